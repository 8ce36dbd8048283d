package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"

	"github.com/hopper-go/hopper/internal/engine"
)

// DefaultQueue is the queue jobs go to when nothing names another.
const DefaultQueue = "default"

// Unlimited, as Config.MaxWorkers, removes the cap on concurrent jobs.
const Unlimited = -1

// The engine's slots take MaxWorkers as is: the two constants must agree
// (a negative uint constant does not compile).
const (
	_ = uint(Unlimited - engine.Unlimited)
	_ = uint(engine.Unlimited - Unlimited)
)

// Clock is the source of time for everything hopper times: backoff, delays,
// deadlines, leases, polling. Tests replace it (see package hoppertest).
type Clock = hclock.Clock

// Timer is a one-shot timer of a Clock.
type Timer = hclock.Timer

// ErrorPhase says where a non-critical engine error happened.
type ErrorPhase = hoppertype.ErrorPhase

// Error phases reported to Config.OnError.
const (
	// PhaseCommit: recording a result the handler already produced failed.
	// The attempt is not retried by the engine (that could duplicate the
	// work); its lease lapses and the rescuer takes it from there.
	PhaseCommit = hoppertype.PhaseCommit
	// PhaseQueue: claiming, polling or routing jobs failed; the loop backs
	// off and continues.
	PhaseQueue = hoppertype.PhaseQueue
	// PhaseHook: an event hook, a classifier, Config.Backpressure or
	// Config.Accept panicked.
	PhaseHook = hoppertype.PhaseHook
	// PhaseMaintenance: a maintenance service (rescuer, retention, leader
	// election, redrive) failed; it retries on its next round.
	PhaseMaintenance = hoppertype.PhaseMaintenance
	// PhaseSchedule: a schedule's occurrence could not be enqueued (its
	// Job failed, or the store did after retries within the catch-up
	// window); the schedule goes on with the next occurrence.
	PhaseSchedule = hoppertype.PhaseSchedule
	// PhaseObserver: an AfterCommit observer failed on a change (it is
	// retried), or its delivery loop could not read the feed.
	PhaseObserver = hoppertype.PhaseObserver
)

// Retention says how long terminal jobs are kept before deletion. Zero
// fields default to 24h; a negative value keeps jobs of that state forever.
// The leader deletes them (once a minute); a settled fan-out group's row
// goes with the last of its jobs.
type Retention struct {
	Succeeded time.Duration
	Dead      time.Duration
	Expired   time.Duration
	Cancelled time.Duration
}

