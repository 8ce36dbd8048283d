package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// History event kinds. A run's history holds what its own execution did, in
// order; replay answers each operation of the workflow function from it.
const (
	evWorkflowStarted   = "workflow_started"
	evWorkflowCompleted = "workflow_completed"
	evWorkflowFailed    = "workflow_failed"
	evWorkflowCancelled = "workflow_cancelled"
	evStep              = "step"
	evSideEffect        = "side_effect"
	evSleep             = "sleep"
	evPatch             = "patch"
	evHookCreated       = "hook_created"
	evHookWait          = "hook_wait"
	evHookReceived      = "hook_received"
	evHookTimeout       = "hook_timeout"
	evChildStarted      = "child_started"
	evChildCompleted    = "child_completed"
	evActivityScheduled = "activity_scheduled"
	evActivityCompleted = "activity_completed"
	// The activity's executions, derived from its job's changes for the
	// run's timeline (never stored in the history, never replayed).
	evActivityStarted   = "activity_started"
	evActivityHeartbeat = "activity_heartbeat"
	evActivityFailed    = "activity_failed"
	evActivityRetry     = "activity_retry"
	evCompensationAdded = "compensation_added"
	evCompensationDone  = "compensation_executed"
	evCompensationFail  = "compensation_failed"
	evStreamWrite       = "stream_write"
)

// farFuture is when a run waiting for an event with no timeout is due: the
// event wakes it first.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// evData is the JSON payload of a history event.
type evData struct {
	Output json.RawMessage       `json:"output,omitempty"`
	Error  *hoppertype.ErrorInfo `json:"error,omitempty"`
	Until  time.Time             `json:"until,omitzero"`
	Token  string                `json:"token,omitempty"`
	// Schema is a hook's payload type as payloadSchema describes it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Request is the HookRequest that resumed a hook through its webhook.
	Request json.RawMessage      `json:"request,omitempty"`
	Child   string               `json:"child,omitempty"`
	Job     string               `json:"job,omitempty"`
	Status  hoppertype.RunStatus `json:"status,omitempty"`
	// Attempts is how many tries a step took.
	Attempts int `json:"attempts,omitempty"`
	// Attempt, Worker and Message describe one execution of an activity
	// in a run's timeline.
	Attempt int    `json:"attempt,omitempty"`
	Worker  string `json:"worker,omitempty"`
	Message string `json:"message,omitempty"`
	// Offset is the stream offset of the chunk a stream_write wrote.
	Offset *int64 `json:"offset,omitempty"`
}

// errSuspended is returned by workflow operations once the run is waiting
// (a sleep, a hook, a child, an activity): the workflow function should
// return it (any error will do). Once a run is suspended no further
// operation runs, so code that swallows the error does no harm.
var errSuspended = errors.New("hopper: workflow suspended (return this error)")

// compensation is a registered undo action.
type compensation struct {
	name string
	fn   func(ctx context.Context) error
}

// wfState is a run's execution: the history being replayed, what was
// registered, whether it suspended.
type wfState struct {
	c       *Client
	ctx     context.Context
	jc      *JobContext
	run     *hoppertype.RunRow
	opts    WorkflowOpts
	attempt int
	events  []*hoppertype.RunEvent
	pos     int
	nextSeq int

	suspended bool
	until     time.Time
	recheck   func(ctx context.Context) bool
	fatal     error // non-determinism or a lost lease: nothing more may run
	cancelled bool
	// pending is an event to store with the next one appended (the run's
	// start), already counted in nextSeq.
	pending *hoppertype.RunEvent
	// markRunning asks the next append to set the run's status to running.
	markRunning bool
	// replay is set for an offline replay (ReplayHistory): the end of the
	// history ends the execution, as a suspension, instead of going live.
	replay bool
	comps  []compensation
}

