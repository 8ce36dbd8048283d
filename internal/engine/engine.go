// Package engine is hopper's engine: what runs jobs and records their
// outcomes, behind the public API of package hopper.
//
// It claims due jobs (producer.go) into a bounded number of worker slots
// (slots.go, limiter.go), runs each attempt (executor.go), turns it into an
// outcome (outcome.go) and records outcomes in group-committed
// transactions (completer.go) together with everything an outcome implies:
// fan-out groups (group.go), gates (gate.go), workflow runs (run.go), the
// InCommit observers (observe.go). A leader runs the maintenance services
// (maintenance.go); AfterCommit observers are delivered from the change
// feed (deliver.go). Every store call the engine makes on its own behalf
// has a deadline (deadline.go).
//
// The engine knows jobs as bytes: the public package binds types, codecs
// and generics and hands the engine JobType values. The engine imports
// only hoppertype, driver and internal/hclock (layering_test.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// WorkflowTypePrefix starts the job type of a workflow's runs.
const WorkflowTypePrefix = "workflow:"

// BuiltinTypePrefix starts the names of hopper's own job types (the gate
// type, say). Accept never sees their jobs, and limits never hold them
// back: declining them on every process would stall what they serve.
const BuiltinTypePrefix = "hopper."

// ErrStopping is the cause given to handlers cancelled by Stop.
var ErrStopping = errors.New("hopper: client stopping")

// JobType is a registered job type as the engine runs it.
type JobType interface {
	// Name is the type's name as stored on its jobs.
	Name() string
	// Queue is the queue the type's jobs go to by default ("" for the
	// engine's default queue); the engine works it.
	Queue() string
	// SkipQueue says a first attempt may run at once in the inserting
	// process.
	SkipQueue() bool
	// Limit is the type's own limit, nil if none.
	Limit() *hoppertype.Limit
	// Classifier decides on the type's failures (nil: the engine's).
	Classifier() hoppertype.Classifier
	// OnEvent, if not nil, receives the type's events.
	OnEvent() func(hoppertype.Event)
	// HeartbeatTimeout, if positive, fails an attempt that goes that long
	// without a heartbeat.
	HeartbeatTimeout() time.Duration
	// Run runs one attempt of a job (a.Row().Input) and returns its
	// encoded output.
	Run(ctx context.Context, a *Attempt) ([]byte, error)
}

// WorkflowJobType is a JobType that says whether its jobs are workflow
// runs' executions: the engine reads the runs of such jobs together with
// the claim that returned them (see session.loadRuns).
type WorkflowJobType interface {
	JobType
	IsWorkflow() bool
}

// isWorkflow reports whether the registered type name runs workflow runs.
func (e *Engine) isWorkflow(name string) bool {
	e.typesMu.RLock()
	t := e.types[name]
	e.typesMu.RUnlock()
	w, ok := t.(WorkflowJobType)
	return ok && w.IsWorkflow()
}

// Retention says how long terminal jobs of each state are kept (negative:
// forever).
type Retention struct {
	Succeeded, Dead, Expired, Cancelled time.Duration
}

// Config is an engine's configuration. The public package fills in every
// default; the engine takes the values as given.
type Config struct {
	Driver      driver.Driver
	Clock       hclock.Clock
	Logger      *slog.Logger
	WorkerID    string
	IDGenerator func() string

	MaxWorkers int
	// Autoscale, when set, moves the worker slots between its Min and Max
	// (MaxWorkers is then unused).
	Autoscale   *Autoscale
	FetchBatch  int
	AutoRedrive int
	// NoClaimAhead turns claims ahead off (see producer.claimsAhead).
	NoClaimAhead bool

	Visibility        time.Duration
	HeartbeatInterval time.Duration
	PollInterval      time.Duration
	RescueInterval    time.Duration
	WaitPollInterval  time.Duration
	LeaderTTL         time.Duration
	GateRecheck       time.Duration
	Retention         Retention

	DefaultQueue string
	Queues       []string
	Limit        *hoppertype.Limit

	Hooks Hooks
}

// Hooks are the engine's calls into the code around it. Every one is
// optional.
type Hooks struct {
	// OnEvent receives every event.
	OnEvent func(hoppertype.Event)
	// OnError receives non-critical errors.
	OnError func(error, hoppertype.ErrorPhase)
	// Classify decides on failures of types without a classifier.
	Classify hoppertype.Classifier
	// Backpressure says how long a producer waits before its next round;
	// ctx carries what the public package put in it, active is how many
	// attempts run here.
	Backpressure func(ctx context.Context, queue string, active int) time.Duration
	// Accept says whether this process takes a claimed job.
	Accept func(row *hoppertype.JobRow) bool
	// OnOrphanGroup receives a settled group that nobody waited for.
	OnOrphanGroup func(g *hoppertype.GroupRow)
	// CommitContext returns the context an InCommit observer runs under
	// in tx (the public package puts its Commit in it).
	CommitContext func(ctx context.Context, tx driver.Executor) context.Context
	// WorkerInfo returns the worker row's description of this process,
	// given the engine's part of it.
	WorkerInfo func(WorkerReport) []byte
	// StoredSchedule returns the schedule that runs the stored schedule
	// name as def defines it, or an error: ErrScheduleNotHere when this
	// process does not register its target.
	StoredSchedule func(name string, def *driver.ScheduleDef) (*Schedule, error)
	// InsertMiddleware runs store, which inserts rows, inside the public
	// package's insert middleware (for the jobs the engine itself
	// enqueues: schedules' occurrences).
	InsertMiddleware func(ctx context.Context, rows []*hoppertype.JobRow, store func(ctx context.Context) error) error
}

