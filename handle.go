package hopper

import (
	"context"
	"errors"
	"fmt"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Handle refers to an enqueued job. Result waits for the job's own output;
// Group waits for its fan-out group's value. A waiter in one process is
// woken when another process finishes the job (by a store notification,
// with a poll every Config.WaitPollInterval as the fallback).
type Handle[O any] struct {
	c            *Client
	id, groupID  string
	state        JobState
	deduplicated bool
	decode       func([]byte) (O, error)
}

func newHandle[O any](c *Client, r driver.JobInsertResult, decode func([]byte) (O, error)) *Handle[O] {
	return &Handle[O]{c: c, id: r.Job.ID, groupID: r.Job.GroupID, state: r.Job.State, deduplicated: r.Existing, decode: decode}
}

// HandleFor returns a typed handle to an existing job by id (in another
// process, say). It does not check that the job exists or is of type t.
func HandleFor[I, O any](c *Client, t *Type[I, O], id string) *Handle[O] {
	return typedHandles[O](c, t.core(), []driver.JobInsertResult{{Job: &hoppertype.JobRow{ID: id, GroupID: id}}})[0]
}

// ID returns the job's id.
func (h *Handle[O]) ID() string { return h.id }

// State returns the job's state as the insert left it: pending or
// scheduled, or for a deduplicated insert the existing job's state then.
// It is empty for a handle made by HandleFor. Client.JobGet reads the state now.
func (h *Handle[O]) State() JobState { return h.state }

// GroupID returns the id of the job's fan-out group.
func (h *Handle[O]) GroupID() string { return h.groupID }

// Deduplicated reports whether the enqueue found a stored job and returned
// it instead of storing a new one: a live job with the same unique key, or
// the job with the same explicit id, type and input (InsertOpts.ID).
func (h *Handle[O]) Deduplicated() bool { return h.deduplicated }

// Wait blocks until the job is terminal (or ctx is done) and returns it.
func (h *Handle[O]) Wait(ctx context.Context) (*hoppertype.JobRow, error) {
	return h.c.waitJob(ctx, h.id)
}

// Result blocks until the job is terminal and returns its own output. A job
// that did not succeed yields a *JobError matching ErrAborted, ErrExpired,
// ErrCancelled, … with errors.Is. A stuck job is not terminal: Result keeps
// waiting until it is retried, cancelled or ctx is done.
func (h *Handle[O]) Result(ctx context.Context) (O, error) {
	var zero O
	row, err := h.Wait(ctx)
	if err != nil {
		return zero, err
	}
	if row.State != hoppertype.JobStateSucceeded {
		return zero, jobErrorFromRow(row)
	}
	v, err := h.decode(row.Result)
	if err != nil {
		return zero, fmt.Errorf("hopper: decode result of job %s: %w", row.ID, err)
	}
	return v, nil
}

// Group blocks until the job's fan-out group settles (every job in it is
// terminal) and returns the group's value.
func (h *Handle[O]) Group(ctx context.Context) (*GroupValue, error) {
	return h.c.waitGroup(ctx, h.groupID)
}

// GroupValue is the settled value of a fan-out group: by default the result
// of the last job to finish, unless a contribution locked it or folded into
// it. Set is false when no job contributed a value.
type GroupValue struct {
	ID    string
	Value []byte
	Set   bool
	// Settled is set once every job in the group is terminal.
	Settled bool
	// Open counts the group's jobs that are not terminal yet (GroupGet
	// and GroupWait fill it): 0 once it settled.
	Open  int
	codec Codec
}

// Decode decodes the value into v with the client's codec.
func (g *GroupValue) Decode(v any) error {
	if !g.Set {
		return fmt.Errorf("hopper: group %s has no value", g.ID)
	}
	return g.codec.Unmarshal(g.Value, v)
}

// JobWait blocks until the job with this id is terminal (or ctx is done) and
// returns it; it works for jobs of any type and any process.
func (c *Client) JobWait(ctx context.Context, id string) (*JobRow, error) {
	return c.waitJob(ctx, id)
}

// GroupWait blocks until the fan-out group settles and returns its value.
func (c *Client) GroupWait(ctx context.Context, groupID string) (*GroupValue, error) {
	return c.waitGroup(ctx, groupID)
}

// GroupCounts are a fan-out group's jobs counted by state (GroupCount).
type GroupCounts struct {
	// ByState counts the jobs counted, its root among them, in each state.
	ByState map[JobState]int
	// Counted is how many jobs were counted; Capped says the count stopped
	// at the maximum asked for, so the group may hold more.
	Counted int
	Capped  bool
}

// GroupCount counts the jobs of a fan-out group by state: the group's root
// (the job whose id the group bears) and its members, at most limit of
// them, the first in id order (limit <= 0: all). It reads the group's index, not
// the jobs' rows: a count of a few thousand is cheap, a count of millions
// is not.
func (c *Client) GroupCount(ctx context.Context, groupID string, limit int) (*GroupCounts, error) {
	if err := checkText("group id", groupID); err != nil {
		return nil, err
	}
	res, err := c.store().JobCountByState(ctx, &driver.JobCountParams{GroupID: groupID, Limit: max(limit, 0)})
	if err != nil {
		return nil, fmt.Errorf("hopper: count group %s: %w", groupID, err)
	}
	out := &GroupCounts{ByState: map[JobState]int{}}
	for _, r := range res {
		out.ByState[r.State] += r.Count
		out.Counted += r.Count
	}
	out.Capped = limit > 0 && out.Counted >= limit
	return out, nil
}

// GroupGet returns a group's state and value now, without waiting:
// Settled says whether every job in it is terminal.
func (c *Client) GroupGet(ctx context.Context, groupID string) (*GroupValue, error) {
	if err := checkText("group id", groupID); err != nil {
		return nil, err
	}
	g, err := c.store().GroupGet(ctx, &driver.GroupGetParams{ID: groupID})
	if err == nil {
		return &GroupValue{ID: groupID, Value: g.Value, Set: g.ValueSet, Settled: g.State == hoppertype.GroupSettled, Open: g.Open, codec: c.codec}, nil
	}
	if !errors.Is(err, hoppertype.ErrNotFound) {
		return nil, err
	}
	row, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: groupID})
	if err != nil {
		return nil, fmt.Errorf("hopper: group %s: %w", groupID, err)
	}
	gv := &GroupValue{ID: groupID, Settled: row.State.Terminal(), codec: c.codec}
	if !gv.Settled {
		gv.Open = 1
	}
	if row.State == hoppertype.JobStateSucceeded && row.Result != nil {
		gv.Value, gv.Set = row.Result, true
	}
	return gv, nil
}

// waitJob waits for a job to be terminal.
func (c *Client) waitJob(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	return c.eng.WaitJob(ctx, id)
}

// waitGroup waits for a group to settle. A job that never fanned out is a
// group of one with no row: it settles when the job is terminal, with the
// job's result as its value when it succeeded.
func (c *Client) waitGroup(ctx context.Context, id string) (*GroupValue, error) {
	if err := checkText("group id", id); err != nil {
		return nil, err
	}
	g, err := c.eng.WaitGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	return &GroupValue{ID: g.ID, Value: g.Value, Set: g.Set, Settled: true, codec: c.codec}, nil
}
