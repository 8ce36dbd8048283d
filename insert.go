package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
)

// InsertOpts are per-instance job options. A nil *InsertOpts is valid and
// means "the defaults". Zero fields inherit from the next layer down: the
// type's Options(input), the type's constants (TypeOpts), the client's
// defaults (Config). Options are stored with the job, so whichever worker
// runs it applies the same policy.
type InsertOpts struct {
	// ID is the job's id; empty mints one (Config.IDGenerator). Minting ids
	// before enqueue lets a gate refer to jobs enqueued beside it. An id
	// given here must keep ValidateID's rule, or the enqueue is refused
	// with ErrInvalidInput and nothing is stored. An id
	// that a stored job has already makes the enqueue of a single job
	// idempotent when that job has the same type and input: the handle is
	// the stored job's and Handle.Deduplicated reports it; with another
	// type or input it is an error matching ErrDuplicateID (and so is a
	// taken id among several jobs enqueued together).
	ID string
	// Delay postpones the first attempt. Must not be negative.
	Delay time.Duration
	// RunAt is the earliest start, absolute; it wins over Delay.
	RunAt time.Time
	// Priority: higher runs first (the reverse of River's convention).
	Priority int
	// Queue the job goes to.
	Queue string
	// Group is the fairness label read by fair limiters. It is not the
	// fan-out group, which hopper assigns (Handle.GroupID).
	Group string
	// Retry overrides fields of the retry policy.
	Retry RetryPolicy
	// Deadline: the job must start and finish by then, or it expires without
	// further attempts. It wins over Timeout.
	Deadline time.Time
	// Timeout is a relative deadline: Deadline = enqueue time + Timeout.
	Timeout time.Duration
	// AttemptTimeout bounds one execution.
	AttemptTimeout time.Duration
	// UniqueKey makes the enqueue idempotent per type: while a job of the
	// same type and key is not terminal, enqueueing again returns that job
	// (Handle.Deduplicated reports it) and stores nothing new.
	UniqueKey string
	// Metadata is stored with the job; keys set here override the type's.
	Metadata map[string]string
	// ConcurrencyKey and ConcurrencyLimit cap how many jobs with the same
	// key run at once across every process sharing the store — at most 2
	// jobs of "customer:42", say. The store enforces it when it hands out
	// jobs: a job whose key is at its limit waits (pending) and the claim
	// moves on to other jobs. Jobs of one key should agree on the limit;
	// each job is held to its own. Both are set or neither.
	ConcurrencyKey   string
	ConcurrencyLimit int
	// SkipQueue runs this job's first attempt in the enqueuing process at
	// once, as TypeOpts.SkipQueue does for every job of a type (seed 002's
	// per-instance skipQueue): recorded as running under a lease, so a
	// crash or a failure retries it durably. It applies only when the
	// enqueuing client is started, runs the type, and the job is due now
	// with no unique key, concurrency key or limiter; otherwise the job
	// goes through the queue as usual.
	SkipQueue bool
}

// validate reports options that make no sense.
func (o *InsertOpts) validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.Delay < 0:
		return fmt.Errorf("%w: negative delay %v", ErrInvalidInput, o.Delay)
	case o.Timeout < 0:
		return fmt.Errorf("%w: negative timeout %v", ErrInvalidInput, o.Timeout)
	case o.AttemptTimeout < 0:
		return fmt.Errorf("%w: negative attempt timeout %v", ErrInvalidInput, o.AttemptTimeout)
	case len(o.Queue) > 255 || strings.ContainsAny(o.Queue, ",\x00"):
		return fmt.Errorf("%w: queue name %q (at most 255 bytes, no commas)", ErrInvalidInput, o.Queue)
	case len(o.UniqueKey) > 1024:
		return fmt.Errorf("%w: unique key longer than 1024 bytes", ErrInvalidInput)
	case len(o.ConcurrencyKey) > 1024:
		return fmt.Errorf("%w: concurrency key longer than 1024 bytes", ErrInvalidInput)
	case o.ConcurrencyLimit < 0 || o.ConcurrencyLimit > 1<<30:
		return fmt.Errorf("%w: concurrency limit %d", ErrInvalidInput, o.ConcurrencyLimit)
	case (o.ConcurrencyKey == "") != (o.ConcurrencyLimit == 0):
		return fmt.Errorf("%w: a concurrency key needs a limit (and a limit a key)", ErrInvalidInput)
	}
	if err := checkPriority(o.Priority); err != nil {
		return err
	}
	if err := checkTime("run at", o.RunAt); err != nil {
		return err
	}
	if err := checkTime("deadline", o.Deadline); err != nil {
		return err
	}
	return o.Retry.Validate()
}

