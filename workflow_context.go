package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	randv2 "math/rand/v2"
	"time"

	"github.com/hopper-go/hopper/internal/hclock"
)

// WorkflowContext is what workflow code sees of its run. Workflow code reads
// time, randomness and new ids only through it (they are recorded, so a
// replay sees the same values), and does side effects in steps.
type WorkflowContext interface {
	// Context is the run's context: cancelled when the run is cancelled or
	// its worker loses it. Pass it to steps' work, not to long waits (use
	// Sleep, hooks, children).
	Context() context.Context
	// RunID returns the run's id; ParentID the parent run's id, if any.
	RunID() string
	ParentID() string
	// Workflow returns the workflow's name.
	Workflow() string
	// Attempt returns the run's attempt, 1 for the first: StrategyRetry
	// starts a new attempt from the beginning, numbered 2, 3 …; a crash
	// does not (the attempt goes on). What an attempt starts (activities,
	// children, steps' ids) is identified per attempt, so a new attempt
	// never meets the previous attempt's.
	Attempt() int
	// StartedAt returns when the run was created.
	StartedAt() time.Time
	// Now returns the current time, recorded: a replay sees the same time.
	Now() time.Time
	// Random returns a number in [0,1), recorded.
	Random() float64
	// NewID returns a new unique id, recorded.
	NewID() string
	// Sleep waits d durably: the run suspends (no goroutine is held) and
	// wakes when d has passed, even after a restart. It returns an error
	// when the run suspends or is cancelled: return it.
	Sleep(d time.Duration) error
	// SleepUntil waits until t durably, as Sleep.
	SleepUntil(t time.Time) error
	// Compensate registers an undo action for what the attempt did so far
	// (register it right after the step it undoes): when the attempt fails
	// (retried or not) or the run is cancelled, the attempt's registered
	// actions run in reverse order, each once and recorded.
	Compensate(name string, fn func(ctx context.Context) error)
	// IsCancelled reports whether the run was asked to stop.
	IsCancelled() bool
	// Patch marks a change to workflow code: it returns true for runs that
	// reach this point with the new code (new runs, and old ones that had
	// not got this far), false for runs whose history predates the change.
	Patch(name string) bool
	// Stream is the run's append-only progress stream.
	Stream() *Stream

	state() *wfState
}

func (st *wfState) state() *wfState             { return st }
func (st *wfState) Context() context.Context    { return st.ctx }
func (st *wfState) RunID() string               { return st.run.ID }
func (st *wfState) ParentID() string            { return st.run.ParentID }
func (st *wfState) Workflow() string            { return st.run.Workflow }
func (st *wfState) Attempt() int                { return st.attempt }
func (st *wfState) StartedAt() time.Time        { return st.run.CreatedAt }
func (st *wfState) Stream() *Stream             { return &Stream{st: st} }
func (st *wfState) IsCancelled() bool           { return st.isCancelled() }
func (st *wfState) Sleep(d time.Duration) error { return st.sleep(d, time.Time{}) }
func (st *wfState) SleepUntil(t time.Time) error {
	return st.sleep(0, t)
}

func (st *wfState) Now() time.Time {
	t, _ := SideEffect(st, "now", func() time.Time { return st.c.now() })
	return t
}

func (st *wfState) Random() float64 {
	f, _ := SideEffect(st, "random", randv2.Float64)
	return f
}

func (st *wfState) NewID() string {
	id, _ := SideEffect(st, "id", st.c.newID)
	return id
}

func (st *wfState) Compensate(name string, fn func(ctx context.Context) error) {
	if st.check() != nil {
		return
	}
	if ev, err := st.next(name, evCompensationAdded); err != nil {
		return
	} else if ev == nil {
		if st.live() != nil || st.record(st.ctx, nil, evCompensationAdded, name, evData{}) != nil {
			return
		}
	}
	st.comps = append(st.comps, compensation{name: name, fn: fn})
}

func (st *wfState) Patch(name string) bool {
	if st.check() != nil {
		return false
	}
	ev := st.peek()
	switch {
	case ev == nil && st.replay:
		st.suspended = true
		return false
	case ev == nil:
		return st.live() == nil && st.record(st.ctx, nil, evPatch, name, evData{}) == nil
	case ev.Kind == evPatch && ev.Name == name:
		st.pos++
		return true
	default:
		return false
	}
}

func (st *wfState) sleep(d time.Duration, until time.Time) error {
	if err := st.check(); err != nil {
		return err
	}
	ev, err := st.next("sleep", evSleep)
	if err != nil {
		return err
	}
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return err
		}
		until = data.Until
		if st.replay && st.pos < len(st.events) {
			return nil // the history goes on: the sleep ended
		}
	} else {
		if err := st.live(); err != nil {
			return err
		}
		if until.IsZero() {
			until = st.c.now().Add(d)
		}
		if err := checkTime("sleep until", until); err != nil {
			return err
		}
		until = hclock.Truncate(until)
		if err := st.record(st.ctx, nil, evSleep, "sleep", evData{Until: until}); err != nil {
			return err
		}
	}
	if !st.c.now().Before(until) {
		return nil
	}
	if err := st.live(); err != nil {
		return err
	}
	return st.suspend(until, nil)
}

// SideEffect runs fn once and records its value: a replay returns the
// recorded value without running fn. Use it for anything non-deterministic
// that is not worth a step (a random choice, a timestamp).
func SideEffect[T any](wf WorkflowContext, name string, fn func() T) (T, error) {
	st := wf.state()
	var zero T
	if err := st.check(); err != nil {
		return zero, err
	}
	ev, err := st.next(name, evSideEffect)
	if err != nil {
		return zero, err
	}
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		var v T
		err := json.Unmarshal(data.Output, &v)
		return v, err
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	v := fn()
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("hopper: side effect %q: %w", name, err)
	}
	if err := st.record(st.ctx, nil, evSideEffect, name, evData{Output: b}); err != nil {
		return zero, err
	}
	return v, nil
}

// fail turns a store error into a fatal one for the run.
func (st *wfState) fail(err error) error {
	if st.fatal == nil {
		st.fatal = err
	}
	return st.fatal
}
