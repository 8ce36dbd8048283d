package engine

import (
	"context"
	"fmt"
	"slices"
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

// WorkerReport is the engine's part of a worker row: how this process
// stands now.
type WorkerReport struct {
	// Status is "idle" (no attempt running), "busy", or "stopping" (Stop
	// began: no more claims, running attempts finishing).
	Status string
	// Active counts the attempts running (or waiting in a limiter); Slots
	// is the cap on them now (MaxWorkers, or the autoscaler's).
	Active, Slots int
	// Jobs and Runs are the ids of the jobs and workflow runs running, at
	// most reportedIDs of each, in order.
	Jobs, Runs []string
	// Completed and Failed count this process's attempts since it was
	// made: succeeded, and failed (retried or not).
	Completed, Failed int64
	Leader            bool
	// Scalings are the autoscaler's latest decisions, oldest first.
	Scalings []hoppertype.ScalingInfo
}

// reportedIDs bounds the job and run ids a worker row lists.
const reportedIDs = 100

// report is this session's WorkerReport.
func (s *session) report() WorkerReport {
	e := s.e
	r := WorkerReport{Slots: s.slots.Max(), Completed: e.completed.Load(), Failed: e.failed.Load(),
		Leader: s.maint != nil && s.maint.isLeading()}
	s.mu.Lock()
	r.Scalings = slices.Clone(s.scalings)
	r.Active = len(s.active)
	for _, a := range s.active {
		if isRunJob(a.row) {
			r.Runs = append(r.Runs, a.row.ID)
		} else {
			r.Jobs = append(r.Jobs, a.row.ID)
		}
	}
	s.mu.Unlock()
	slices.Sort(r.Jobs)
	slices.Sort(r.Runs)
	r.Jobs, r.Runs = r.Jobs[:min(len(r.Jobs), reportedIDs)], r.Runs[:min(len(r.Runs), reportedIDs)]
	switch {
	case s.ctx.Err() != nil:
		r.Status = "stopping"
	case r.Active > 0:
		r.Status = "busy"
	default:
		r.Status = "idle"
	}
	return r
}

// upsertWorker refreshes this client's worker row, within ctx and a
// heartbeat interval (the next report's due then).
func (s *session) upsertWorker(ctx context.Context) error {
	e := s.e
	var b []byte
	if h := e.cfg.Hooks.WorkerInfo; h != nil {
		b = h(s.report())
	}
	ctx, cancel := call(ctx, e.cfg.HeartbeatInterval)
	defer cancel()
	if err := e.drv.WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: e.worker, StartedAt: s.startedAt, SeenAt: e.now(), Info: b}}); err != nil {
		return fmt.Errorf("report worker: %w", err)
	}
	return nil
}

// reportStopping reports the worker as stopping while attempts drain
// (with none running, its row is about to go): within shortBudget and
// the hard lifetime, as the report loop has ended with Stop's start.
func (s *session) reportStopping() {
	s.mu.Lock()
	active := len(s.active)
	s.mu.Unlock()
	if active == 0 {
		return
	}
	ctx, cancel := call(s.life.hard, shortBudget)
	defer cancel()
	if err := s.upsertWorker(ctx); err != nil && ctx.Err() == nil {
		s.e.reportError(err, hoppertype.PhaseMaintenance)
	}
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

// Report returns this process's worker report now, and false unless a
// session runs.
func (e *Engine) Report() (WorkerReport, bool) {
	s := e.session()
	if s == nil {
		return WorkerReport{}, false
	}
	return s.report(), true
}
