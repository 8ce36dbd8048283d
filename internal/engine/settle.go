package engine

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Settled is the engine's work at its clock's now, as Settle found it.
type Settled struct {
	// Idle says nothing is left to do now: no job running (claimed) or
	// due in the queues the engine works, no claim under way or asked for,
	// no outcome being recorded, no worker slot in use, no schedule
	// occurrence due and not yet stored.
	Idle bool
	// Running counts the jobs running (claimed) in the store.
	Running int
	// Due counts the jobs due now in the queues the engine works, paused
	// queues left out.
	Due int
	// Next is when the earliest scheduled or retrying job of those queues
	// is due, after now (zero: none).
	Next time.Time
	// NextSchedule is the next occurrence the engine's running schedules
	// wait for (zero: none).
	NextSchedule time.Time
	// Firing counts the schedules whose occurrence is due and not yet
	// stored.
	Firing int
}

// ErrNotStarted is returned by Settle before Start or after Stop.
var ErrNotStarted = errors.New("hopper: the client is not started")

// Settle waits until the engine has nothing left to do at its clock's now,
// and returns what is due later; or, when work is in flight but no attempt
// starts or ends and nothing is recorded for quiet (wall time), returns
// what it found, not idle: the work waits on the clock (a step's backoff, a
// rate limit) or on something outside. It is for harnesses that drive a
// virtual clock: they move the clock only when the engine has settled, so
// no lease lapses under a running attempt.
func (e *Engine) Settle(ctx context.Context, quiet time.Duration) (Settled, error) {
	woke := false
	for {
		s := e.session()
		if s == nil {
			return Settled{}, ErrNotStarted
		}
		moved := e.progressC()
		st, err := e.settled(ctx, s)
		if err != nil || st.Idle {
			return st, err
		}
		if st.Due > 0 && st.Running == 0 && !woke {
			// Due and unclaimed: make sure the producers look now (once:
			// a wake-up is progress, and would wake this loop again).
			woke = true
			for _, q := range e.queues() {
				e.wakeQueue(q, time.Time{})
			}
			continue
		}
		t := time.NewTimer(quiet)
		select {
		case <-moved:
			t.Stop()
		case <-t.C:
			return st, nil
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		}
	}
}

// HoldLeases renews the leases of the attempts running in this engine to
// last Visibility past until, as its heartbeats would have by then. A
// harness about to jump a virtual clock to until while attempts wait on it
// calls it first, so the rescuer the jump wakes finds their leases held.
func (e *Engine) HoldLeases(ctx context.Context, until time.Time) error {
	s := e.session()
	if s == nil {
		return ErrNotStarted
	}
	return s.renewLeases(ctx, until.Add(e.cfg.Visibility))
}

// settled reads what is running and due in the store, and what the
// completer holds.
func (e *Engine) settled(ctx context.Context, s *session) (Settled, error) {
	var st Settled
	now := e.now()
	paused := map[string]bool{}
	qs, err := e.drv.QueueList(ctx, &driver.QueueListParams{})
	if err != nil {
		return st, err
	}
	for _, q := range qs {
		paused[q.Name] = q.Paused
	}
	served := map[string]bool{}
	for _, q := range e.queues() {
		if !paused[q] {
			served[q] = true
		}
	}
	counts, err := e.drv.JobCountByState(ctx, &driver.JobCountParams{})
	if err != nil {
		return st, err
	}
	for _, c := range counts {
		switch {
		case c.State == hoppertype.JobStateRunning:
			st.Running += c.Count
		case c.State == hoppertype.JobStatePending && served[c.Queue]:
			st.Due += c.Count
		}
	}
	for q := range served {
		next, err := e.drv.JobNextRunAt(ctx, &driver.JobNextRunAtParams{Queue: q})
		if err != nil {
			return st, err
		}
		switch {
		case next.IsZero():
		case !next.After(now):
			st.Due++
		case st.Next.IsZero() || next.Before(st.Next):
			st.Next = next
		}
	}
	for _, sc := range e.Schedules() {
		// The occurrence its goroutine waits for: one due is fired
		// (stored) before the clock may move on, or the next move would
		// leave it behind its catch-up window.
		switch at := sc.dueAt(); {
		case at.IsZero():
		case !at.After(now):
			st.Firing++
		case st.NextSchedule.IsZero() || at.Before(st.NextSchedule):
			st.NextSchedule = at
		}
	}
	// The slots in use cover an attempt whose outcome is stored but whose
	// goroutine has yet to give its slot back, and slots granted to a
	// producer whose claim has yet to run: either would hold the slots,
	// and read as load, across a move of the clock.
	st.Idle = st.Running == 0 && st.Due == 0 && st.Firing == 0 && s.completer.pending.Load() == 0 &&
		s.rounds.Load() == 0 && s.slots.Used() == 0
	return st, nil
}

// progressC returns a channel closed at the engine's next progress: an
// attempt starts or ends, outcomes are recorded, a claim round ends, a
// queue is woken.
func (e *Engine) progressC() <-chan struct{} { return e.prog.C() }

// progressed closes the channel progressC gave, if any.
func (e *Engine) progressed() { e.prog.fire() }