// executeRun runs or resumes a workflow in its job's handler.
func (c *Client) executeRun(ctx context.Context, opts WorkflowOpts, body func(WorkflowContext) ([]byte, error)) (out []byte, err error) {
	jc := JobFromContext(ctx)
	if jc == nil {
		return nil, errors.New("hopper: a workflow runs only as a job")
	}
	runID := jc.ID()
	// One read: the run and its whole history.
	run, all, err := c.store().RunLoad(ctx, &driver.RunLoadParams{ID: runID})
	if err != nil {
		return nil, fmt.Errorf("hopper: workflow run %s: %w", runID, err)
	}
	st := &wfState{c: c, ctx: ctx, jc: jc, run: run, opts: opts, attempt: jc.Attempt()}
	st.cancelled = run.Error != nil && run.Error.Kind == hoppertype.ErrorKindCancelled
	jc.run = &engine.RunEffect{}
	jc.a.SetRun(jc.run)
	// The run is marked running by its first record (see appendEvent); an
	// execution that records nothing (a wake-up with nothing new to do)
	// leaves the run as it was.
	st.markRunning = run.Status != hoppertype.RunRunning
	gens := generations(all)
	var retries int
	st.attempt, st.events, retries = currentHistory(gens, run.Status == hoppertype.RunPending)
	st.nextSeq = len(st.events) + 1
	// What earlier attempts did and left to undo is undone before this one
	// goes on (see undoEarlier).
	if err := c.undoEarlier(st, gens, body); err != nil {
		return nil, st.fatalErr()
	}
	if ev, err := st.next("", evWorkflowStarted); err != nil {
		return nil, st.fatalErr()
	} else if ev == nil {
		// The start goes to the store with the run's first recorded
		// operation, saving a commit: every path of a first execution
		// records something before it ends or suspends.
		ev, err := st.event(evWorkflowStarted, "", evData{})
		if err != nil {
			return nil, err
		}
		st.pending = ev
		st.nextSeq++
	}

	func() {
		defer func() {
			if r := recover(); r != nil {
				out, err = nil, &engine.KindError{Kind: hoppertype.ErrorKindPanic, Err: fmt.Errorf("%w: %v", ErrPanic, r), Stack: string(debug.Stack())}
			}
		}()
		out, err = body(st)
	}()

	switch {
	case st.fatal != nil:
		return nil, st.fatalErr()
	case st.suspended:
		jc.run.Recheck = st.recheck
		return nil, &engine.SuspendError{Until: st.until}
	case err == nil && !st.cancelled:
		if st.pos < len(st.events) {
			ev := st.events[st.pos]
			if ev.Kind == evWorkflowCompleted && st.pos == len(st.events)-1 {
				// Recorded by an execution that died before its job
				// completed: the run is done.
				return out, nil
			}
			st.fatal = &NonDeterminismError{RunID: runID, Workflow: run.Workflow, Attempt: st.attempt, Position: st.pos + 1, RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: "the end of the workflow"}
			return nil, st.fatalErr()
		}
		// The end is recorded in the transaction that completes the run's
		// job, saving a commit.
		ev, eerr := st.event(evWorkflowCompleted, "", evData{Output: out})
		if eerr != nil {
			return nil, eerr
		}
		if st.pending != nil {
			jc.run.Events = append(jc.run.Events, st.pending)
		}
		jc.run.Events = append(jc.run.Events, ev)
		return out, nil
	}
	if err == nil {
		err = ErrCancelled
	}
	if st.isCancelled() {
		if err := c.compensate(st); err != nil {
			return nil, st.fatalErr()
		}
		if !st.recorded(evWorkflowCancelled) {
			st.recordEnd(evWorkflowCancelled, evData{})
		}
		return nil, &engine.KindError{Kind: hoppertype.ErrorKindCancelled, Err: fmt.Errorf("%w: workflow run %s", ErrCancelled, runID), Abort: true}
	}
	final := aborts(err) || opts.Strategy != StrategyRetry || retries >= opts.MaxRetries || jc.Attempt() >= jc.MaxAttempts()
	if !final {
		// The saga: what this attempt did is undone before the next one
		// does it again. Undoing at the end instead would never undo it if
		// a later attempt succeeded (see "Retries and compensation" in
		// docs/concepts.md).
		if err := c.compensate(st); err != nil {
			return nil, st.fatalErr()
		}
		_ = st.record(ctx, nil, evWorkflowFailed, "", evData{Error: errorInfo(err, st.attempt, c.now())})
		return nil, err // the job retries: a new attempt, a fresh history
	}
	status := hoppertype.RunFailed
	switch opts.Strategy {
	case StrategyRetry, StrategyCompensate:
		if len(st.comps) > 0 {
			if _, uerr := c.store().RunUpdate(ctx, &driver.RunUpdateParams{ID: runID, Status: hoppertype.RunCompensating, Now: c.now()}); uerr != nil {
				return nil, uerr
			}
			if err := c.compensate(st); err != nil {
				return nil, st.fatalErr()
			}
		}
		if len(st.comps) > 0 || registeredCompensations(gens) {
			// Its compensations ran, this attempt's now, earlier
			// attempts' when they failed.
			status = hoppertype.RunCompensated
		}
	case StrategyQuarantine:
		status = hoppertype.RunQuarantined
	case StrategyCascade:
		c.cascade(ctx, run)
		status = hoppertype.RunCancelled
	}
	jc.run.Final = status
	if !st.recorded(evWorkflowFailed) {
		st.recordEnd(evWorkflowFailed, evData{Error: errorInfo(err, st.attempt, c.now()), Status: status})
	}
	// The run's job ends now, its error keeping the cause's kind: a waiter
	// (a parent among them, in any process) matches what failed the run
	// (ErrAborted only for an abort), and a parent that returns it retries
	// it unless it is an abort.
	var stack string
	var ke *engine.KindError
	if errors.As(err, &ke) {
		stack = ke.Stack
	}
	return nil, &engine.KindError{Kind: errorKind(err), Err: err, Stack: stack, Final: true}
}

