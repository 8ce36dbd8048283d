package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// ErrSuspended is returned by workflow operations once the run is waiting
// (a sleep, a hook, a child, an activity): the workflow function should
// return it (any error will do). Once a run is suspended no further
// operation runs, so code that swallows the error does no harm.
var ErrSuspended = errors.New("hopper: workflow suspended (return this error)")

// Compensation is a registered undo action.
type Compensation struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Failure strategies, as the root's FailureStrategy spells them.
const (
	StrategyRetry      = "retry"
	StrategyCompensate = "compensate"
	StrategyIgnore     = "ignore"
	StrategyQuarantine = "quarantine"
	StrategyCascade    = "cascade"
)

// RunOptions is what the executor needs of a workflow's options.
type RunOptions struct {
	// Strategy is the failure strategy (one of the Strategy constants).
	Strategy string
	// MaxRetries is how many failed attempts StrategyRetry retries.
	MaxRetries int
}

// RunState is a run's execution: the history being replayed, what was
// registered, whether it suspended. The root's typed operations (steps,
// activities, children, hooks) read and record through it.
type RunState struct {
	e   *Engine
	ctx context.Context
	// a is the run's job attempt (nil in an offline replay).
	a       *Attempt
	attempt int

	// Run is the run's row as the execution read it.
	Run *hoppertype.RunRow
	// Events is the current attempt's history; Pos the next event to
	// replay; NextSeq the sequence number of the next event recorded.
	Events  []*hoppertype.RunEvent
	Pos     int
	NextSeq int

	// Suspended says the run is waiting, until Until, with Recheck (when
	// set) run at commit against the lost-wake race.
	Suspended bool
	Until     time.Time
	Recheck   func(ctx context.Context) bool
	// Fatal is non-determinism or a lost lease: nothing more may run.
	Fatal     error
	cancelled bool
	// pending are events to store with the next one appended (the run's
	// start, a step's record), already counted in NextSeq. deferred says
	// they hold a step's record, which is stored before the run does
	// anything else (see RecordLater).
	pending  []*hoppertype.RunEvent
	deferred bool
	// markRunning asks the next append to set the run's status to running.
	markRunning bool
	// Replay is set for an offline replay: the end of the history ends
	// the execution, as a suspension, instead of going live.
	Replay bool
	// Comps are the compensations the attempt registered, in order.
	Comps []Compensation
}

// NewReplayState returns the state of an offline replay of one attempt's
// recorded events: no store, no clock; reaching the end of the events
// suspends.
func NewReplayState(ctx context.Context, run *hoppertype.RunRow, attempt int, events []*hoppertype.RunEvent) *RunState {
	return &RunState{ctx: ctx, Run: run, attempt: attempt, Events: events, NextSeq: len(events) + 1, Replay: true}
}

// Context is the run's context: the job's.
func (st *RunState) Context() context.Context { return st.ctx }

// RunID returns the run's id.
func (st *RunState) RunID() string { return st.Run.ID }

// ParentID returns the parent run's id, if any.
func (st *RunState) ParentID() string { return st.Run.ParentID }

// Workflow returns the workflow's name.
func (st *RunState) Workflow() string { return st.Run.Workflow }

// Attempt returns the run's attempt (its history generation), 1 for the
// first.
func (st *RunState) Attempt() int { return st.attempt }

// StartedAt returns when the run was created.
func (st *RunState) StartedAt() time.Time { return st.Run.CreatedAt }

