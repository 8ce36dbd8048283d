package hopper

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

func TestCurrentHistory(t *testing.T) {
	t.Parallel()
	ev := func(attempt, seq int, kind, data string) *hoppertype.RunEvent {
		return &hoppertype.RunEvent{Attempt: attempt, Seq: seq, Kind: kind, Data: []byte(data)}
	}
	started := func(a int) *hoppertype.RunEvent { return ev(a, 1, evWorkflowStarted, `{}`) }
	step := func(a, seq int) *hoppertype.RunEvent { return ev(a, seq, evStep, `{"output":1}`) }
	retried := func(a, seq int) *hoppertype.RunEvent {
		return ev(a, seq, evWorkflowFailed, `{"error":{"kind":"handler"}}`)
	}
	final := func(a, seq int) *hoppertype.RunEvent {
		return ev(a, seq, evWorkflowFailed, `{"error":{"kind":"handler"},"status":"compensated"}`)
	}
	cancelled := func(a, seq int) *hoppertype.RunEvent { return ev(a, seq, evWorkflowCancelled, `{}`) }
	tests := []struct {
		name        string
		all         []*hoppertype.RunEvent
		restarted   bool
		wantAttempt int
		wantEvents  int
		wantRetries int
	}{
		{"a new run", nil, false, 1, 0, 0},
		{"a run resumed after a wait", []*hoppertype.RunEvent{started(1), step(1, 2)}, false, 1, 2, 0},
		// A crash counts a job attempt but continues the history: the
		// recorded step must not run again.
		{"after a crash", []*hoppertype.RunEvent{started(1), step(1, 2)}, false, 1, 2, 0},
		{"after two crashes", []*hoppertype.RunEvent{started(1), step(1, 2), step(1, 3)}, false, 1, 3, 0},
		// A failure the workflow retries starts a fresh attempt, numbered
		// next, however many job attempts crashes used.
		{"after a retried failure", []*hoppertype.RunEvent{started(1), step(1, 2), retried(1, 3)}, false, 2, 0, 1},
		{"a crash in the second attempt", []*hoppertype.RunEvent{started(1), retried(1, 2), started(2), step(2, 2)}, false, 2, 2, 1},
		{"two retried failures", []*hoppertype.RunEvent{started(1), retried(1, 2), started(2), retried(2, 2)}, false, 3, 0, 2},
		// An attempt whose failure was retried stays over when an undo of
		// its effects is recorded after its failure.
		{"a retried failure, then its undo", []*hoppertype.RunEvent{started(1), retried(1, 2), ev(1, 3, evCompensationDone, `{}`)}, false, 2, 0, 1},
		// Runs recorded before attempts were numbered keyed an attempt by
		// its first job attempt: read as they are, the next numbered on.
		{"an attempt keyed by a job attempt", []*hoppertype.RunEvent{started(1), retried(1, 2), started(3), step(3, 2)}, false, 3, 2, 1},
		{"after an attempt keyed by a job attempt", []*hoppertype.RunEvent{started(1), retried(1, 2), started(3), retried(3, 2)}, false, 4, 0, 2},
		// A final failure recorded before a crash is replayed, not retried.
		{"after a final failure", []*hoppertype.RunEvent{started(1), step(1, 2), final(1, 3)}, false, 1, 3, 0},
		// A run retried after it ended (RunRetry) starts a fresh attempt,
		// with its whole retry budget again.
		{"retried after a final failure", []*hoppertype.RunEvent{started(1), retried(1, 2), started(2), final(2, 2)}, true, 3, 0, 0},
		{"retried after a cancellation", []*hoppertype.RunEvent{started(1), step(1, 2), cancelled(1, 3)}, true, 2, 0, 0},
		{"a retry of a retried run fails again", []*hoppertype.RunEvent{started(1), final(1, 2), started(2), retried(2, 2)}, false, 3, 0, 1},
		// A run still going (not pending) replays its final failure.
		{"a final failure, not retried", []*hoppertype.RunEvent{started(1), retried(1, 2), started(2), final(2, 2)}, false, 2, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempt, events, retries := currentHistory(generations(tt.all), tt.restarted)
			require.Equal(t, tt.wantAttempt, attempt, "attempt")
			require.Len(t, events, tt.wantEvents, "events")
			require.Equal(t, tt.wantRetries, retries, "retries")
			for _, e := range events {
				require.Equal(t, attempt, e.Attempt)
			}
		})
	}
}

// TestErrorKind: a run's failure is recorded with its cause's kind, so a
// child's or an activity's error passed on as it is keeps its meaning, and
// an abort wins.
func TestErrorKind(t *testing.T) {
	t.Parallel()
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
			require.Equal(t, tt.want, errorKind(tt.err))
		})
	}
}
