package hopper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobRow is a job as stored: its state, attempts, payloads and times.
type JobRow = hoppertype.JobRow

// StuckInfo is the cause of a stuck job: the flat status slot (cause,
// retryable, blocker ids, detail, when it was observed).
type StuckInfo = hoppertype.StuckInfo

// ErrorInfo is the record of a failure kept with a job and its changes.
type ErrorInfo = hoppertype.ErrorInfo

// Stuck causes.
const (
	StuckEngineFailure = hoppertype.StuckEngineFailure
	StuckFailedBlocker = hoppertype.StuckFailedBlocker
	StuckCycle         = hoppertype.StuckCycle
)

// JobState is a job's state.
type JobState = hoppertype.JobState

// Job states (see DESIGN: one vocabulary everywhere).
const (
	StatePending   = hoppertype.JobStatePending
	StateScheduled = hoppertype.JobStateScheduled
	StateRunning   = hoppertype.JobStateRunning
	StateRetrying  = hoppertype.JobStateRetrying
	StateSucceeded = hoppertype.JobStateSucceeded
	StateDead      = hoppertype.JobStateDead
	StateExpired   = hoppertype.JobStateExpired
	StateCancelled = hoppertype.JobStateCancelled
	StateStuck     = hoppertype.JobStateStuck
)

// JobGet returns a job by id, or an error matching ErrNotFound.
func (c *Client) JobGet(ctx context.Context, id string) (*JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	row, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: get job %s: %w", id, err)
	}
	return row, nil
}

// ListParams filter JobList. Empty fields do not filter.
type ListParams struct {
	States   []JobState
	Types    []string
	Queues   []string
	GroupID  string
	ParentID string
	// QueuedAfter and QueuedBefore bound the enqueue time (inclusive,
	// exclusive).
	QueuedAfter  time.Time
	QueuedBefore time.Time
	// EndedAfter and EndedBefore bound when the job ended — for a dead
	// letter, when it died — (inclusive, exclusive); either leaves out
	// the jobs that have not ended.
	EndedAfter  time.Time
	EndedBefore time.Time
	// Metadata keeps the jobs whose metadata holds every key with exactly
	// its value.
	Metadata map[string]string
	// UniqueKey keeps the jobs with that unique key (InsertOpts.UniqueKey),
	// of any type.
	UniqueKey string
	// ErrorContains keeps the jobs whose last error's message contains it
	// (case-sensitive).
	//
	// No index serves Metadata, UniqueKey or ErrorContains: a listing
	// reads the jobs the other filters select, in its order, until its
	// page is full — or, with ScanLimit, until it has read that many.
	// Narrow them by state, type, queue or time to keep a search over a
	// large store quick.
	ErrorContains string
	// ScanLimit bounds the work of a search by Metadata, UniqueKey or
	// ErrorContains: a page examines at most ScanLimit of the jobs the
	// other filters select (after Cursor, in the listing's order) and
	// keeps those that match. When they run out before the page fills, the
	// page comes back short — with fewer jobs than Limit, even none — and
	// its NextCursor searches on from the last job examined. 0 (the
	// default) reads on until the page is full, however many jobs that
	// takes; the dashboard, the HTTP API and the CLI use DefaultScanLimit.
	// Without those three filters it changes nothing, and a bulk action's
	// filter (BulkParams.Filter) ignores it: an action reads every job its
	// filter selects.
	ScanLimit int
	// HideCompensated leaves out the jobs of workflow runs that ended
	// compensated: a saga that failed and undid its work needs no
	// operator, so dead-letter listings hide it (its run stays in the
	// runs listings).
	HideCompensated bool
	// Cursor continues a listing from a JobPage's NextCursor.
	Cursor string
	// Ascending lists oldest first; the default is newest first.
	Ascending bool
	// Limit caps the page. Defaults to 100; at most 1000.
	Limit int
}

// check refuses filters no store takes alike.
func (p *ListParams) check() error {
	for _, err := range []error{
		checkTexts("type filter", p.Types), checkTexts("queue filter", p.Queues), checkText("group id filter", p.GroupID),
		checkText("parent id filter", p.ParentID), checkText("cursor", p.Cursor),
		checkTime("queued-after filter", p.QueuedAfter), checkTime("queued-before filter", p.QueuedBefore),
		checkTime("ended-after filter", p.EndedAfter), checkTime("ended-before filter", p.EndedBefore),
		checkText("unique key filter", p.UniqueKey), checkText("error filter", p.ErrorContains),
	} {
		if err != nil {
			return err
		}
	}
	for k, v := range p.Metadata {
		if err := errors.Join(checkText("metadata filter key", k), checkText("metadata filter value", v)); err != nil {
			return err
		}
	}
	return nil
}

// driverParams is p as the store takes it (its Limit aside).
func (p *ListParams) driverParams() driver.JobListParams {
	dp := driver.JobListParams{
		States: p.States, Types: p.Types, Queues: p.Queues, GroupID: p.GroupID, ParentID: p.ParentID,
		QueuedAfter: p.QueuedAfter, QueuedBefore: p.QueuedBefore, EndedAfter: p.EndedAfter, EndedBefore: p.EndedBefore,
		Metadata: p.Metadata, UniqueKey: p.UniqueKey,
		ErrorContains: p.ErrorContains, Cursor: p.Cursor, Ascending: p.Ascending,
	}
	if p.HideCompensated {
		dp.SkipRunStatuses = []RunStatus{RunCompensated}
	}
	return dp
}

