package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// execute runs one claimed attempt and submits its outcome to the completer.
func (s *session) execute(it dispatchItem) {
	row, holdsSlot, done := it.row, it.holdsSlot, it.done
	defer s.execs.Done()
	if it.batch != nil {
		// After the slot is given back: the round that waits for its
		// batch then finds the slot free.
		defer it.batch.attemptDone()
	}
	if holdsSlot {
		// Settle counts the slots in use: it looks again once this one is
		// back (the outcome may be recorded first).
		defer s.e.progressed()
		defer s.slots.Release(1)
	}
	if done != nil {
		// Before execs.Done: a limiter's next job may be handed back to
		// the completer, which Stop keeps open until every attempt is done.
		defer done()
	}
	e := s.e
	now := e.now()

	// Deadline checked before dispatch: a job past it never runs.
	if !row.Deadline.IsZero() && !now.Before(row.Deadline) {
		s.refuse(row, now, true)
		return
	}
	t := e.lookupType(row.Type)
	if t == nil {
		s.refuse(row, now, false)
		return
	}

	ctx, cancel := context.WithCancelCause(s.workCtx)
	at := &Attempt{e: e, row: row, life: s.life, fresh: it.fresh, loaded: it.loaded}
	var (
		deadline time.Time
		cause    error
	)
	if row.AttemptTimeout > 0 {
		deadline, cause = row.StartedAt.Add(row.AttemptTimeout), hoppertype.ErrAttemptTimeout
	}
	if !row.Deadline.IsZero() && (deadline.IsZero() || row.Deadline.Before(deadline)) {
		deadline, cause = row.Deadline, hoppertype.ErrExpired
	}
	stopDeadline := func() {}
	if !deadline.IsZero() {
		ctx, stopDeadline = hclock.WithDeadline(ctx, e.clock, deadline, cause)
	}
	if hb := t.HeartbeatTimeout(); hb > 0 {
		// A watchdog on the engine's clock, moved on by each heartbeat.
		at.hbEvery = hb
		at.hb = e.clock.AfterFunc(hb, func() { cancel(hoppertype.ErrHeartbeatTimeout) })
	}
	a := s.addActive(row, cancel)
	e.emitStarted(row)

	out, err := t.Run(ctx, at)
	if err == nil {
		if ferr := at.failure(); ferr != nil {
			err = hoppertype.Abort(ferr)
		}
	}

	if at.hb != nil {
		at.hb.Stop()
	}
	s.removeActive(row)
	res := attemptResult{out: out, err: err}
	if err != nil {
		res.cause = context.Cause(ctx)
	}
	a.mu.Lock()
	res.cancelRequested = a.cancelRequested
	a.mu.Unlock()
	stopDeadline()
	cancel(nil)

	if tf := at.txDone(); tf != nil && s.confirmTx(at, tf) {
		return // completed in the application's transaction
	}
	s.submitOutcome(t, at, &res)
}

// The helpers below hold execute's large values (an event, an outcome, a
// finish item: hundreds of bytes each) in frames of their own, called
// before or after the handler runs, so that the handler runs on a short
// stack: a worker's stack then fits its first size and is not grown for
// every job after the garbage collector shrank it while the worker waited.

// refuse submits the outcome of an attempt that does not run: expired,
// the job's deadline is at or before now; otherwise its type is not
// registered here (it is put back without using the attempt).
//
//go:noinline
func (s *session) refuse(row *hoppertype.JobRow, now time.Time, expired bool) {
	e := s.e
	if expired {
		s.completer.submit(finishItem{row: row, outcome: decide(row, attemptResult{err: hoppertype.ErrExpired, cause: hoppertype.ErrExpired}, nil, now, nil, nil), here: s})
		return
	}
	// Claims name only registered types, so this is a type removed
	// underneath us.
	o := decide(row, attemptResult{err: hoppertype.ErrUnknownType}, func(error, hoppertype.FailureInfo) hoppertype.Decision {
		return hoppertype.DecideDelay(e.cfg.PollInterval)
	}, now, nil, nil)
	s.completer.submit(finishItem{row: row, outcome: o, here: s})
}

// emitStarted emits the event of an attempt that starts.
//
//go:noinline
func (e *Engine) emitStarted(row *hoppertype.JobRow) {
	e.emit(hoppertype.Event{Kind: hoppertype.EventStarted, JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID,
		ParentID: row.ParentID, Dependents: row.Dependents, Attempt: row.Attempt, RunAt: row.RunAt, At: row.StartedAt})
}

// submitOutcome decides the outcome of an attempt that ran and submits it
// to the completer.
//
//go:noinline
func (s *session) submitOutcome(t JobType, at *Attempt, res *attemptResult) {
	e, row := s.e, at.row
	classify := t.Classifier()
	if classify == nil {
		classify = e.cfg.Hooks.Classify
	}
	item := finishItem{row: row, outcome: decide(row, *res, classify, e.now(), defaultRand, func(err error) { e.reportError(err, hoppertype.PhaseHook) }),
		run: at.run, effects: at.effects, here: s}
	if item.outcome.params.State == hoppertype.JobStateSucceeded {
		item.group = at.groupEffect()
	}
	s.completer.submit(item)
}

// runSkipQueue runs the first attempt of a SkipQueue job, inserted already
// claimed by this engine, at once in this process; fresh is its run's row
// when the job is a run this process just started.
func (e *Engine) runSkipQueue(row *hoppertype.JobRow, fresh *hoppertype.RunRow) {
	s := e.session()
	if s == nil || !s.dispatchItem(dispatchItem{row: row, fresh: fresh}) {
		return // the engine stopped: the lease lapses and the rescuer retries it
	}
}

// SkipQueueRows marks the rows whose first attempt asks to skip the queue
// (want[i]) and that this engine can run now as inserted already claimed,
// and returns their ids. A started engine runs them once inserted
// (Insert, AfterInsert).
func (e *Engine) SkipQueueRows(rows []*hoppertype.JobRow, want []bool, now time.Time) map[string]bool {
	s := e.session()
	if s == nil {
		return nil
	}
	var skip map[string]bool
	for i, row := range rows {
		if !want[i] || row.State != hoppertype.JobStatePending || row.UniqueKey != "" ||
			row.ConcurrencyKey != "" || s.limiterOf(row.Type) != nil {
			continue // a key or a limit is enforced where jobs are claimed
		}
		if e.lookupType(row.Type) == nil {
			continue
		}
		if skip == nil {
			skip = map[string]bool{}
		}
		skip[row.ID] = true
		row.State = hoppertype.JobStateRunning
		row.Attempt = 1
		row.LeaseToken = 1
		row.LeaseExpiresAt = now.Add(e.cfg.Visibility)
		row.Worker = e.worker
		row.StartedAt = now
	}
	return skip
}

// String helps debugging.
func (a *activeJob) String() string { return fmt.Sprintf("%s/%d", a.row.ID, a.row.LeaseToken) }
