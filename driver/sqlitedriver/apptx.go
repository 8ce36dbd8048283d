package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.TxJoiner = (*Driver)(nil)

// TxJoin joins tx, an application's *sql.Tx on this database (from DB(),
// or from the application's own *sql.DB on the same file), so that
// hopper's operations run through it and commit with the application's
// writes; see driver.TxJoiner. Any other tx type is an error wrapping
// driver.ErrTxType. The Executor's notifications are delivered when the
// AppTx's Commit commits tx; for a tx the application commits itself,
// AppTx.Pending returns them to send (the writer does not see that commit:
// other processes notice it through PRAGMA data_version, this one at its
// next poll).
func (d *Driver) TxJoin(ctx context.Context, tx any, _ *driver.TxJoinParams) (*driver.AppTx, error) {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("sqlitedriver: join a transaction: needs a *sql.Tx, got %T: %w", tx, driver.ErrTxType)
	}
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return nil, err
	}
	return d.appTx(stx), nil
}

// TxBegin begins a transaction on the write handle (DB()): BEGIN IMMEDIATE
// on the one write connection, so it waits for the writer's current batch
// and the writer waits for it (keep it short: every write of the Driver
// waits meanwhile). It is refused from inside a function running in the
// writer, which would wait for itself. ctx is the transaction's context:
// when it ends before Commit, the transaction is rolled back.
func (d *Driver) TxBegin(ctx context.Context, _ *driver.TxBeginParams) (*driver.AppTx, error) {
	if v, _ := ctx.Value(inWriterKey{}).(*Driver); v == d {
		return nil, errReentrant
	}
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return nil, err
	}
	stx, err := d.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: begin: %w", (&runner{d: d}).mapClosed(err))
	}
	return d.appTx(stx), nil
}

// appTx is stx with an executor on it. Its notifications are published
// after its Commit succeeds.
func (d *Driver) appTx(stx *sql.Tx) *driver.AppTx {
	t := &executor{r: &runner{q: stx, d: d}}
	return &driver.AppTx{
		Tx:       stx,
		Executor: t,
		Commit: func(context.Context) error {
			t.done.Store(true)
			if err := stx.Commit(); err != nil {
				return fmt.Errorf("sqlitedriver: commit: %w", err)
			}
			d.hub.publish(t.notes)
			return nil
		},
		Rollback: func(context.Context) error {
			t.done.Store(true)
			return stx.Rollback()
		},
		Bind: func(ctx context.Context) context.Context {
			return context.WithValue(ctx, inWriterKey{}, d)
		},
		Pending: func() []driver.NotifyParams {
			out := make([]driver.NotifyParams, len(t.notes))
			for i, n := range t.notes {
				out[i] = driver.NotifyParams{Topic: n.topic, Payload: n.payload}
			}
			return out
		},
	}
}
