package pgdriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// sqlTx runs the driver's insert statements on a caller's *sql.Tx opened
// through pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib), which
// passes pgx's argument types through. Only what an insert needs is there:
// no batches, no COPY.
type sqlTx struct{ tx *sql.Tx }

var errSQLTxUnsupported = errors.New("pgdriver: not available on a *sql.Tx")

func (q sqlTx) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return pgconn.NewCommandTag(fmt.Sprintf("EXEC %d", n)), nil
}

func (q sqlTx) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	rows, err := q.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return &sqlRows{rows: rows}, nil
}

func (q sqlTx) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return sqlRow{q.tx.QueryRowContext(ctx, query, args...)}
}

func (q sqlTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	return errBatch{}
}

func (q sqlTx) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errSQLTxUnsupported
}

// sqlRow adapts *sql.Row, mapping sql.ErrNoRows to pgx.ErrNoRows.
type sqlRow struct{ row *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}

// sqlRows adapts *sql.Rows to the part of pgx.Rows the driver uses.
type sqlRows struct {
	rows *sql.Rows
	n    int64
}

func (r *sqlRows) Close()     { _ = r.rows.Close() }
func (r *sqlRows) Err() error { return r.rows.Err() }
func (r *sqlRows) CommandTag() pgconn.CommandTag {
	return pgconn.NewCommandTag(fmt.Sprintf("SELECT %d", r.n))
}
func (r *sqlRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r *sqlRows) Next() bool {
	if r.rows.Next() {
		r.n++
		return true
	}
	return false
}
func (r *sqlRows) Scan(dest ...any) error { return r.rows.Scan(dest...) }
func (r *sqlRows) Values() ([]any, error) {
	cols, err := r.rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, r.rows.Scan(ptrs...)
}
func (r *sqlRows) RawValues() [][]byte  { return nil }
func (r *sqlRows) Conn() *pgx.Conn      { return nil }
func (r *sqlRows) TypeMap() *pgtype.Map { return nil }

// errBatch answers every batch operation with errSQLTxUnsupported.
type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errSQLTxUnsupported }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errSQLTxUnsupported }
func (errBatch) QueryRow() pgx.Row                { return sqlErrRow{} }
func (errBatch) Close() error                     { return nil }
func (errBatch) Tx() pgx.Tx                       { return nil }

type sqlErrRow struct{}

func (sqlErrRow) Scan(...any) error { return errSQLTxUnsupported }
