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
	// MaxWorkers is the cap on jobs run at once; with autoscaling, the
	// most it may grow to, and MinWorkers the least. Slots is the cap now.
	MaxWorkers int       `json:"max_workers"`
	MinWorkers int       `json:"min_workers,omitempty"`
	Slots      int       `json:"slots"`
	Active     int       `json:"active"`
	Leader     bool      `json:"leader,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	SeenAt     time.Time `json:"seen_at"`
}

// workerGone is how long after its last report a worker is no longer
// listed, in heartbeat intervals, and after which retention deletes it.
const (
	workerListed   = 3
	workerRetained = engine.WorkerRetained
)

// WorkerList returns the clients running jobs on this store (started, and
// seen within three of this client's heartbeat intervals), by id.
func (c *Client) WorkerList(ctx context.Context) ([]*WorkerInfo, error) {
	rows, err := c.store().WorkerList(ctx, &driver.WorkerListParams{SeenAfter: c.now().Add(-workerListed * c.cfg.HeartbeatInterval)})
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
