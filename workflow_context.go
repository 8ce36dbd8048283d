package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"time"

	"github.com/hopper-go/hopper/internal/engine"
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
	// Logger is the client's logger with the run's attributes (run id,
	// workflow, attempt, category "workflow").
	Logger() *slog.Logger

	state() *wfState
}

func (st *wfState) state() *wfState             { return st }
func (st *wfState) Stream() *Stream             { return &Stream{st: st} }
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
	if st.Check() != nil {
		return
	}
	if ev, err := st.Next(name, engine.EvCompensationAdded); err != nil {
		return
	} else if ev == nil {
		if st.Live() != nil || st.Record(st.Context(), nil, engine.EvCompensationAdded, name, engine.EventData{}) != nil {
			return
		}
	}
	st.Comps = append(st.Comps, engine.Compensation{Name: name, Fn: fn})
}

func (st *wfState) Patch(name string) bool {
	if st.Check() != nil {
		return false
	}
	ev := st.Peek()
	switch {
	case ev == nil && st.Replay:
		st.Suspended = true
		return false
	case ev == nil:
		return st.Live() == nil && st.Record(st.Context(), nil, engine.EvPatch, name, engine.EventData{}) == nil
	case ev.Kind == engine.EvPatch && ev.Name == name:
		st.Pos++
		return true
	default:
		return false
	}
}

func (st *wfState) sleep(d time.Duration, until time.Time) error {
	if err := st.Check(); err != nil {
		return err
	}
	ev, err := st.Next("sleep", engine.EvSleep)
	if err != nil {
		return err
	}
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return err
		}
		until = data.Until
		if st.Replay && st.Pos < len(st.Events) {
			return nil // the history goes on: the sleep ended
		}
	} else {
		if err := st.Live(); err != nil {
			return err
		}
		if until.IsZero() {
			until = st.c.now().Add(d)
		}
		if err := checkTime("sleep until", until); err != nil {
			return err
		}
		until = hclock.Truncate(until)
		if err := st.Record(st.Context(), nil, engine.EvSleep, "sleep", engine.EventData{Until: until}); err != nil {
			return err
		}
	}
	if !st.c.now().Before(until) {
		return nil
	}
	if err := st.Live(); err != nil {
		return err
	}
	return st.Suspend(until, nil)
}

// SideEffect runs fn once and records its value: a replay returns the
// recorded value without running fn. Use it for anything non-deterministic
// that is not worth a step (a random choice, a timestamp).
func SideEffect[T any](wf WorkflowContext, name string, fn func() T) (T, error) {
	st := wf.state()
	var zero T
	if err := st.Check(); err != nil {
		return zero, err
	}
	ev, err := st.Next(name, engine.EvSideEffect)
	if err != nil {
		return zero, err
	}
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		var v T
		err := json.Unmarshal(data.Output, &v)
		return v, err
	}
	if err := st.Live(); err != nil {
		return zero, err
	}
	v := fn()
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("hopper: side effect %q: %w", name, err)
	}
	if err := st.Record(st.Context(), nil, engine.EvSideEffect, name, engine.EventData{Output: b}); err != nil {
		return zero, err
	}
	return v, nil
}

// errSuspended is returned by workflow operations once the run is waiting
// (a sleep, a hook, a child, an activity): the workflow function should
// return it (any error will do).
var errSuspended = engine.ErrSuspended

// wfState is the typed face of a run's execution: the engine's RunState
// (history, replay, records, compensations) with the client that encodes
// and decodes the workflow's values. It implements WorkflowContext.
type wfState struct {
	*engine.RunState
	c    *Client
	opts WorkflowOpts
}

// executeRun runs or resumes a workflow in its job's handler: the engine
// executes the run, calling body with the state wrapped for workflow code.
func (c *Client) executeRun(ctx context.Context, opts WorkflowOpts, body func(WorkflowContext) ([]byte, error)) ([]byte, error) {
	jc := JobFromContext(ctx)
	if jc == nil {
		return nil, errors.New("hopper: a workflow runs only as a job")
	}
	ro := engine.RunOptions{Strategy: string(opts.Strategy), MaxRetries: opts.MaxRetries}
	return c.eng.ExecuteRun(ctx, jc.a, ro, func(rs *engine.RunState) ([]byte, error) {
		return body(&wfState{RunState: rs, c: c, opts: opts})
	})
}
