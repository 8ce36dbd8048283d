package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// RunStatus is a workflow run's status.
type RunStatus = hoppertype.RunStatus

// Run statuses.
const (
	RunPending      = hoppertype.RunPending
	RunRunning      = hoppertype.RunRunning
	RunWaiting      = hoppertype.RunWaiting
	RunCompleted    = hoppertype.RunCompleted
	RunFailed       = hoppertype.RunFailed
	RunCompensating = hoppertype.RunCompensating
	RunCompensated  = hoppertype.RunCompensated
	RunCancelled    = hoppertype.RunCancelled
	RunQuarantined  = hoppertype.RunQuarantined
	RunStuck        = hoppertype.RunStuck
)

// FailureStrategy says what a workflow does when its function fails.
type FailureStrategy string

// Failure strategies.
const (
	// StrategyRetry (the default) runs the workflow again from the beginning,
	// as a new attempt with a fresh history, with backoff, up to MaxRetries
	// times. A failed attempt's compensations run (LIFO) before the next
	// attempt begins, so each attempt's effects are undone once, whatever
	// the later attempts do; when the run finally fails, its last attempt's
	// run too and the run ends compensated (failed when no attempt
	// registered any). An Abort error is not retried.
	StrategyRetry FailureStrategy = "retry"
	// StrategyCompensate runs the compensations at once, without retries.
	StrategyCompensate FailureStrategy = "compensate"
	// StrategyIgnore fails the run with no retry and no compensation.
	StrategyIgnore FailureStrategy = "ignore"
	// StrategyQuarantine keeps everything as it is for inspection: no retry,
	// no compensation, status quarantined.
	StrategyQuarantine FailureStrategy = "quarantine"
	// StrategyCascade cancels the run's parent and children and ends the run
	// cancelled.
	StrategyCascade FailureStrategy = "cascade"
)

// valid reports whether s is one of the strategies.
func (s FailureStrategy) valid() bool {
	switch s {
	case StrategyRetry, StrategyCompensate, StrategyIgnore, StrategyQuarantine, StrategyCascade:
		return true
	}
	return false
}

// workflowTypePrefix prefixes the job type under which a workflow's runs
// execute, keeping workflow names apart from job type names.
const workflowTypePrefix = "workflow:"

// WorkflowOpts configure a workflow type. The zero value is valid.
type WorkflowOpts struct {
	// Queue the runs go to. Defaults to the client's default queue.
	Queue string
	// Priority of the runs; higher runs first.
	Priority int
	// Strategy on failure. Defaults to the client's
	// Config.WorkflowStrategy (StrategyRetry unless set there).
	Strategy FailureStrategy
	// MaxRetries bounds StrategyRetry. Defaults to 3.
	MaxRetries int
	// Retry shapes the backoff between retries (its Attempts is ignored).
	Retry RetryPolicy
	// CodeVersion is stored with every run, to tell which code started it.
	CodeVersion string
	// SkipQueue runs a run's first execution in the starting process at
	// once, without a trip through the queue (still recorded as running
	// under a lease: a crash resumes it from its history), when the starting
	// client is started and has the workflow registered. It saves the
	// pickup latency; the start then bypasses the worker limit, so the
	// callers bound the concurrency. Child runs always go through the queue.
	SkipQueue bool
	// WorkMiddleware wrap each execution of this workflow's runs, inside
	// the client's Config.WorkMiddleware (see WorkMiddleware).
	WorkMiddleware []WorkMiddleware
	// InsertMiddleware wrap the starts of this workflow's runs (the run's
	// own job row), inside the client's Config.InsertMiddleware.
	InsertMiddleware []InsertMiddleware
}

// WorkflowFunc is a workflow's code: plain Go that survives crashes. It must
// be deterministic: read time, randomness and ids through wf, and put side
// effects in steps.
type WorkflowFunc[I, O any] func(wf WorkflowContext, in I) (O, error)

// WorkflowType is a named, typed workflow, made by Workflow.
type WorkflowType[I, O any] struct {
	wfName string
	fn     WorkflowFunc[I, O]
	opts   WorkflowOpts
}

