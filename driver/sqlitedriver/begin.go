package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// beginSlice bounds one attempt to take the write lock. SQLite's own busy
// handler backs off to one try every 100ms, so a writer of another process
// that commits back to back, leaving gaps of microseconds between its
// transactions, can starve it past any timeout. The writer instead retries
// BEGIN IMMEDIATE in short slices (each of them a few tries of SQLite's busy
// handler, which gives up when the attempt's context ends) until the busy
// timeout has passed.
const beginSlice = 2 * time.Millisecond

// errBeginSlice ends one attempt to take the write lock.
var errBeginSlice = errors.New("sqlitedriver: begin attempt timed out")

// beginAttempt is the context of one BEGIN attempt. Its Done channel closes
// when the slice runs out, unless BEGIN has returned by then: once settled it
// never closes, so database/sql never rolls back a transaction it began.
type beginAttempt struct {
	context.Context // background: values and no deadline
	done            chan struct{}

	mu      sync.Mutex
	expired bool // guarded by mu
	settled bool // guarded by mu
}

// Done is closed when the attempt's slice has run out.
func (a *beginAttempt) Done() <-chan struct{} { return a.done }

// Err reports errBeginSlice once the slice has run out.
func (a *beginAttempt) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.expired {
		return errBeginSlice
	}
	return nil
}

// expire ends the attempt unless BEGIN has returned.
func (a *beginAttempt) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.settled && !a.expired {
		a.expired = true
		close(a.done)
	}
}

// settle marks BEGIN as returned and reports whether the attempt expired
// first.
func (a *beginAttempt) settle() (expired bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settled = true
	return a.expired
}

// begin takes the write connection from the write handle (waiting as long as
// a caller's own transaction on DB() holds it) and begins an IMMEDIATE
// transaction on it, retrying for up to the busy timeout while another
// connection holds the write lock. With lax, the transaction commits with
// synchronous=NORMAL (see runBatch); release restores FULL.
func (w *writer) begin(lax bool) (*sql.Conn, *sql.Tx, error) {
	conn, err := w.d.wdb.Conn(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if lax {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous=NORMAL"); err != nil {
			w.release(conn, lax)
			return nil, nil, err
		}
	}
	tx, err := w.d.beginImmediate(conn)
	if err != nil {
		w.release(conn, lax)
		return nil, nil, err
	}
	return conn, tx, nil
}

// beginImmediate begins an IMMEDIATE transaction on conn, retrying in short
// slices for up to the busy timeout while another connection (of this
// process or another) holds the write lock.
func (d *Driver) beginImmediate(conn *sql.Conn) (*sql.Tx, error) {
	deadline := time.Now().Add(d.opts.BusyTimeout)
	for {
		a := &beginAttempt{Context: context.Background(), done: make(chan struct{})}
		timer := time.AfterFunc(beginSlice, a.expire)
		tx, err := conn.BeginTx(a, nil) // BEGIN IMMEDIATE (_txlock)
		timer.Stop()
		expired := a.settle()
		if err == nil && !expired {
			return tx, nil
		}
		if err == nil {
			// Began, but the attempt's context ended first: database/sql
			// rolls such a transaction back. Let it, and try again.
			d.beginAborts.Add(1)
			tx.Rollback()
		} else if !expired && sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY {
			return nil, err
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errBeginSlice
			}
			return nil, fmt.Errorf("write lock held by another connection for longer than the busy timeout (%s): %w", d.opts.BusyTimeout, err)
		}
	}
}
