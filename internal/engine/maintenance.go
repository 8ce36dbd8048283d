package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// leaderName is the leadership the maintenance services run under.
const leaderName = "hopper-maintenance"

// maintenance runs the services one process of the fleet runs at a time —
// the rescuer, retention, promotion of due jobs in queues nobody works —
// under a leadership taken in the store with a TTL and a term (fencing
// token). A deposed leader stops them at once.
type maintenance struct {
	e *Engine
	// ctx ends when Stop begins (the stopping lifetime), hard stopGrace
	// after Stop's ctx is done (resign).
	ctx  context.Context
	hard context.Context

	mu       sync.Mutex
	leading  bool
	term     int64
	lastAuto time.Time
}

func newMaintenance(e *Engine, life *lifetimes) *maintenance {
	return &maintenance{e: e, ctx: life.stopping, hard: life.hard}
}

func (m *maintenance) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

func (m *maintenance) run() {
	e := m.e
	var lead struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	stopLeading := func() {
		if lead.cancel != nil {
			lead.cancel()
			<-lead.done
			lead.cancel = nil
		}
		m.mu.Lock()
		was := m.leading
		m.leading = false
		m.mu.Unlock()
		if was {
			e.lead.fire()
		}
	}
	defer stopLeading()
	t := hclock.NewBackgroundTimer(e.clock, 0)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
		}
		t.Reset(e.cfg.LeaderTTL / 3)
		row, err := m.attempt()
		switch {
		case err != nil:
			if m.ctx.Err() != nil {
				return
			}
			e.reportError(fmt.Errorf("leader election: %w", err), hoppertype.PhaseMaintenance)
			// Without a confirmed renewal we cannot know we still lead.
			stopLeading()
		case row.Owner == e.worker:
			m.mu.Lock()
			same := m.leading && m.term == row.Term
			m.mu.Unlock()
			if !same {
				stopLeading()
				var ctx context.Context
				ctx, lead.cancel = context.WithCancel(m.ctx)
				lead.done = make(chan struct{})
				timers := m.leadTimers()
				go func(done chan struct{}) {
					defer close(done)
					m.lead(ctx, timers)
				}(lead.done)
				m.mu.Lock()
				m.leading, m.term = true, row.Term
				m.mu.Unlock()
				e.lead.fire()
			}
		default:
			stopLeading()
		}
	}
}

// attempt takes or renews the leadership, within a third of its TTL (the
// next attempt's due then).
func (m *maintenance) attempt() (*driver.LeaderRow, error) {
	e := m.e
	ctx, cancel := call(m.ctx, e.cfg.LeaderTTL/3)
	defer cancel()
	return e.drv.LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: leaderName, Owner: e.worker, Now: e.now(), TTL: e.cfg.LeaderTTL})
}

// resign gives the leadership up so another process takes it at once.
// Giving up is a courtesy: a resignation the store does not take in time
// is skipped, and the leadership lapses with its TTL.
func (m *maintenance) resign() {
	e := m.e
	ctx, cancel := call(m.hard, min(e.cfg.LeaderTTL/3, shortBudget))
	defer cancel()
	_ = e.drv.LeaderResign(ctx, &driver.LeaderResignParams{Name: leaderName, Owner: e.worker})
}

type leadTimers struct{ rescue, promote, retention hclock.Timer }

// leadTimers arms the leader's timers before it is known to lead, so a
// virtual clock moved right after finds them.
func (m *maintenance) leadTimers() leadTimers {
	e := m.e
	return leadTimers{
		rescue:    hclock.NewBackgroundTimer(e.clock, e.cfg.RescueInterval),
		promote:   hclock.NewBackgroundTimer(e.clock, e.cfg.PollInterval),
		retention: hclock.NewBackgroundTimer(e.clock, time.Minute),
	}
}

// lead runs the leader's services until ctx ends.
func (m *maintenance) lead(ctx context.Context, t leadTimers) {
	e := m.e
	rescue, promote, retention := t.rescue, t.promote, t.retention
	defer rescue.Stop()
	defer promote.Stop()
	defer retention.Stop()
	if err := e.rescue(ctx); err != nil && ctx.Err() == nil {
		e.reportError(fmt.Errorf("rescue: %w", err), hoppertype.PhaseMaintenance)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rescue.C():
			rescue.Reset(e.cfg.RescueInterval)
			if err := e.rescue(ctx); err != nil && ctx.Err() == nil {
				e.reportError(fmt.Errorf("rescue: %w", err), hoppertype.PhaseMaintenance)
			}
		case <-promote.C():
			promote.Reset(e.cfg.PollInterval)
			if err := e.promote(ctx); err != nil && ctx.Err() == nil {
				e.reportError(fmt.Errorf("promote due jobs: %w", err), hoppertype.PhaseMaintenance)
			}
		case <-retention.C():
			retention.Reset(time.Minute)
			if err := e.retain(ctx); err != nil && ctx.Err() == nil {
				e.reportError(fmt.Errorf("retention: %w", err), hoppertype.PhaseMaintenance)
			}
		}
	}
}

// promote makes due jobs pending in queues nobody works, within a poll
// interval.
func (e *Engine) promote(ctx context.Context) error {
	ctx, cancel := call(ctx, e.cfg.PollInterval)
	defer cancel()
	_, err := e.drv.JobPromote(ctx, &driver.JobPromoteParams{Now: e.now(), Limit: 1000})
	return err
}