// Workflow defines a durable workflow. Register it with the clients that
// should run it; any client can start it. opts may be nil.
func Workflow[I, O any](name string, fn WorkflowFunc[I, O], opts *WorkflowOpts) *WorkflowType[I, O] {
	if name == "" || fn == nil {
		panic("hopper: Workflow needs a name and a function")
	}
	w := &WorkflowType[I, O]{wfName: name, fn: fn}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.Strategy != "" && !w.opts.Strategy.valid() {
		panic(fmt.Sprintf("hopper: workflow %q: unknown failure strategy %q", name, w.opts.Strategy))
	}
	if w.opts.MaxRetries <= 0 {
		w.opts.MaxRetries = 3
	}
	return w
}

// Name returns the workflow's name.
func (w *WorkflowType[I, O]) Name() string { return w.wfName }

func (w *WorkflowType[I, O]) core() typeCore { return (*workflowImpl[I, O])(w) }

// StartOpts are the options of one run. A nil *StartOpts is valid.
type StartOpts struct {
	// ID is the run's id; empty mints one. It must keep ValidateID's rule,
	// or the start is refused with ErrInvalidInput. Starting an id that
	// exists, in any state, returns the existing run (idempotent start;
	// RunHandle.Existing reports it) when it is a run of the same
	// workflow; a run of another workflow, or a job that is not a run,
	// under that id is an error matching ErrDuplicateID.
	ID string
	// Delay postpones the start.
	Delay time.Duration
	// Priority overrides the workflow's.
	Priority int
	// Queue overrides the workflow's.
	Queue string
	// RunAt starts the run at that time (seed 004's scheduleOnce); it wins
	// over Delay. The zero time is now.
	RunAt time.Time
	// SkipQueue runs this run's first execution in the starting process at
	// once, as WorkflowOpts.SkipQueue does for every run of a workflow.
	SkipQueue bool
}

// RunHandle refers to a workflow run.
type RunHandle[O any] struct {
	c        *Client
	id       string
	existing bool
	decode   func([]byte) (O, error)
}

// ID returns the run's id.
func (h *RunHandle[O]) ID() string { return h.id }

// Existing reports whether Start found a run with this id and returned it.
func (h *RunHandle[O]) Existing() bool { return h.existing }

// Result waits until the run is finished and returns its output, or an
// error: a *RunError matching ErrCancelled, ErrNonDeterminism, … with
// errors.Is.
func (h *RunHandle[O]) Result(ctx context.Context) (O, error) {
	var zero O
	// A run's job succeeds in the transaction that completes the run, and
	// holds its output: the run's row need not be read.
	job, err := h.c.waitJob(ctx, h.id)
	if err == nil && job.State == hoppertype.JobStateSucceeded && strings.HasPrefix(job.Type, workflowTypePrefix) {
		return h.decode(job.Result)
	}
	info, err := h.c.runWaitAfter(ctx, h.id, job, err)
	if err != nil {
		return zero, err
	}
	if info.Status != RunCompleted {
		return zero, info.err()
	}
	return h.decode(info.Output)
}

// Start starts a run of w with input in.
func (w *WorkflowType[I, O]) Start(ctx context.Context, c *Client, in I, opts *StartOpts) (*RunHandle[O], error) {
	id, existing, err := c.startRun(ctx, w.core(), in, opts)
	if err != nil {
		return nil, err
	}
	return &RunHandle[O]{c: c, id: id, existing: existing, decode: w.decodeOutput(c)}, nil
}

// RunSpec is a run of a workflow to start, made by WorkflowType.RunSpec:
// what a schedule starts at each occurrence (Schedule.Run).
type RunSpec struct {
	t    typeCore
	in   any
	opts StartOpts
}

// Workflow names the workflow the spec starts.
func (s *RunSpec) Workflow() string {
	if w, ok := s.t.(workflowCore); ok {
		return w.workflowName()
	}
	return ""
}

// RunSpec returns the spec of a run of w with input in and opts (nil for
// the defaults), for Schedule.Run.
func (w *WorkflowType[I, O]) RunSpec(in I, opts *StartOpts) *RunSpec {
	s := &RunSpec{t: w.core(), in: in}
	if opts != nil {
		s.opts = *opts
	}
	return s
}

// Handle returns a handle to an existing run of w by id.
func (w *WorkflowType[I, O]) Handle(c *Client, id string) *RunHandle[O] {
	return &RunHandle[O]{c: c, id: id, decode: w.decodeOutput(c)}
}

