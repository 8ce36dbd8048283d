package engine

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hopper-go/hopper/hoppertype"
)

// KindError carries a hopper error kind (and, for panics, a stack) from the
// handler wrapper to the outcome decision.
type KindError struct {
	Kind  hoppertype.ErrorKind
	Err   error
	Stack string
	// Abort dead-letters the job without a retry.
	Abort bool
	// Final ends the job dead now, keeping Kind as it is (a workflow run's
	// final failure: its waiters match the cause, not ErrAborted).
	Final bool
}

func (e *KindError) Error() string { return e.Err.Error() }

func (e *KindError) Unwrap() error { return e.Err }

// RawJSON is a result as raw JSON when it is JSON (for events), else nil.
func RawJSON(b []byte) json.RawMessage { return rawJSON(b) }

// rawJSON is a helper for events: a result as raw JSON when it is JSON.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return json.RawMessage(b)
}

// PanicCause is a recovered panic value as an error: the value itself when
// it is one (a panic(err), a runtime error), so that errors.Is and errors.As
// see through the panic to its cause; otherwise an error reading as the
// value does with %v.
func PanicCause(r any) error {
	if err, ok := r.(error); ok {
		return err
	}
	return errors.New(fmt.Sprint(r))
}
