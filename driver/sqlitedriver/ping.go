package sqlitedriver

import (
	"context"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.Pinger = (*Driver)(nil)

// Ping reads the database file's schema version on the read pool: a round
// trip through SQLite to the file, which fails when the file is gone or
// unreadable.
func (d *Driver) Ping(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	var v int
	return d.rdb.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&v)
}