func (w *WorkflowType[I, O]) decodeOutput(c *Client) func([]byte) (O, error) {
	return func(b []byte) (O, error) {
		var v O
		if isNoValue[O]() || len(b) == 0 {
			return v, nil
		}
		err := c.codec.Unmarshal(b, &v)
		return v, err
	}
}

// StartName starts a run of a registered workflow by name with JSON input,
// decoded strictly into the workflow's input.
func (c *Client) StartName(ctx context.Context, name string, input json.RawMessage, opts *StartOpts) (*RunHandle[json.RawMessage], error) {
	spec, err := c.NameRun(name, input, nil)
	if err != nil {
		return nil, err
	}
	id, existing, err := c.startRun(ctx, spec.t, spec.in, opts)
	if err != nil {
		return nil, err
	}
	return &RunHandle[json.RawMessage]{c: c, id: id, existing: existing, decode: rawDecoder}, nil
}

// startRun stores a run row and its job in one transaction, or finds the
// run that already has the id.
func (c *Client) startRun(ctx context.Context, t typeCore, in any, opts *StartOpts) (string, bool, error) {
	return c.startRunIn(ctx, nil, t, in, opts, "")
}

// startRunIn starts a run inside tx when given (a parent starting a child),
// else in its own transaction.
func (c *Client) startRunIn(ctx context.Context, tx driver.Executor, t typeCore, in any, opts *StartOpts, parentID string) (string, bool, error) {
	row, existing, err := c.startRunRow(ctx, tx, t, in, opts, parentID)
	if err != nil {
		return "", false, err
	}
	return row.ID, existing, nil
}

// startRunRow is startRunIn returning the run's job row.
func (c *Client) startRunRow(ctx context.Context, tx driver.Executor, t typeCore, in any, opts *StartOpts, parentID string) (*hoppertype.JobRow, bool, error) {
	wi, spec, row, run, err := c.runRows(t, in, opts, parentID)
	if err != nil {
		return nil, false, err
	}
	now := run.CreatedAt
	var skip map[string]bool
	if tx == nil && parentID == "" {
		skip = c.skipQueueRows([]*JobSpec{spec}, []*hoppertype.JobRow{row}, now)
		if skip[row.ID] {
			// Its job is stored claimed by this process and its first
			// execution begins at once: the run is stored running, so
			// the first record moves nothing.
			run.Status = RunRunning
		}
	}
	// One atomic store operation: the run, its job, the queue's wake-up.
	var ex driver.Executor = c.store()
	if tx != nil {
		ex = tx
	}
	var existing bool
	err = c.withInsertMiddleware(ctx, []*hoppertype.JobRow{row}, func(ctx context.Context) error {
		var err error
		existing, err = ex.RunStart(ctx, &driver.RunStartParams{Run: run, Job: row})
		return err
	})
	if errors.Is(err, ErrDuplicateID) {
		// The id is a job's that is not a run.
		return nil, false, fmt.Errorf("hopper: start workflow %s: %w: %q is the id of a job", wi.workflowName(), ErrDuplicateID, row.ID)
	}
	if err != nil {
		return nil, false, fmt.Errorf("hopper: start workflow %s: %w", wi.workflowName(), err)
	}
	if existing {
		// The same id again is the same run, if it is one of this workflow.
		have, err := ex.RunGet(ctx, &driver.RunGetParams{ID: row.ID})
		if err == nil && have.Workflow != run.Workflow {
			return nil, false, fmt.Errorf("hopper: start workflow %s: %w: run %q is a run of workflow %q", wi.workflowName(), ErrDuplicateID, row.ID, have.Workflow)
		}
	}
	if !existing && tx == nil {
		c.eng.AfterRunStart(row, run, skip)
	}
	return row, existing, nil
}