// Config configures a Client. The zero value of every field means its
// default.
type Config struct {
	// Driver is the store: memdriver for tests, sqlitedriver for one
	// machine, pgdriver for many. Defaults to the SQLite file ./hopper.db,
	// which the client then owns: Close closes it.
	Driver driver.Driver
	// MaxWorkers caps how many jobs this client runs at once (Unlimited for
	// no cap). Defaults to 100.
	MaxWorkers int
	// Autoscale, when set, moves the cap on how many jobs this client runs
	// at once between a minimum and a maximum by its workload (seed 004's
	// autoscaler); MaxWorkers is then unused. Off by default: the cap is
	// MaxWorkers, fixed, as a process sized by its operator expects.
	Autoscale *Autoscale
	// FetchBatch caps how many jobs one claim takes. Defaults to 500. A
	// claim takes the free worker slots up to it; for a queue of short
	// jobs it also claims ahead (see DisableClaimAhead).
	FetchBatch int
	// DisableClaimAhead makes every claim take only free worker slots.
	// By default a queue of short jobs (a claim's jobs return, by the
	// means, in under half the time a claim takes) claims ahead: besides
	// the free slots, a claim takes up to FetchBatch jobs in all, and while
	// no other queue waits for a slot. A job claimed ahead waits in this
	// process for the next slot freed, ahead of every queue's next claim;
	// it is running in the store, leased to this process (its lease is
	// renewed, a cancel or Stop hands it back without using its attempt),
	// and one that has waited a HeartbeatInterval goes back to its queue
	// for another process to take. A claim's cost is mostly per statement
	// and per commit, so short jobs claimed a few hundred at a time cost
	// the store less each (at 100 workers on PostgreSQL, about a third
	// more no-op jobs a second; docs/BENCHMARKS.md). The cost: up to
	// FetchBatch jobs more than MaxWorkers may be leased to the process,
	// and run in it, while another process has slots free. Queues with
	// rate or concurrency limits (Limit) never claim ahead.
	DisableClaimAhead bool
	// Queues lists queues to work besides DefaultQueue and those named by
	// registered types.
	Queues []string
	// DefaultQueue is the queue of jobs whose type and call name none.
	// Defaults to "default".
	DefaultQueue string
	// Retry is the client-wide retry policy (over DefaultRetryPolicy).
	Retry RetryPolicy
	// AttemptTimeout bounds every execution unless a type or call says
	// otherwise. Defaults to none.
	AttemptTimeout time.Duration
	// Classify decides what failed attempts lead to, unless a type has its own.
	Classify Classifier
	// OnEvent receives every lifecycle event of jobs this client enqueues or
	// runs, after the transition commits.
	OnEvent func(Event)
	// InsertMiddleware wrap this client's inserts, in order (see
	// InsertMiddleware).
	InsertMiddleware []InsertMiddleware
	// WorkMiddleware wrap the attempts this client runs, in order, around
	// the types' own (see WorkMiddleware).
	WorkMiddleware []WorkMiddleware
	// StepMiddleware wrap each try of the workflow steps this client runs,
	// in order (see StepMiddleware).
	StepMiddleware []StepMiddleware
	// OnError receives non-critical engine errors.
	OnError func(err error, phase ErrorPhase)
	// Visibility is the lease: a running job whose worker has not heartbeat
	// for this long is rescued. Defaults to 30s.
	Visibility time.Duration
	// HeartbeatInterval is how often leases are renewed. Defaults to
	// Visibility/3.
	HeartbeatInterval time.Duration
	// PollInterval is the fallback poll when no notification arrives.
	// Defaults to 1s.
	PollInterval time.Duration
	// Backpressure, if set, is asked by each queue's producer before every
	// claim round how long to wait first. A positive duration makes the
	// producer wait that long on Clock, deaf to wake-ups, and ask again;
	// zero or less lets it claim. It gates claiming only: enqueueing,
	// running attempts and SkipQueue jobs go on. ctx ends when the client
	// stops and carries the round's BackpressureInfo (queue, running
	// attempts, outcome counts; see BackpressureFromContext). It is called
	// from several goroutines and should be quick. A panic is reported
	// through OnError (PhaseHook) and counts as 0. NewAdaptiveDelay makes
	// one that backs off while attempts fail. Defaults to none: always
	// claim.
	Backpressure func(ctx context.Context) time.Duration
	// Accept, if set, sees each job this client claims from a queue before
	// the job runs, and returning false declines it: the job goes straight
	// back to pending, its attempt not used, for another process (or this
	// one, later) to take. Use it to shard job types across processes;
	// separate queues do the same more cheaply. A producer whose round
	// declined every job it claimed waits PollInterval (on Clock, deaf to
	// wake-ups) before claiming from that queue again, so declining costs
	// a claim per PollInterval, not a busy loop. Accept runs on the
	// producer's goroutine and should be quick. A panic is reported through
	// OnError (PhaseHook) and accepts the job. Jobs of hopper's own types
	// (named "hopper.…") are not offered to it. Defaults to none: accept
	// every job.
	Accept func(info AcceptInfo) bool
	// RescueInterval is how often the leader looks for expired leases.
	// Defaults to 5s.
	RescueInterval time.Duration
	// WaitPollInterval is how often a waiting Handle re-reads the store in
	// case a notification was missed. Defaults to 250ms.
	WaitPollInterval time.Duration
	// LeaderTTL is how long a leadership lasts without renewal. Defaults to 15s.
	LeaderTTL time.Duration
	// AutoRedrive moves up to this many dead jobs back to pending whenever a
	// poll round finds the queues idle (the seeds' redriveCount). Defaults
	// to 0: off.
	AutoRedrive int
	// Retention says how long terminal jobs are kept.
	Retention Retention
	// MaxPayloadBytes caps an encoded input. Defaults to 1 MiB.
	MaxPayloadBytes int
	// Clock replaces the wall clock (tests).
	Clock Clock
	// IDGenerator mints job ids. Defaults to NewID (UUIDv7). Ids must be
	// unique; ids that sort by creation time keep listings in order. They
	// are not checked, so they must keep ValidateID's rule themselves: an
	// id ending as hopper's derived ids do ("x@2", "x.5") could take the
	// name of another run's attempt or child.
	IDGenerator func() string
	// Codec encodes inputs and outputs. Defaults to JSONCodec.
	Codec Codec
	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// WorkerID names this process in leases and attempts. Defaults to
	// host-pid-random.
	WorkerID string
	// WebhookBaseURL builds hook URLs: Hook.URL is this plus the hook's
	// token (for example "http://127.0.0.1:7700/v1/webhooks/"). hopper dev
	// sets it from its address.
	WebhookBaseURL string
	// WorkflowStrategy is the failure strategy of the workflows whose
	// WorkflowOpts set none, when this client runs them (seed 004's
	// world-level default). Defaults to StrategyRetry.
	WorkflowStrategy FailureStrategy
	// OnOrphanGroup is called once across every process sharing the store
	// when a fan-out group settles that nobody awaited: no Handle.Group or
	// WaitGroup was waiting for it, in any process, before it settled. It
	// runs in the process that recorded the settle (set it on every client
	// that runs jobs), after the commit, on the engine's goroutine: keep it
	// quick. A panic is reported through OnError and ignored.
	OnOrphanGroup func(g *GroupValue)
	// Limit bounds the attempts of every type without a limit of its own
	// (TypeOpts.Limit) in this client: how many run at once, in which order
	// waiting ones start (fair across fairness groups, by priority, by
	// age), how fast they start. Jobs waiting for their turn are claimed
	// and hold worker slots, so a Limit caps below MaxWorkers. Defaults to
	// none.
	Limit *Limit
	// GateRecheck is how often a waiting gate looks at its jobs on its own,
	// a safety net behind the transitions that wake it. Defaults to
	// DefaultGateRecheck.
	GateRecheck time.Duration
	// RetryObserverCap is the retry observer's cap on a job's generations
	// (see RetryObserver): 0 means MaxRetryAttempts, a negative value turns
	// the observer off (stuck jobs then wait for a person or a policy of
	// one's own).
	RetryObserverCap int
	// FetchAllowPrivate lets Fetch reach the addresses it refuses by
	// default (ErrFetchForbidden: loopback, private, carrier-grade NAT,
	// link-local, unique-local and every other special-purpose block that
	// is not globally reachable), so a workflow's input cannot point it at
	// the internal network.
	FetchAllowPrivate bool
}

