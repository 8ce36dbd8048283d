package pgdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlJoinedTx is an application's *sql.Tx opened through pgx's
// database/sql driver, as the pgx.Tx a joined transaction (TxJoin) runs
// every operation of the driver on: a batch runs its statements one after
// another, a nested transaction is a savepoint. COPY is not available
// (inserts do without it on a caller's *sql.Tx).
type sqlJoinedTx struct {
	sqlTx
	// sp names the savepoint this nested transaction is ("" for the
	// application's transaction itself); n counts the savepoints opened,
	// for their names.
	sp     string
	n      *int
	closed bool
}

var _ pgx.Tx = (*sqlJoinedTx)(nil)

func joinSQLTx(tx *sql.Tx) *sqlJoinedTx { return &sqlJoinedTx{sqlTx: sqlTx{tx}, n: new(int)} }

// Begin opens a savepoint.
func (t *sqlJoinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	*t.n++
	name := fmt.Sprintf("hopper_sp_%d", *t.n)
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &sqlJoinedTx{sqlTx: t.sqlTx, sp: name, n: t.n}, nil
}

// Commit releases the savepoint, or commits the application's
// transaction.
func (t *sqlJoinedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.sp == "" {
		return t.tx.Commit()
	}
	_, err := t.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+t.sp)
	return err
}

// Rollback rolls back to the savepoint, or the application's transaction.
func (t *sqlJoinedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.sp == "" {
		return t.tx.Rollback()
	}
	_, err := t.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+t.sp)
	return err
}

// SendBatch runs the batch's statements one at a time, as its results are
// read (the ones left unread run at Close).
func (t *sqlJoinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return &sqlBatch{ctx: ctx, q: t.sqlTx, queued: b.QueuedQueries}
}

// LargeObjects is not available on a *sql.Tx.
func (t *sqlJoinedTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare is not available on a *sql.Tx.
func (t *sqlJoinedTx) Prepare(context.Context, string, string) (*pgconn.StatementDescription, error) {
	return nil, errSQLTxUnsupported
}

// Conn is nil: a *sql.Tx keeps its connection to itself.
func (t *sqlJoinedTx) Conn() *pgx.Conn { return nil }

// sqlBatch is a batch's results on a *sql.Tx: each read runs the next
// statement.
type sqlBatch struct {
	ctx    context.Context
	q      sqlTx
	queued []*pgx.QueuedQuery
	next   int
}

var errBatchDone = errors.New("pgdriver: no more results in the batch")

func (b *sqlBatch) take() (*pgx.QueuedQuery, error) {
	if b.next >= len(b.queued) {
		return nil, errBatchDone
	}
	qq := b.queued[b.next]
	b.next++
	return qq, nil
}

func (b *sqlBatch) Exec() (pgconn.CommandTag, error) {
	qq, err := b.take()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return b.q.Exec(b.ctx, qq.SQL, qq.Arguments...)
}

func (b *sqlBatch) Query() (pgx.Rows, error) {
	qq, err := b.take()
	if err != nil {
		return nil, err
	}
	return b.q.Query(b.ctx, qq.SQL, qq.Arguments...)
}

func (b *sqlBatch) QueryRow() pgx.Row {
	qq, err := b.take()
	if err != nil {
		return errRow{err}
	}
	return b.q.QueryRow(b.ctx, qq.SQL, qq.Arguments...)
}

// Tx is nil: the batch runs in the application's *sql.Tx.
func (b *sqlBatch) Tx() pgx.Tx { return nil }

// Close runs the statements no one read.
func (b *sqlBatch) Close() error {
	for b.next < len(b.queued) {
		if _, err := b.Exec(); err != nil {
			b.next = len(b.queued)
			return err
		}
	}
	return nil
}

// errRow is a row that fails to scan with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
