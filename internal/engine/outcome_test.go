package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// decideCase runs decide on a claimed row at attempt n of 3.
func decideRow(attempt int) *hoppertype.JobRow {
	return &hoppertype.JobRow{
		ID: "j1", Type: "t", Queue: "q", GroupID: "j1", Attempt: attempt, LeaseToken: 7,
		RunAt: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC),
		Retry: hoppertype.RetryPolicy{Attempts: 3, Backoff: "exponential", Base: time.Second, Factor: 2, Max: 30 * time.Second},
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	abortAll := func(error, hoppertype.FailureInfo) hoppertype.Decision { return hoppertype.DecideAbort() }
	delayAll := func(error, hoppertype.FailureInfo) hoppertype.Decision { return hoppertype.DecideDelay(time.Minute) }
	runAtAll := func(error, hoppertype.FailureInfo) hoppertype.Decision {
		return hoppertype.DecideRunAt(now.Add(time.Hour))
	}
	panics := func(error, hoppertype.FailureInfo) hoppertype.Decision { panic("classifier bug") }
	withDeadline := func(r *hoppertype.JobRow, d time.Time) *hoppertype.JobRow { r.Deadline = d; return r }

	tests := []struct {
		name      string
		row       *hoppertype.JobRow
		res       attemptResult
		classify  hoppertype.Classifier
		state     hoppertype.JobState
		attempt   int
		runAt     time.Time
		kind      hoppertype.ErrorKind
		event     hoppertype.EventKind
		willRetry bool
		panicked  bool
	}{
		{name: "success", row: decideRow(1), res: attemptResult{out: []byte("3")}, state: hoppertype.JobStateSucceeded, attempt: 1, event: hoppertype.EventSucceeded},
		{name: "error retries with backoff", row: decideRow(1), res: attemptResult{err: boom}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed, willRetry: true},
		{name: "second failure backs off more", row: decideRow(2), res: attemptResult{err: boom}, state: hoppertype.JobStateRetrying, attempt: 2, runAt: now.Add(2 * time.Second), kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed, willRetry: true},
		{name: "attempts used up dead-letters", row: decideRow(3), res: attemptResult{err: boom}, state: hoppertype.JobStateDead, attempt: 3, kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed},
		{name: "abort dead-letters now", row: decideRow(1), res: attemptResult{err: hoppertype.Abort(boom)}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: hoppertype.EventFailed},
		{name: "a run's final failure is dead now, its kind kept", row: decideRow(1), res: attemptResult{err: &KindError{Kind: hoppertype.ErrorKindHandler, Err: boom, Final: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed},
		{name: "a run's final failure of a cancelled child's error stays dead", row: decideRow(1), res: attemptResult{err: &KindError{Kind: hoppertype.ErrorKindCancelled, Err: boom, Final: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindCancelled, event: hoppertype.EventFailed},
		{name: "snooze keeps the attempt", row: decideRow(2), res: attemptResult{err: hoppertype.Snooze(time.Minute)}, state: hoppertype.JobStateScheduled, attempt: 1, runAt: now.Add(time.Minute), event: hoppertype.EventDeferred},
		{name: "snooze until", row: decideRow(1), res: attemptResult{err: hoppertype.SnoozeUntil(now.Add(time.Hour))}, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Hour), event: hoppertype.EventDeferred},
		{name: "snooze zero is due now", row: decideRow(1), res: attemptResult{err: hoppertype.Snooze(0)}, state: hoppertype.JobStatePending, attempt: 0, runAt: now, event: hoppertype.EventDeferred},
		{name: "snooze beyond deadline expires", row: withDeadline(decideRow(1), now.Add(time.Second)), res: attemptResult{err: hoppertype.Snooze(time.Minute)}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: hoppertype.EventExpired},
		{name: "retry after floor", row: decideRow(1), res: attemptResult{err: hoppertype.RetryAfter(boom, time.Hour)}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Hour), kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed, willRetry: true},
		{name: "retry after below backoff keeps backoff", row: decideRow(1), res: attemptResult{err: hoppertype.RetryAfter(boom, time.Millisecond)}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed, willRetry: true},
		{name: "classifier abort", row: decideRow(1), res: attemptResult{err: boom}, classify: abortAll, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: hoppertype.EventFailed},
		{name: "classifier delay keeps the attempt", row: decideRow(2), res: attemptResult{err: boom}, classify: delayAll, state: hoppertype.JobStateScheduled, attempt: 1, runAt: now.Add(time.Minute), event: hoppertype.EventDeferred},
		{name: "classifier run-at", row: decideRow(1), res: attemptResult{err: boom}, classify: runAtAll, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Hour), event: hoppertype.EventDeferred},
		{name: "explicit abort beats classifier", row: decideRow(1), res: attemptResult{err: hoppertype.Abort(boom)}, classify: delayAll, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: hoppertype.EventFailed},
		{name: "explicit snooze beats classifier", row: decideRow(1), res: attemptResult{err: hoppertype.Snooze(time.Second)}, classify: abortAll, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Second), event: hoppertype.EventDeferred},
		{name: "panicking classifier falls back to retry", row: decideRow(1), res: attemptResult{err: boom}, classify: panics, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: hoppertype.EventFailed, willRetry: true, panicked: true},
		{name: "next retry past deadline expires", row: withDeadline(decideRow(1), now.Add(500*time.Millisecond)), res: attemptResult{err: boom}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: hoppertype.EventExpired},
		{name: "failure after deadline expires", row: withDeadline(decideRow(1), now), res: attemptResult{err: boom}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: hoppertype.EventExpired},
		{name: "deadline cause expires", row: decideRow(1), res: attemptResult{err: boom, cause: hoppertype.ErrExpired}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: hoppertype.EventExpired},
		{name: "success after deadline still succeeds", row: withDeadline(decideRow(1), now.Add(-time.Second)), res: attemptResult{out: []byte("1")}, state: hoppertype.JobStateSucceeded, attempt: 1, event: hoppertype.EventSucceeded},
		{name: "attempt timeout is a failure", row: decideRow(1), res: attemptResult{err: fmt.Errorf("ctx: %w", hoppertype.ErrAttemptTimeout), cause: hoppertype.ErrAttemptTimeout}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindTimeout, event: hoppertype.EventFailed, willRetry: true},
		{name: "abort beats an attempt timeout", row: decideRow(1), res: attemptResult{err: hoppertype.Abort(boom), cause: hoppertype.ErrAttemptTimeout}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindTimeout, event: hoppertype.EventFailed},
		{name: "cancel requested", row: decideRow(1), res: attemptResult{err: boom, cancelRequested: true}, state: hoppertype.JobStateCancelled, attempt: 1, kind: hoppertype.ErrorKindCancelled, event: hoppertype.EventCancelled},
		{name: "stopping puts it back unused", row: decideRow(2), res: attemptResult{err: boom, cause: ErrStopping}, state: hoppertype.JobStatePending, attempt: 1, runAt: now, event: hoppertype.EventDeferred},
		{name: "decode error aborts", row: decideRow(1), res: attemptResult{err: &KindError{Kind: hoppertype.ErrorKindDecode, Err: boom, Abort: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindDecode, event: hoppertype.EventFailed},
		{name: "panic retries", row: decideRow(1), res: attemptResult{err: &KindError{Kind: hoppertype.ErrorKindPanic, Err: hoppertype.ErrPanic, Stack: "stack"}}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindPanic, event: hoppertype.EventFailed, willRetry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			panicked := false
			o := decide(tt.row, tt.res, tt.classify, now, nil, func(error) { panicked = true })
			p := o.params
			if p.State != tt.state {
				t.Fatalf("state = %s, want %s", p.State, tt.state)
			}
			if p.Attempt != tt.attempt {
				t.Errorf("attempt = %d, want %d", p.Attempt, tt.attempt)
			}
			if p.LeaseToken != 7 || p.ID != "j1" {
				t.Errorf("lease = %s/%d, want j1/7", p.ID, p.LeaseToken)
			}
			wantRunAt := tt.runAt
			if wantRunAt.IsZero() {
				wantRunAt = tt.row.RunAt // unchanged
			}
			if !p.RunAt.Equal(wantRunAt) {
				t.Errorf("runAt = %v, want %v", p.RunAt, wantRunAt)
			}
			if tt.state.Terminal() != !p.EndedAt.IsZero() {
				t.Errorf("endedAt = %v for state %s", p.EndedAt, p.State)
			}
			if tt.kind != "" {
				if p.Error == nil || p.Error.Kind != tt.kind {
					t.Errorf("error = %+v, want kind %s", p.Error, tt.kind)
				}
			}
			if tt.state == hoppertype.JobStateSucceeded && string(p.Result) != string(tt.res.out) {
				t.Errorf("result = %q, want %q", p.Result, tt.res.out)
			}
			if o.event.Kind != tt.event || o.event.WillRetry != tt.willRetry {
				t.Errorf("event = %s willRetry=%v, want %s willRetry=%v", o.event.Kind, o.event.WillRetry, tt.event, tt.willRetry)
			}
			if panicked != tt.panicked {
				t.Errorf("classifier panic reported = %v, want %v", panicked, tt.panicked)
			}
		})
	}
}

func TestDecidePanicKeepsStack(t *testing.T) {
	t.Parallel()
	long := make([]byte, 3*hoppertype.MaxStackBytes)
	for i := range long {
		long[i] = 'x'
	}
	o := decide(decideRow(1), attemptResult{err: &KindError{Kind: hoppertype.ErrorKindPanic, Err: hoppertype.ErrPanic, Stack: string(long)}}, nil, time.Now(), nil, nil)
	if o.params.Error == nil || len(o.params.Error.Stack) != hoppertype.MaxStackBytes {
		t.Fatalf("stack not kept or not truncated: %+v", o.params.Error)
	}
}

func TestDecideRescue(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	o := decideRescue(decideRow(1), now, nil)
	if o.params.State != hoppertype.JobStateRetrying || o.params.Error.Kind != hoppertype.ErrorKindLeaseLost || !o.params.RequireLeaseExpiredBefore.Equal(now) {
		t.Fatalf("rescue at attempt 1 = %+v", o.params)
	}
	if !o.params.RunAt.Equal(now.Add(time.Second)) || !o.event.WillRetry {
		t.Fatalf("rescue retry at %v (event %+v)", o.params.RunAt, o.event)
	}
	live := decideRow(1)
	live.LeaseExpiresAt = now.Add(time.Hour) // listed because its worker is dead
	if o := decideRescue(live, now, nil); !o.params.RequireLeaseExpiredBefore.IsZero() || !strings.Contains(o.params.Error.Message, "is dead") ||
		o.params.State != hoppertype.JobStateRetrying {
		t.Fatalf("rescue of a dead worker's job = %+v: want it retried now, fenced by its token alone", o.params)
	}
	o = decideRescue(decideRow(3), now, nil)
	if o.params.State != hoppertype.JobStateStuck || o.params.Stuck == nil || o.params.Stuck.Cause != hoppertype.StuckEngineFailure ||
		o.params.Stuck.Retryable == nil || !*o.params.Stuck.Retryable || o.event.Kind != hoppertype.EventStuck || o.event.Stuck != o.params.Stuck {
		t.Fatalf("rescue with attempts used up = %+v", o.params)
	}
	r := decideRow(1)
	r.Deadline = now
	if o = decideRescue(r, now, nil); o.params.State != hoppertype.JobStateExpired || o.params.EndedAt.IsZero() {
		t.Fatalf("rescue past deadline = %+v", o.params)
	}
}

// TestRescueFollowsDecide: a rescued attempt (its lease lost) ends as a
// failed attempt does under decide, by the same deadline, backoff and
// expiry rules, on every side of the deadline and at every attempt. The one
// difference is an attempt with none left: stuck for help, not dead.
func TestRescueFollowsDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rnd := func() float64 { return 0.3 }
	boom := errors.New("boom")
	for attempt := 1; attempt <= 3; attempt++ {
		row := decideRow(attempt)
		row.Retry.Jitter = 0.5
		next := now.Add(row.Retry.Delay(attempt, rnd)).Truncate(time.Microsecond)
		for _, d := range []struct {
			name     string
			deadline time.Time
		}{
			{"no deadline", time.Time{}},
			{"deadline passed", now.Add(-time.Second)},
			{"deadline now", now},
			{"deadline before the retry", next.Add(-time.Microsecond)},
			{"deadline at the retry", next},
			{"deadline after the retry", next.Add(time.Microsecond)},
		} {
			t.Run(fmt.Sprintf("attempt %d, %s", attempt, d.name), func(t *testing.T) {
				row := row.Clone()
				row.Deadline = d.deadline
				row.LeaseExpiresAt = now.Add(-time.Second)
				failed := decide(row, attemptResult{err: boom}, nil, now, rnd, nil)
				rescued := decideRescue(row, now, rnd)
				f, r := failed.params, rescued.params
				wantState, wantEnded := f.State, f.EndedAt
				if f.State == hoppertype.JobStateDead {
					wantState, wantEnded = hoppertype.JobStateStuck, time.Time{} // not ended: it waits for help
				}
				if r.State != wantState || !r.RunAt.Equal(f.RunAt) || !r.EndedAt.Equal(wantEnded) || r.Attempt != f.Attempt {
					t.Fatalf("rescue = %s at %v (ended %v, attempt %d), decide = %s at %v (ended %v, attempt %d)",
						r.State, r.RunAt, r.EndedAt, r.Attempt, f.State, f.RunAt, f.EndedAt, f.Attempt)
				}
				if r.State == hoppertype.JobStateRetrying && (r.Error == nil || r.Error.Kind != hoppertype.ErrorKindLeaseLost) {
					t.Errorf("rescue records %+v, want a lost lease", r.Error)
				}
				if f.State == hoppertype.JobStateExpired && (r.Error == nil || *r.Error != *f.Error) {
					t.Errorf("rescue records %+v, decide %+v", r.Error, f.Error)
				}
				fe, re := failed.event, rescued.event
				wantKind := fe.Kind
				if f.State == hoppertype.JobStateDead {
					wantKind = hoppertype.EventStuck
				}
				if re.Kind != wantKind || re.WillRetry != fe.WillRetry || !re.RunAt.Equal(fe.RunAt) || !re.Deadline.Equal(fe.Deadline) {
					t.Errorf("rescue's event = %+v, decide's = %+v", re, fe)
				}
			})
		}
	}
}

// TestDecideCancelOfASuspendingRun: a workflow run whose cancel arrives as
// it suspends runs again at once, so its execution compensates and ends
// it; a plain job cancelled while running ends cancelled.
func TestDecideCancelOfASuspendingRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	run := decideRow(1)
	run.Type = WorkflowTypePrefix + "saga"
	o := decide(run, attemptResult{err: &SuspendError{Until: now.Add(time.Hour)}, cancelRequested: true}, nil, now, nil, nil)
	if o.params.State == hoppertype.JobStateCancelled || !o.params.RunAt.Equal(now) {
		t.Fatalf("a suspending run's cancel = %s at %v; want it run again now", o.params.State, o.params.RunAt)
	}
	o = decide(decideRow(1), attemptResult{err: &SuspendError{Until: now.Add(time.Hour)}, cancelRequested: true}, nil, now, nil, nil)
	if o.params.State != hoppertype.JobStateCancelled {
		t.Fatalf("a job's cancel while running = %s; want cancelled", o.params.State)
	}
}