// Client enqueues jobs, runs the jobs of its registered types once started,
// and answers questions about jobs. It is safe for concurrent use.
type Client struct {
	cfg Config
	// eng runs the jobs: the engine behind this API.
	eng   *engine.Engine
	clock Clock
	// stats folds the client's own events (Client.Stats).
	stats *StatsRecorder
	codec Codec
	log   *slog.Logger

	typesMu sync.RWMutex
	// batchers holds the open batches of each batch type (DefineBatch).
	batchers sync.Map
	// batchJoined, when set (by tests), is called each time a job joins a
	// batch, with the batch type and the batch's size then.
	batchJoined atomic.Pointer[func(name string, n int)]
	// types are the registered types with their codecs (the engine has
	// them too, bound to this client).
	types map[string]typeCore

	fetchOnce sync.Once
	fetchHTTP *http.Client

	retryObs *RetryObserver

	ownsDriver bool
}

// New makes a client over cfg.Driver. It does not start workers; Start does.
func New(cfg Config) (*Client, error) {
	owned := false
	if cfg.Driver == nil {
		d, err := sqlitedriver.Open(DefaultDatabase, nil)
		if err != nil {
			return nil, fmt.Errorf("hopper: open the default database %s: %w", DefaultDatabase, err)
		}
		cfg.Driver, owned = d, true
	}
	c, err := newClient(cfg)
	if err != nil {
		if owned {
			_ = cfg.Driver.Close()
		}
		return nil, err
	}
	c.ownsDriver = owned
	return c, nil
}

// DefaultDatabase is the SQLite file New opens when Config.Driver is nil.
const DefaultDatabase = "hopper.db"

