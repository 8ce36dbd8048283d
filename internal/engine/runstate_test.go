package engine

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

func TestCurrentHistory(t *testing.T) {
	ev := func(attempt, seq int, kind, data string) *hoppertype.RunEvent {
		return &hoppertype.RunEvent{Attempt: attempt, Seq: seq, Kind: kind, Data: []byte(data)}
	}
	started := func(a int) *hoppertype.RunEvent { return ev(a, 1, EvWorkflowStarted, `{}`) }
	step := func(a, seq int) *hoppertype.RunEvent { return ev(a, seq, EvStep, `{"output":1}`) }
	retried := func(a, seq int) *hoppertype.RunEvent {
		return ev(a, seq, EvWorkflowFailed, `{"error":{"kind":"handler"}}`)
	}
	final := func(a, seq int) *hoppertype.RunEvent {
		return ev(a, seq, EvWorkflowFailed, `{"error":{"kind":"handler"},"status":"compensated"}`)
	}
	cancelled := func(a, seq int) *hoppertype.RunEvent { return ev(a, seq, EvWorkflowCancelled, `{}`) }
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
		{"a retried failure, then its undo", []*hoppertype.RunEvent{started(1), retried(1, 2), ev(1, 3, EvCompensationDone, `{}`)}, false, 2, 0, 1},
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
			attempt, events, retries := CurrentHistory(Generations(tt.all), tt.restarted)
			require.Equal(t, tt.wantAttempt, attempt, "attempt")
			require.Len(t, events, tt.wantEvents, "events")
			require.Equal(t, tt.wantRetries, retries, "retries")
			for _, e := range events {
				require.Equal(t, attempt, e.Attempt)
			}
		})
	}
}

// runFixture starts run "r" of workflow "w" on the memory driver and
// claims its job; claim claims it again after the job was retried.
type runFixture struct {
	t   *testing.T
	e   *Engine
	d   driver.Driver
	now time.Time
}