// recordEnd records how the run ended, though its attempt was cancelled:
// within the lease's length and the runtime's hard lifetime. Unrecorded,
// the run's job records the end all the same.
func (st *wfState) recordEnd(kind string, data evData) {
	ctx, cancel := engine.Within(st.ctx, st.jc.hardLife(), st.c.cfg.Visibility)
	defer cancel()
	_ = st.record(ctx, nil, kind, "", data)
}

// aborts says whether err ends a run at once, whatever its strategy: an
// Abort (a Fatal step's error, an aborted activity's or child's) or one of
// hopper's own permanent failures (an output that does not encode).
func aborts(err error) bool {
	var ke *engine.KindError
	return errors.Is(err, ErrAborted) || errors.As(err, &ke) && ke.Abort
}

// generation is one attempt of a run in its history: the events recorded
// under one attempt key. A run's first attempt is 1; each attempt that the
// workflow retries (StrategyRetry) is followed by a new one, keyed by the
// next number. A crash does not start one: the attempt goes on.
type generation struct {
	attempt int
	events  []*hoppertype.RunEvent
	// retried says the attempt ended in a failure the workflow retried
	// (a workflow_failed event without a final status).
	retried bool
	// ended says the attempt ended the run: a final failure (a
	// workflow_failed event with its final status) or a cancellation.
	ended bool
}

// generations splits all of a run's events (in attempt, seq order) into
// its attempts.
func generations(all []*hoppertype.RunEvent) []generation {
	var gens []generation
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].Attempt == all[i].Attempt {
			j++
		}
		g := generation{attempt: all[i].Attempt, events: all[i:j]}
		g.retried = slices.ContainsFunc(g.events, retriedFailure)
		g.ended = slices.ContainsFunc(g.events, endingEvent)
		gens = append(gens, g)
		i = j
	}
	return gens
}

// currentHistory picks, from a run's attempts, the one an execution
// continues: the last, unless the workflow retried it, in which case a
// fresh attempt begins, keyed by the next number (1 for a new run). A crash
// (the job rescued, its job attempt counted) continues the last attempt,
// so recorded steps never run again. It returns the attempt, its events,
// and how many attempts failed and were retried.
//
// Runs recorded before attempts were numbered this way keyed an attempt by
// the job attempt that began it (a crash could skip numbers): their keys
// are read as they are, and a new attempt still takes the next number.
//
// restarted says the run was retried after it ended (Client.RunRetry: its
// status is pending again): an attempt that ended the run is then over
// too, and the retries are counted anew from there.
func currentHistory(gens []generation, restarted bool) (attempt int, events []*hoppertype.RunEvent, retries int) {
	if len(gens) == 0 {
		return 1, nil, 0
	}
	last := gens[len(gens)-1]
	fresh := last.retried || (restarted && last.ended)
	past := gens
	if !fresh {
		past = gens[:len(gens)-1] // the last attempt goes on
	}
	for _, g := range past {
		switch {
		case g.ended:
			retries = 0 // a run retried after it ended has its whole budget again
		case g.retried:
			retries++
		}
	}
	if fresh {
		return last.attempt + 1, nil, retries
	}
	return last.attempt, last.events, retries
}