// Close stops the client (as Stop does, waiting until ctx is done) and
// closes its store if the client opened it (Config.Driver was nil). A client
// over a driver you passed in leaves that driver open.
func (c *Client) Close(ctx context.Context) error {
	err := c.Stop(ctx)
	c.eng.Close()
	if c.ownsDriver {
		if cerr := c.eng.Driver().Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func newClient(cfg Config) (*Client, error) {
	if cfg.MaxWorkers == 0 {
		cfg.MaxWorkers = 100
	}
	if cfg.Autoscale != nil {
		a, err := cfg.Autoscale.withDefaults()
		if err != nil {
			return nil, err
		}
		cfg.Autoscale = &a
	}
	if cfg.MaxWorkers < Unlimited {
		return nil, fmt.Errorf("hopper: MaxWorkers %d (use a positive number or Unlimited)", cfg.MaxWorkers)
	}
	if cfg.FetchBatch <= 0 {
		cfg.FetchBatch = 500
	}
	if cfg.DefaultQueue == "" {
		cfg.DefaultQueue = DefaultQueue
	}
	if err := checkText("Config.DefaultQueue", cfg.DefaultQueue); err != nil {
		return nil, fmt.Errorf("hopper: %w", err)
	}
	if err := checkTexts("a name in Config.Queues", cfg.Queues); err != nil {
		return nil, fmt.Errorf("hopper: %w", err)
	}
	if err := checkText("Config.WorkerID", cfg.WorkerID); err != nil {
		return nil, fmt.Errorf("hopper: %w", err)
	}
	if err := cfg.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("hopper: Config.Retry: %w", err)
	}
	if err := validateLimit(cfg.Limit); err != nil {
		return nil, fmt.Errorf("hopper: Config.Limit: %w", err)
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&cfg.Visibility, 30*time.Second)
	setDur(&cfg.HeartbeatInterval, cfg.Visibility/3)
	setDur(&cfg.PollInterval, time.Second)
	setDur(&cfg.RescueInterval, 5*time.Second)
	setDur(&cfg.WaitPollInterval, 250*time.Millisecond)
	setDur(&cfg.LeaderTTL, 15*time.Second)
	setDur(&cfg.GateRecheck, DefaultGateRecheck)
	for _, d := range []*time.Duration{&cfg.Retention.Succeeded, &cfg.Retention.Dead, &cfg.Retention.Expired, &cfg.Retention.Cancelled} {
		if *d == 0 {
			*d = 24 * time.Hour
		}
	}
	if cfg.WorkflowStrategy != "" && !cfg.WorkflowStrategy.valid() {
		return nil, fmt.Errorf("%w: Config.WorkflowStrategy %q is not a failure strategy", ErrInvalidInput, cfg.WorkflowStrategy)
	}
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = 1 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = hclock.Real{}
	}
	if cfg.IDGenerator == nil {
		cfg.IDGenerator = NewID
	}
	if cfg.Codec == nil {
		cfg.Codec = JSONCodec{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), NewID()[24:])
	}
	c := &Client{
		cfg:   cfg,
		clock: cfg.Clock,
		codec: cfg.Codec,
		log:   cfg.Logger,
		types: map[string]typeCore{gateTypeName: gateType.core()},
	}
	c.eng = engine.New(c.engineConfig())
	c.stats = NewStatsRecorder(cfg.Clock)
	c.eng.Subscribe(c.stats.Observe)
	if err := c.eng.Register(c.bind(gateType.core())); err != nil {
		return nil, err
	}
	if cfg.RetryObserverCap >= 0 {
		max := cfg.RetryObserverCap
		if max == 0 {
			max = MaxRetryAttempts
		}
		r, err := newRetryObserver(c, max)
		if err != nil {
			return nil, err
		}
		c.retryObs = r
	}
	return c, nil
}

// Driver returns the client's store.
func (c *Client) Driver() driver.Driver { return c.eng.Driver() }

// baseDriver is the store (its operations through c.store(), which adds
// the InCommit observers when there are any).
func (c *Client) baseDriver() driver.Driver { return c.eng.Driver() }

// store returns the store's operations as the engine makes them: with the
// InCommit observers once there are any.
func (c *Client) store() driver.Executor { return c.eng.Exec() }

