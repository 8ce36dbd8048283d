package hopper

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// QueueDemand is how much work a queue has and how many worker processes it
// needs, read from the store, so every process of the fleet computes the
// same: what Kubernetes' HPA or KEDA scales worker processes on
// (docs/operations.md).
//
// By Little's law a queue keeps λ·W slots busy, jobs arriving at λ a second
// that run W each. DesiredSlots is that at a utilisation of 0.8, plus the
// slots that start the due backlog within the pickup target (a minute from
// becoming due), never fewer than run now:
// ceil(λ·W ÷ 0.8 + Due·W ÷ Drain) ≥ Running, where Drain is what is left of
// the target for the longest-waiting due job, 60 s − OldestDueAge, at least
// 10 s. W is the service time the completions measure: the mean run of the
// jobs that succeeded in the last minute, or over the last ten when none did.
// DesiredWorkers is that over the slots of one process. A paused queue needs
// none.
type QueueDemand struct {
	// QueueDepth is the queue's backlog: the demand reads Due, the jobs
	// waiting to run now (counted up to QueueDepthCap+1), OldestDueAge and
	// Running.
	QueueDepth
	// ArrivalPerSecond is the jobs queued in the last minute, a second (at
	// most 1,000 counted).
	ArrivalPerSecond float64 `json:"arrival_per_second"`
	// CompletionPerSecond is the jobs that succeeded in the last minute, a
	// second, counted among the first 1,000 of the queue's succeeded jobs
	// queued in the last ten minutes.
	CompletionPerSecond float64 `json:"completion_per_second"`
	// MeanRun is W, the service time: the mean time, from start to end, of
	// the jobs CompletionPerSecond counts, or when there are none of those
	// 1,000 jobs; a second when none succeeded.
	MeanRun time.Duration `json:"mean_run_ns"`
	// Drain is the time the backlog is to be started within: the pickup
	// target (a minute) less OldestDueAge, at least 10 s.
	Drain time.Duration `json:"drain_ns"`
	// SlotsPerWorker is the mean cap on jobs at once of the live workers
	// that work the queue (this client's MaxWorkers when none does).
	SlotsPerWorker int `json:"slots_per_worker"`
	// Workers counts the live workers that work the queue.
	Workers        int `json:"workers"`
	DesiredSlots   int `json:"desired_slots"`
	DesiredWorkers int `json:"desired_workers"`
}

// Demand's constants (see QueueDemand).
const (
	demandUtilisation = 0.8
	demandPickup      = time.Minute      // a due job is to start within it
	demandMinDrain    = 10 * time.Second // the least Drain, past the target
	demandWindow      = time.Minute
	demandSamples     = 1000
	demandArrivals    = 1000
	demandRunWindow   = 10 * time.Minute
)

// demandIn is what a queue's recommendation is made from: the store's
// readings, reduced.
type demandIn struct {
	arrival float64 // λ, jobs queued a second
	// recentRun and windowRun are the mean runs of the jobs that succeeded
	// in the last minute and of the whole sample; zero without a job.
	recentRun, windowRun time.Duration
	due, running         int
	oldestDue            time.Duration
	slotsPerWorker       int
	paused               bool
}

// demandOut is the recommendation (see QueueDemand).
type demandOut struct {
	run, drain     time.Duration
	slots, workers int
}

// decideDemand is the recommendation for in, a pure function of it (see
// QueueDemand for the formula).
func decideDemand(in demandIn) demandOut {
	out := demandOut{run: time.Second, drain: demandPickup - in.oldestDue}
	switch {
	case in.recentRun > 0:
		out.run = in.recentRun
	case in.windowRun > 0:
		out.run = in.windowRun
	}
	out.drain = min(max(out.drain, demandMinDrain), demandPickup)
	if in.paused {
		return out
	}
	w := out.run.Seconds()
	need := in.arrival*w/demandUtilisation + float64(in.due)*w/out.drain.Seconds()
	out.slots = max(int(math.Ceil(need-1e-9)), in.running)
	if in.due > 0 && out.slots == 0 {
		out.slots = 1
	}
	per := max(in.slotsPerWorker, 1)
	out.workers = (out.slots + per - 1) / per
	return out
}

// idFloor is the least UUIDv7 minted at t or later: a listing's cursor
// that starts at the jobs made from t on.
func idFloor(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x-0000-0000-000000000000", ms>>16, ms&0xffff)
}