func newRunFixture(t *testing.T, attempts int) *runFixture {
	t.Helper()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	f := &runFixture{t: t, e: newTestEngine(t, d), d: d, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, err := d.Executor().RunStart(context.Background(), &driver.RunStartParams{
		Run: &hoppertype.RunRow{ID: "r", Workflow: "w", Status: hoppertype.RunPending, CreatedAt: f.now, UpdatedAt: f.now},
		Job: &hoppertype.JobRow{ID: "r", GroupID: "r", Type: WorkflowTypePrefix + "w", Queue: "q", State: hoppertype.JobStatePending,
			Retry: hoppertype.RetryPolicy{Attempts: attempts}, QueuedAt: f.now, RunAt: f.now},
	})
	require.NoError(t, err)
	return f
}

// claim claims the run's job and returns its attempt.
func (f *runFixture) claim() *Attempt {
	f.t.Helper()
	rows, err := f.d.Executor().JobClaim(context.Background(), &driver.JobClaimParams{Queue: "q", Limit: 1, Now: f.now, LeaseExpiresAt: f.now.Add(time.Hour), Worker: "w"})
	require.NoError(f.t, err)
	require.Len(f.t, rows, 1)
	return f.e.NewAttempt(rows[0])
}

// history returns the kinds and names of the run's stored events.
func (f *runFixture) history() []string {
	f.t.Helper()
	evs, err := f.d.Executor().RunEventList(context.Background(), &driver.RunEventListParams{RunID: "r"})
	require.NoError(f.t, err)
	var out []string
	for _, ev := range evs {
		out = append(out, strconv.Itoa(ev.Attempt)+":"+ev.Kind+":"+ev.Name)
	}
	return out
}

// step is a workflow operation done the way the root's Step does it:
// replayed from the history, else run and recorded.
func step(st *RunState, name string, run func()) error {
	if err := st.Check(); err != nil {
		return err
	}
	ev, err := st.Next(name, EvStep)
	if err != nil || ev != nil {
		return err
	}
	if err := st.Live(); err != nil {
		return err
	}
	run()
	return st.Record(st.Context(), nil, EvStep, name, EventData{Output: []byte(`1`)})
}

// compensate registers an undo as the root's Compensate does.
func compensate(st *RunState, name string, fn func(context.Context) error) {
	if ev, err := st.Next(name, EvCompensationAdded); err != nil {
		return
	} else if ev == nil && st.Record(st.Context(), nil, EvCompensationAdded, name, EventData{}) != nil {
		return
	}
	st.Comps = append(st.Comps, Compensation{Name: name, Fn: fn})
}

// TestExecuteRunReplaysRecordedSteps: a second execution of the same
// attempt (a crash before the job finished) answers recorded steps from the
// history without running them, records the start once, and ends with the
// completion in the run's effect, for the job's finishing transaction.
func TestExecuteRunReplaysRecordedSteps(t *testing.T) {
	f := newRunFixture(t, 3)
	a := f.claim()
	ran := map[string]int{}
	body := func(st *RunState) ([]byte, error) {
		for _, name := range []string{"a", "b"} {
			if err := step(st, name, func() { ran[name]++ }); err != nil {
				return nil, err
			}
		}
		return []byte(`"done"`), nil
	}
	out, err := f.e.ExecuteRun(context.Background(), a, RunOptions{Strategy: StrategyRetry, MaxRetries: 2}, body)
	require.NoError(t, err)
	require.Equal(t, `"done"`, string(out))
	require.Equal(t, []string{"1:workflow_started:", "1:step:a", "1:step:b"}, f.history())
	require.Len(t, a.run.Events, 1, "the end goes with the job's completion")
	require.Equal(t, EvWorkflowCompleted, a.run.Events[0].Kind)

	again := f.e.NewAttempt(a.Row())
	_, err = f.e.ExecuteRun(context.Background(), again, RunOptions{Strategy: StrategyRetry, MaxRetries: 2}, body)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 1, "b": 1}, ran, "recorded steps never run again")
	require.Equal(t, []string{"1:workflow_started:", "1:step:a", "1:step:b"}, f.history())
}

// TestExecuteRunDivergenceGoesStuck: code that asks for another operation
// than the history recorded ends the execution with a non-determinism
// error that is not retried, running nothing more.
func TestExecuteRunDivergenceGoesStuck(t *testing.T) {
	f := newRunFixture(t, 3)
	a := f.claim()
	_, err := f.e.ExecuteRun(context.Background(), a, RunOptions{Strategy: StrategyRetry}, func(st *RunState) ([]byte, error) {
		if err := step(st, "a", func() {}); err != nil {
			return nil, err
		}
		return nil, st.Suspend(f.now.Add(time.Hour), nil)
	})
	var se *SuspendError
	require.ErrorAs(t, err, &se)
	require.Equal(t, f.now.Add(time.Hour), se.Until)

	ranB := false
	_, err = f.e.ExecuteRun(context.Background(), f.e.NewAttempt(a.Row()), RunOptions{Strategy: StrategyRetry}, func(st *RunState) ([]byte, error) {
		if err := step(st, "changed", func() {}); err != nil {
			return nil, err
		}
		return nil, step(st, "b", func() { ranB = true })
	})
	var ke *KindError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, hoppertype.ErrorKindNonDeterminism, ke.Kind)
	require.True(t, ke.Abort, "a divergence is not retried")
	var nd *hoppertype.NonDeterminismError
	require.ErrorAs(t, err, &nd)
	require.Equal(t, 2, nd.Position)
	require.Equal(t, "step", nd.RecordedKind)
	require.Equal(t, "a", nd.RecordedName)
	require.False(t, ranB)
}