// WorkerID returns the name this client uses in leases.
func (c *Client) WorkerID() string { return c.eng.WorkerID() }

// Register adds job types and workflows this client runs. They may be
// registered before or after Start; a name may be registered once (else
// ErrDuplicateType), and a name (or code version) with a NUL byte or
// invalid UTF-8 is refused with ErrInvalidInput.
func (c *Client) Register(types ...AnyType) error {
	c.typesMu.Lock()
	for _, t := range types {
		if t == nil {
			c.typesMu.Unlock()
			return errors.New("hopper: Register(nil)")
		}
		if err := checkText(fmt.Sprintf("type name %q", t.Name()), t.core().name()); err != nil {
			c.typesMu.Unlock()
			return err
		}
		if w, ok := t.core().(workflowCore); ok {
			if err := checkText(fmt.Sprintf("code version of workflow %q", t.Name()), w.codeVersion()); err != nil {
				c.typesMu.Unlock()
				return err
			}
		}
		if _, ok := c.types[t.core().name()]; ok {
			c.typesMu.Unlock()
			return fmt.Errorf("%w: %q", ErrDuplicateType, t.Name())
		}
		if err := validateLimit(t.core().limit()); err != nil {
			c.typesMu.Unlock()
			return fmt.Errorf("hopper: type %q: %w", t.Name(), err)
		}
	}
	bound := make([]engine.JobType, len(types))
	for i, t := range types {
		bound[i] = c.bind(t.core())
		c.types[t.core().name()] = t.core()
	}
	c.typesMu.Unlock()
	// Not under typesMu: a started engine reads the stored schedules of
	// the new types, which looks them up here.
	if err := c.eng.Register(bound...); err != nil {
		c.typesMu.Lock()
		for _, t := range types {
			delete(c.types, t.core().name())
		}
		c.typesMu.Unlock()
		return err
	}
	return nil
}

// Types returns the names of the registered job types, sorted.
func (c *Client) Types() []string {
	return c.registered(false)
}

// Workflows returns the names of the registered workflows, sorted.
func (c *Client) Workflows() []string {
	return c.registered(true)
}

func (c *Client) registered(workflows bool) []string {
	c.typesMu.RLock()
	defer c.typesMu.RUnlock()
	names := make([]string, 0, len(c.types))
	for n := range c.types {
		if n == gateTypeName {
			continue // built in
		}
		if w, ok := strings.CutPrefix(n, workflowTypePrefix); ok == workflows {
			names = append(names, w)
		}
	}
	slices.Sort(names)
	return names
}

func (c *Client) lookupType(name string) typeCore {
	c.typesMu.RLock()
	defer c.typesMu.RUnlock()
	return c.types[name]
}

// queues returns the queues this client works.
func (c *Client) queues() []string { return c.eng.Queues() }

// Start starts the client's workers and, if this client wins the leadership,
// the maintenance services. It returns once they run; ctx only bounds
// starting. Start on a started client does nothing.
func (c *Client) Start(ctx context.Context) error { return c.eng.Start(ctx) }

// Stop stops taking new jobs, waits for running attempts to finish until ctx
// is done, then cancels the ones still running (they go back to pending
// without using an attempt), records every outcome and stops the maintenance
// services. It returns ctx's error if it had to cancel attempts. Stop on a
// stopped client does nothing; the client may be started again.
//
// Stop returns by ctx's deadline plus a grace of 2 s even when the store
// stops answering, provided the handlers return once their context is
// cancelled: what it could not write then is reported to Config.OnError
// and left to the rescuer (an outcome not recorded, say, leaves its job's
// lease to expire, and the job runs again). See "Stopping" in
// docs/operations.md.
func (c *Client) Stop(ctx context.Context) error { return c.eng.Stop(ctx) }

// Started reports whether the client's workers run.
func (c *Client) Started() bool { return c.eng.Started() }

func (c *Client) now() time.Time { return c.eng.Now() }

func (c *Client) newID() string { return c.cfg.IDGenerator() }

// wakeQueue tells the local producer of queue (if any) that a job is due at
// t (zero: now).
func (c *Client) wakeQueue(queue string, at time.Time) { c.eng.WakeQueue(queue, at) }

// reportError hands a non-critical error to Config.OnError and the log.
func (c *Client) reportError(err error, phase ErrorPhase) { c.eng.ReportError(err, phase) }

