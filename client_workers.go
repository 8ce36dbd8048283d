package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hopper-go/hopper/driver"
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
	Schedules  []WorkerSchedule `json:"schedules,omitempty"`
	MaxWorkers int              `json:"max_workers"`
	Active     int              `json:"active"`
	Leader     bool             `json:"leader,omitempty"`
	StartedAt  time.Time        `json:"started_at"`
	SeenAt     time.Time        `json:"seen_at"`
}

// workerGone is how long after its last report a worker is no longer
// listed, in heartbeat intervals, and after which retention deletes it.
const (
	workerListed   = 3
	workerRetained = time.Hour
)

// WorkerList returns the clients running jobs on this store (started, and
// seen within three of this client's heartbeat intervals), by id.
func (c *Client) WorkerList(ctx context.Context) ([]*WorkerInfo, error) {
	rows, err := c.drv.WorkerList(ctx, c.now().Add(-workerListed*c.cfg.HeartbeatInterval))
	if err != nil {
		return nil, fmt.Errorf("hopper: list workers: %w", err)
	}
	out := make([]*WorkerInfo, 0, len(rows))
	for _, r := range rows {
		w := &WorkerInfo{}
		if len(r.Info) > 0 {
			if err := json.Unmarshal(r.Info, w); err != nil {
				return nil, fmt.Errorf("hopper: worker %s: %w", r.ID, err)
			}
		}
		w.ID, w.StartedAt, w.SeenAt = r.ID, r.StartedAt, r.SeenAt
		out = append(out, w)
	}
	return out, nil
}

// reportWorker refreshes this client's worker row.
func (rt *runtime) reportWorker(ctx context.Context) {
	if err := rt.upsertWorker(ctx); err != nil && ctx.Err() == nil {
		rt.c.reportError(err, PhaseMaintenance)
	}
}

// upsertWorker refreshes this client's worker row, within ctx and a
// heartbeat interval (the next report's due then).
func (rt *runtime) upsertWorker(ctx context.Context) error {
	c := rt.c
	host, _ := os.Hostname()
	rt.mu.Lock()
	active := len(rt.active)
	rt.mu.Unlock()
	info := WorkerInfo{Host: host, PID: os.Getpid(), Queues: c.queues(), Types: c.Types(), Workflows: c.Workflows(),
		Schedules: c.runningSchedules(), MaxWorkers: c.cfg.MaxWorkers, Active: active, Leader: rt.maint != nil && rt.maint.isLeading()}
	b, _ := json.Marshal(info)
	ctx, cancel := call(ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	if err := c.drv.WorkerUpsert(ctx, &driver.WorkerRow{ID: c.worker, StartedAt: rt.startedAt, SeenAt: c.now(), Info: b}); err != nil {
		return fmt.Errorf("report worker: %w", err)
	}
	return nil
}

// workerChanged has the heartbeat loop refresh this client's worker row
// soon: what it reports changed. It never blocks.
func (rt *runtime) workerChanged() {
	select {
	case rt.workerDirty <- struct{}{}:
	default:
	}
}

// forgetWorker removes this client's worker row: it stopped. A deletion
// the store does not take in time is skipped: the row ages out of the
// listing, and retention deletes it.
func (rt *runtime) forgetWorker() {
	c := rt.c
	ctx, cancel := call(rt.life.hard, shortBudget)
	defer cancel()
	if _, err := c.drv.WorkerDelete(ctx, &driver.WorkerDeleteParams{ID: c.worker}); err != nil {
		c.reportError(fmt.Errorf("remove worker: %w", err), PhaseMaintenance)
	}
}