// Engine runs jobs over a store. Make one with New.
type Engine struct {
	cfg Config
	// prog fires at each progress, for Settle; lead when this engine
	// begins or stops leading (LeadershipChanged).
	prog, lead signal
	// completed and failed count the attempts this engine recorded:
	// succeeded, and failed (retried or not).
	completed, failed atomic.Int64
	// base is the store; drv runs its operations (base's Executor, with
	// the InCommit observers once there are any).
	base   driver.Driver
	drv    driver.Executor
	clock  hclock.Clock
	log    *slog.Logger
	worker string
	// sender signs the queue notifications of this engine's inserts, so
	// its own session, which the insert woke already, ignores their echo.
	sender string

	typesMu sync.RWMutex
	types   map[string]JobType

	waiters *waiterHub

	subsMu sync.Mutex
	subs   atomic.Pointer[[]*subscriber]

	hist histWriter

	// outcomes counts finished attempts for Hooks.Backpressure (nil
	// without it).
	outcomes *OutcomeCounts

	// inCommitObs are the InCommit observers (read on every transaction
	// once there are any); afterCommit the AfterCommit ones (fixed at
	// Start). feedNudge wakes the AfterCommit deliverers after a commit.
	inCommitObs atomic.Pointer[[]*Observer]
	afterCommit []*Observer
	feedNudge   chan struct{}

	// schedMu guards the schedules: registered in code (by name), the
	// stored ones run here (by name), the running session's part.
	schedMu   sync.Mutex
	schedules map[string]*Schedule
	stored    map[string]*storedEntry
	sched     *schedRun

	mu sync.Mutex
	s  *session // nil unless started
}

// New makes an engine over cfg.Driver. Every field of cfg must be set
// (the public package's defaults), the hooks excepted.
func New(cfg Config) *Engine {
	e := &Engine{
		cfg:       cfg,
		base:      cfg.Driver,
		drv:       cfg.Driver.Executor(),
		clock:     cfg.Clock,
		log:       cfg.Logger,
		worker:    cfg.WorkerID,
		sender:    cfg.IDGenerator(),
		types:     map[string]JobType{},
		feedNudge: make(chan struct{}, 1),
	}
	e.waiters = newWaiterHub(e)
	if cfg.Hooks.Backpressure != nil {
		e.outcomes = &OutcomeCounts{}
	}
	return e
}

// Driver returns the store.
func (e *Engine) Driver() driver.Driver { return e.base }

// Exec returns the store's operations as the engine makes them: with the
// InCommit observers once there are any. Writes of the engine's own kinds
// go through it, so no observer is bypassed.
func (e *Engine) Exec() driver.Executor { return e.drv }

// WorkerID returns the name this engine uses in leases.
func (e *Engine) WorkerID() string { return e.worker }

// Sender returns the id that signs this engine's queue notifications.
func (e *Engine) Sender() string { return e.sender }

// Now returns the engine clock's time, truncated as the store keeps it.
func (e *Engine) Now() time.Time { return e.now() }

func (e *Engine) now() time.Time { return hclock.Truncate(e.clock.Now()) }

// NewID returns a fresh id.
func (e *Engine) NewID() string { return e.cfg.IDGenerator() }

// Config returns the engine's configuration.
func (e *Engine) Config() *Config { return &e.cfg }

// Outcomes returns the attempt counts (nil without Hooks.Backpressure).
func (e *Engine) Outcomes() *OutcomeCounts { return e.outcomes }

// Register adds job types; a name may be registered once. A started
// engine starts producers for new queues at once.
func (e *Engine) Register(types ...JobType) error {
	e.typesMu.Lock()
	for i, t := range types {
		if _, ok := e.types[t.Name()]; ok || slices.ContainsFunc(types[:i], func(o JobType) bool { return o.Name() == t.Name() }) {
			e.typesMu.Unlock()
			return fmt.Errorf("%w: %q", ErrDuplicateType, strings.TrimPrefix(t.Name(), WorkflowTypePrefix))
		}
	}
	for _, t := range types {
		e.types[t.Name()] = t
	}
	e.typesMu.Unlock()
	if s := e.session(); s != nil {
		s.ensureProducers()
		e.syncStored() // stored schedules of the new types
	}
	return nil
}

// ErrDuplicateType is returned when registering two types of one name.
var ErrDuplicateType = errors.New("hopper: duplicate type name")

