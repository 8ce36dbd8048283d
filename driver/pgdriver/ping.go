package pgdriver

import (
	"context"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.Pinger = (*Driver)(nil)

// Ping makes a round trip to the server on one of the pool's connections.
func (d *Driver) Ping(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return d.pool.Ping(ctx)
}