// runRows checks a start and builds the run's job row and run row.
func (c *Client) runRows(t typeCore, in any, opts *StartOpts, parentID string) (workflowCore, *JobSpec, *hoppertype.JobRow, *hoppertype.RunRow, error) {
	wi, ok := t.(workflowCore)
	if !ok {
		return nil, nil, nil, nil, fmt.Errorf("%w: %q is not a workflow", ErrInvalidInput, t.name())
	}
	var o StartOpts
	if opts != nil {
		o = *opts
	}
	if o.Delay < 0 {
		return nil, nil, nil, nil, fmt.Errorf("%w: negative delay", ErrInvalidInput)
	}
	// A child's id was checked by Child, or derived from its parent's.
	spec := &JobSpec{t: t, in: in, opts: InsertOpts{ID: o.ID, Delay: o.Delay, RunAt: o.RunAt, Priority: o.Priority, Queue: o.Queue, SkipQueue: o.SkipQueue},
		id: o.ID, derivedID: parentID != ""}
	now := c.now()
	row, err := c.buildRow(spec, now)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	row.ParentID = parentID
	run := &hoppertype.RunRow{ID: row.ID, Workflow: wi.workflowName(), Status: hoppertype.RunPending, ParentID: parentID,
		CodeVersion: wi.codeVersion(), CreatedAt: now, UpdatedAt: now}
	return wi, spec, row, run, nil
}

// StartTx starts a run of w through the caller's own database transaction,
// so the run exists if and only if tx commits: start a workflow beside the
// rows it is about. tx is as for Type.EnqueueTx (*sql.Tx for SQLite;
// pgx.Tx, or *sql.Tx through pgx's database/sql driver, for PostgreSQL);
// the memory driver refuses with an error matching driver.ErrNotImplemented.
// Workers notice the run at their next poll after the commit (at once on
// PostgreSQL). opts.SkipQueue does not apply: the run cannot execute before
// tx commits. Starting an id that exists returns the existing run. The
// InCommit observers see the run and its job inside tx; a veto fails the
// call with an error matching ErrVetoed and undoes hopper's writes alone,
// as for EnqueueTx.
func (w *WorkflowType[I, O]) StartTx(ctx context.Context, c *Client, tx any, in I, opts *StartOpts) (*RunHandle[O], error) {
	id, existing, err := c.startRunTx(ctx, tx, w.core(), in, opts)
	if err != nil {
		return nil, err
	}
	return &RunHandle[O]{c: c, id: id, existing: existing, decode: w.decodeOutput(c)}, nil
}

// startRunTx stores a run and its job through the caller's transaction.
func (c *Client) startRunTx(ctx context.Context, tx any, t typeCore, in any, opts *StartOpts) (string, bool, error) {
	if tx == nil {
		return "", false, fmt.Errorf("%w: StartTx with a nil transaction", ErrInvalidInput)
	}
	ti, ok := c.baseDriver().(driver.TxInserter)
	if !ok {
		return "", false, fmt.Errorf("%w: the %s driver has no transactional start", driver.ErrNotImplemented, c.eng.Driver().Name())
	}
	wi, _, row, run, err := c.runRows(t, in, opts, "")
	if err != nil {
		return "", false, err
	}
	var existing bool
	err = c.eng.InCallerTx(ctx, tx, func(ctx context.Context) error {
		var err error
		existing, err = ti.RunStartInTx(ctx, tx, &driver.RunStartParams{Run: run, Job: row})
		return err
	})
	if errors.Is(err, ErrDuplicateID) {
		return "", false, fmt.Errorf("hopper: start workflow %s: %w: %q is the id of a job", wi.workflowName(), ErrDuplicateID, row.ID)
	}
	if err != nil {
		return "", false, fmt.Errorf("hopper: start workflow %s: %w", wi.workflowName(), err)
	}
	if existing {
		// The same id again is the same run, if it is one of this
		// workflow: its job's type says which.
		have, err := ti.JobGetTx(ctx, tx, &driver.JobGetParams{ID: row.ID})
		if err == nil && have.Type != row.Type {
			return "", false, fmt.Errorf("hopper: start workflow %s: %w: %q is the id of a %s job", wi.workflowName(), ErrDuplicateID, row.ID, have.Type)
		}
	}
	return row.ID, existing, nil
}

// workflowCore is what the engine needs of a workflow type beyond typeCore.
type workflowCore interface {
	typeCore
	workflowName() string
	codeVersion() string
	strategy() FailureStrategy
}

type workflowImpl[I, O any] WorkflowType[I, O]