// TestExecuteRunCompensatesNewestFirst: a run that finally fails under
// StrategyCompensate runs its compensations in reverse order, each
// recorded; a failing one is recorded and the rest still run; the run ends
// compensated.
func TestExecuteRunCompensatesNewestFirst(t *testing.T) {
	f := newRunFixture(t, 1)
	a := f.claim()
	var order []string
	boom := errors.New("boom")
	_, err := f.e.ExecuteRun(context.Background(), a, RunOptions{Strategy: StrategyCompensate}, func(st *RunState) ([]byte, error) {
		for _, name := range []string{"one", "two", "three"} {
			if err := step(st, name, func() {}); err != nil {
				return nil, err
			}
			compensate(st, "undo-"+name, func(context.Context) error {
				order = append(order, name)
				if name == "two" {
					return errors.New("refund refused")
				}
				return nil
			})
		}
		return nil, boom
	})
	var ke *KindError
	require.ErrorAs(t, err, &ke)
	require.True(t, ke.Final)
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{"three", "two", "one"}, order)
	require.Equal(t, hoppertype.RunCompensated, a.run.Final)
	h := f.history()
	require.Equal(t, []string{
		"1:compensation_executed:undo-three#2", "1:compensation_failed:undo-two#1", "1:compensation_executed:undo-one#0",
		"1:workflow_failed:",
	}, h[len(h)-4:])
}

// TestExecuteRunRetryStartsAFreshAttempt: a failed attempt that the
// workflow retries undoes what it did, records its failure, and returns the
// cause for the job to retry; the next execution begins attempt 2 with a
// fresh history and its own scope, running the steps again.
func TestExecuteRunRetryStartsAFreshAttempt(t *testing.T) {
	f := newRunFixture(t, 3)
	a := f.claim()
	ran, undone := 0, 0
	var scopes []string
	fail := true
	body := func(st *RunState) ([]byte, error) {
		scopes = append(scopes, st.Scope())
		if err := step(st, "charge", func() { ran++ }); err != nil {
			return nil, err
		}
		compensate(st, "refund", func(context.Context) error { undone++; return nil })
		if fail {
			return nil, errors.New("declined")
		}
		return []byte(`1`), nil
	}
	_, err := f.e.ExecuteRun(context.Background(), a, RunOptions{Strategy: StrategyRetry, MaxRetries: 2}, body)
	require.EqualError(t, err, "declined", "the job retries on the cause itself")
	require.Equal(t, 1, undone, "the attempt's charge is refunded before the next")

	// The job is retried: claim it again.
	_, err = f.d.Executor().JobFinishMany(context.Background(), &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: "r", LeaseToken: a.Row().LeaseToken, State: hoppertype.JobStatePending, Attempt: a.Row().Attempt, RunAt: f.now}}})
	require.NoError(t, err)
	fail = false
	b := f.claim()
	_, err = f.e.ExecuteRun(context.Background(), b, RunOptions{Strategy: StrategyRetry, MaxRetries: 2}, body)
	require.NoError(t, err)
	require.Equal(t, 2, ran, "a new attempt runs its steps again")
	require.Equal(t, 1, undone)
	require.Equal(t, []string{"r", "r@2"}, scopes)
	require.Contains(t, f.history(), "2:step:charge")
}

// TestReplayStateSuspendsAtTheEnd: an offline replay answers from the
// events given and suspends where they end, recording nothing.
func TestReplayStateSuspendsAtTheEnd(t *testing.T) {
	run := &hoppertype.RunRow{ID: "r", Workflow: "w"}
	events := []*hoppertype.RunEvent{{RunID: "r", Attempt: 1, Seq: 1, Kind: EvStep, Name: "a"}}
	st := NewReplayState(context.Background(), run, 1, events)
	ev, err := st.Next("a", EvStep)
	require.NoError(t, err)
	require.Equal(t, "a", ev.Name)
	require.Nil(t, st.Peek())
	_, err = st.Next("b", EvStep)
	require.ErrorIs(t, err, ErrSuspended)
	require.True(t, st.Suspended)
	require.ErrorIs(t, st.Check(), ErrSuspended)

	require.ErrorIs(t, NewReplayState(context.Background(), run, 1, nil).Record(context.Background(), nil, EvStep, "bad\x00name", EventData{}), hoppertype.ErrInvalidInput)
}