// overlay applies the non-zero fields of o onto r.
func (r *InsertOpts) overlay(o *InsertOpts) {
	if o == nil {
		return
	}
	if o.ID != "" {
		r.ID = o.ID
	}
	if o.Delay != 0 {
		r.Delay = o.Delay
	}
	if !o.RunAt.IsZero() {
		r.RunAt = o.RunAt
	}
	if o.Priority != 0 {
		r.Priority = o.Priority
	}
	if o.Queue != "" {
		r.Queue = o.Queue
	}
	if o.Group != "" {
		r.Group = o.Group
	}
	r.Retry = r.Retry.merge(o.Retry)
	if !o.Deadline.IsZero() {
		r.Deadline = o.Deadline
	}
	if o.Timeout != 0 {
		r.Timeout = o.Timeout
	}
	if o.AttemptTimeout != 0 {
		r.AttemptTimeout = o.AttemptTimeout
	}
	if o.UniqueKey != "" {
		r.UniqueKey = o.UniqueKey
	}
	if o.ConcurrencyKey != "" {
		r.ConcurrencyKey, r.ConcurrencyLimit = o.ConcurrencyKey, o.ConcurrencyLimit
	}
	if o.SkipQueue {
		r.SkipQueue = true
	}
	if len(o.Metadata) > 0 {
		if r.Metadata == nil {
			r.Metadata = map[string]string{}
		}
		maps.Copy(r.Metadata, o.Metadata)
	}
}

// JobSpec is a job built but not yet enqueued: a type, an input and options,
// with its id minted at build time (so other jobs and gates can refer to it
// before it is stored). Make one with Type.Job; enqueue it with
// Client.EnqueueMany.
type JobSpec struct {
	t    typeCore
	in   any
	opts InsertOpts
	id   string
	err  error
	// gate is set on a spec made by Gate.
	gate *gateSpec
	// derivedID is set when opts.ID was made by hopper from another id (an
	// activity's, a child run's): it is not held to ValidateID.
	derivedID bool
}

// Job builds a JobSpec of this type; opts may be nil.
func (t *Type[I, O]) Job(in I, opts *InsertOpts) *JobSpec {
	s := &JobSpec{t: t.core(), in: in}
	if opts != nil {
		s.opts = *opts
		s.opts.Metadata = maps.Clone(opts.Metadata)
	}
	s.id = s.opts.ID
	return s
}

// ID returns the id the job will have. Unless InsertOpts.ID named one, the
// id is minted by the client's Config.IDGenerator at enqueue — or here, by
// NewID, when ID is asked before the job is enqueued.
func (s *JobSpec) ID() string {
	if s.id == "" {
		s.id = NewID()
	}
	return s.id
}

// Type returns the job's type name.
func (s *JobSpec) Type() string { return s.t.name() }

// Enqueue stores a job of type t with input in on c's store and returns its
// handle; opts may be nil.
func (t *Type[I, O]) Enqueue(ctx context.Context, c *Client, in I, opts *InsertOpts) (*Handle[O], error) {
	hs, err := t.EnqueueMany(ctx, c, []I{in}, opts)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// EnqueueMany stores one job per input, all in one transaction, with the
// same opts (an opts.ID applies only when there is a single input).
func (t *Type[I, O]) EnqueueMany(ctx context.Context, c *Client, ins []I, opts *InsertOpts) ([]*Handle[O], error) {
	if opts != nil && opts.ID != "" && len(ins) > 1 {
		return nil, fmt.Errorf("%w: InsertOpts.ID with %d inputs", ErrInvalidInput, len(ins))
	}
	specs := make([]*JobSpec, len(ins))
	for i, in := range ins {
		specs[i] = t.Job(in, opts)
	}
	res, err := c.insert(ctx, nil, specs)
	if err != nil {
		return nil, err
	}
	return typedHandles[O](c, t.core(), res), nil
}

// EnqueueTx stores a job through the caller's own database transaction, so
// the job exists if and only if tx commits. tx must be a transaction of the
// client's driver kind (*sql.Tx for SQLite; pgx.Tx, or *sql.Tx opened
// through pgx's database/sql driver, for PostgreSQL). Workers notice the job at their next poll after the commit.
// The InCommit observers see the job inside tx; when one vetoes it, the
// call fails with an error matching ErrVetoed and hopper's writes are
// undone (a savepoint of tx), leaving tx usable.
func (t *Type[I, O]) EnqueueTx(ctx context.Context, c *Client, tx any, in I, opts *InsertOpts) (*Handle[O], error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: EnqueueTx with a nil transaction", ErrInvalidInput)
	}
	res, err := c.insert(ctx, tx, []*JobSpec{t.Job(in, opts)})
	if err != nil {
		return nil, err
	}
	return typedHandles[O](c, t.core(), res)[0], nil
}

