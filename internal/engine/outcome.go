package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// outcome is what a finished attempt turns into: the transition to store and
// the event to emit once it committed.
type outcome struct {
	params driver.JobFinishParams
	event  hoppertype.Event
}

// attemptResult is what the executor observed of one attempt.
type attemptResult struct {
	out []byte
	err error
	// cause is why the handler's context was cancelled, if it was.
	cause error
	// cancelRequested is set when the job was cancelled while running.
	cancelRequested bool
}

// ending builds the outcomes of one attempt of row that ends at now. decide
// and decideRescue build theirs with it, so the rules the state machine
// applies to every ending attempt are written once: when a deadline has
// passed, what an expired job records, the backoff of a retry and a retry
// that would come too late.
type ending struct {
	row  *hoppertype.JobRow
	now  time.Time
	base driver.JobFinishParams
	ev   hoppertype.Event
}

func newEnding(row *hoppertype.JobRow, now time.Time) *ending {
	return &ending{
		row: row, now: now,
		base: driver.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken, Attempt: row.Attempt, RunAt: row.RunAt, Error: row.Error},
		ev: hoppertype.Event{JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID, ParentID: row.ParentID,
			Dependents: row.Dependents, Attempt: row.Attempt, QueuedAt: row.QueuedAt, At: now},
	}
}

// deadlinePassed says whether the job's deadline is at or before t: a job
// is expired at its deadline, not only past it.
func (e *ending) deadlinePassed(t time.Time) bool {
	return !e.row.Deadline.IsZero() && !t.Before(e.row.Deadline)
}

// errInfo is the error the attempt records, its stack cut to MaxStackBytes.
func (e *ending) errInfo(kind hoppertype.ErrorKind, err error, stack string) *hoppertype.ErrorInfo {
	if len(stack) > hoppertype.MaxStackBytes {
		stack = stack[:hoppertype.MaxStackBytes]
	}
	return &hoppertype.ErrorInfo{Kind: kind, Message: err.Error(), Stack: stack, Attempt: e.row.Attempt, At: e.now}
}

// terminal ends the job in state, recording ei, with an event of kind.
func (e *ending) terminal(state hoppertype.JobState, ei *hoppertype.ErrorInfo, kind hoppertype.EventKind) outcome {
	p, ev := e.base, e.ev
	p.State, p.EndedAt, p.Error = state, e.now, ei
	ev.Kind = kind
	if ei != nil {
		ev.Error = ei.Message
	}
	if state == hoppertype.JobStateExpired {
		ev.Deadline = e.row.Deadline
	}
	return outcome{params: p, event: ev}
}

// expire ends the job expired: its deadline passed.
func (e *ending) expire() outcome {
	return e.terminal(hoppertype.JobStateExpired, e.errInfo(hoppertype.ErrorKindExpired, hoppertype.ErrExpired, ""), hoppertype.EventExpired)
}

// stuck parks the job stuck, for help, recording ei when it is not nil.
func (e *ending) stuck(info *hoppertype.StuckInfo, ei *hoppertype.ErrorInfo, msg string) outcome {
	p, ev := e.base, e.ev
	p.State, p.Stuck = hoppertype.JobStateStuck, info
	if ei != nil {
		p.Error = ei
	}
	ev.Kind, ev.Error, ev.Stuck = hoppertype.EventStuck, msg, info
	return outcome{params: p, event: ev}
}

// deferTo runs the job again at at without using its attempt; expired
// instead when at is past its deadline.
func (e *ending) deferTo(at time.Time) outcome {
	at = clampTime(at) // a wait past year 9999 is as good as forever
	// Deferred to its deadline exactly, a job is expired when it comes
	// due (dispatch refuses a job at its deadline); past it, at once.
	if !e.row.Deadline.IsZero() && at.After(e.row.Deadline) {
		return e.expire()
	}
	p, ev := e.base, e.ev
	p.State, p.RunAt, p.Attempt = hoppertype.JobStateScheduled, at, e.row.Attempt-1
	if !at.After(e.now) {
		p.State = hoppertype.JobStatePending
	}
	ev.Kind, ev.RunAt, ev.Attempt = hoppertype.EventDeferred, at, e.row.Attempt-1
	return outcome{params: p, event: ev}
}

// retryDelay is the backoff before the attempt's retry: the job's retry
// policy's delay, no shorter than a RetryAfter in err asks for.
func (e *ending) retryDelay(err error, rnd func() float64) time.Duration {
	delay := e.row.Retry.Delay(e.row.Attempt, rnd)
	var ra *hoppertype.RetryAfterError
	if errors.As(err, &ra) && ra.Delay > delay {
		delay = ra.Delay
	}
	return delay
}