// endingEvent says whether ev ends the run: a workflow_failed event with a
// final status, or workflow_cancelled.
func endingEvent(ev *hoppertype.RunEvent) bool {
	if ev.Kind == evWorkflowCancelled {
		return true
	}
	return ev.Kind == evWorkflowFailed && !retriedFailure(ev)
}

// lastGeneration returns the events of the run's latest history
// generation (the last attempt that recorded any) and its attempt.
func lastGeneration(all []*hoppertype.RunEvent) (int, []*hoppertype.RunEvent) {
	if len(all) == 0 {
		return 0, nil
	}
	first := len(all) - 1
	for first > 0 && all[first-1].Attempt == all[first].Attempt {
		first--
	}
	return all[first].Attempt, all[first:]
}

// retriedFailure says whether ev ends an attempt the workflow retries: a
// workflow_failed event without a final status.
func retriedFailure(ev *hoppertype.RunEvent) bool {
	if ev.Kind != evWorkflowFailed {
		return false
	}
	var data evData
	_ = json.Unmarshal(ev.Data, &data)
	return data.Status == ""
}

// compensate runs the compensations the current attempt registered, in
// reverse order, each once: one whose execution an earlier, interrupted
// execution recorded is skipped. A failing compensation is recorded and
// the rest still run. They run on a context detached from the run's
// cancellation, which ends when the client's Stop gives up (the hard
// lifetime); each record has the lease's length (see appendEvent). An
// execution that cannot record (its lease lost) stops there, so the one
// that takes the run over runs each of the others once.
func (c *Client) compensate(st *wfState) error {
	ctx, cancel := engine.Within(st.ctx, st.jc.hardLife(), 0)
	defer cancel()
	done := map[string]bool{}
	for _, ev := range st.events {
		if ev.Kind == evCompensationDone || ev.Kind == evCompensationFail {
			done[ev.Name] = true
		}
	}
	st.pos = len(st.events) // what follows is live
	for i := len(st.comps) - 1; i >= 0; i-- {
		comp := st.comps[i]
		key := compKey(comp.name, i)
		if done[key] {
			continue
		}
		kind, data := evCompensationDone, evData{}
		if err := runCompensation(ctx, comp.fn); err != nil {
			kind, data = evCompensationFail, evData{Error: errorInfo(err, st.attempt, c.now())}
		}
		if err := st.record(ctx, nil, kind, key, data); err != nil {
			return err
		}
	}
	return nil
}

// runCompensation calls a compensation; a panic is its failure.
func runCompensation(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return fn(ctx)
}

