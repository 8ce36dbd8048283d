// Package memdriver is hopper's in-memory reference driver. It keeps every
// row in process memory behind one mutex, so it is safe for concurrent use
// but shares nothing across processes and keeps nothing across restarts. It
// serves tests, examples and hoppertest, and it is the reference the other
// drivers are checked against by the conformance suite in drivertest.
//
// Transactions (InTx) hold the driver's mutex for the whole function and
// record an undo log; a returned error undoes every write in reverse order.
// Operations of its Executor outside InTx run as one-operation transactions,
// so each of them is atomic.
package memdriver

import (
	"context"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// Driver is an in-memory hopper store. The zero value is not usable; call New.
type Driver struct {
	mu     sync.Mutex
	closed bool   // guarded by mu
	st     *store // guarded by mu; nil after Close
	broker *broker
	exec   *executor // the Executor, in no transaction
}

// Executor returns the executor that runs the store's operations; see
// driver.Executor for their contracts.
func (d *Driver) Executor() driver.Executor { return d.exec }

var _ driver.Driver = (*Driver)(nil)

// New returns an empty in-memory store.
func New(opts ...Option) *Driver {
	d := &Driver{st: newStore(), broker: newBroker()}
	d.exec = &executor{d: d}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Option configures a Driver.
type Option func(*Driver)

// WithClock makes the store stamp its change feed (and so the attempts
// read from it) with now instead of the wall clock: give it the clock of
// the client's Config.Clock, as hoppertest does, so that attempt times and
// job times can be compared. It must be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(d *Driver) {
		if now != nil {
			d.st.now = now
		}
	}
}

// Name returns "memory".
func (d *Driver) Name() string { return "memory" }

// Close releases the store's memory and ends every subscription. Operations
// after Close return driver.ErrClosed; closing twice is a no-op.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.st = nil
	d.mu.Unlock()
	d.broker.close()
	return nil
}

// Listen subscribes to notifications published on topic with Notify. The
// subscription's channel buffers 64 payloads; when it is full further
// payloads are dropped (notifications are hints). It ends when ctx is done,
// when Close is called on it or when the driver is closed.
func (d *Driver) Listen(ctx context.Context, topic string) (driver.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.broker.subscribe(ctx, topic)
}