// retry schedules the failed attempt's retry after delay, recording ei;
// expired instead when the retry would come at or past the deadline.
func (e *ending) retry(ei *hoppertype.ErrorInfo, delay time.Duration) outcome {
	next := e.now.Add(delay).Truncate(time.Microsecond)
	if e.deadlinePassed(next) {
		return e.expire()
	}
	p, ev := e.base, e.ev
	p.State, p.RunAt, p.Error = hoppertype.JobStateRetrying, next, ei
	ev.Kind, ev.Error, ev.WillRetry, ev.RunAt = hoppertype.EventFailed, ei.Message, true, next
	return outcome{params: p, event: ev}
}

// decide turns an attempt into its outcome. It is a pure function of the
// claimed row, the attempt, the classifiers and now (plus rnd for jitter).
func decide(row *hoppertype.JobRow, res attemptResult, classify hoppertype.Classifier, now time.Time, rnd func() float64, onPanic func(error)) outcome {
	if res.err == nil {
		return succeeded(row, res.out, now)
	}
	return decideFailed(row, res, classify, now, rnd, onPanic)
}

// succeeded is the outcome of an attempt that returned out: the job
// succeeded. It builds the outcome once, in a small frame (decide is on
// every job's path, after its handler).
func succeeded(row *hoppertype.JobRow, out []byte, now time.Time) outcome {
	return outcome{
		params: driver.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken, Attempt: row.Attempt, RunAt: row.RunAt, Error: row.Error,
			Claimed: row, State: hoppertype.JobStateSucceeded, EndedAt: now, Result: out},
		event: hoppertype.Event{Kind: hoppertype.EventSucceeded, JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID,
			ParentID: row.ParentID, Dependents: row.Dependents, Attempt: row.Attempt, QueuedAt: row.QueuedAt, At: now, Result: rawJSON(out)},
	}
}

// decideFailed is decide for an attempt that returned an error. Its many
// outcomes take a large frame, which only a failed attempt pays for.
//
//go:noinline
func decideFailed(row *hoppertype.JobRow, res attemptResult, classify hoppertype.Classifier, now time.Time, rnd func() float64, onPanic func(error)) outcome {
	e := newEnding(row, now)
	e.base.Claimed = row
	err := res.err

	// Stopping the client: back to pending, the attempt not used.
	if errors.Is(res.cause, ErrStopping) {
		p, ev := e.base, e.ev
		p.State, p.RunAt, p.Attempt = hoppertype.JobStatePending, now, row.Attempt-1
		ev.Kind, ev.RunAt, ev.Attempt = hoppertype.EventDeferred, now, row.Attempt-1
		return outcome{params: p, event: ev}
	}
	if res.cancelRequested && isRunJob(row) {
		if suspend := (*SuspendError)(nil); errors.As(err, &suspend) {
			// The run suspended as its cancel came: it runs again at once,
			// and that execution, seeing the cancel, runs the run's
			// compensations and ends it. Cancelled here, it would end
			// without them.
			return e.deferTo(now)
		}
	}
	if res.cancelRequested || errors.Is(res.cause, hoppertype.ErrCancelled) {
		return e.terminal(hoppertype.JobStateCancelled, e.errInfo(hoppertype.ErrorKindCancelled, fmt.Errorf("%w: %w", hoppertype.ErrCancelled, err), ""), hoppertype.EventCancelled)
	}
	if errors.Is(res.cause, hoppertype.ErrExpired) || e.deadlinePassed(now) {
		return e.expire()
	}

	var stuck *stuckError
	if errors.As(err, &stuck) {
		return e.stuck(stuck.info, nil, err.Error())
	}
	var suspend *SuspendError
	if errors.As(err, &suspend) {
		// A workflow run waits: deferred without using an attempt.
		return e.deferTo(suspend.Until)
	}
	var snooze *hoppertype.SnoozeError
	if errors.As(err, &snooze) {
		at := snooze.RunAt
		if at.IsZero() {
			at = now.Add(max(snooze.Delay, 0))
		}
		return e.deferTo(at.Truncate(time.Microsecond))
	}

	kind, stack, abort, final := hoppertype.ErrorKindHandler, "", false, false
	var ke *KindError
	if errors.As(err, &ke) {
		kind, stack, abort, final = ke.Kind, ke.Stack, ke.Abort, ke.Final
	}
	if errors.Is(res.cause, hoppertype.ErrAttemptTimeout) { // a heartbeat timeout too
		kind = hoppertype.ErrorKindTimeout
		err = fmt.Errorf("%w: %w", res.cause, err)
	}
	if errors.Is(err, hoppertype.ErrAborted) {
		abort = true
	}
	if final {
		return e.terminal(hoppertype.JobStateDead, e.errInfo(kind, err, stack), hoppertype.EventFailed)
	}
	switch kind {
	case hoppertype.ErrorKindCancelled:
		return e.terminal(hoppertype.JobStateCancelled, e.errInfo(kind, err, ""), hoppertype.EventCancelled)
	case hoppertype.ErrorKindNonDeterminism:
		// Replay diverged from history: retrying the same code cannot help.
		notRetryable := false
		info := &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &notRetryable, Detail: err.Error(), ObservedAt: now}
		return e.stuck(info, e.errInfo(kind, err, ""), err.Error())
	}
	if abort {
		if kind == hoppertype.ErrorKindHandler {
			kind = hoppertype.ErrorKindAborted
		}
		return e.terminal(hoppertype.JobStateDead, e.errInfo(kind, err, stack), hoppertype.EventFailed)
	}

	// The classifier (type's, else client's) decides next.
	if classify != nil {
		d, ok := runClassifier(classify, err, hoppertype.FailureInfo{ID: row.ID, Type: row.Type, Attempt: row.Attempt, Attempts: row.Retry.Attempts}, onPanic)
		if ok {
			switch d.Kind() {
			case hoppertype.DecisionAbort:
				return e.terminal(hoppertype.JobStateDead, e.errInfo(hoppertype.ErrorKindAborted, err, stack), hoppertype.EventFailed)
			case hoppertype.DecisionDelay:
				return e.deferTo(now.Add(max(d.Delay(), 0)).Truncate(time.Microsecond))
			case hoppertype.DecisionRunAt:
				return e.deferTo(d.RunAt().Truncate(time.Microsecond))
			}
		}
	}

	ei := e.errInfo(kind, err, stack)
	if row.Attempt >= row.Retry.Attempts {
		return e.terminal(hoppertype.JobStateDead, ei, hoppertype.EventFailed)
	}
	return e.retry(ei, e.retryDelay(err, rnd))
}