// Type returns the registered type of name, nil if none.
func (e *Engine) Type(name string) JobType {
	e.typesMu.RLock()
	defer e.typesMu.RUnlock()
	return e.types[name]
}

func (e *Engine) lookupType(name string) JobType { return e.Type(name) }

// TypeNames returns every registered type name as stored on jobs
// (workflows carry their prefix), sorted: what this engine's producers
// claim.
func (e *Engine) TypeNames() []string {
	e.typesMu.RLock()
	names := make([]string, 0, len(e.types))
	for n := range e.types {
		names = append(names, n)
	}
	e.typesMu.RUnlock()
	slices.Sort(names)
	return names
}

func (e *Engine) claimTypes() []string { return e.TypeNames() }

// Queues returns the queues this engine works: the default one, the
// configured ones, then the types' own.
func (e *Engine) Queues() []string {
	qs := []string{e.cfg.DefaultQueue}
	for _, q := range e.cfg.Queues {
		if !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	e.typesMu.RLock()
	var own []string
	for _, t := range e.types {
		if q := t.Queue(); q != "" && !slices.Contains(qs, q) && !slices.Contains(own, q) {
			own = append(own, q)
		}
	}
	e.typesMu.RUnlock()
	slices.Sort(own)
	return append(qs, own...)
}

func (e *Engine) queues() []string { return e.Queues() }

// anyTypeLimit reports whether a registered type has a Limit of its own.
func (e *Engine) anyTypeLimit() bool {
	e.typesMu.RLock()
	defer e.typesMu.RUnlock()
	for _, t := range e.types {
		if t.Limit() != nil {
			return true
		}
	}
	return false
}

// Start starts the engine's workers and, if this engine wins the
// leadership, the maintenance services. It returns once they run; ctx only
// bounds starting. Start on a started engine does nothing.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s != nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := startSession(ctx, e)
	if err != nil {
		return err
	}
	e.s = s
	return nil
}

// Stop stops the engine's session (see Client.Stop); the engine may be
// started again.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	s := e.s
	e.mu.Unlock()
	if s == nil {
		return nil
	}
	err := s.stop(ctx)
	e.mu.Lock()
	if e.s == s {
		e.s = nil
	}
	e.mu.Unlock()
	e.waiters.close()
	return err
}

// Close ends what outlives a session (the waiters' subscription).
func (e *Engine) Close() { e.waiters.close() }

// Started reports whether the engine's workers run.
func (e *Engine) Started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.s != nil
}

func (e *Engine) session() *session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.s
}

// OnWaitBlock has f called with a job's id each time a wait for it
// (WaitJob), registered and done reading, is about to block: a finish from
// then on wakes it. For tests.
func (e *Engine) OnWaitBlock(f func(id string)) {
	if f == nil {
		e.waiters.onBlock.Store(nil)
		return
	}
	e.waiters.onBlock.Store(&f)
}

// executesHere reports whether an attempt of job id is dispatched to this
// process's running session and its end not yet recorded (see
// session.here).
func (e *Engine) executesHere(id string) bool {
	s := e.session()
	return s != nil && s.executesHere(id)
}

// Session returns the running session, nil unless started.
func (e *Engine) Session() *Session {
	if s := e.session(); s != nil {
		return s.pub
	}
	return nil
}

// WakeQueue tells the local producer of queue (if any) that a job is due
// at t (zero: now).
func (e *Engine) WakeQueue(queue string, at time.Time) { e.wakeQueue(queue, at) }

func (e *Engine) wakeQueue(queue string, at time.Time) {
	e.progressed()
	if s := e.session(); s != nil {
		s.wake(queue, at)
	}
}

// ReportError hands a non-critical error to Hooks.OnError and the log.
func (e *Engine) ReportError(err error, phase hoppertype.ErrorPhase) { e.reportError(err, phase) }

func (e *Engine) reportError(err error, phase hoppertype.ErrorPhase) {
	if err == nil {
		return
	}
	e.log.Warn("hopper: engine error", "category", "system", "phase", string(phase), "err", err)
	if e.cfg.Hooks.OnError == nil {
		return
	}
	defer func() { _ = recover() }()
	e.cfg.Hooks.OnError(err, phase)
}

// LeadershipChanged returns a channel closed when this engine next begins
// or stops leading: IsLeader has changed by then.
func (e *Engine) LeadershipChanged() <-chan struct{} { return e.lead.C() }

// IsLeader reports whether this engine currently runs maintenance.
func (e *Engine) IsLeader() bool {
	s := e.session()
	if s == nil || s.maint == nil {
		return false
	}
	return s.maint.isLeading()
}

// Active returns the rows of the attempts running here.
func (e *Engine) Active() []*hoppertype.JobRow {
	s := e.session()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*hoppertype.JobRow, 0, len(s.active))
	for _, a := range s.active {
		out = append(out, a.row.Clone())
	}
	return out
}

// CancelLocal cancels a job's attempts running in this process, if any.
func (e *Engine) CancelLocal(id string) {
	if s := e.session(); s != nil {
		s.cancelLocal(id)
	}
}
