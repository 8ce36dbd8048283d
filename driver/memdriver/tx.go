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

// tx is the executor handed to InTx functions. Its methods run while the
// driver's lock is held by the top-level InTx, so they never take it. Every
// write goes through a helper that appends the inverse operation to undo.
type tx struct {
	st    *store
	undo  []func()
	notes []note
	// done is set when the top-level InTx returns; later use is an error
	// rather than an unsynchronised access to the store.
	done atomic.Bool
}

// note is a notification buffered until the transaction commits.
type note struct {
	topic, payload string
}

var _ driver.Executor = (*tx)(nil)

// check refuses work on an ended transaction or a done context.
func (t *tx) check(ctx context.Context) error {
	if t.done.Load() {
		return errTxDone
	}
	return ctx.Err()
}

// undoTo undoes the writes recorded after mark, newest first.
func (t *tx) undoTo(mark int) {
	for i := len(t.undo) - 1; i >= mark; i-- {
		t.undo[i]()
		t.undo[i] = nil
	}
	t.undo = t.undo[:mark]
}

// InTx opens a nested scope (a savepoint): an error from fn undoes only the
// writes and drops only the notifications made inside it.
func (t *tx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	if err := t.check(ctx); err != nil {
		return err
	}
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

// Notify buffers a notification; it is delivered after the outermost
// transaction commits, and dropped if the scope it was made in rolls back.
func (t *tx) Notify(ctx context.Context, params *driver.NotifyParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	t.notes = append(t.notes, note{topic: params.Topic, payload: params.Payload})
	return nil
}