// Subscribe registers fn to receive every event this client emits, as
// Config.OnEvent does; the returned function removes it. The same rules
// apply: fn runs on the engine's goroutines and must be quick.
func (c *Client) Subscribe(fn func(Event)) (unsubscribe func()) { return c.eng.Subscribe(fn) }

// emit delivers an event as the engine's own are.
func (c *Client) emit(e Event) { c.eng.Emit(e) }

// IsLeader reports whether this client currently runs maintenance.
func (c *Client) IsLeader() bool { return c.eng.IsLeader() }

// engineConfig is the engine's configuration: cfg's values (defaults
// applied) and the hooks that carry the public API's types.
func (c *Client) engineConfig() engine.Config {
	cfg := c.cfg
	h := engine.Hooks{
		OnEvent:  cfg.OnEvent,
		OnError:  cfg.OnError,
		Classify: cfg.Classify,
		CommitContext: func(ctx context.Context, tx driver.Executor) context.Context {
			return context.WithValue(ctx, commitKey{}, &Commit{c: c, tx: tx})
		},
		WorkerInfo:       c.workerInfo,
		StoredSchedule:   c.storedScheduleEntry,
		InsertMiddleware: c.withInsertMiddleware,
	}
	if bp := cfg.Backpressure; bp != nil {
		h.Backpressure = func(ctx context.Context, queue string, active int) time.Duration {
			info := BackpressureInfo{Queue: queue, Active: active, outcomes: c.eng.Outcomes()}
			return bp(context.WithValue(ctx, backpressureKey{}, info))
		}
	}
	if accept := cfg.Accept; accept != nil {
		h.Accept = func(row *hoppertype.JobRow) bool {
			return accept(AcceptInfo{ID: row.ID, Type: row.Type, Queue: row.Queue, Attempt: row.Attempt,
				Priority: row.Priority, Metadata: maps.Clone(row.Metadata)})
		}
	}
	if orphan := cfg.OnOrphanGroup; orphan != nil {
		h.OnOrphanGroup = func(g *hoppertype.GroupRow) {
			orphan(&GroupValue{ID: g.ID, Value: g.Value, Set: g.ValueSet, Settled: true, codec: c.codec})
		}
	}
	return engine.Config{
		Driver:            cfg.Driver,
		Clock:             cfg.Clock,
		Logger:            cfg.Logger,
		WorkerID:          cfg.WorkerID,
		IDGenerator:       cfg.IDGenerator,
		MaxWorkers:        cfg.MaxWorkers,
		Autoscale:         cfg.Autoscale.engine(),
		FetchBatch:        cfg.FetchBatch,
		NoClaimAhead:      cfg.DisableClaimAhead,
		AutoRedrive:       cfg.AutoRedrive,
		Visibility:        cfg.Visibility,
		HeartbeatInterval: cfg.HeartbeatInterval,
		PollInterval:      cfg.PollInterval,
		RescueInterval:    cfg.RescueInterval,
		WaitPollInterval:  cfg.WaitPollInterval,
		LeaderTTL:         cfg.LeaderTTL,
		GateRecheck:       cfg.GateRecheck,
		Retention:         engine.Retention(cfg.Retention),
		DefaultQueue:      cfg.DefaultQueue,
		Queues:            cfg.Queues,
		Limit:             cfg.Limit,
		Hooks:             h,
	}
}

// workerInfo is this client's worker row, as the engine reports it.
func (c *Client) workerInfo(r engine.WorkerReport) []byte {
	host, _ := os.Hostname()
	info := WorkerInfo{Host: host, PID: os.Getpid(), Queues: c.queues(), Types: c.Types(), Workflows: c.Workflows(),
		Schedules: c.runningSchedules(), Status: r.Status, MaxWorkers: c.cfg.MaxWorkers, Slots: r.Slots, Active: r.Active,
		Jobs: r.Jobs, Runs: r.Runs, Completed: r.Completed, Failed: r.Failed, Leader: r.Leader, Scalings: r.Scalings}
	if a := c.cfg.Autoscale; a != nil {
		info.MinWorkers, info.MaxWorkers = a.Min, a.Max
	}
	b, _ := json.Marshal(info)
	return b
}
