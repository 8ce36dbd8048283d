package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/internal/engine"
)

// WorkerInfo is a client that runs jobs, as it last reported itself: every
// started client refreshes its row each Config.HeartbeatInterval and
// removes it when it stops.
type WorkerInfo struct {
	ID        string   `json:"id"`
	Host      string   `json:"host,omitempty"`
	PID       int      `json:"pid,omitempty"`
	Queues    []string `json:"queues,omitempty"`
	Types     []string `json:"types,omitempty"`
	Workflows []string `json:"workflows,omitempty"`
	// Schedules are the schedules the client runs (in code, or stored
	// with a target it registers), as of its last report.
	Schedules []WorkerSchedule `json:"schedules,omitempty"`
	// Status is "idle" (no job running), "busy", "stopping" (its Stop
	// began: no more claims, running jobs finishing), or "dead": no report
	// for WorkerDeadAfter heartbeat intervals (the process was killed, or
	// lost the store); the leader rescues its running jobs then, without
	// waiting for their leases to lapse.
	Status string `json:"status"`
	// MaxWorkers is the cap on jobs run at once; with autoscaling, the
	// most it may grow to, and MinWorkers the least. Slots is the cap now.
	MaxWorkers int `json:"max_workers"`
	MinWorkers int `json:"min_workers,omitempty"`
	Slots      int `json:"slots"`
	// Active counts the jobs running (slots used); Jobs and Runs are the
	// ids of the jobs and workflow runs running (at most 100 of each).
	Active int      `json:"active"`
	Jobs   []string `json:"jobs,omitempty"`
	Runs   []string `json:"runs,omitempty"`
	// Completed and Failed count the attempts the client recorded since it
	// was made: succeeded, and failed (retried or not).
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	// Scalings are the autoscaler's latest decisions (up to 20, oldest
	// first): when, the workload it read, and the slots before and after.
	Scalings  []ScalingInfo `json:"scalings,omitempty"`
	Leader    bool          `json:"leader,omitempty"`
	StartedAt time.Time     `json:"started_at"`
	SeenAt    time.Time     `json:"seen_at"`
}

// Worker statuses (WorkerInfo.Status).
const (
	WorkerIdle     = "idle"
	WorkerBusy     = "busy"
	WorkerStopping = "stopping"
	WorkerDead     = "dead"
)

// WorkerDeadAfter is how many heartbeat intervals a worker may go without
// a report before it is dead (30 s at the default 10 s interval, seed
// 004's figure): listed as dead, and its running jobs rescued by the
// leader at once rather than when their leases lapse. The listing and the
// leader count in their own client's HeartbeatInterval.
const WorkerDeadAfter = engine.DeadAfter

// workerRetained is how long after its last report retention deletes a
// worker's row (and WorkerList stops listing it as dead).
const workerRetained = engine.WorkerRetained

// WorkerList returns the clients that ran jobs on this store, by id: those
// started and reporting, and, as WorkerDead, those that stopped reporting
// without stopping (killed, or cut off from the store) in the last hour,
// until retention deletes their rows.
func (c *Client) WorkerList(ctx context.Context) ([]*WorkerInfo, error) {
	now := c.now()
	rows, err := c.store().WorkerList(ctx, &driver.WorkerListParams{SeenAfter: now.Add(-workerRetained)})
	if err != nil {
		return nil, fmt.Errorf("hopper: list workers: %w", err)
	}
	deadBefore := now.Add(-WorkerDeadAfter * c.cfg.HeartbeatInterval)
	out := make([]*WorkerInfo, 0, len(rows))
	for _, r := range rows {
		w := &WorkerInfo{}
		if len(r.Info) > 0 {
			if err := json.Unmarshal(r.Info, w); err != nil {
				return nil, fmt.Errorf("hopper: worker %s: %w", r.ID, err)
			}
		}
		w.ID, w.StartedAt, w.SeenAt = r.ID, r.StartedAt, r.SeenAt
		if w.Status == "" {
			w.Status = WorkerIdle // a row written before statuses
		}
		if r.SeenAt.Before(deadBefore) {
			w.Status = WorkerDead
		}
		out = append(out, w)
	}
	return out, nil
}