// JobPage is one page of a listing.
type JobPage struct {
	Jobs []*JobRow
	// NextCursor continues the listing; empty on the last page. A
	// non-empty NextCursor means more jobs may follow, not that they do:
	// the page of a search bounded by ListParams.ScanLimit may hold fewer
	// jobs than the limit (none, even) and still have a NextCursor, from
	// where its search stopped.
	NextCursor string
}

// MaxListLimit is the largest page JobList returns.
const MaxListLimit = 1000

// DefaultScanLimit is the ListParams.ScanLimit of the dashboard's, the HTTP
// API's and the CLI's job listings: a search by metadata, unique key or
// error text examines at most this many jobs a page.
const DefaultScanLimit = 100_000

// JobList returns jobs matching p (nil lists the newest), newest first, a page
// at a time. Bad filters (an unknown state, a negative limit) are refused.
func (c *Client) JobList(ctx context.Context, p *ListParams) (*JobPage, error) {
	if p == nil {
		p = &ListParams{}
	}
	for _, s := range p.States {
		if !s.Valid() {
			return nil, fmt.Errorf("%w: unknown job state %q", ErrInvalidInput, s)
		}
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.ScanLimit < 0 {
		return nil, fmt.Errorf("%w: negative scan limit %d", ErrInvalidInput, p.ScanLimit)
	}
	limit := p.Limit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	case limit == 0:
		limit = 100
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	dp := p.driverParams()
	dp.Limit = limit + 1
	page := &JobPage{}
	var rows []*JobRow
	var err error
	if p.ScanLimit > 0 {
		var res *driver.JobScanResult
		if res, err = c.store().JobScan(ctx, &driver.JobScanParams{JobListParams: dp, ScanLimit: p.ScanLimit}); err == nil {
			rows, page.NextCursor = res.Jobs, res.Next
		}
	} else {
		rows, err = c.store().JobList(ctx, &dp)
	}
	if err != nil {
		return nil, fmt.Errorf("hopper: list jobs: %w", err)
	}
	page.Jobs = rows
	if len(rows) > limit {
		page.Jobs = rows[:limit]
		page.NextCursor = rows[limit-1].ID
	}
	return page, nil
}

// Active returns the jobs this client has claimed and is running.
func (c *Client) Active() []*JobRow {
	out := c.eng.Active()
	slices.SortFunc(out, func(a, b *JobRow) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// JobCancel cancels a job. A job that waits (pending, scheduled, retrying) or
// is stuck becomes cancelled at once; a running job's context is cancelled
// (in whichever process runs it) and the job ends cancelled when its handler
// returns an error (a handler that finishes successfully anyway is recorded
// as succeeded). Cancelling a finished job returns it with an error matching
// ErrStateConflict.
func (c *Client) JobCancel(ctx context.Context, id string) (*JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	row, err := c.eng.CancelJob(ctx, id)
	if err != nil {
		if errors.Is(err, hoppertype.ErrStateConflict) && row != nil {
			return row, fmt.Errorf("hopper: cancel job %s: it is %s: %w", id, row.State, err)
		}
		return nil, fmt.Errorf("hopper: cancel job %s: %w", id, err)
	}
	return row, nil
}

// JobRetry moves one dead, expired, cancelled or stuck job back to pending as
// a fresh job (attempt 1 next, a passed deadline cleared) — a redrive of one
// job. A job in any other state yields an error matching ErrStateConflict.
func (c *Client) JobRetry(ctx context.Context, id string) (*JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	res, err := c.eng.Redrive(ctx, &driver.JobRetryParams{IDs: []string{id}, States: []hoppertype.JobState{
		hoppertype.JobStateDead, hoppertype.JobStateExpired, hoppertype.JobStateCancelled, hoppertype.JobStateStuck}})
	if err != nil {
		return nil, fmt.Errorf("hopper: retry job %s: %w", id, err)
	}
	if len(res) == 1 {
		return res[0].Job, nil
	}
	row, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: retry job %s: %w", id, err)
	}
	return row, fmt.Errorf("hopper: retry job %s: it is %s (or its unique key is taken): %w", id, row.State, ErrStateConflict)
}

// JobReopen moves a stuck job back to pending as a fresh job: a new
// generation of attempts, its stuck slot cleared. A job in any other state
// yields an error matching ErrStateConflict. It is what a policy for stuck
// jobs calls (see RetryObserver): unlike JobRetry, it never brings back a job
// that someone cancelled or that died meanwhile.
func (c *Client) JobReopen(ctx context.Context, id string) (*JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	res, err := c.eng.Redrive(ctx, &driver.JobRetryParams{IDs: []string{id}, States: []hoppertype.JobState{hoppertype.JobStateStuck}})
	if err != nil {
		return nil, fmt.Errorf("hopper: reopen job %s: %w", id, err)
	}
	if len(res) == 1 {
		return res[0].Job, nil
	}
	row, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: reopen job %s: %w", id, err)
	}
	return row, fmt.Errorf("hopper: reopen job %s: it is %s, not stuck (or its unique key is taken): %w", id, row.State, ErrStateConflict)
}

// RedriveParams select dead-lettered jobs to move back: by IDs, by Type,
// or All of them.
type RedriveParams struct {
	IDs  []string
	Type string
	All  bool
	// Limit caps how many are moved; 0 means no cap.
	Limit int
}

// JobRedrive moves dead jobs back to pending as fresh jobs (attempt 1 next) and
// returns how many it moved. Jobs whose unique key another live job holds
// stay dead, and so does the job of a workflow run that ended compensated:
// a saga that undid its work is no dead letter (RunRetry runs it again).
func (c *Client) JobRedrive(ctx context.Context, p *RedriveParams) (int, error) {
	if p == nil || (len(p.IDs) == 0 && p.Type == "" && !p.All) {
		return 0, fmt.Errorf("%w: redrive needs IDs, a Type or All", ErrInvalidInput)
	}
	if p.Limit < 0 {
		return 0, fmt.Errorf("%w: negative limit", ErrInvalidInput)
	}
	if err := checkTexts("job id", p.IDs); err != nil {
		return 0, err
	}
	if err := checkText("type name", p.Type); err != nil {
		return 0, err
	}
	res, err := c.eng.Redrive(ctx, &driver.JobRetryParams{IDs: p.IDs, Type: p.Type, All: p.All && len(p.IDs) == 0 && p.Type == "",
		States: []hoppertype.JobState{hoppertype.JobStateDead}, Limit: p.Limit})
	if err != nil {
		return 0, fmt.Errorf("hopper: redrive: %w", err)
	}
	return len(res), nil
}

// QueueInfo describes a queue: whether it is paused and how many jobs it
// holds in each state.
type QueueInfo struct {
	Name   string
	Paused bool
	Counts map[JobState]int
}

// QueueList returns every queue that holds jobs or a stored state, by name,
// with its jobs counted in every state. It counts every job stored (on
// PostgreSQL and SQLite a scan of the whole jobs table): to watch queues,
// read QueueDepths, whose cost does not grow with the jobs stored.
func (c *Client) QueueList(ctx context.Context) ([]QueueInfo, error) {
	counts, err := c.store().JobCountByState(ctx, &driver.JobCountParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: count jobs: %w", err)
	}
	stored, err := c.store().QueueList(ctx, &driver.QueueListParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: list queues: %w", err)
	}
	byName := map[string]*QueueInfo{}
	get := func(name string) *QueueInfo {
		q := byName[name]
		if q == nil {
			q = &QueueInfo{Name: name, Counts: map[JobState]int{}}
			byName[name] = q
		}
		return q
	}
	for _, n := range counts {
		get(n.Queue).Counts[n.State] += n.Count
	}
	for _, s := range stored {
		get(s.Name).Paused = s.Paused
	}
	out := make([]QueueInfo, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueInfo) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out, nil
}

// QueuePause stops every process from starting jobs of queue until
// QueueResume. Running jobs finish, and the first attempt of a SkipQueue
// job, which never goes through the queue, still runs. A queue that no
// job, worker (this client, or a process whose worker row the store
// keeps) or earlier pause has named is refused with an *UnknownNameError
// (wrapping ErrNotFound), unless opts.Create pauses it ahead of its first
// job.
func (c *Client) QueuePause(ctx context.Context, queue string, opts *PauseOpts) error {
	return c.setPaused(ctx, queue, true, opts != nil && opts.Create)
}

// QueueResume lets a paused queue's jobs start again. A queue nothing has
// named is refused as QueuePause refuses it.
func (c *Client) QueueResume(ctx context.Context, queue string) error {
	return c.setPaused(ctx, queue, false, false)
}

func (c *Client) setPaused(ctx context.Context, queue string, paused, create bool) error {
	if queue == "" {
		return fmt.Errorf("%w: empty queue name", ErrInvalidInput)
	}
	if err := checkText("queue name", queue); err != nil {
		return err
	}
	err := c.store().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if !create {
			if err := c.checkQueueKnown(ctx, tx, queue); err != nil {
				return err
			}
		}
		if err := tx.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: queue, Paused: paused, Now: c.now()}); err != nil {
			return err
		}
		if !paused {
			return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: queue})
		}
		return nil
	})
	var unknown *UnknownNameError
	if errors.As(err, &unknown) {
		return err
	}
	if err != nil {
		return fmt.Errorf("hopper: set queue %s paused=%v: %w", queue, paused, err)
	}
	if !paused {
		c.wakeQueue(queue, time.Time{})
	}
	return nil
}

// Ping checks that the store answers: a round trip to the database server
// or file, within ctx. It returns nil when the store answered.
func (c *Client) Ping(ctx context.Context) error {
	if p, ok := c.eng.Driver().(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	// A read of a job that cannot exist goes to the store and back.
	if _, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: "hopper.ping"}); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