// ExecuteRun runs or resumes a workflow run in its job's attempt a: it
// loads the run and its history, picks the attempt to continue (undoing
// what earlier attempts left), calls body, and turns how body ended into
// the job's outcome and the run's effects (its end, a suspension, a final
// status), committed with the job's completion. body wraps the state in
// the typed workflow context the code sees; it is called again, offline,
// to find an earlier attempt's compensations.
func (e *Engine) ExecuteRun(ctx context.Context, a *Attempt, opts RunOptions, body func(*RunState) ([]byte, error)) (out []byte, err error) {
	row := a.Row()
	runID := row.ID
	// One read: the run and its whole history; none for a run this process
	// just started, which has none (its row is as the start stored it).
	var (
		run *hoppertype.RunRow
		all []*hoppertype.RunEvent
	)
	if f := a.fresh; f != nil && f.ID == runID {
		r := *f
		r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		run = &r
	} else if l := a.loaded; l != nil && l.Run != nil && l.Run.ID == runID {
		// Read with the claim's other runs (see session.loadRuns).
		run, all = l.Run, l.Events
	} else if run, all, err = e.drv.RunLoad(ctx, &driver.RunLoadParams{ID: runID}); err != nil {
		return nil, fmt.Errorf("hopper: workflow run %s: %w", runID, err)
	}
	st := &RunState{e: e, ctx: ctx, a: a, Run: run}
	st.cancelled = run.Error != nil && run.Error.Kind == hoppertype.ErrorKindCancelled
	eff := &RunEffect{}
	a.SetRun(eff)
	// The run is marked running by its first record (see AppendEvent); an
	// execution that records nothing (a wake-up with nothing new to do)
	// leaves the run as it was.
	st.markRunning = run.Status != hoppertype.RunRunning
	gens := Generations(all)
	var retries int
	st.attempt, st.Events, retries = CurrentHistory(gens, run.Status == hoppertype.RunPending)
	st.NextSeq = len(st.Events) + 1
	// What earlier attempts did and left to undo is undone before this one
	// goes on (see undoEarlier).
	if err := e.undoEarlier(st, gens, body); err != nil {
		return nil, st.FatalErr()
	}
	if ev, err := st.Next("", EvWorkflowStarted); err != nil {
		return nil, st.FatalErr()
	} else if ev == nil {
		// The start goes to the store with the run's first recorded
		// operation, saving a commit: every path of a first execution
		// records something before it ends or suspends.
		ev, err := st.Event(EvWorkflowStarted, "", EventData{})
		if err != nil {
			return nil, err
		}
		st.pending = append(st.pending, ev)
		st.NextSeq++
	}

	out, err = callBody(st, body)

	switch {
	case st.Fatal != nil:
		return nil, st.FatalErr()
	case st.Suspended:
		// What is still pending goes with the suspension (an operation
		// stores it before it suspends: see Next).
		eff.Events = append(eff.Events, st.pending...)
		eff.unstarted = st.markRunning && len(st.pending) > 0
		eff.Recheck = st.Recheck
		return nil, &SuspendError{Until: st.Until}
	case err == nil && !st.cancelled:
		if st.Pos < len(st.Events) {
			ev := st.Events[st.Pos]
			if ev.Kind == EvWorkflowCompleted && st.Pos == len(st.Events)-1 {
				// Recorded by an execution that died before its job
				// completed: the run is done.
				return out, nil
			}
			st.Fatal = &hoppertype.NonDeterminismError{RunID: runID, Workflow: run.Workflow, Attempt: st.attempt, Position: st.Pos + 1, RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: "the end of the workflow"}
			return nil, st.FatalErr()
		}
		// The end is recorded in the transaction that completes the run's
		// job, saving a commit, with what is pending (the last step's
		// record: another commit saved).
		ev, eerr := st.Event(EvWorkflowCompleted, "", EventData{Output: out})
		if eerr != nil {
			return nil, eerr
		}
		eff.Events = append(eff.Events, st.pending...)
		eff.Events = append(eff.Events, ev)
		eff.unstarted = st.markRunning
		return out, nil
	}
	if err == nil {
		err = hoppertype.ErrCancelled
	}
	if st.IsCancelled() {
		if err := e.compensate(st); err != nil {
			return nil, st.FatalErr()
		}
		if !st.Recorded(EvWorkflowCancelled) {
			st.RecordEnd(EvWorkflowCancelled, EventData{})
		}
		return nil, &KindError{Kind: hoppertype.ErrorKindCancelled, Err: fmt.Errorf("%w: workflow run %s", hoppertype.ErrCancelled, runID), Abort: true}
	}
	final := aborts(err) || opts.Strategy != StrategyRetry || retries >= opts.MaxRetries || row.Attempt >= row.Retry.Attempts
	if !final {
		// The saga: what this attempt did is undone before the next one
		// does it again. Undoing at the end instead would never undo it if
		// a later attempt succeeded (see "Retries and compensation" in
		// docs/concepts.md).
		if err := e.compensate(st); err != nil {
			return nil, st.FatalErr()
		}
		_ = st.Record(ctx, nil, EvWorkflowFailed, "", EventData{Error: ErrorInfo(err, st.attempt, e.now())})
		return nil, err // the job retries: a new attempt, a fresh history
	}
	status := hoppertype.RunFailed
	switch opts.Strategy {
	case StrategyRetry, StrategyCompensate:
		if len(st.Comps) > 0 {
			if _, uerr := e.drv.RunUpdate(ctx, &driver.RunUpdateParams{ID: runID, Status: hoppertype.RunCompensating, Now: e.now()}); uerr != nil {
				return nil, uerr
			}
			if err := e.compensate(st); err != nil {
				return nil, st.FatalErr()
			}
		}
		if len(st.Comps) > 0 || registeredCompensations(gens) {
			// Its compensations ran, this attempt's now, earlier
			// attempts' when they failed.
			status = hoppertype.RunCompensated
		}
	case StrategyQuarantine:
		status = hoppertype.RunQuarantined
	case StrategyCascade:
		e.cascade(ctx, a, run)
		status = hoppertype.RunCancelled
	}
	eff.Final = status
	if !st.Recorded(EvWorkflowFailed) {
		st.RecordEnd(EvWorkflowFailed, EventData{Error: ErrorInfo(err, st.attempt, e.now()), Status: status})
	}
	// The run's job ends now, its error keeping the cause's kind: a waiter
	// (a parent among them, in any process) matches what failed the run
	// (ErrAborted only for an abort), and a parent that returns it retries
	// it unless it is an abort.
	var stack string
	var ke *KindError
	if errors.As(err, &ke) {
		stack = ke.Stack
	}
	return nil, &KindError{Kind: ErrorKind(err), Err: err, Stack: stack, Final: true}
}