// QueueDemand reads queue's demand from the store (see QueueDemand).
func (c *Client) QueueDemand(ctx context.Context, queue string) (*QueueDemand, error) {
	if err := checkText("queue name", queue); err != nil {
		return nil, err
	}
	d := &QueueDemand{QueueDepth: QueueDepth{Queue: queue}}
	now := c.now()
	depths, err := c.store().QueueDepthList(ctx, &driver.QueueDepthListParams{Queue: queue, Cap: QueueDepthCap, Now: now})
	if err != nil {
		return nil, fmt.Errorf("hopper: queue %s demand: %w", queue, err)
	}
	for _, r := range depths {
		d.QueueDepth = depthOf(r, now)
	}
	stored, err := c.store().QueueList(ctx, &driver.QueueListParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: queue %s demand: %w", queue, err)
	}
	for _, q := range stored {
		if q.Name == queue {
			d.Paused = q.Paused
		}
	}
	workers, err := c.WorkerList(ctx)
	if err != nil {
		return nil, err
	}
	return d, c.fillDemand(ctx, d, workers)
}

// QueueDemands reads the demand of every queue QueueDepths lists, with its
// depth, reading the queues' depths and the workers once for all of them.
func (c *Client) QueueDemands(ctx context.Context) ([]*QueueDemand, error) {
	workers, err := c.WorkerList(ctx)
	if err != nil {
		return nil, err
	}
	qs, err := c.queueDepths(ctx, workers)
	if err != nil {
		return nil, err
	}
	out := make([]*QueueDemand, 0, len(qs))
	for _, q := range qs {
		d := &QueueDemand{QueueDepth: q}
		if err := c.fillDemand(ctx, d, workers); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// fillDemand completes d, whose queue, pause and counts are read, with
// its arrivals and run time from the store and the workers that work it,
// and computes what it needs.
func (c *Client) fillDemand(ctx context.Context, d *QueueDemand, workers []*WorkerInfo) error {
	queue := d.Queue
	now := c.now()
	// Both windows are on the client's clock (QueuedAfter), as every other
	// time the demand reads. Both listings also walk only the ids minted
	// in their window: hopper's ids (UUIDv7) sort by creation time, so a
	// listing from the window's first possible id reads the window's jobs
	// and few others, however many the store holds. NewID mints on the
	// wall clock, which a virtual Config.Clock leaves behind or ahead, so
	// the listing starts at the earlier of the two clocks' window starts:
	// it never cuts the window short, and QueuedAfter decides it. With a
	// Config.IDGenerator whose ids do not sort by time they undercount,
	// and the due backlog carries the demand.
	from := func(window time.Duration) string {
		start := now
		if wall := time.Now(); wall.Before(start) {
			start = wall
		}
		return idFloor(start.Add(-window))
	}
	arrived, err := c.store().JobList(ctx, &driver.JobListParams{Queues: []string{queue}, QueuedAfter: now.Add(-demandWindow),
		Cursor: from(demandWindow), Ascending: true, Limit: demandArrivals})
	if err != nil {
		return fmt.Errorf("hopper: queue %s demand: %w", queue, err)
	}
	d.ArrivalPerSecond = float64(len(arrived)) / demandWindow.Seconds()
	done, err := c.store().JobList(ctx, &driver.JobListParams{Queues: []string{queue}, States: []JobState{StateSucceeded},
		QueuedAfter: now.Add(-demandRunWindow), Cursor: from(demandRunWindow), Ascending: true, Limit: demandSamples})
	if err != nil {
		return fmt.Errorf("hopper: queue %s demand: %w", queue, err)
	}
	in := demandIn{arrival: d.ArrivalPerSecond, due: d.Due, running: d.Running, oldestDue: d.OldestDueAge, paused: d.Paused}
	var total, recent time.Duration
	var n, completed int
	for _, j := range done {
		if j.StartedAt.IsZero() || !j.EndedAt.After(j.StartedAt) {
			continue
		}
		run := j.EndedAt.Sub(j.StartedAt)
		total += run
		n++
		if j.EndedAt.After(now.Add(-demandWindow)) {
			recent += run
			completed++
		}
	}
	if n > 0 {
		in.windowRun = total / time.Duration(n)
	}
	if completed > 0 {
		in.recentRun = recent / time.Duration(completed)
	}
	d.CompletionPerSecond = float64(completed) / demandWindow.Seconds()
	slots := 0
	for _, w := range workers {
		if w.Status != WorkerDead && slices.Contains(w.Queues, queue) && w.Slots > 0 {
			d.Workers++
			slots += w.Slots
		}
	}
	d.SlotsPerWorker = max(c.cfg.MaxWorkers, 1)
	if d.Workers > 0 {
		d.SlotsPerWorker = max(slots/d.Workers, 1)
	}
	in.slotsPerWorker = d.SlotsPerWorker
	out := decideDemand(in)
	d.MeanRun, d.Drain, d.DesiredSlots, d.DesiredWorkers = out.run, out.drain, out.slots, out.workers
	return nil
}