// compKey is the name a compensation's execution is recorded under: its
// name and its place among its attempt's registrations ("refund#0").
func compKey(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// undoneCompensations returns the places (in registration order) of the
// compensations an attempt registered whose execution it never recorded.
func undoneCompensations(events []*hoppertype.RunEvent) []int {
	var names []string
	done := map[string]bool{}
	for _, ev := range events {
		switch ev.Kind {
		case evCompensationAdded:
			names = append(names, ev.Name)
		case evCompensationDone, evCompensationFail:
			done[ev.Name] = true
		}
	}
	var out []int
	for i, name := range names {
		if !done[compKey(name, i)] {
			out = append(out, i)
		}
	}
	return out
}

// registeredCompensations says whether any attempt of a run registered a
// compensation.
func registeredCompensations(gens []generation) bool {
	for _, g := range gens {
		if slices.ContainsFunc(g.events, func(ev *hoppertype.RunEvent) bool { return ev.Kind == evCompensationAdded }) {
			return true
		}
	}
	return false
}

// undoEarlier runs, before an attempt goes on, the compensations earlier
// attempts registered and never ran: the newest attempt's first, each
// attempt's in reverse order, each recorded in that attempt's history
// (after its failure) so it runs once. An attempt that fails runs its own
// compensations before the next attempt begins, so there are such only in
// runs recorded before hopper did that. The functions are found by
// replaying the earlier attempt's history, offline: none of its operations
// runs again. A replay that diverges from that history makes the run go
// stuck, undoing nothing, as a divergence of the current attempt does.
// They run as compensate runs them.
func (c *Client) undoEarlier(st *wfState, gens []generation, body func(WorkflowContext) ([]byte, error)) error {
	ctx, cancel := engine.Within(st.ctx, st.jc.hardLife(), 0)
	defer cancel()
	for gi := len(gens) - 1; gi >= 0; gi-- {
		g := gens[gi]
		if !g.retried || g.attempt == st.attempt {
			continue
		}
		undone := undoneCompensations(g.events)
		if len(undone) == 0 {
			continue
		}
		comps, err := c.replayCompensations(ctx, st, g, body)
		if err != nil {
			return st.fail(err)
		}
		seq := g.events[len(g.events)-1].Seq
		for k := len(undone) - 1; k >= 0; k-- {
			i := undone[k]
			kind, data := evCompensationDone, evData{}
			if err := runCompensation(ctx, comps[i].fn); err != nil {
				kind, data = evCompensationFail, evData{Error: errorInfo(err, g.attempt, c.now())}
			}
			seq++
			ev, err := newEvent(st.run.ID, g.attempt, seq, kind, compKey(comps[i].name, i), data, c.now())
			if err != nil {
				return st.fail(err)
			}
			if err := st.appendEvent(ctx, nil, ev); err != nil {
				return st.fail(err)
			}
			st.markRunning = false
		}
	}
	return nil
}

// replayCompensations replays an earlier attempt's history through the
// workflow function, offline (the end of the history ends the replay; no
// operation runs), and returns the compensations it registered, in order.
func (c *Client) replayCompensations(ctx context.Context, st *wfState, g generation, body func(WorkflowContext) ([]byte, error)) ([]compensation, error) {
	var events []*hoppertype.RunEvent
	for _, ev := range g.events {
		if replayTail(ev.Kind) {
			break
		}
		events = append(events, ev)
	}
	rs := &wfState{c: c, ctx: ctx, jc: st.jc, run: st.run, opts: st.opts, attempt: g.attempt, events: events, nextSeq: len(events) + 1, replay: true}
	if len(events) > 0 {
		if _, err := rs.next("", evWorkflowStarted); err != nil {
			return nil, err
		}
	}
	func() {
		defer func() { _ = recover() }() // the attempt may have ended in a panic
		_, _ = body(rs)
	}()
	if rs.fatal != nil {
		return nil, rs.fatal
	}
	n := 0
	for i, ev := range events {
		if ev.Kind != evCompensationAdded {
			continue
		}
		if n == len(rs.comps) {
			return nil, &NonDeterminismError{RunID: st.run.ID, Workflow: st.run.Workflow, Attempt: g.attempt, Position: i + 1,
				RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: "the end of the workflow"}
		}
		n++
	}
	return rs.comps, nil
}

// cascade cancels a failed run's parent and children, though its attempt
// was cancelled: within cascadeBudget and the runtime's hard lifetime.
func (c *Client) cascade(ctx context.Context, run *hoppertype.RunRow) {
	ctx, cancel := engine.Within(ctx, JobFromContext(ctx).hardLife(), engine.CascadeBudget)
	defer cancel()
	if run.ParentID != "" {
		_ = c.RunCancel(ctx, run.ParentID)
	}
	children, err := c.store().RunList(ctx, &driver.RunListParams{ParentID: run.ID, Limit: 10_000})
	if err != nil {
		c.reportError(fmt.Errorf("cascade from run %s: %w", run.ID, err), PhaseHook)
		return
	}
	for _, ch := range children {
		if !ch.Status.Terminal() {
			_ = c.RunCancel(ctx, ch.ID)
		}
	}
}

func errorInfo(err error, attempt int, now time.Time) *hoppertype.ErrorInfo {
	return &hoppertype.ErrorInfo{Kind: errorKind(err), Message: err.Error(), Attempt: attempt, At: now}
}

// kindsBySentinel are the error kinds a cause may carry, each with the
// sentinel it matches, in the order errorKind tries them.
var kindsBySentinel = []hoppertype.ErrorKind{
	hoppertype.ErrorKindAborted, hoppertype.ErrorKindCancelled, hoppertype.ErrorKindNonDeterminism,
	hoppertype.ErrorKindTimeout, hoppertype.ErrorKindExpired, hoppertype.ErrorKindPanic,
	hoppertype.ErrorKindEncode, hoppertype.ErrorKindDecode, hoppertype.ErrorKindLeaseLost, hoppertype.ErrorKindUnknownType,
}

// errorKind is the kind recorded for err: hopper's own error's kind, else
// the kind of the sentinel it matches (a *StepError, *RunError or
// *JobError matches its kind's, so a child's or an activity's error passed
// on keeps its kind), else handler. An abort wins.
func errorKind(err error) hoppertype.ErrorKind {
	var ke *engine.KindError
	if errors.As(err, &ke) {
		return ke.Kind
	}
	for _, k := range kindsBySentinel {
		if errors.Is(err, (&JobError{Kind: k}).Unwrap()) {
			return k
		}
	}
	return hoppertype.ErrorKindHandler
}

// scope is what the identities of everything an attempt starts begin with:
// the run's id in its first attempt, "<run>@<attempt>" in later ones. An
// activity is the job "<scope>.a<position>", a child the run
// "<scope>.<position>", so a retried run never meets the jobs and runs of
// its earlier attempts.
func (st *wfState) scope() string {
	if st.attempt <= 1 {
		return st.run.ID
	}
	return st.run.ID + "@" + strconv.Itoa(st.attempt)
}

// fatalErr is the error a run ends its execution with after a fatal
// problem: non-determinism (the run goes stuck) or a lost lease.
func (st *wfState) fatalErr() error {
	if errors.Is(st.fatal, hoppertype.ErrLeaseLost) {
		return st.fatal
	}
	return &engine.KindError{Kind: hoppertype.ErrorKindNonDeterminism, Err: st.fatal, Abort: true}
}

// check says whether an operation may go on: not after a suspension or a
// fatal problem. Recorded operations replay even in a cancelled run (so its
// compensations are registered again); live ones ask live() too.
func (st *wfState) check() error {
	switch {
	case st.fatal != nil:
		return st.fatal
	case st.suspended:
		return errSuspended
	}
	return nil
}

// live says whether an operation that is not in the history may run now:
// not in a cancelled run.
func (st *wfState) live() error {
	if st.isCancelled() {
		return ErrCancelled
	}
	return nil
}

func (st *wfState) isCancelled() bool {
	if !st.cancelled && errors.Is(context.Cause(st.ctx), ErrCancelled) {
		st.cancelled = true
	}
	return st.cancelled
}

// next consumes the next history event if there is one: it must be of one
// of kinds and bear name, else the run has diverged from its history.
func (st *wfState) next(name string, kinds ...string) (*hoppertype.RunEvent, error) {
	// A name no store keeps is refused alike on every replay.
	if err := checkText(kinds[0]+" name", name); err != nil {
		return nil, err
	}
	if st.pos >= len(st.events) {
		if st.replay {
			st.suspended = true
			return nil, errSuspended
		}
		return nil, nil
	}
	ev := st.events[st.pos]
	if !slices.Contains(kinds, ev.Kind) || ev.Name != name {
		st.fatal = &NonDeterminismError{RunID: st.run.ID, Workflow: st.run.Workflow, Attempt: st.attempt, Position: st.pos + 1,
			RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: fmt.Sprintf("%s %q", kinds[0], name)}
		return nil, st.fatal
	}
	st.pos++
	return ev, nil
}

// recorded says whether the history holds an event of kind: an ending an
// earlier execution recorded before it died.
func (st *wfState) recorded(kind string) bool {
	return slices.ContainsFunc(st.events, func(ev *hoppertype.RunEvent) bool { return ev.Kind == kind })
}

// peek returns the next history event without consuming it.
func (st *wfState) peek() *hoppertype.RunEvent {
	if st.pos >= len(st.events) {
		return nil
	}
	return st.events[st.pos]
}

// record appends one event to the run's history (through tx when given),
// fenced by the run's lease. Inside a transaction the event is taken into
// the run's state only once the transaction commits (see inTx): a store may
// run a transaction's function again, and a rolled-back event must not
// count.
func (st *wfState) record(ctx context.Context, tx driver.Executor, kind, name string, data evData) error {
	ev, err := st.event(kind, name, data)
	if err != nil {
		return err
	}
	if tx != nil {
		return st.appendEvent(ctx, tx, ev)
	}
	if err := st.appendEvent(ctx, nil, ev); err != nil {
		return st.fail(err)
	}
	st.accept(ev)
	return nil
}

// event builds the next event of the run's history.
func (st *wfState) event(kind, name string, data evData) (*hoppertype.RunEvent, error) {
	if err := checkText(kind+" name", name); err != nil {
		return nil, err
	}
	return newEvent(st.run.ID, st.attempt, st.nextSeq, kind, name, data, st.c.now())
}

// newEvent builds a history event.
func newEvent(runID string, attempt, seq int, kind, name string, data evData, at time.Time) (*hoppertype.RunEvent, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return &hoppertype.RunEvent{RunID: runID, Attempt: attempt, Seq: seq, Kind: kind, Name: name, Data: b, At: at}, nil
}

// appendEvent appends ev (with a pending start) under the run's lease:
// through ex, a transaction, or, when ex is nil, through the client's
// history writer, which shares a statement between runs.
func (st *wfState) appendEvent(ctx context.Context, ex driver.Executor, ev *hoppertype.RunEvent) error {
	events := []*hoppertype.RunEvent{ev}
	if st.pending != nil {
		events = []*hoppertype.RunEvent{st.pending, ev}
	}
	p := &driver.RunEventAppendParams{RunID: st.run.ID, LeaseToken: st.jc.row.LeaseToken, Events: events}
	if st.markRunning {
		p.RunStatus, p.Now = hoppertype.RunRunning, ev.At
	}
	var err error
	if ex == nil {
		// Shares a statement with other runs': seen through whatever
		// happens to ctx, for as long as the lease and the runtime's hard
		// lifetime.
		err = st.c.eng.AppendHistory(ctx, st.jc.hardLife(), p)
	} else {
		err = ex.RunEventAppend(ctx, p)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hoppertype.ErrLeaseLost):
		return fmt.Errorf("hopper: workflow run %s: %w", st.run.ID, hoppertype.ErrLeaseLost)
	default:
		return fmt.Errorf("hopper: workflow run %s: record %s: %w", st.run.ID, ev.Kind, err)
	}
}