// callBody calls the workflow function; a panic is its failure, with the
// stack.
func callBody(st *RunState, body func(*RunState) ([]byte, error)) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &KindError{Kind: hoppertype.ErrorKindPanic, Err: fmt.Errorf("%w: %w", hoppertype.ErrPanic, PanicCause(r)), Stack: string(debug.Stack())}
		}
	}()
	return body(st)
}

// RecordEnd records how the run ended, though its attempt was cancelled:
// within the lease's length and the attempt's hard lifetime. Unrecorded,
// the run's job records the end all the same.
func (st *RunState) RecordEnd(kind string, data EventData) {
	ctx, cancel := Within(st.ctx, st.a.HardLife(), st.e.cfg.Visibility)
	defer cancel()
	_ = st.Record(ctx, nil, kind, "", data)
}

// aborts says whether err ends a run at once, whatever its strategy: an
// Abort (a Fatal step's error, an aborted activity's or child's) or one of
// hopper's own permanent failures (an output that does not encode).
func aborts(err error) bool {
	var ke *KindError
	return errors.Is(err, hoppertype.ErrAborted) || errors.As(err, &ke) && ke.Abort
}

// Scope is what the identities of everything an attempt starts begin with:
// the run's id in its first attempt, "<run>@<attempt>" in later ones. An
// activity is the job "<scope>.a<position>", a child the run
// "<scope>.<position>", so a retried run never meets the jobs and runs of
// its earlier attempts.
func (st *RunState) Scope() string {
	if st.attempt <= 1 {
		return st.Run.ID
	}
	return st.Run.ID + "@" + strconv.Itoa(st.attempt)
}

// FatalErr is the error a run ends its execution with after a fatal
// problem: non-determinism (the run goes stuck) or a lost lease.
func (st *RunState) FatalErr() error {
	if errors.Is(st.Fatal, hoppertype.ErrLeaseLost) {
		return st.Fatal
	}
	return &KindError{Kind: hoppertype.ErrorKindNonDeterminism, Err: st.Fatal, Abort: true}
}

// Fail turns a store error into a fatal one for the run.
func (st *RunState) Fail(err error) error {
	if st.Fatal == nil {
		st.Fatal = err
	}
	return st.Fatal
}

