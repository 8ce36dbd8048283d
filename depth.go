package hopper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// QueueDepthCap is how far QueueDepths counts a queue's due and delayed
// jobs: a count reads at most QueueDepthCap+1 jobs, and QueueDepthCap+1
// means more than QueueDepthCap.
const QueueDepthCap = 10_000

// QueueDepth is a queue's backlog, read from the store by QueueDepths at a
// cost that does not grow with the jobs stored.
type QueueDepth struct {
	Queue  string `json:"queue"`
	Paused bool   `json:"paused,omitempty"`
	// Due counts the jobs due now that wait for a worker: pending jobs,
	// and scheduled or retrying jobs whose time has come (a worker's claim
	// makes them pending). Up to QueueDepthCap+1, which means more.
	Due int `json:"due"`
	// Delayed counts the scheduled and retrying jobs due later. Up to
	// QueueDepthCap+1, which means more.
	Delayed int `json:"delayed"`
	// Running counts the running jobs, all of them.
	Running int `json:"running"`
	// OldestDueAt is when the job due longest became due (its RunAt): the
	// zero time when no job is due. OldestDueAge is how long ago that was
	// when the store was read (0 when no job is due): the pickup lag a
	// new job of the queue can expect, give or take its priority.
	OldestDueAt  time.Time     `json:"oldest_due_at,omitzero"`
	OldestDueAge time.Duration `json:"oldest_due_age_ns"`
}

// QueueDepths reads the backlog of every queue that holds a due, delayed or
// running job, has a stored state (paused or resumed), is worked by this
// client or by a live worker process, by name: what the /metrics endpoint
// exports as hopper_queue_depth and hopper_queue_oldest_due_age_seconds.
//
// Unlike QueueList, which counts every job in every state (a scan of the
// whole jobs table), it reads only the indexes that claims read, and each
// count stops at QueueDepthCap+1, so its cost stays the same with a million
// jobs stored (docs/BENCHMARKS.md, "Fleet metrics at a 1M backlog"). Stuck
// and finished jobs are not counted: JobList and QueueList read those.
func (c *Client) QueueDepths(ctx context.Context) ([]QueueDepth, error) {
	workers, err := c.WorkerList(ctx)
	if err != nil {
		return nil, err
	}
	return c.queueDepths(ctx, workers)
}

// queueDepths is QueueDepths with the workers already read.
func (c *Client) queueDepths(ctx context.Context, workers []*WorkerInfo) ([]QueueDepth, error) {
	now := c.now()
	rows, err := c.store().QueueDepthList(ctx, &driver.QueueDepthListParams{Cap: QueueDepthCap, Now: now})
	if err != nil {
		return nil, fmt.Errorf("hopper: read queue depths: %w", err)
	}
	stored, err := c.store().QueueList(ctx, &driver.QueueListParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: list queues: %w", err)
	}
	byName := map[string]*QueueDepth{}
	get := func(name string) *QueueDepth {
		d := byName[name]
		if d == nil {
			d = &QueueDepth{Queue: name}
			byName[name] = d
		}
		return d
	}
	for _, r := range rows {
		*get(r.Queue) = depthOf(r, now)
	}
	for _, s := range stored {
		get(s.Name).Paused = s.Paused
	}
	for _, q := range c.queues() {
		get(q)
	}
	for _, w := range workers {
		if w.Status != WorkerDead {
			for _, q := range w.Queues {
				get(q)
			}
		}
	}
	out := make([]QueueDepth, 0, len(byName))
	for _, d := range byName {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b QueueDepth) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// depthOf is a driver's row as a QueueDepth at now (not yet Paused).
func depthOf(r *driver.QueueDepthRow, now time.Time) QueueDepth {
	d := QueueDepth{Queue: r.Queue, Due: r.Due, Delayed: r.Delayed, Running: r.Running, OldestDueAt: r.OldestDueAt}
	if !r.OldestDueAt.IsZero() {
		d.OldestDueAge = max(now.Sub(r.OldestDueAt), 0)
	}
	return d
}
