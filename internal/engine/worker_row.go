package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// reportWorker refreshes this client's worker row.
func (s *session) reportWorker(ctx context.Context) {
	if err := s.upsertWorker(ctx); err != nil && ctx.Err() == nil {
		s.e.reportError(err, hoppertype.PhaseMaintenance)
	}
}

// upsertWorker refreshes this client's worker row, within ctx and a
// heartbeat interval (the next report's due then).
func (s *session) upsertWorker(ctx context.Context) error {
	e := s.e
	s.mu.Lock()
	active := len(s.active)
	s.mu.Unlock()
	var b []byte
	if h := e.cfg.Hooks.WorkerInfo; h != nil {
		b = h(active, s.slots.Max(), s.maint != nil && s.maint.isLeading())
	}
	ctx, cancel := call(ctx, e.cfg.HeartbeatInterval)
	defer cancel()
	if err := e.drv.WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: e.worker, StartedAt: s.startedAt, SeenAt: e.now(), Info: b}}); err != nil {
		return fmt.Errorf("report worker: %w", err)
	}
	return nil
}

// workerChanged has the heartbeat loop refresh this client's worker row
// soon: what it reports changed. It never blocks.
func (s *session) workerChanged() {
	select {
	case s.workerDirty <- struct{}{}:
	default:
	}
}

// forgetWorker removes this client's worker row: it stopped. A deletion
// the store does not take in time is skipped: the row ages out of the
// listing, and retention deletes it.
func (s *session) forgetWorker() {
	e := s.e
	ctx, cancel := call(s.life.hard, shortBudget)
	defer cancel()
	if _, err := e.drv.WorkerDelete(ctx, &driver.WorkerDeleteParams{ID: e.worker}); err != nil {
		e.reportError(fmt.Errorf("remove worker: %w", err), hoppertype.PhaseMaintenance)
	}
}

// WorkerRetained is how long after its last report retention deletes a
// worker's row.
const WorkerRetained = time.Hour