// Check says whether an operation may go on: not after a suspension or a
// fatal problem. Recorded operations replay even in a cancelled run (so its
// compensations are registered again); live ones ask Live too.
func (st *RunState) Check() error {
	switch {
	case st.Fatal != nil:
		return st.Fatal
	case st.Suspended:
		return ErrSuspended
	}
	return nil
}

// Live says whether an operation that is not in the history may run now:
// not in a cancelled run.
func (st *RunState) Live() error {
	if st.IsCancelled() {
		return hoppertype.ErrCancelled
	}
	return nil
}

// IsCancelled reports whether the run was asked to stop.
func (st *RunState) IsCancelled() bool {
	if !st.cancelled && errors.Is(context.Cause(st.ctx), hoppertype.ErrCancelled) {
		st.cancelled = true
	}
	return st.cancelled
}

// Next consumes the next history event if there is one: it must be of one
// of kinds and bear name, else the run has diverged from its history. At
// the end of the history it returns nil, nil (the operation goes live), or
// suspends an offline replay.
func (st *RunState) Next(name string, kinds ...string) (*hoppertype.RunEvent, error) {
	// A name no store keeps is refused alike on every replay.
	if err := CheckText(kinds[0]+" name", name); err != nil {
		return nil, err
	}
	if st.Pos >= len(st.Events) {
		if st.Replay {
			st.Suspended = true
			return nil, ErrSuspended
		}
		// The operation goes live: a step's record still pending is
		// stored first, before anything the operation does.
		if err := st.Flush(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	ev := st.Events[st.Pos]
	if !slices.Contains(kinds, ev.Kind) || ev.Name != name {
		st.Fatal = &hoppertype.NonDeterminismError{RunID: st.Run.ID, Workflow: st.Run.Workflow, Attempt: st.attempt, Position: st.Pos + 1,
			RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: fmt.Sprintf("%s %q", kinds[0], name)}
		return nil, st.Fatal
	}
	st.Pos++
	return ev, nil
}

// Recorded says whether the history holds an event of kind: an ending an
// earlier execution recorded before it died.
func (st *RunState) Recorded(kind string) bool {
	return slices.ContainsFunc(st.Events, func(ev *hoppertype.RunEvent) bool { return ev.Kind == kind })
}

// Peek returns the next history event without consuming it.
func (st *RunState) Peek() *hoppertype.RunEvent {
	if st.Pos >= len(st.Events) {
		return nil
	}
	return st.Events[st.Pos]
}

// Record appends one event to the run's history (through tx when given),
// fenced by the run's lease. Inside a transaction the event is taken into
// the run's state only once the transaction commits (see InTx): a store
// may run a transaction's function again, and a rolled-back event must
// not count.
func (st *RunState) Record(ctx context.Context, tx driver.Executor, kind, name string, data EventData) error {
	ev, err := st.Event(kind, name, data)
	if err != nil {
		return err
	}
	if tx != nil {
		return st.AppendEvent(ctx, tx, ev)
	}
	if err := st.AppendEvent(ctx, nil, ev); err != nil {
		return st.Fail(err)
	}
	st.Accept(ev)
	return nil
}

// RecordLater records a step's outcome as Record does, but stores it with
// the run's next append rather than at once: with the run's end when the
// step was its last operation (one commit fewer), else before the next
// operation goes live (Next) or a compensation runs. Nothing the run does
// comes between the step and its record but the workflow function's own
// code, so the step's effect stays at least once, as with Record: a crash
// before the record runs the step again.
func (st *RunState) RecordLater(kind, name string, data EventData) error {
	ev, err := st.Event(kind, name, data)
	if err != nil {
		return err
	}
	st.pending = append(st.pending, ev)
	st.NextSeq++
	st.deferred = true
	return nil
}

// Flush stores the step records RecordLater left pending, fenced by the
// run's lease; a failure is fatal for the run, as Record's is.
func (st *RunState) Flush() error {
	if !st.deferred {
		return nil
	}
	if err := st.appendEvents(st.ctx, nil, st.pending); err != nil {
		return st.Fail(err)
	}
	st.acceptPending()
	return nil
}

// Event builds the next event of the run's history.
func (st *RunState) Event(kind, name string, data EventData) (*hoppertype.RunEvent, error) {
	if err := CheckText(kind+" name", name); err != nil {
		return nil, err
	}
	return newEvent(st.Run.ID, st.attempt, st.NextSeq, kind, name, data, st.e.now())
}

// newEvent builds a history event.
func newEvent(runID string, attempt, seq int, kind, name string, data EventData, at time.Time) (*hoppertype.RunEvent, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &hoppertype.RunEvent{RunID: runID, Attempt: attempt, Seq: seq, Kind: kind, Name: name, Data: b, At: at}, nil
}

// AppendEvent appends ev (with a pending start) under the run's lease:
// through ex, a transaction, or, when ex is nil, through the engine's
// history writer, which shares a statement between runs.
func (st *RunState) AppendEvent(ctx context.Context, ex driver.Executor, ev *hoppertype.RunEvent) error {
	return st.appendEvents(ctx, ex, append(slices.Clip(st.pending), ev))
}

// appendEvents appends events, the last one new, under the run's lease
// (see AppendEvent).
func (st *RunState) appendEvents(ctx context.Context, ex driver.Executor, events []*hoppertype.RunEvent) error {
	last := events[len(events)-1]
	p := &driver.RunEventAppendParams{RunID: st.Run.ID, LeaseToken: st.a.Row().LeaseToken, Events: events}
	if st.markRunning {
		p.RunStatus, p.Now = hoppertype.RunRunning, last.At
	}
	var err error
	if ex == nil {
		// Shares a statement with other runs': seen through whatever
		// happens to ctx, for as long as the lease and the attempt's hard
		// lifetime.
		err = st.e.AppendHistory(ctx, st.a.HardLife(), p)
	} else {
		err = ex.RunEventAppend(ctx, p)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hoppertype.ErrLeaseLost):
		return fmt.Errorf("hopper: workflow run %s: %w", st.Run.ID, hoppertype.ErrLeaseLost)
	default:
		return fmt.Errorf("hopper: workflow run %s: record %s: %w", st.Run.ID, last.Kind, err)
	}
}

// Accept takes a committed event into the run's state.
func (st *RunState) Accept(ev *hoppertype.RunEvent) {
	st.NextSeq++
	st.pending = append(st.pending, ev)
	st.acceptPending()
}

// acceptPending takes the pending events, stored now, into the run's
// state.
func (st *RunState) acceptPending() {
	st.markRunning = false
	st.Events = append(st.Events, st.pending...)
	st.pending, st.deferred = nil, false
	st.Pos = len(st.Events)
}

// InTx runs fn in a transaction that ends by recording one history event
// of kind and name; the event counts only once the transaction committed.
func (st *RunState) InTx(kind, name string, data EventData, fn func(ctx context.Context, tx driver.Executor) error) error {
	return st.InTxData(kind, name, func(ctx context.Context, tx driver.Executor) (EventData, error) {
		return data, fn(ctx, tx)
	})
}

// InTxData is InTx with the event's data made by fn, in the transaction.
func (st *RunState) InTxData(kind, name string, fn func(ctx context.Context, tx driver.Executor) (EventData, error)) error {
	var ev *hoppertype.RunEvent
	err := st.e.drv.InTx(st.ctx, func(ctx context.Context, tx driver.Executor) error {
		data, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		if ev, err = st.Event(kind, name, data); err != nil {
			return err
		}
		return st.AppendEvent(ctx, tx, ev)
	})
	if err != nil {
		return st.Fail(err)
	}
	st.Accept(ev)
	return nil
}

// Suspend makes the run wait until at (FarFuture: until woken), with a
// recheck for the lost-wake race.
func (st *RunState) Suspend(at time.Time, recheck func(ctx context.Context) bool) error {
	st.Suspended, st.Until, st.Recheck = true, at, recheck
	return ErrSuspended
}

// CheckText refuses, before it reaches a store, a string no store keeps
// alike: one with a NUL byte or that is not valid UTF-8 (PostgreSQL's
// text refuses both). field names it in the error, which wraps
// ErrInvalidInput.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s holds a NUL byte", hoppertype.ErrInvalidInput, field)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", hoppertype.ErrInvalidInput, field)
	}
	return nil
}