// accept takes a committed event into the run's state.
func (st *wfState) accept(ev *hoppertype.RunEvent) {
	st.markRunning = false
	if st.pending != nil {
		st.events = append(st.events, st.pending)
		st.pending = nil
	}
	st.nextSeq++
	st.events = append(st.events, ev)
	st.pos = len(st.events)
}

// inTx runs fn in a transaction that ends by recording one history event
// of kind and name; the event counts only once the transaction committed.
func (st *wfState) inTx(kind, name string, data evData, fn func(ctx context.Context, tx driver.Executor) error) error {
	return st.inTxData(kind, name, func(ctx context.Context, tx driver.Executor) (evData, error) {
		return data, fn(ctx, tx)
	})
}

// inTxData is inTx with the event's data made by fn, in the transaction.
func (st *wfState) inTxData(kind, name string, fn func(ctx context.Context, tx driver.Executor) (evData, error)) error {
	var ev *hoppertype.RunEvent
	err := st.c.store().InTx(st.ctx, func(ctx context.Context, tx driver.Executor) error {
		data, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		if ev, err = st.event(kind, name, data); err != nil {
			return err
		}
		return st.appendEvent(ctx, tx, ev)
	})
	if err != nil {
		return st.fail(err)
	}
	st.accept(ev)
	return nil
}

// suspend makes the run wait until at (farFuture: until woken), with a
// recheck for the lost-wake race.
func (st *wfState) suspend(at time.Time, recheck func(ctx context.Context) bool) error {
	st.suspended, st.until, st.recheck = true, at, recheck
	return errSuspended
}

// NonDeterminismError says a run's replay diverged from its history: the
// workflow code changed, or does not run the same way twice. The run goes
// stuck (engine failure, not retryable) until the code is fixed and it is
// retried.
type NonDeterminismError = hoppertype.NonDeterminismError
