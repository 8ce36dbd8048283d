package pgdriver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.TxJoiner = (*Driver)(nil)

// TxJoin joins tx, an application's pgx.Tx on the driver's database, or a
// *sql.Tx opened through pgx's database/sql driver (pgx/v5/stdlib), so that
// hopper's operations run through it and commit with the application's
// writes; see driver.TxJoiner. Any other tx type is an error wrapping
// driver.ErrTxType. Notifications made through the Executor are
// NOTIFYs in tx: PostgreSQL delivers them if and when tx commits, however
// it is committed.
func (d *Driver) TxJoin(ctx context.Context, tx any, _ *driver.TxJoinParams) (*driver.AppTx, error) {
	const op = "join a transaction"
	var e *executor
	switch t := tx.(type) {
	case pgx.Tx:
		if t == nil {
			return nil, fmt.Errorf("pgdriver: %s: a nil pgx.Tx: %w", op, driver.ErrTxType)
		}
		e = &executor{d: d, q: t, tx: t}
	case *sql.Tx:
		if t == nil {
			return nil, fmt.Errorf("pgdriver: %s: a nil *sql.Tx: %w", op, driver.ErrTxType)
		}
		jt := joinSQLTx(t)
		e = &executor{d: d, q: jt, tx: jt, callerSQLTx: true}
	default:
		return nil, fmt.Errorf("pgdriver: %s: %T is neither a pgx.Tx nor a *sql.Tx: %w", op, tx, driver.ErrTxType)
	}
	if err := e.check(ctx, op); err != nil {
		return nil, err
	}
	return appTx(e), nil
}

// TxBegin begins a READ COMMITTED transaction on the driver's pool, a
// pgx.Tx; see driver.TxJoiner.
func (d *Driver) TxBegin(ctx context.Context, _ *driver.TxBeginParams) (*driver.AppTx, error) {
	if d.closed.Load() {
		return nil, driverClosed("begin transaction")
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, d.fail("begin transaction", err)
	}
	return appTx(&executor{d: d, q: tx, tx: tx}), nil
}

// appTx is e's transaction with its ends.
func appTx(e *executor) *driver.AppTx {
	tx := e.tx
	return &driver.AppTx{
		Tx:       tx,
		Executor: e,
		Commit: func(ctx context.Context) error {
			return e.d.fail("commit", tx.Commit(ctx))
		},
		Rollback: func(ctx context.Context) error {
			return tx.Rollback(ctx)
		},
	}
}
