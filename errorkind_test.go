package hopper

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// TestErrorKind: a run's failure is recorded with its cause's kind, so a
// child's or an activity's error passed on as it is keeps its meaning, and
// an abort wins.
func TestErrorKind(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want hoppertype.ErrorKind
	}{
		{"a plain error", boom, hoppertype.ErrorKindHandler},
		{"an abort", Abort(boom), hoppertype.ErrorKindAborted},
		{"hopper's own", &engine.KindError{Kind: hoppertype.ErrorKindEncode, Err: boom}, hoppertype.ErrorKindEncode},
		{"a step's failure", &StepError{Kind: hoppertype.ErrorKindHandler}, hoppertype.ErrorKindHandler},
		{"a fatal step", &StepError{Kind: hoppertype.ErrorKindAborted}, hoppertype.ErrorKindAborted},
		{"an activity that timed out", &StepError{Kind: hoppertype.ErrorKindTimeout}, hoppertype.ErrorKindTimeout},
		{"a child that failed", &RunError{Status: hoppertype.RunCompensated, Kind: hoppertype.ErrorKindHandler}, hoppertype.ErrorKindHandler},
		{"a child that panicked", &RunError{Status: hoppertype.RunFailed, Kind: hoppertype.ErrorKindPanic}, hoppertype.ErrorKindPanic},
		{"a cancelled child", &RunError{Status: hoppertype.RunCancelled}, hoppertype.ErrorKindCancelled},
		{"a wrapped child error", fmt.Errorf("order: %w", &RunError{Status: hoppertype.RunFailed, Kind: hoppertype.ErrorKindExpired}), hoppertype.ErrorKindExpired},
		{"an abort of a step's failure", Abort(&StepError{Kind: hoppertype.ErrorKindPanic}), hoppertype.ErrorKindAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, engine.ErrorKind(tt.err))
		})
	}
}
