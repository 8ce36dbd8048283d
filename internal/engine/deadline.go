package engine

import (
	"context"
	"sync"
	"time"
)

// Deadlines of the engine's store calls.
//
// Every call the engine makes to the store on its own behalf runs under a
// context that ends: one of a started client's three lifetimes, and a
// budget for that one call, whichever comes first. One hung connection then
// costs a late heartbeat or a skipped poll, never a stopped loop, and Stop
// returns by its ctx's deadline plus stopGrace however the store behaves.
// A call made for a user keeps the user's context (Enqueue, Cancel, the
// reads), as does code that runs in a handler under its attempt's context.
//
// The lifetimes of a session (one Start to its Stop):
//
//   - stopping (session.ctx) ends when Stop begins. The loops that look for
//     work stop there, mid-call: polls, leader election and the leader's
//     services, schedules, the reads of stored schedules.
//   - drained ends once every running attempt has returned. The heartbeats
//     that hold their leases run until then.
//   - hard ends stopGrace after Stop's ctx is done (or when Stop returns).
//     The work that finishes what was begun runs until then, then is cut:
//     a claim under way, the completer's last flush, the history a run
//     records as it ends and its compensations, the observers' cursors,
//     leader resignation, the worker row's deletion. Handlers are
//     cancelled as Stop's ctx is done, before it.
//
// A budget is wall time, at least minBudget: it cuts a hung connection, so
// a virtual clock does not move it, and it is never so short that a busy
// store's latency reads as a hang. Each call site names its budget: a
// constant below or one derived from Config (Visibility, HeartbeatInterval,
// PollInterval, LeaderTTL, RescueInterval).
//
// What is cut is not lost. A lease that could not be renewed, or whose
// attempt's outcome could not be recorded, is left to expire: the rescuer
// (in this process or another) moves its job on, attempt + 1. Every write
// the engine makes is a compare-and-set, so one that commits after its
// caller stopped waiting changes nothing it should not.

const (
	// stopGrace is how long after Stop's ctx is done the work that finishes
	// what was begun may still take (the hard lifetime).
	stopGrace = 2 * time.Second
	// minBudget is the shortest budget of any call.
	minBudget = time.Second
	// shortBudget bounds a call of a row or two that follows other work:
	// the orphan check of a settled group, a recheck and wake-up, the
	// worker row's deletion, a schedule's registration, a read of the
	// stored schedules, an automatic redrive.
	shortBudget = 5 * time.Second
	// claimBudget bounds a claim, seen through once begun (see producer).
	claimBudget = 10 * time.Second
	// cascadeBudget bounds the cancellations a failed run cascades to.
	cascadeBudget = 30 * time.Second
	// retentionBudget bounds each delete of a retention round (a round
	// runs once a minute).
	retentionBudget = time.Minute
	// occurrenceBudget bounds a schedule occurrence's enqueue, within its
	// catch-up window.
	occurrenceBudget = 30 * time.Second
)

// lifetimes are a session's contexts (see the top of this file).
type lifetimes struct {
	stopping    context.Context
	endStopping context.CancelFunc
	drained     context.Context
	endDrained  context.CancelFunc
	hard        context.Context
	endHard     context.CancelFunc

	mu     sync.Mutex
	ended  bool
	unwait func() bool // stops waiting for Stop's ctx (endHardAfter)
	grace  *time.Timer
}

// newLifetimes makes a session's lifetimes. They keep start's values (a
// logger's, a tracer's) but not its end: the session outlives Start's ctx.
func newLifetimes(start context.Context) *lifetimes {
	l := &lifetimes{}
	l.hard, l.endHard = context.WithCancel(context.WithoutCancel(start))
	l.stopping, l.endStopping = context.WithCancel(l.hard)
	l.drained, l.endDrained = context.WithCancel(l.hard)
	return l
}

// endHardAfter ends the hard lifetime stopGrace after ctx is done. The
// grace is wall time, as ctx's deadline is.
func (l *lifetimes) endHardAfter(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.unwait != nil {
		return
	}
	l.unwait = context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.ended {
			l.grace = time.AfterFunc(stopGrace, l.endHard)
		}
	})
}

// end ends every lifetime now: the session stopped.
func (l *lifetimes) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	if l.unwait != nil {
		l.unwait()
	}
	if l.grace != nil {
		l.grace.Stop()
	}
	l.endHard()
}

// call returns the context of one store call: it ends with parent or after
// budget (at least minBudget), whichever comes first.
func call(parent context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, max(budget, minBudget))
}

// within returns a context with ctx's values that ends when life ends or
// after budget (none when budget is 0), but not when ctx does: the work
// that finishes what ctx's holder began (a run's last history, its
// compensations) whatever happens to the holder.
func within(ctx, life context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unwait := context.AfterFunc(life, func() { cancel(context.Cause(life)) })
	end := func() {
		unwait()
		cancel(context.Canceled)
	}
	if budget <= 0 {
		return out, end
	}
	out, stop := context.WithTimeout(out, max(budget, minBudget))
	return out, func() {
		stop()
		end()
	}
}

// afterCommit returns the context of a call that follows a caller's commit
// (a notification that hints at its jobs): the caller's values, not its
// end, and budget. Such calls run whether or not the client is started, so
// no session's lifetime bounds them.
func afterCommit(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	return call(context.WithoutCancel(ctx), budget)
}

// Call returns the context of one store call: it ends with parent or after
// budget (at least a second), whichever comes first.
func Call(parent context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	return call(parent, budget)
}

// Within returns a context with ctx's values that ends when life ends or
// after budget (none when 0), but not when ctx does (see within).
func Within(ctx, life context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	return within(ctx, life, budget)
}

// StopGrace is how long after Stop's ctx is done the work that finishes
// what was begun may still take.
const StopGrace = stopGrace

// Budgets of the calls the public package makes on the engine's behalf.
const (
	// ShortBudget bounds a call of a row or two that follows other work.
	ShortBudget = shortBudget
	// OccurrenceBudget bounds a schedule occurrence's enqueue.
	OccurrenceBudget = occurrenceBudget
	// CascadeBudget bounds the cancellations a failed run cascades to.
	CascadeBudget = cascadeBudget
)