// EnqueueName stores a job by type name with JSON input, for callers that do
// not link the type (the HTTP API, the CLI, other services). The type must be
// registered with c. The input is decoded strictly into the type's input
// (unknown fields and trailing data are refused) before anything is stored.
func (c *Client) EnqueueName(ctx context.Context, name string, input json.RawMessage, opts *InsertOpts) (*Handle[json.RawMessage], error) {
	spec, err := c.NameJob(name, input, opts)
	if err != nil {
		return nil, err
	}
	hs, err := c.EnqueueMany(ctx, spec)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// NameJob builds a JobSpec by type name with JSON input, decoding the input
// strictly; the type must be registered with c.
func (c *Client) NameJob(name string, input json.RawMessage, opts *InsertOpts) (*JobSpec, error) {
	if err := enqueueableName(name); err != nil {
		return nil, err
	}
	t := c.lookupType(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %q is not registered with this client (registered: %s)", ErrUnknownType, name, listOrNone(c.Types()))
	}
	if len(input) > c.cfg.MaxPayloadBytes {
		return nil, c.tooLarge("input", len(input))
	}
	in, err := t.decodeJSON(input)
	if err != nil {
		return nil, err
	}
	s := &JobSpec{t: t, in: in}
	if opts != nil {
		s.opts = *opts
		s.opts.Metadata = maps.Clone(opts.Metadata)
	}
	s.id = s.opts.ID
	return s, nil
}

// enqueueableName refuses the names of the job types hopper runs for itself:
// a workflow's runs ("workflow:<name>") start with StartName, and hopper's
// own types ("hopper.…") are made by the calls that need them.
func enqueueableName(name string) error {
	switch {
	case strings.HasPrefix(name, workflowTypePrefix):
		wf := strings.TrimPrefix(name, workflowTypePrefix)
		return fmt.Errorf("%w: %q is the job type that runs workflow %q: start a run of it instead (Client.StartName, POST /v1/runs, hopper runs start)", ErrInvalidInput, name, wf)
	case strings.HasPrefix(name, engine.BuiltinTypePrefix):
		return fmt.Errorf("%w: %q is one of hopper's own job types and cannot be enqueued by name", ErrInvalidInput, name)
	}
	return nil
}

// EnqueueMany stores the given jobs, of any types, in one transaction and
// returns their handles in order. Results come back as raw encoded values;
// use a typed Enqueue for typed results.
func (c *Client) EnqueueMany(ctx context.Context, specs ...*JobSpec) ([]*Handle[json.RawMessage], error) {
	res, err := c.insert(ctx, nil, specs)
	if err != nil {
		return nil, err
	}
	hs := make([]*Handle[json.RawMessage], len(res))
	for i, r := range res {
		hs[i] = newHandle[json.RawMessage](c, r, rawDecoder)
	}
	return hs, nil
}

func rawDecoder(b []byte) (json.RawMessage, error) { return json.RawMessage(b), nil }

func typedHandles[O any](c *Client, t typeCore, res []driver.JobInsertResult) []*Handle[O] {
	codec := t.codec(c)
	dec := func(b []byte) (O, error) {
		var v O
		if isNoValue[O]() || len(b) == 0 {
			return v, nil
		}
		err := codec.Unmarshal(b, &v)
		return v, err
	}
	hs := make([]*Handle[O], len(res))
	for i, r := range res {
		hs[i] = newHandle(c, r, dec)
	}
	return hs
}

// buildRow resolves a spec's options and forms the row to store.
func (c *Client) buildRow(s *JobSpec, now time.Time) (*hoppertype.JobRow, error) {
	if s == nil || s.t == nil {
		return nil, fmt.Errorf("%w: nil job spec", ErrInvalidInput)
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.gate != nil {
		return c.buildGateRow(s, now)
	}
	if err := s.opts.validate(); err != nil {
		return nil, err
	}
	if s.opts.ID != "" && !s.derivedID {
		if err := ValidateID(s.opts.ID); err != nil {
			return nil, err
		}
	}
	t := s.t
	o := InsertOpts{Queue: c.cfg.DefaultQueue, Retry: c.cfg.Retry, AttemptTimeout: c.cfg.AttemptTimeout}
	b := t.base(c)
	o.overlay(&b)
	if comp := t.computed(s.in); comp != nil {
		if err := comp.validate(); err != nil {
			return nil, fmt.Errorf("computed options of %q: %w", t.name(), err)
		}
		o.overlay(comp)
	}
	o.overlay(&s.opts)
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}

	input, err := t.encodeInput(c, s.in)
	if err != nil {
		return nil, err
	}
	if len(input) > c.cfg.MaxPayloadBytes {
		return nil, c.tooLarge("input", len(input))
	}
	runAt := now.Add(o.Delay)
	if !o.RunAt.IsZero() {
		runAt = hclock.Truncate(o.RunAt)
	}
	deadline := time.Time{}
	if o.Timeout > 0 {
		deadline = now.Add(o.Timeout)
	}
	if !o.Deadline.IsZero() {
		deadline = hclock.Truncate(o.Deadline)
	}
	state := hoppertype.JobStatePending
	if runAt.After(now) {
		state = hoppertype.JobStateScheduled
	}
	if s.id == "" {
		s.id = c.newID()
	}
	id := s.id
	row := &hoppertype.JobRow{
		ID:               id,
		Type:             t.name(),
		Queue:            o.Queue,
		State:            state,
		Priority:         o.Priority,
		Input:            input,
		GroupID:          id,
		FairKey:          o.Group,
		UniqueKey:        o.UniqueKey,
		ConcurrencyKey:   o.ConcurrencyKey,
		ConcurrencyLimit: o.ConcurrencyLimit,
		Metadata:         o.Metadata,
		Retry:            o.Retry.stored(),
		AttemptTimeout:   o.AttemptTimeout,
		Deadline:         deadline,
		QueuedAt:         now,
		RunAt:            runAt,
	}
	if err := checkRow(row); err != nil {
		return nil, err
	}
	return row, nil
}

// insert builds rows for specs and has the engine store them in one
// transaction (the caller's tx when given).
func (c *Client) insert(ctx context.Context, tx any, specs []*JobSpec) ([]driver.JobInsertResult, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	now := c.now()
	rows := make([]*hoppertype.JobRow, len(specs))
	seen := make(map[string]struct{}, len(specs))
	for i, s := range specs {
		row, err := c.buildRow(s, now)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[row.ID]; dup {
			return nil, fmt.Errorf("%w: id %q given twice", ErrInvalidInput, row.ID)
		}
		seen[row.ID] = struct{}{}
		rows[i] = row
	}
	var res []driver.JobInsertResult
	err := c.withInsertMiddleware(ctx, rows, func(ctx context.Context) error {
		var err error
		res, err = c.eng.Insert(ctx, &engine.InsertParams{
			Rows:       rows,
			Tx:         tx,
			Skip:       c.skipQueueRows(specs, rows, now),
			ExplicitID: len(specs) == 1 && specs[0].opts.ID != "",
		})
		return err
	})
	return res, err
}

// skipQueueRows marks the SkipQueue jobs among rows that this client can
// run now as inserted already claimed, and returns their ids.
func (c *Client) skipQueueRows(specs []*JobSpec, rows []*hoppertype.JobRow, now time.Time) map[string]bool {
	want := make([]bool, len(specs))
	any := false
	for i, s := range specs {
		want[i] = s.t.skipQueue() || s.opts.SkipQueue
		any = any || want[i]
	}
	if !any {
		return nil
	}
	return c.eng.SkipQueueRows(rows, want, now)
}