// rescue finds running jobs whose lease expired (their worker died,
// stalled or lost the store), or whose worker is dead (DeadAfter heartbeat
// intervals without a report), and moves them on: retry with backoff while
// attempts remain, stuck (engine failure, retryable) when they are used up,
// expired past the deadline. Each write is a compare-and-set on the lease
// token and expiry, so a worker that finished or heartbeat in between wins.
func (e *Engine) rescue(ctx context.Context) error {
	dead, err := e.deadWorkers(ctx)
	if err != nil {
		return err
	}
	for {
		now := e.now()
		lctx, cancel := call(ctx, e.cfg.RescueInterval)
		rows, err := e.drv.JobListExpiredLeases(lctx, &driver.JobListExpiredLeasesParams{Now: now, Limit: maxCompleteBatch, Workers: dead})
		cancel()
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		items := make([]finishItem, len(rows))
		for i, row := range rows {
			items[i] = finishItem{row: row, outcome: decideRescue(row, now, defaultRand)}
		}
		e.recordFinished(ctx, items)
		if len(rows) < maxCompleteBatch {
			return nil
		}
	}
}

// DeadAfter is how many heartbeat intervals a worker may go without a
// report before it is dead: its running jobs are rescued then, without
// waiting for their leases to lapse (30 s at the default 10 s interval,
// seed 004's figure).
const DeadAfter = 3

// deadWorkers returns the workers that stopped reporting DeadAfter
// heartbeat intervals ago, whose rows retention has not deleted yet.
func (e *Engine) deadWorkers(ctx context.Context) ([]string, error) {
	now := e.now()
	ctx, cancel := call(ctx, e.cfg.RescueInterval)
	defer cancel()
	rows, err := e.drv.WorkerList(ctx, &driver.WorkerListParams{SeenAfter: now.Add(-WorkerRetained)})
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, r := range rows {
		if r.ID != e.worker && r.SeenAt.Before(now.Add(-DeadAfter*e.cfg.HeartbeatInterval)) {
			dead = append(dead, r.ID)
		}
	}
	return dead, nil
}

// retain deletes terminal jobs older than their state's retention.
func (e *Engine) retain(ctx context.Context) error {
	now := e.now()
	for _, r := range []struct {
		state hoppertype.JobState
		keep  time.Duration
	}{
		{hoppertype.JobStateSucceeded, e.cfg.Retention.Succeeded},
		{hoppertype.JobStateDead, e.cfg.Retention.Dead},
		{hoppertype.JobStateExpired, e.cfg.Retention.Expired},
		{hoppertype.JobStateCancelled, e.cfg.Retention.Cancelled},
	} {
		if r.keep < 0 {
			continue
		}
		for {
			dctx, cancel := call(ctx, retentionBudget)
			n, err := e.drv.JobDeleteFinished(dctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{r.state}, Before: now.Add(-r.keep), Limit: 1000})
			cancel()
			if err != nil {
				return err
			}
			if n < 1000 {
				break
			}
		}
	}
	// Workers that stopped without saying so (killed) go after a while.
	wctx, cancel := call(ctx, retentionBudget)
	// The feed's worker and schedule changes, which have no job to go
	// with, go when succeeded jobs' changes would (never when those stay).
	var changesBefore time.Time
	if keep := e.cfg.Retention.Succeeded; keep >= 0 {
		changesBefore = now.Add(-keep)
	}
	_, err := e.drv.WorkerDelete(wctx, &driver.WorkerDeleteParams{Before: now.Add(-WorkerRetained), ChangesBefore: changesBefore,
		TransitionsOlderThan: transitionsAge(e.cfg.Retention)})
	cancel()
	if err != nil {
		return err
	}
	// Expiring keys (awaited-group marks) go once they expired.
	for {
		kctx, cancel := call(ctx, retentionBudget)
		n, err := e.drv.KeyDeleteExpired(kctx, &driver.KeyDeleteExpiredParams{Before: now, Limit: 1000})
		cancel()
		if err != nil {
			return err
		}
		if n < 1000 {
			return nil
		}
	}
}

// transitionsAge is how old the store's job transitions kept apart from
// their jobs (see driver.WorkerDeleteParams.TransitionsOlderThan) must be
// to go: older than the longest retention of any terminal state, so a kept
// job's history stays while the job does; nil (never) when a state is kept
// forever. The age is the store's: it stamped them by its clock.
func transitionsAge(r Retention) *time.Duration {
	longest := time.Duration(0)
	for _, keep := range []time.Duration{r.Succeeded, r.Dead, r.Expired, r.Cancelled} {
		if keep < 0 {
			return nil
		}
		longest = max(longest, keep)
	}
	return &longest
}

// autoRedrive moves dead jobs back when a queue is idle, at most once per
// poll interval per client.
func (m *maintenance) autoRedrive() {
	e := m.e
	now := e.now()
	m.mu.Lock()
	if !m.lastAuto.IsZero() && now.Sub(m.lastAuto) < e.cfg.PollInterval {
		m.mu.Unlock()
		return
	}
	m.lastAuto = now
	m.mu.Unlock()
	ctx, cancel := call(m.ctx, shortBudget)
	defer cancel()
	if _, err := e.Redrive(ctx, &driver.JobRetryParams{All: true, States: []hoppertype.JobState{hoppertype.JobStateDead}, Limit: e.cfg.AutoRedrive}); err != nil && m.ctx.Err() == nil {
		e.reportError(fmt.Errorf("auto redrive: %w", err), hoppertype.PhaseMaintenance)
	}
}
