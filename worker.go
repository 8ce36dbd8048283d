package hopper

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// execute runs one claimed attempt and submits its outcome to the completer.
func (rt *runtime) execute(row *hoppertype.JobRow, holdsSlot bool, done func()) {
	defer rt.execs.Done()
	if holdsSlot {
		defer rt.slots.Release(1)
	}
	if done != nil {
		// Before execs.Done: a limiter's next job may be handed back to
		// the completer, which Stop keeps open until every attempt is done.
		defer done()
	}
	c := rt.c
	now := c.now()

	// Deadline checked before dispatch: a job past it never runs.
	if !row.Deadline.IsZero() && !now.Before(row.Deadline) {
		rt.completer.submit(finishItem{row: row, outcome: decide(row, attemptResult{err: ErrExpired, cause: ErrExpired}, nil, now, nil, nil)})
		return
	}
	t := c.lookupType(row.Type)
	if t == nil {
		// Claims name only registered types, so this is a type removed
		// underneath us; put the job back without using the attempt.
		o := decide(row, attemptResult{err: ErrUnknownType}, func(error, FailureInfo) Decision { return DecideDelay(c.cfg.PollInterval) }, now, nil, nil)
		rt.completer.submit(finishItem{row: row, outcome: o})
		return
	}

	ctx, cancel := context.WithCancelCause(rt.workCtx)
	jc := &JobContext{c: c, row: row, life: rt.life}
	ctx = withJobContext(ctx, jc)
	var (
		deadline time.Time
		cause    error
	)
	if row.AttemptTimeout > 0 {
		deadline, cause = row.StartedAt.Add(row.AttemptTimeout), ErrAttemptTimeout
	}
	if !row.Deadline.IsZero() && (deadline.IsZero() || row.Deadline.Before(deadline)) {
		deadline, cause = row.Deadline, ErrExpired
	}
	stopDeadline := func() {}
	if !deadline.IsZero() {
		ctx, stopDeadline = hclock.WithDeadline(ctx, c.clock, deadline, cause)
	}
	if hb := t.heartbeatTimeout(); hb > 0 {
		// A watchdog on the client's clock, moved on by each heartbeat.
		jc.hbEvery = hb
		jc.hb = c.clock.AfterFunc(hb, func() { cancel(ErrHeartbeatTimeout) })
	}
	a := rt.addActive(row, cancel)
	c.emit(Event{Kind: EventStarted, JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID,
		ParentID: row.ParentID, Dependents: row.Dependents, Attempt: row.Attempt, RunAt: row.RunAt, At: row.StartedAt})

	out, err := t.run(ctx, c, row.Input)
	if err == nil {
		jc.group.mu.Lock()
		if jc.group.err != nil {
			err = Abort(jc.group.err)
		}
		jc.group.mu.Unlock()
	}

	if jc.hb != nil {
		jc.hb.Stop()
	}
	rt.removeActive(row)
	res := attemptResult{out: out, err: err}
	if err != nil {
		res.cause = context.Cause(ctx)
	}
	a.mu.Lock()
	res.cancelRequested = a.cancelRequested
	a.mu.Unlock()
	stopDeadline()
	cancel(nil)

	classify := t.classify()
	if classify == nil {
		classify = c.cfg.Classify
	}
	o := decide(row, res, classify, c.now(), defaultRand, func(e error) { c.reportError(e, PhaseHook) })
	item := finishItem{row: row, outcome: o, run: jc.run, effects: jc.effects}
	if o.params.State == hoppertype.JobStateSucceeded {
		item.group = jc.groupEffect()
	}
	rt.completer.submit(item)
}

// runSkipQueue runs the first attempt of a SkipQueue job, inserted already
// claimed by this client, at once in this process.
func (c *Client) runSkipQueue(row *hoppertype.JobRow) {
	rt := c.runtime()
	if rt == nil || !rt.dispatch(row, false, nil) {
		return // the client stopped: the lease lapses and the rescuer retries it
	}
}

// skipQueueRows marks SkipQueue jobs that this client can run now as
// inserted already claimed, and returns their ids.
func (c *Client) skipQueueRows(specs []*JobSpec, rows []*hoppertype.JobRow, now time.Time) map[string]bool {
	rt := c.runtime()
	if rt == nil {
		return nil
	}
	var skip map[string]bool
	for i, s := range specs {
		row := rows[i]
		if !(s.t.skipQueue() || s.opts.SkipQueue) || row.State != hoppertype.JobStatePending || row.UniqueKey != "" ||
			row.ConcurrencyKey != "" || rt.limiterOf(row.Type) != nil {
			continue // a key or a limit is enforced where jobs are claimed
		}
		if c.lookupType(row.Type) == nil {
			continue
		}
		if skip == nil {
			skip = map[string]bool{}
		}
		skip[row.ID] = true
		row.State = hoppertype.JobStateRunning
		row.Attempt = 1
		row.LeaseToken = 1
		row.LeaseExpiresAt = now.Add(c.cfg.Visibility)
		row.Worker = c.worker
		row.StartedAt = now
	}
	return skip
}

// String helps debugging.
func (a *activeJob) String() string { return fmt.Sprintf("%s/%d", a.row.ID, a.row.LeaseToken) }
