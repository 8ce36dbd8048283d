package hopper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
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
	case strings.HasPrefix(name, builtinTypePrefix):
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

// insert builds rows for specs and stores them in one transaction (the
// caller's tx when given), then wakes workers and emits queued events.
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
	skip := c.skipQueueRows(specs, rows, now)

	var res []driver.JobInsertResult
	params := &driver.JobInsertManyParams{Jobs: rows}
	var err error
	notify := false // the queue notifications are still to send
	if tx != nil {
		for _, r := range rows {
			if r.Type == gateTypeName {
				return nil, fmt.Errorf("%w: a gate cannot be enqueued through a caller's transaction (enqueue it with EnqueueMany)", ErrInvalidInput)
			}
		}
		ti, ok := c.baseDriver().(driver.TxInserter)
		if !ok {
			return nil, fmt.Errorf("%w: the %s driver has no transactional enqueue", driver.ErrNotImplemented, c.base.Name())
		}
		res, err = ti.JobInsertManyTx(ctx, tx, params)
	} else if !slices.ContainsFunc(rows, func(r *hoppertype.JobRow) bool { return r.Type == gateTypeName }) {
		// One atomic call: no transaction to open and commit around it.
		// The notifications follow the commit and this client's own
		// wake-ups (below).
		res, err = c.drv.JobInsertMany(ctx, params)
		notify = true
	} else {
		err = c.drv.InTx(ctx, func(ctx context.Context, dtx driver.Executor) error {
			var err error
			res, err = c.insertIn(ctx, dtx, params)
			return err
		})
	}
	if errors.Is(err, ErrDuplicateID) {
		res, err = c.duplicateInsert(ctx, tx, specs, rows)
		notify = false
	}
	if err != nil {
		return nil, fmt.Errorf("hopper: enqueue: %w", err)
	}
	c.afterInsert(res, skip)
	if notify {
		c.notifyAfterInsert(ctx, res)
	}
	return res, nil
}

// duplicateInsert answers an insert that the store refused because an id
// was taken (through tx, the caller's transaction, when given). One job
// with an explicit id whose stored job has the same type and input is an
// idempotent repeat: its result is the stored job, marked Existing (a
// client retrying an enqueue whose reply it lost gets the same job). Any
// other case is an error matching ErrDuplicateID, in hopper's words (the
// store's are left out). When the stored job cannot be read through tx (a
// PostgreSQL transaction that a concurrent insert of the id aborted), the
// error is ErrDuplicateID too.
func (c *Client) duplicateInsert(ctx context.Context, tx any, specs []*JobSpec, rows []*hoppertype.JobRow) ([]driver.JobInsertResult, error) {
	if len(specs) != 1 || specs[0].opts.ID == "" {
		return nil, fmt.Errorf("%w: a job id given is taken", ErrDuplicateID)
	}
	row := rows[0]
	var have *hoppertype.JobRow
	var err error
	if tx != nil {
		have, err = c.baseDriver().(driver.TxInserter).JobGetTx(ctx, tx, row.ID)
	} else {
		have, err = c.drv.JobGet(ctx, row.ID)
	}
	switch {
	case err != nil:
		// Deleted since, or unreadable through an aborted transaction.
		return nil, fmt.Errorf("%w: job %q exists", ErrDuplicateID, row.ID)
	case have.Type != row.Type:
		return nil, fmt.Errorf("%w: job %q exists with type %q, not %q", ErrDuplicateID, row.ID, have.Type, row.Type)
	case !bytes.Equal(have.Input, row.Input):
		return nil, fmt.Errorf("%w: job %q exists with another input", ErrDuplicateID, row.ID)
	}
	return []driver.JobInsertResult{{Job: have, Existing: true}}, nil
}

// insertIn stores the jobs of p in tx with their gates, and the wake-ups of
// the queues that received due jobs.
func (c *Client) insertIn(ctx context.Context, tx driver.Executor, p *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	res, err := tx.JobInsertMany(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := c.insertGates(ctx, tx, res); err != nil {
		return nil, err
	}
	return res, notifyQueues(ctx, tx, res)
}

// notifyAfterInsert announces the queues that received due jobs, after the
// insert committed and this client woke its own workers. Each payload is
// signed with the client's sender id (queue,sender): its own runtime skips
// the echo, which would only make it claim again and find nothing. A
// notification is a hint (listeners also poll), so a failure to send one
// does not fail the enqueue; it is reported. The caller's ctx ending does
// not cut it (the jobs are stored already); a poll interval does.
func (c *Client) notifyAfterInsert(ctx context.Context, res []driver.JobInsertResult) {
	queues := pendingQueues(res)
	if len(queues) == 0 {
		return
	}
	ctx, cancel := afterCommit(ctx, c.cfg.PollInterval)
	defer cancel()
	for _, q := range queues {
		if err := c.drv.Notify(ctx, driver.TopicJobAvailable, q+","+c.sender); err != nil {
			c.reportError(fmt.Errorf("announce queue %q: %w", q, err), PhaseQueue)
			return
		}
	}
}

// notifyQueues announces the queues that received due jobs.
func notifyQueues(ctx context.Context, tx driver.Executor, res []driver.JobInsertResult) error {
	return notifyQueueNames(ctx, tx, pendingQueues(res))
}

// pendingQueues returns, sorted and once each, the queues of the jobs an
// insert stored as pending.
func pendingQueues(res []driver.JobInsertResult) []string {
	var queues []string
	for _, r := range res {
		if !r.Existing && r.Job.State == hoppertype.JobStatePending {
			queues = append(queues, r.Job.Queue)
		}
	}
	slices.Sort(queues)
	return slices.Compact(queues)
}

// notifyQueueNames announces, once each, that the queues have due jobs.
func notifyQueueNames(ctx context.Context, tx driver.Executor, queues []string) error {
	slices.Sort(queues)
	for _, q := range slices.Compact(queues) {
		if err := tx.Notify(ctx, driver.TopicJobAvailable, q); err != nil {
			return err
		}
	}
	return nil
}

// afterInsert runs after the insert committed: local wake-ups, events, and
// the in-process first attempt of SkipQueue jobs.
func (c *Client) afterInsert(res []driver.JobInsertResult, skip map[string]bool) {
	for _, r := range res {
		if r.Existing {
			continue
		}
		j := r.Job
		c.emit(Event{Kind: EventQueued, JobID: j.ID, Type: j.Type, Queue: j.Queue, GroupID: j.GroupID,
			ParentID: j.ParentID, Dependents: j.Dependents, RunAt: j.RunAt, At: j.QueuedAt})
		switch {
		case skip[j.ID] && j.State == hoppertype.JobStateRunning:
			c.runSkipQueue(j)
		case j.State == hoppertype.JobStatePending:
			c.wakeQueue(j.Queue, time.Time{})
		case j.State == hoppertype.JobStateScheduled:
			c.wakeQueue(j.Queue, j.RunAt)
		}
	}
}