func (w *workflowImpl[I, O]) name() string              { return workflowTypePrefix + w.wfName }
func (w *workflowImpl[I, O]) workflowName() string      { return w.wfName }
func (w *workflowImpl[I, O]) codeVersion() string       { return w.opts.CodeVersion }
func (w *workflowImpl[I, O]) strategy() FailureStrategy { return w.opts.Strategy }

// optsFor is the workflow's options as client c runs them: its strategy, or
// c's default (Config.WorkflowStrategy) when it sets none.
func (w *workflowImpl[I, O]) optsFor(c *Client) WorkflowOpts {
	o := w.opts
	if o.Strategy == "" {
		o.Strategy = StrategyRetry
		if c != nil && c.cfg.WorkflowStrategy != "" {
			o.Strategy = c.cfg.WorkflowStrategy
		}
	}
	return o
}
func (w *workflowImpl[I, O]) queue() string                    { return w.opts.Queue }
func (w *workflowImpl[I, O]) codec(c *Client) Codec            { return c.codec }
func (w *workflowImpl[I, O]) classify() Classifier             { return nil }
func (w *workflowImpl[I, O]) onEvent() func(Event)             { return nil }
func (w *workflowImpl[I, O]) skipQueue() bool                  { return w.opts.SkipQueue }
func (w *workflowImpl[I, O]) limit() *Limit                    { return nil }
func (w *workflowImpl[I, O]) heartbeatTimeout() time.Duration  { return 0 }
func (w *workflowImpl[I, O]) workMiddleware() []WorkMiddleware { return w.opts.WorkMiddleware }
func (w *workflowImpl[I, O]) insertMiddleware() []InsertMiddleware {
	return w.opts.InsertMiddleware
}
func (w *workflowImpl[I, O]) computed(any) *InsertOpts { return nil }

// runCrashAllowance is how many executions of a run may be lost to
// crashes (a lease expired: the worker died or stalled) on top of its
// retries before the run goes stuck: a crash resumes the run from its
// history and does not use a retry, but a run that kills its process
// every time must not loop forever.
const runCrashAllowance = 100

func (w *workflowImpl[I, O]) base(c *Client) InsertOpts {
	attempts := 1
	if w.optsFor(c).Strategy == StrategyRetry {
		attempts = w.opts.MaxRetries + 1
	}
	attempts += runCrashAllowance
	r := w.opts.Retry
	r.Attempts = attempts
	return InsertOpts{Queue: w.opts.Queue, Priority: w.opts.Priority, Retry: r}
}

func (w *workflowImpl[I, O]) decodeJSON(raw []byte) (any, error) {
	var in I
	if len(raw) == 0 {
		raw = []byte("null")
	}
	if err := decodeStrictJSON(raw, &in); err != nil {
		return nil, fmt.Errorf("%w: input for workflow %q: %w", ErrInvalidInput, w.wfName, err)
	}
	return in, nil
}

func (w *workflowImpl[I, O]) encodeInput(c *Client, in any) ([]byte, error) {
	v, ok := in.(I)
	if !ok {
		return nil, fmt.Errorf("%w: input for workflow %q is %T, want %v", ErrInvalidInput, w.wfName, in, reflect.TypeFor[I]())
	}
	b, err := c.codec.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode input for workflow %q: %w", ErrInvalidInput, w.wfName, err)
	}
	return b, nil
}

// run executes (or resumes, by replay) the workflow in the run's job.
func (w *workflowImpl[I, O]) run(ctx context.Context, c *Client, input []byte) ([]byte, error) {
	var in I
	if err := c.codec.Unmarshal(input, &in); err != nil {
		return nil, &engine.KindError{Kind: hoppertype.ErrorKindDecode, Err: fmt.Errorf("decode input for workflow %q: %w", w.wfName, err), Abort: true}
	}
	return c.executeRun(ctx, w.optsFor(c), func(wf WorkflowContext) ([]byte, error) {
		out, err := w.fn(wf, in)
		if err != nil {
			return nil, err
		}
		if isNoValue[O]() {
			return nil, nil
		}
		b, err := c.codec.Marshal(out)
		if err != nil {
			return nil, &engine.KindError{Kind: hoppertype.ErrorKindEncode, Err: fmt.Errorf("%w: %w", ErrEncode, err), Abort: true}
		}
		return b, nil
	})
}
