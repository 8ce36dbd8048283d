// Package hclock is the clock hopper's engine reads all time through: the
// wall clock in production, a virtual clock in tests, so backoff, sleeps,
// deadlines and schedules are tested without waiting.
package hclock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time the timer fired (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// NewBackgroundTimer returns a timer of clk that fires once after d, for
// periodic housekeeping no attempt waits on (polls, heartbeats,
// maintenance): a harness moving a virtual clock may jump over such timers
// to the next one work waits on. Clocks that do not tell timers apart
// return an ordinary timer.
func NewBackgroundTimer(clk Clock, d time.Duration) Timer {
	if b, ok := clk.(interface {
		NewBackgroundTimer(time.Duration) Timer
	}); ok {
		return b.NewBackgroundTimer(d)
	}
	return clk.NewTimer(d)
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Truncate rounds t down to the microsecond, the precision every store keeps,
// and drops the monotonic reading.
func Truncate(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	t = t.Round(0) // drops the monotonic reading
	// Time.Truncate handles any duration with a division; dropping the
	// sub-microsecond nanoseconds is the same for microseconds, and cheaper
	// on a path every job takes.
	if ns := t.Nanosecond() % 1000; ns != 0 {
		t = t.Add(-time.Duration(ns))
	}
	return t
}

// WithDeadline returns a context that is cancelled with cause when clk reaches
// deadline, and whose Deadline method reports deadline. For the wall clock it
// is context.WithDeadlineCause.
func WithDeadline(parent context.Context, clk Clock, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := clk.(Real); ok {
		return context.WithDeadlineCause(parent, deadline, cause)
	}
	ctx, cancel := context.WithCancelCause(parent)
	d := deadline.Sub(clk.Now())
	if d <= 0 {
		cancel(cause)
		return &deadlineCtx{Context: ctx, deadline: deadline}, func() { cancel(context.Canceled) }
	}
	t := clk.AfterFunc(d, func() { cancel(cause) })
	return &deadlineCtx{Context: ctx, deadline: deadline}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Sleep waits for d on clk or until ctx is done, returning ctx's error in the
// latter case.
func Sleep(ctx context.Context, clk Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Virtual is a clock that moves only when told to. Timers fire, in time
// order, as Advance or Set passes their due time. It is safe for concurrent
// use.
type Virtual struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[*vtimer]struct{}
	// waiters are notified whenever a timer is created, so tests can wait for
	// the engine to arm its next timer before advancing.
	waiters []chan struct{}
}

// NewVirtual returns a virtual clock set to start.
func NewVirtual(start time.Time) *Virtual {
	return &Virtual{now: Truncate(start), timers: map[*vtimer]struct{}{}}
}

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer firing when virtual time reaches now+d.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &vtimer{v: v, c: make(chan time.Time, 1)}
	v.arm(t, d)
	return t
}

// NewBackgroundTimer returns a timer firing when virtual time reaches
// now+d, marked as periodic housekeeping: NextForegroundTimer passes over
// it.
func (v *Virtual) NewBackgroundTimer(d time.Duration) Timer {
	t := &vtimer{v: v, c: make(chan time.Time, 1), background: true}
	v.arm(t, d)
	return t
}

// AfterFunc calls f when virtual time reaches now+d.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &vtimer{v: v, f: f}
	v.arm(t, d)
	return t
}

func (v *Virtual) arm(t *vtimer, d time.Duration) {
	v.mu.Lock()
	v.seq++
	t.seq = v.seq
	t.when = v.now.Add(d)
	t.active = true
	v.timers[t] = struct{}{}
	ws := v.waiters
	v.waiters = nil
	v.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
	if d <= 0 {
		v.Advance(0)
	}
}

// Timers returns how many timers are armed.
func (v *Virtual) Timers() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// TimerArmed returns a channel closed the next time a timer is armed.
func (v *Virtual) TimerArmed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := make(chan struct{})
	v.waiters = append(v.waiters, c)
	return c
}

// ArmedAt reports whether a timer is armed to fire at t exactly.
func (v *Virtual) ArmedAt(t time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for tm := range v.timers {
		if tm.when.Equal(t) {
			return true
		}
	}
	return false
}

// WaitArmedAt waits until a timer is armed to fire at t exactly (or ctx is
// done): what a test waits for before moving the clock past t.
func (v *Virtual) WaitArmedAt(ctx context.Context, t time.Time) error {
	for {
		armed := v.TimerArmed()
		if v.ArmedAt(t) {
			return nil
		}
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NextTimer returns the due time of the earliest armed timer.
func (v *Virtual) NextTimer() (time.Time, bool) { return v.next(true) }

// NextForegroundTimer returns the due time of the earliest armed timer
// that is not a background one (NewBackgroundTimer): one that work waits
// on, such as a backoff, a sleep or a deadline.
func (v *Virtual) NextForegroundTimer() (time.Time, bool) { return v.next(false) }

// next returns the due time of the earliest armed timer, background ones
// included when all is set.
func (v *Virtual) next(all bool) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var best *vtimer
	for t := range v.timers {
		if t.background && !all {
			continue
		}
		if best == nil || t.when.Before(best.when) || (t.when.Equal(best.when) && t.seq < best.seq) {
			best = t
		}
	}
	if best == nil {
		return time.Time{}, false
	}
	return best.when, true
}

// Advance moves virtual time forward by d, firing due timers in order.
func (v *Virtual) Advance(d time.Duration) {
	v.mu.Lock()
	target := v.now.Add(d)
	v.mu.Unlock()
	v.Set(target)
}

// Jump moves virtual time to t at once (never backwards), then fires the
// timers due by then, in order, all seeing t: what a process sees when it
// wakes from a suspension. Set, by contrast, walks time through each due
// timer, so timers re-armed on the way fire again.
func (v *Virtual) Jump(t time.Time) {
	v.mu.Lock()
	if t.After(v.now) {
		v.now = t
	}
	v.mu.Unlock()
	v.Set(t)
}

// Set moves virtual time to t (never backwards), firing due timers in order.
func (v *Virtual) Set(t time.Time) {
	for {
		v.mu.Lock()
		var best *vtimer
		for tm := range v.timers {
			if tm.when.After(t) {
				continue
			}
			if best == nil || tm.when.Before(best.when) || (tm.when.Equal(best.when) && tm.seq < best.seq) {
				best = tm
			}
		}
		if best == nil {
			if t.After(v.now) {
				v.now = t
			}
			v.mu.Unlock()
			return
		}
		delete(v.timers, best)
		best.active = false
		if best.when.After(v.now) {
			v.now = best.when
		}
		now := v.now
		v.mu.Unlock()
		if best.f != nil {
			go best.f()
		} else {
			select {
			case best.c <- now:
			default:
			}
		}
	}
}

type vtimer struct {
	v      *Virtual
	c      chan time.Time
	f      func()
	when   time.Time
	seq    int
	active bool
	// background marks periodic housekeeping (NewBackgroundTimer).
	background bool
}

func (t *vtimer) C() <-chan time.Time { return t.c }

func (t *vtimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	was := t.active
	t.active = false
	delete(t.v.timers, t)
	return was
}

func (t *vtimer) Reset(d time.Duration) bool {
	was := t.Stop()
	if t.c != nil {
		select {
		case <-t.c:
		default:
		}
	}
	t.v.arm(t, d)
	return was
}
