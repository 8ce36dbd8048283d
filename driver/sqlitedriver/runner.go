package sqlitedriver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// querier is what a runner runs SQL on: the writer's *sql.Tx, the read pool's
// *sql.DB, or a caller's *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// runner runs the driver's SQL on one handle. Every operation is written
// once against a runner and used from the writer's transaction, the read
// pool and TxInserter alike.
type runner struct {
	q querier
	// prep returns a prepared statement for query; nil prep means plain
	// queries (a caller's transaction).
	prep func(ctx context.Context, query string) (*sql.Stmt, error)
	// b is the writer's batch, nil outside the writer.
	b *batch
	d *Driver
}

// stmt returns the prepared statement for a hot query, or nil to run query
// unprepared.
func (r *runner) stmt(ctx context.Context, query string) *sql.Stmt {
	if r.prep == nil || !hotStatements[query] {
		return nil
	}
	s, err := r.prep(ctx, query)
	if err != nil {
		return nil
	}
	return s
}

// before refuses to run on a batch that can no longer commit.
func (r *runner) before() error {
	if r.b != nil && r.b.broken != nil {
		return r.b.broken
	}
	return nil
}

// after marks the batch broken when err came with the end of the whole
// transaction (SQLite rolls it back on its own after some I/O, disk-full and
// lock errors), so no later statement runs outside it by accident and no
// caller is told its write committed.
func (r *runner) after(err error) error {
	if err != nil && r.b != nil && r.b.txGone(err) {
		r.b.fail(err)
	}
	return r.mapClosed(err)
}

// mapClosed reports driver.ErrClosed for an error caused by Close.
func (r *runner) mapClosed(err error) error {
	if err != nil && r.d != nil && r.d.closed.Load() && (errors.Is(err, sql.ErrConnDone) || err.Error() == "sql: database is closed") {
		return driver.ErrClosed
	}
	return err
}

func (r *runner) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := r.before(); err != nil {
		return nil, err
	}
	var res sql.Result
	var err error
	if s := r.stmt(ctx, query); s != nil {
		res, err = s.ExecContext(ctx, args...)
	} else {
		res, err = r.q.ExecContext(ctx, query, args...)
	}
	return res, r.after(err)
}

func (r *runner) execNoArgs(ctx context.Context, query string) error {
	_, err := r.exec(ctx, query)
	return err
}

func (r *runner) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := r.before(); err != nil {
		return nil, err
	}
	var rows *sql.Rows
	var err error
	if s := r.stmt(ctx, query); s != nil {
		rows, err = s.QueryContext(ctx, args...)
	} else {
		rows, err = r.q.QueryContext(ctx, query, args...)
	}
	return rows, r.after(err)
}

// each runs query and calls fn for every row.
func (r *runner) each(ctx context.Context, query string, fn func(rows *sql.Rows) error, args ...any) error {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return r.after(err)
	}
	return r.after(rows.Close())
}

// one runs query and scans its first row with fn; no row is sql.ErrNoRows.
func (r *runner) one(ctx context.Context, query string, fn func(rows *sql.Rows) error, args ...any) error {
	found := false
	err := r.each(ctx, query, func(rows *sql.Rows) error {
		if found {
			return nil
		}
		found = true
		return fn(rows)
	}, args...)
	if err == nil && !found {
		return sql.ErrNoRows
	}
	return err
}

// jobs runs query, whose columns are jobCols, and returns its rows.
func (r *runner) jobs(ctx context.Context, query string, args ...any) ([]*hoppertype.JobRow, error) {
	var out []*hoppertype.JobRow
	err := r.each(ctx, query, func(rows *sql.Rows) error {
		j, err := scanJob(rows)
		if err == nil {
			out = append(out, j)
		}
		return err
	}, args...)
	return out, err
}

// column runs query, which returns one column, and returns its values.
func column[T any](ctx context.Context, r *runner, query string, args ...any) ([]T, error) {
	var out []T
	err := r.each(ctx, query, func(rows *sql.Rows) error {
		var v T
		if err := rows.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, args...)
	return out, err
}

// job runs query, whose columns are jobCols, and returns its first row or
// sql.ErrNoRows.
func (r *runner) job(ctx context.Context, query string, args ...any) (*hoppertype.JobRow, error) {
	var j *hoppertype.JobRow
	err := r.one(ctx, query, func(rows *sql.Rows) error {
		var err error
		j, err = scanJob(rows)
		return err
	}, args...)
	return j, err
}

// savepoint runs fn inside SAVEPOINT name: an error (or a panic) from fn
// rolls back what fn wrote and nothing else.
func (r *runner) savepoint(ctx context.Context, name string, fn func() error) (err error) {
	if err := r.execNoArgs(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	ok := false
	defer func() {
		if ok {
			return
		}
		if rerr := r.rollbackTo(ctx, name); rerr != nil {
			if r.b != nil {
				r.b.fail(rerr)
			} else if err != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if err := fn(); err != nil {
		return err
	}
	if err := r.execNoArgs(ctx, "RELEASE "+name); err != nil {
		return err
	}
	ok = true
	return nil
}

// rollbackTo undoes and ends the savepoint name. It runs even on a broken
// batch; its failure means the transaction itself is gone.
func (r *runner) rollbackTo(ctx context.Context, name string) error {
	run := func(q string) error {
		var err error
		if s := r.stmt(ctx, q); s != nil {
			_, err = s.ExecContext(ctx)
		} else {
			_, err = r.q.ExecContext(ctx, q)
		}
		return err
	}
	if err := run("ROLLBACK TO " + name); err != nil {
		return err
	}
	return run("RELEASE " + name)
}

// sqliteCode returns the extended result code of a SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// connGone reports whether err means the transaction's connection is gone.
func connGone(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// abortsTx reports whether err may have rolled back the whole transaction;
// it is the fallback when the rollback hook is not installed.
func abortsTx(err error) bool {
	if connGone(err) {
		return true
	}
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_NOMEM,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// isPrimaryKeyConflict reports whether err is a PRIMARY KEY violation.
func isPrimaryKeyConflict(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// wrapErr maps sql.ErrNoRows to hoppertype.ErrNotFound: the one place the
// driver does so. Other errors are wrapped with what.
func wrapErr(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, hoppertype.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// hotStatements are the statements worth preparing once per connection and
// reusing; everything else (dynamic list filters, rare admin writes) runs
// unprepared.
var hotStatements = map[string]bool{
	"SAVEPOINT hopper_call": true, "RELEASE hopper_call": true, "ROLLBACK TO hopper_call": true,
	"SAVEPOINT hopper_op": true, "RELEASE hopper_op": true, "ROLLBACK TO hopper_op": true,
	"SAVEPOINT hopper_tx": true, "RELEASE hopper_tx": true, "ROLLBACK TO hopper_tx": true,
	uniqueHolderSQL: true, getJobSQL: true, getManySQL: true, jobExistsSQL: true,
	promoteQueueSQL: true, promoteAllSQL: true, claimSQLAny: true, claimSQLTypes: true,
	leaseCounterSQL: true, setLeaseCounterSQL: true, nextRunAtSQL: true, heartbeatSQL: true,
	finishSQL: true, expiredLeasesSQL: true, getGroupSQL: true, updateGroupSQL: true,
	watchedSQL:     true, // every finish looks for gates watching its jobs
	claimedRowsSQL: true,
}
