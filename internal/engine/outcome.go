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

// decide turns an attempt into its outcome. It is a pure function of the
// claimed row, the attempt, the classifiers and now (plus rnd for jitter).
func decide(row *hoppertype.JobRow, res attemptResult, classify hoppertype.Classifier, now time.Time, rnd func() float64, onPanic func(error)) outcome {
	base := driver.JobFinishParams{
		ID:         row.ID,
		LeaseToken: row.LeaseToken,
		Attempt:    row.Attempt,
		RunAt:      row.RunAt,
		Error:      row.Error,
		Result:     nil,
		Claimed:    row,
	}
	ev := hoppertype.Event{JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID, ParentID: row.ParentID,
		Dependents: row.Dependents, Attempt: row.Attempt, At: now}
	errInfo := func(kind hoppertype.ErrorKind, err error, stack string) *hoppertype.ErrorInfo {
		if len(stack) > hoppertype.MaxStackBytes {
			stack = stack[:hoppertype.MaxStackBytes]
		}
		return &hoppertype.ErrorInfo{Kind: kind, Message: err.Error(), Stack: stack, Attempt: row.Attempt, At: now}
	}
	terminal := func(state hoppertype.JobState, ei *hoppertype.ErrorInfo, kind hoppertype.EventKind) outcome {
		p := base
		p.State, p.EndedAt, p.Error = state, now, ei
		ev.Kind = kind
		if ei != nil {
			ev.Error = ei.Message
		}
		if state == hoppertype.JobStateExpired {
			ev.Deadline = row.Deadline
		}
		return outcome{params: p, event: ev}
	}
	deadlinePassed := func(t time.Time) bool { return !row.Deadline.IsZero() && !t.Before(row.Deadline) }
	expire := func() outcome {
		return terminal(hoppertype.JobStateExpired, errInfo(hoppertype.ErrorKindExpired, hoppertype.ErrExpired, ""), hoppertype.EventExpired)
	}
	deferTo := func(at time.Time) outcome {
		at = clampTime(at) // a wait past year 9999 is as good as forever
		// Deferred to its deadline exactly, a job is expired when it comes
		// due (dispatch refuses a job at its deadline); past it, at once.
		if !row.Deadline.IsZero() && at.After(row.Deadline) {
			return expire()
		}
		p := base
		p.State, p.RunAt, p.Attempt = hoppertype.JobStateScheduled, at, row.Attempt-1
		if !at.After(now) {
			p.State = hoppertype.JobStatePending
		}
		ev.Kind, ev.RunAt, ev.Attempt = hoppertype.EventDeferred, at, row.Attempt-1
		return outcome{params: p, event: ev}
	}

	if res.err == nil {
		p := base
		p.State, p.EndedAt, p.Result = hoppertype.JobStateSucceeded, now, res.out
		ev.Kind, ev.Result = hoppertype.EventSucceeded, rawJSON(res.out)
		return outcome{params: p, event: ev}
	}
	err := res.err

	// Stopping the client: back to pending, the attempt not used.
	if errors.Is(res.cause, ErrStopping) {
		p := base
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
			return deferTo(now)
		}
	}
	if res.cancelRequested || errors.Is(res.cause, hoppertype.ErrCancelled) {
		return terminal(hoppertype.JobStateCancelled, errInfo(hoppertype.ErrorKindCancelled, fmt.Errorf("%w: %w", hoppertype.ErrCancelled, err), ""), hoppertype.EventCancelled)
	}
	if errors.Is(res.cause, hoppertype.ErrExpired) || deadlinePassed(now) {
		return expire()
	}

	var stuck *stuckError
	if errors.As(err, &stuck) {
		p := base
		p.State, p.Stuck = hoppertype.JobStateStuck, stuck.info
		ev.Kind, ev.Error, ev.Stuck = hoppertype.EventStuck, err.Error(), stuck.info
		return outcome{params: p, event: ev}
	}
	var suspend *SuspendError
	if errors.As(err, &suspend) {
		// A workflow run waits: deferred without using an attempt.
		return deferTo(suspend.Until)
	}
	var snooze *hoppertype.SnoozeError
	if errors.As(err, &snooze) {
		at := snooze.RunAt
		if at.IsZero() {
			at = now.Add(max(snooze.Delay, 0))
		}
		return deferTo(at.Truncate(time.Microsecond))
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
		return terminal(hoppertype.JobStateDead, errInfo(kind, err, stack), hoppertype.EventFailed)
	}
	switch kind {
	case hoppertype.ErrorKindCancelled:
		return terminal(hoppertype.JobStateCancelled, errInfo(kind, err, ""), hoppertype.EventCancelled)
	case hoppertype.ErrorKindNonDeterminism:
		// Replay diverged from history: retrying the same code cannot help.
		p := base
		notRetryable := false
		p.State, p.Error = hoppertype.JobStateStuck, errInfo(kind, err, "")
		p.Stuck = &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &notRetryable, Detail: err.Error(), ObservedAt: now}
		ev.Kind, ev.Error, ev.Stuck = hoppertype.EventStuck, err.Error(), p.Stuck
		return outcome{params: p, event: ev}
	}
	if abort {
		if kind == hoppertype.ErrorKindHandler {
			kind = hoppertype.ErrorKindAborted
		}
		o := terminal(hoppertype.JobStateDead, errInfo(kind, err, stack), hoppertype.EventFailed)
		return o
	}

	// The classifier (type's, else client's) decides next.
	if classify != nil {
		d, ok := runClassifier(classify, err, hoppertype.FailureInfo{ID: row.ID, Type: row.Type, Attempt: row.Attempt, Attempts: row.Retry.Attempts}, onPanic)
		if ok {
			switch d.Kind() {
			case hoppertype.DecisionAbort:
				return terminal(hoppertype.JobStateDead, errInfo(hoppertype.ErrorKindAborted, err, stack), hoppertype.EventFailed)
			case hoppertype.DecisionDelay:
				return deferTo(now.Add(max(d.Delay(), 0)).Truncate(time.Microsecond))
			case hoppertype.DecisionRunAt:
				return deferTo(d.RunAt().Truncate(time.Microsecond))
			}
		}
	}

	ei := errInfo(kind, err, stack)
	if row.Attempt >= row.Retry.Attempts {
		return terminal(hoppertype.JobStateDead, ei, hoppertype.EventFailed)
	}
	delay := row.Retry.Delay(row.Attempt, rnd)
	var ra *hoppertype.RetryAfterError
	if errors.As(err, &ra) && ra.Delay > delay {
		delay = ra.Delay
	}
	next := now.Add(delay).Truncate(time.Microsecond)
	if deadlinePassed(next) {
		return expire()
	}
	p := base
	p.State, p.RunAt, p.Error = hoppertype.JobStateRetrying, next, ei
	ev.Kind, ev.Error, ev.WillRetry, ev.RunAt = hoppertype.EventFailed, ei.Message, true, next
	return outcome{params: p, event: ev}
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
