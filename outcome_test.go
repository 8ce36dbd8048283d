package hopper

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	half := func() float64 { return 0.5 }
	tests := []struct {
		name string
		p    RetryPolicy
		n    int
		rnd  func() float64
		want time.Duration
	}{
		{"default first retry, no jitter draw", RetryPolicy{Jitter: NoJitter}, 1, nil, time.Second},
		{"default doubles", RetryPolicy{Jitter: NoJitter}, 3, nil, 4 * time.Second},
		{"default caps at max", RetryPolicy{Jitter: NoJitter}, 10, nil, 30 * time.Second},
		{"jitter takes a fraction off", RetryPolicy{}, 2, half, time.Duration(float64(2*time.Second) * (1 - 0.5*0.5))},
		{"jitter 1 with rand 0 keeps delay", RetryPolicy{Jitter: 1}, 1, func() float64 { return 0 }, time.Second},
		{"linear", RetryPolicy{Backoff: BackoffLinear, Base: 100 * time.Millisecond, Jitter: NoJitter}, 3, nil, 300 * time.Millisecond},
		{"linear capped", RetryPolicy{Backoff: BackoffLinear, Base: 10 * time.Second, Max: 15 * time.Second, Jitter: NoJitter}, 3, nil, 15 * time.Second},
		{"constant", RetryPolicy{Backoff: BackoffConstant, Base: 7 * time.Millisecond, Jitter: NoJitter}, 9, nil, 7 * time.Millisecond},
		{"factor 3", RetryPolicy{Base: time.Second, Factor: 3, Max: time.Hour, Jitter: NoJitter}, 4, nil, 27 * time.Second},
		{"huge n does not overflow", RetryPolicy{Jitter: NoJitter}, 5000, nil, 30 * time.Second},
		{"n below 1 is the first retry", RetryPolicy{Jitter: NoJitter}, 0, nil, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.n, tt.rnd); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	bad := []RetryPolicy{
		{Attempts: -1},
		{Base: -time.Second},
		{Factor: -2},
		{Jitter: 1.5},
		{Backoff: "fibonacci"},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidInput", p, err)
		}
	}
	for _, p := range []RetryPolicy{{}, RetryAPI(), RetryDatabase(), RetryNetwork(), {Jitter: NoJitter}, {Attempts: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

func TestRetryPolicyMergeAndStore(t *testing.T) {
	t.Parallel()
	client := RetryPolicy{Attempts: 5, Base: 2 * time.Second}
	typ := RetryPolicy{Max: time.Minute, Jitter: NoJitter}
	call := RetryPolicy{Attempts: 2}
	got := client.merge(typ).merge(call).stored()
	want := hoppertype.RetryPolicy{Attempts: 2, Backoff: BackoffExponential, Base: 2 * time.Second, Factor: 2, Max: time.Minute, Jitter: 0}
	if got != want {
		t.Fatalf("merged = %+v, want %+v", got, want)
	}
	if back := policyFromStored(got); back.Jitter != NoJitter || back.Attempts != 2 {
		t.Fatalf("policyFromStored = %+v", back)
	}
}

// TestRetryDefaultsAreFresh: DefaultRetryPolicy and the presets hand out
// copies, so a caller that changes one changes neither what the next call
// returns nor the default the engine fills policies from.
func TestRetryDefaultsAreFresh(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy()
	p.Attempts, p.Base = 99, time.Hour
	if got := DefaultRetryPolicy(); got.Attempts != 3 || got.Base != time.Second {
		t.Fatalf("DefaultRetryPolicy() after a caller changed a copy = %+v", got)
	}
	if got := (RetryPolicy{}).resolved(); got != DefaultRetryPolicy() {
		t.Fatalf("resolved() = %+v, want the default %+v", got, DefaultRetryPolicy())
	}
	api := RetryAPI()
	api.Attempts = 1
	if RetryAPI().Attempts != 5 {
		t.Fatal("RetryAPI() returned a changed preset")
	}
	c := AllDone()
	c.Kind = hoppertype.GateAllSuccess
	if AllDone().Kind != hoppertype.GateAllDone {
		t.Fatal("AllDone() returned a changed condition")
	}
}

// decideCase runs decide on a claimed row at attempt n of 3.
func decideRow(attempt int) *hoppertype.JobRow {
	return &hoppertype.JobRow{
		ID: "j1", Type: "t", Queue: "q", GroupID: "j1", Attempt: attempt, LeaseToken: 7,
		RunAt: time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC),
		Retry: RetryPolicy{Jitter: NoJitter}.stored(),
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	abortAll := func(error, FailureInfo) Decision { return DecideAbort() }
	delayAll := func(error, FailureInfo) Decision { return DecideDelay(time.Minute) }
	runAtAll := func(error, FailureInfo) Decision { return DecideRunAt(now.Add(time.Hour)) }
	panics := func(error, FailureInfo) Decision { panic("classifier bug") }
	withDeadline := func(r *hoppertype.JobRow, d time.Time) *hoppertype.JobRow { r.Deadline = d; return r }

	tests := []struct {
		name      string
		row       *hoppertype.JobRow
		res       attemptResult
		classify  Classifier
		state     hoppertype.JobState
		attempt   int
		runAt     time.Time
		kind      hoppertype.ErrorKind
		event     EventKind
		willRetry bool
		panicked  bool
	}{
		{name: "success", row: decideRow(1), res: attemptResult{out: []byte("3")}, state: hoppertype.JobStateSucceeded, attempt: 1, event: EventSucceeded},
		{name: "error retries with backoff", row: decideRow(1), res: attemptResult{err: boom}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: EventFailed, willRetry: true},
		{name: "second failure backs off more", row: decideRow(2), res: attemptResult{err: boom}, state: hoppertype.JobStateRetrying, attempt: 2, runAt: now.Add(2 * time.Second), kind: hoppertype.ErrorKindHandler, event: EventFailed, willRetry: true},
		{name: "attempts used up dead-letters", row: decideRow(3), res: attemptResult{err: boom}, state: hoppertype.JobStateDead, attempt: 3, kind: hoppertype.ErrorKindHandler, event: EventFailed},
		{name: "abort dead-letters now", row: decideRow(1), res: attemptResult{err: Abort(boom)}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: EventFailed},
		{name: "a run's final failure is dead now, its kind kept", row: decideRow(1), res: attemptResult{err: &kindError{kind: hoppertype.ErrorKindHandler, err: boom, final: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindHandler, event: EventFailed},
		{name: "a run's final failure of a cancelled child's error stays dead", row: decideRow(1), res: attemptResult{err: &kindError{kind: hoppertype.ErrorKindCancelled, err: boom, final: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindCancelled, event: EventFailed},
		{name: "snooze keeps the attempt", row: decideRow(2), res: attemptResult{err: Snooze(time.Minute)}, state: hoppertype.JobStateScheduled, attempt: 1, runAt: now.Add(time.Minute), event: EventDeferred},
		{name: "snooze until", row: decideRow(1), res: attemptResult{err: SnoozeUntil(now.Add(time.Hour))}, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Hour), event: EventDeferred},
		{name: "snooze zero is due now", row: decideRow(1), res: attemptResult{err: Snooze(0)}, state: hoppertype.JobStatePending, attempt: 0, runAt: now, event: EventDeferred},
		{name: "snooze beyond deadline expires", row: withDeadline(decideRow(1), now.Add(time.Second)), res: attemptResult{err: Snooze(time.Minute)}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: EventExpired},
		{name: "retry after floor", row: decideRow(1), res: attemptResult{err: RetryAfter(boom, time.Hour)}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Hour), kind: hoppertype.ErrorKindHandler, event: EventFailed, willRetry: true},
		{name: "retry after below backoff keeps backoff", row: decideRow(1), res: attemptResult{err: RetryAfter(boom, time.Millisecond)}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: EventFailed, willRetry: true},
		{name: "classifier abort", row: decideRow(1), res: attemptResult{err: boom}, classify: abortAll, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: EventFailed},
		{name: "classifier delay keeps the attempt", row: decideRow(2), res: attemptResult{err: boom}, classify: delayAll, state: hoppertype.JobStateScheduled, attempt: 1, runAt: now.Add(time.Minute), event: EventDeferred},
		{name: "classifier run-at", row: decideRow(1), res: attemptResult{err: boom}, classify: runAtAll, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Hour), event: EventDeferred},
		{name: "explicit abort beats classifier", row: decideRow(1), res: attemptResult{err: Abort(boom)}, classify: delayAll, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindAborted, event: EventFailed},
		{name: "explicit snooze beats classifier", row: decideRow(1), res: attemptResult{err: Snooze(time.Second)}, classify: abortAll, state: hoppertype.JobStateScheduled, attempt: 0, runAt: now.Add(time.Second), event: EventDeferred},
		{name: "panicking classifier falls back to retry", row: decideRow(1), res: attemptResult{err: boom}, classify: panics, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindHandler, event: EventFailed, willRetry: true, panicked: true},
		{name: "next retry past deadline expires", row: withDeadline(decideRow(1), now.Add(500*time.Millisecond)), res: attemptResult{err: boom}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: EventExpired},
		{name: "failure after deadline expires", row: withDeadline(decideRow(1), now), res: attemptResult{err: boom}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: EventExpired},
		{name: "deadline cause expires", row: decideRow(1), res: attemptResult{err: boom, cause: ErrExpired}, state: hoppertype.JobStateExpired, attempt: 1, kind: hoppertype.ErrorKindExpired, event: EventExpired},
		{name: "success after deadline still succeeds", row: withDeadline(decideRow(1), now.Add(-time.Second)), res: attemptResult{out: []byte("1")}, state: hoppertype.JobStateSucceeded, attempt: 1, event: EventSucceeded},
		{name: "attempt timeout is a failure", row: decideRow(1), res: attemptResult{err: fmt.Errorf("ctx: %w", ErrAttemptTimeout), cause: ErrAttemptTimeout}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindTimeout, event: EventFailed, willRetry: true},
		{name: "abort beats an attempt timeout", row: decideRow(1), res: attemptResult{err: Abort(boom), cause: ErrAttemptTimeout}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindTimeout, event: EventFailed},
		{name: "cancel requested", row: decideRow(1), res: attemptResult{err: boom, cancelRequested: true}, state: hoppertype.JobStateCancelled, attempt: 1, kind: hoppertype.ErrorKindCancelled, event: EventCancelled},
		{name: "stopping puts it back unused", row: decideRow(2), res: attemptResult{err: boom, cause: errStopping}, state: hoppertype.JobStatePending, attempt: 1, runAt: now, event: EventDeferred},
		{name: "decode error aborts", row: decideRow(1), res: attemptResult{err: &kindError{kind: hoppertype.ErrorKindDecode, err: boom, abort: true}}, state: hoppertype.JobStateDead, attempt: 1, kind: hoppertype.ErrorKindDecode, event: EventFailed},
		{name: "panic retries", row: decideRow(1), res: attemptResult{err: &kindError{kind: hoppertype.ErrorKindPanic, err: ErrPanic, stack: "stack"}}, state: hoppertype.JobStateRetrying, attempt: 1, runAt: now.Add(time.Second), kind: hoppertype.ErrorKindPanic, event: EventFailed, willRetry: true},
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

// TestDecideTimeoutKeepsHandlerError: the error of an attempt that ran
// past its timeout wraps both the timeout and the handler's own error, so
// a classifier can tell them apart with errors.Is.
func TestDecideTimeoutKeepsHandlerError(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	upstream := errors.New("upstream down")
	var seen error
	classify := func(err error, _ FailureInfo) Decision { seen = err; return DecideRetry() }
	res := attemptResult{err: fmt.Errorf("call: %w", upstream), cause: ErrAttemptTimeout}
	o := decide(decideRow(1), res, classify, now, nil, func(error) {})
	if o.params.State != hoppertype.JobStateRetrying || o.params.Error == nil || o.params.Error.Kind != hoppertype.ErrorKindTimeout {
		t.Fatalf("outcome = %s %+v, want a retried timeout", o.params.State, o.params.Error)
	}
	if !errors.Is(seen, ErrAttemptTimeout) {
		t.Errorf("the classifier's error %v does not match ErrAttemptTimeout", seen)
	}
	if !errors.Is(seen, upstream) {
		t.Errorf("the classifier's error %v does not match the handler's error", seen)
	}
}

func TestDecidePanicKeepsStack(t *testing.T) {
	t.Parallel()
	long := make([]byte, 3*hoppertype.MaxStackBytes)
	for i := range long {
		long[i] = 'x'
	}
	o := decide(decideRow(1), attemptResult{err: &kindError{kind: hoppertype.ErrorKindPanic, err: ErrPanic, stack: string(long)}}, nil, time.Now(), nil, nil)
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
	o = decideRescue(decideRow(3), now, nil)
	if o.params.State != hoppertype.JobStateStuck || o.params.Stuck == nil || o.params.Stuck.Cause != hoppertype.StuckEngineFailure ||
		o.params.Stuck.Retryable == nil || !*o.params.Stuck.Retryable || o.event.Kind != EventStuck {
		t.Fatalf("rescue with attempts used up = %+v", o.params)
	}
	r := decideRow(1)
	r.Deadline = now
	if o = decideRescue(r, now, nil); o.params.State != hoppertype.JobStateExpired || o.params.EndedAt.IsZero() {
		t.Fatalf("rescue past deadline = %+v", o.params)
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp: connect: connection refused"), true},
		{errors.New("upstream said 503"), true},
		{statusErr(429), true},
		{statusErr(404), false},
		{statusErr(502), true},
		{errors.New("validation failed: name is required"), false},
		{fmt.Errorf("wrapped: %w", statusErr(500)), true},
	} {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("http status %d", int(e)) }
func (e statusErr) StatusCode() int { return int(e) }
