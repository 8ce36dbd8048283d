package hopper

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/hopper-go/hopper/internal/engine"
)

// HookPayloadError is HookResume's refusal of a payload that would not
// decode into the hook's type; the hook stays unused. It matches
// ErrInvalidInput.
type HookPayloadError struct {
	// Hook is the hook's name; Reason says where the payload does not fit,
	// by its path (".approved: want true or false, got the string \"yes\"").
	Hook   string
	Reason string
}

// Error says which hook and where.
func (e *HookPayloadError) Error() string {
	return fmt.Sprintf("hook %q: the payload does not fit its type: %s", e.Hook, e.Reason)
}

// Unwrap returns ErrInvalidInput.
func (e *HookPayloadError) Unwrap() error { return ErrInvalidInput }

// hookSchema is the recorded schema of a hook's payload type T: what the
// engine checks a payload against before it uses the hook
// (engine.HookSchema).
func hookSchema[T any]() json.RawMessage { return engine.HookSchema(reflect.TypeFor[T]()) }