// decideRescue is the outcome of an attempt whose lease expired: the rules
// of decide for a failed attempt (see ending), except that a job whose
// attempts are used up is stuck, for help, rather than dead: its handler
// never said it failed.
//
// A job whose lease has not lapsed was listed because its worker is dead
// (it stopped reporting): it is rescued now, on its lease token alone, as
// its worker will neither heartbeat nor finish it.
func decideRescue(row *hoppertype.JobRow, now time.Time, rnd func() float64) outcome {
	err := fmt.Errorf("%w: worker %s stopped heartbeating during attempt %d", hoppertype.ErrLeaseLost, row.Worker, row.Attempt)
	fence := now
	if !row.LeaseExpiresAt.Before(now) {
		err = fmt.Errorf("%w: worker %s is dead (it stopped reporting) during attempt %d", hoppertype.ErrLeaseLost, row.Worker, row.Attempt)
		fence = time.Time{}
	}
	e := newEnding(row, now)
	ei := e.errInfo(hoppertype.ErrorKindLeaseLost, err, "")
	e.base.RequireLeaseExpiredBefore, e.base.Error, e.ev.Error = fence, ei, ei.Message
	switch {
	case e.deadlinePassed(now):
		return e.expire()
	case row.Attempt >= row.Retry.Attempts:
		retryable := true
		return e.stuck(&hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &retryable,
			Detail: fmt.Sprintf("lease lost on attempt %d of %d", row.Attempt, row.Retry.Attempts), ObservedAt: now}, nil, ei.Message)
	}
	return e.retry(ei, e.retryDelay(err, rnd))
}

// runClassifier calls a classifier, turning a panic into "not decided".
func runClassifier(f hoppertype.Classifier, err error, info hoppertype.FailureInfo, onPanic func(error)) (d hoppertype.Decision, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			if onPanic != nil {
				onPanic(fmt.Errorf("classifier panicked for job %s: %w", info.ID, PanicCause(r)))
			}
		}
	}()
	return f(err, info), true
}

// defaultRand draws jitter.
func defaultRand() float64 { return rand.Float64() }

// The storable years: a time outside them is clamped (clampTime).
var (
	storableMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	storableMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// clampTime brings t within the storable years: a wait past year 9999 is
// as good as forever.
func clampTime(t time.Time) time.Time {
	switch {
	case t.After(storableMax):
		return storableMax
	case t.Before(storableMin):
		return storableMin
	}
	return t
}
