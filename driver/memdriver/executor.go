package memdriver

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/hopper-go/hopper/driver"
)

// errTxDone is returned by a transaction's executor used after its InTx
// returned.
var errTxDone = errors.New("memdriver: transaction has already ended")

// executor runs the store's operations, each implemented once on it.
//
// The Driver's own executor (Driver.Executor) is in no transaction: an
// operation called on it begins one of its own (begin), which takes the
// driver's lock, and ends it when the operation returns (end), committing
// or undoing its writes. InTx hands fn an executor bound to a transaction
// (inTx): its operations run in that transaction, under the lock the
// top-level InTx holds, so they never take it. Every write goes through a
// helper that appends the inverse operation to undo.
type executor struct {
	d *Driver
	// inTx marks an executor bound to a transaction; the fields below are
	// used only then.
	inTx  bool
	st    *store
	undo  []func()
	notes []note
	// done is set when the transaction ends; later use is an error rather
	// than an unsynchronised access to the store.
	done atomic.Bool
}

// note is a notification buffered until the transaction commits.
type note struct {
	topic, payload string
}

var _ driver.Executor = (*executor)(nil)

// begin returns the transaction an operation called on x runs in: x's own
// when x is bound to one, else a new one-operation transaction, holding the
// driver's lock, that x.end finishes. Every operation starts with
//
//	t, err := x.begin(ctx)
//	if err != nil { return …, err }
//	defer x.end(t, &err)
func (x *executor) begin(ctx context.Context) (*executor, error) {
	if x.inTx {
		return x, x.check(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := x.d
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, driver.ErrClosed
	}
	if err := ctx.Err(); err != nil { // ended while waiting for the lock
		d.mu.Unlock()
		return nil, err
	}
	return &executor{d: d, inTx: true, st: d.st}, nil
}

// end finishes the transaction t that x.begin opened for one operation
// (nothing when x was bound to a transaction already): it commits when the
// operation returned no error into *errp, else undoes every write and drops
// the notifications; a panic undoes them too and is re-raised. It releases
// the lock and then publishes the committed notifications. It must be
// deferred directly, so that it sees a panic.
func (x *executor) end(t *executor, errp *error) {
	if x.inTx {
		return
	}
	r := recover()
	committed := r == nil && *errp == nil
	if committed {
		t.st.feed.compact()
	} else {
		t.undoTo(0)
		t.notes = nil
	}
	t.done.Store(true)
	notes := t.notes
	t.d.mu.Unlock()
	t.d.broker.publish(notes)
	if r != nil {
		panic(r)
	}
}

// check refuses work on an ended transaction or a done context.
func (t *executor) check(ctx context.Context) error {
	if t.done.Load() {
		return errTxDone
	}
	return ctx.Err()
}

// undoTo undoes the writes recorded after mark, newest first.
func (t *executor) undoTo(mark int) {
	for i := len(t.undo) - 1; i >= mark; i-- {
		t.undo[i]()
		t.undo[i] = nil
	}
	t.undo = t.undo[:mark]
}

// InTx runs fn in a transaction. On the Driver's executor it holds the
// driver's lock while fn runs, so fn must use tx and never the Driver
// itself; when fn returns an error (or panics) every write made through tx
// is undone and notifications made through tx are dropped, otherwise they
// are delivered after the lock is released. On a transaction's executor it
// opens a nested scope (a savepoint): an error from fn undoes only the
// writes and drops only the notifications made inside it.
func (x *executor) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	mark, noteMark := len(t.undo), len(t.notes)
	ok := false
	defer func() {
		if !ok {
			t.undoTo(mark)
			t.notes = t.notes[:noteMark]
		}
	}()
	if err := fn(ctx, t); err != nil {
		return err
	}
	ok = true
	return nil
}

// Notify publishes Payload on Topic to the current subscribers. Inside a
// transaction it is buffered, delivered after the outermost transaction
// commits and dropped if the scope it was made in rolls back.
func (x *executor) Notify(ctx context.Context, params *driver.NotifyParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	t.notes = append(t.notes, note{topic: params.Topic, payload: params.Payload})
	return nil
}
