package hopper

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// leaderName is the leadership the maintenance services run under.
const leaderName = "hopper-maintenance"

// maintenance runs the services one process of the fleet runs at a time —
// the rescuer, retention, promotion of due jobs in queues nobody works —
// under a leadership taken in the store with a TTL and a term (fencing
// token). A deposed leader stops them at once.
type maintenance struct {
	c *Client
	// ctx ends when Stop begins (the stopping lifetime), hard stopGrace
	// after Stop's ctx is done (resign).
	ctx  context.Context
	hard context.Context

	mu       sync.Mutex
	leading  bool
	term     int64
	lastAuto time.Time
}

func newMaintenance(c *Client, life *lifetimes) *maintenance {
	return &maintenance{c: c, ctx: life.stopping, hard: life.hard}
}

// IsLeader reports whether this client currently runs maintenance.
func (c *Client) IsLeader() bool {
	rt := c.runtime()
	if rt == nil || rt.maint == nil {
		return false
	}
	return rt.maint.isLeading()
}

func (m *maintenance) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

func (m *maintenance) run() {
	c := m.c
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
		m.leading = false
		m.mu.Unlock()
	}
	defer stopLeading()
	t := c.clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
		}
		t.Reset(c.cfg.LeaderTTL / 3)
		row, err := m.attempt()
		switch {
		case err != nil:
			if m.ctx.Err() != nil {
				return
			}
			c.reportError(fmt.Errorf("leader election: %w", err), PhaseMaintenance)
			// Without a confirmed renewal we cannot know we still lead.
			stopLeading()
		case row.Owner == c.worker:
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
			}
		default:
			stopLeading()
		}
	}
}

// attempt takes or renews the leadership, within a third of its TTL (the
// next attempt's due then).
func (m *maintenance) attempt() (*driver.LeaderRow, error) {
	c := m.c
	ctx, cancel := call(m.ctx, c.cfg.LeaderTTL/3)
	defer cancel()
	return c.drv.LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: leaderName, Owner: c.worker, Now: c.now(), TTL: c.cfg.LeaderTTL})
}

// resign gives the leadership up so another process takes it at once.
// Giving up is a courtesy: a resignation the store does not take in time
// is skipped, and the leadership lapses with its TTL.
func (m *maintenance) resign() {
	c := m.c
	ctx, cancel := call(m.hard, min(c.cfg.LeaderTTL/3, shortBudget))
	defer cancel()
	_ = c.drv.LeaderResign(ctx, &driver.LeaderResignParams{Name: leaderName, Owner: c.worker})
}

type leadTimers struct{ rescue, promote, retention Timer }

// leadTimers arms the leader's timers before it is known to lead, so a
// virtual clock moved right after finds them.
func (m *maintenance) leadTimers() leadTimers {
	c := m.c
	return leadTimers{
		rescue:    c.clock.NewTimer(c.cfg.RescueInterval),
		promote:   c.clock.NewTimer(c.cfg.PollInterval),
		retention: c.clock.NewTimer(time.Minute),
	}
}

// lead runs the leader's services until ctx ends.
func (m *maintenance) lead(ctx context.Context, t leadTimers) {
	c := m.c
	rescue, promote, retention := t.rescue, t.promote, t.retention
	defer rescue.Stop()
	defer promote.Stop()
	defer retention.Stop()
	if err := c.rescue(ctx); err != nil && ctx.Err() == nil {
		c.reportError(fmt.Errorf("rescue: %w", err), PhaseMaintenance)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rescue.C():
			rescue.Reset(c.cfg.RescueInterval)
			if err := c.rescue(ctx); err != nil && ctx.Err() == nil {
				c.reportError(fmt.Errorf("rescue: %w", err), PhaseMaintenance)
			}
		case <-promote.C():
			promote.Reset(c.cfg.PollInterval)
			if err := c.promote(ctx); err != nil && ctx.Err() == nil {
				c.reportError(fmt.Errorf("promote due jobs: %w", err), PhaseMaintenance)
			}
		case <-retention.C():
			retention.Reset(time.Minute)
			if err := c.retain(ctx); err != nil && ctx.Err() == nil {
				c.reportError(fmt.Errorf("retention: %w", err), PhaseMaintenance)
			}
		}
	}
}

// promote makes due jobs pending in queues nobody works, within a poll
// interval.
func (c *Client) promote(ctx context.Context) error {
	ctx, cancel := call(ctx, c.cfg.PollInterval)
	defer cancel()
	_, err := c.drv.JobPromote(ctx, &driver.JobPromoteParams{Now: c.now(), Limit: 1000})
	return err
}

// rescue finds running jobs whose lease expired (their worker died,
// stalled or lost the store) and moves them on: retry with backoff while
// attempts remain, stuck (engine failure, retryable) when they are used up,
// expired past the deadline. Each write is a compare-and-set on the lease
// token and expiry, so a worker that finished or heartbeat in between wins.
func (c *Client) rescue(ctx context.Context) error {
	for {
		now := c.now()
		lctx, cancel := call(ctx, c.cfg.RescueInterval)
		rows, err := c.drv.JobListExpiredLeases(lctx, &driver.JobListExpiredLeasesParams{Now: now, Limit: maxCompleteBatch})
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
		c.recordFinished(ctx, items)
		if len(rows) < maxCompleteBatch {
			return nil
		}
	}
}

// decideRescue is the outcome of an attempt whose lease expired.
func decideRescue(row *hoppertype.JobRow, now time.Time, rnd func() float64) outcome {
	msg := fmt.Errorf("%w: worker %s stopped heartbeating during attempt %d", ErrLeaseLost, row.Worker, row.Attempt)
	ei := &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindLeaseLost, Message: msg.Error(), Attempt: row.Attempt, At: now}
	p := driver.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken, RequireLeaseExpiredBefore: now, Attempt: row.Attempt, RunAt: row.RunAt, Error: ei}
	ev := Event{JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID, ParentID: row.ParentID,
		Dependents: row.Dependents, Attempt: row.Attempt, Error: ei.Message, At: now}
	switch {
	case !row.Deadline.IsZero() && !now.Before(row.Deadline):
		p.State, p.EndedAt = hoppertype.JobStateExpired, now
		p.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindExpired, Message: ErrExpired.Error(), Attempt: row.Attempt, At: now}
		ev.Kind, ev.Deadline, ev.Error = EventExpired, row.Deadline, p.Error.Message
	case row.Attempt >= row.Retry.Attempts:
		retryable := true
		p.State = hoppertype.JobStateStuck
		p.Stuck = &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &retryable,
			Detail: fmt.Sprintf("lease lost on attempt %d of %d", row.Attempt, row.Retry.Attempts), ObservedAt: now}
		ev.Kind = EventStuck
	default:
		next := now.Add(policyFromStored(row.Retry).Delay(row.Attempt, rnd)).Truncate(time.Microsecond)
		p.State, p.RunAt = hoppertype.JobStateRetrying, next
		if !row.Deadline.IsZero() && !next.Before(row.Deadline) {
			p.State, p.EndedAt = hoppertype.JobStateExpired, now
			p.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindExpired, Message: ErrExpired.Error(), Attempt: row.Attempt, At: now}
			ev.Kind, ev.Deadline, ev.Error = EventExpired, row.Deadline, p.Error.Message
			break
		}
		ev.Kind, ev.WillRetry, ev.RunAt = EventFailed, true, next
	}
	return outcome{params: p, event: ev}
}

// retain deletes terminal jobs older than their state's retention.
func (c *Client) retain(ctx context.Context) error {
	now := c.now()
	for _, r := range []struct {
		state hoppertype.JobState
		keep  time.Duration
	}{
		{hoppertype.JobStateSucceeded, c.cfg.Retention.Succeeded},
		{hoppertype.JobStateDead, c.cfg.Retention.Dead},
		{hoppertype.JobStateExpired, c.cfg.Retention.Expired},
		{hoppertype.JobStateCancelled, c.cfg.Retention.Cancelled},
	} {
		if r.keep < 0 {
			continue
		}
		for {
			dctx, cancel := call(ctx, retentionBudget)
			n, err := c.drv.JobDeleteFinished(dctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{r.state}, Before: now.Add(-r.keep), Limit: 1000})
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
	_, err := c.drv.WorkerDelete(wctx, &driver.WorkerDeleteParams{Before: now.Add(-workerRetained)})
	cancel()
	if err != nil {
		return err
	}
	// Expiring keys (awaited-group marks) go once they expired.
	for {
		kctx, cancel := call(ctx, retentionBudget)
		n, err := c.drv.KeyDeleteExpired(kctx, &driver.KeyDeleteExpiredParams{Before: now, Limit: 1000})
		cancel()
		if err != nil {
			return err
		}
		if n < 1000 {
			return nil
		}
	}
}

// autoRedrive moves dead jobs back when a queue is idle, at most once per
// poll interval per client.
func (m *maintenance) autoRedrive() {
	c := m.c
	now := c.now()
	m.mu.Lock()
	if !m.lastAuto.IsZero() && now.Sub(m.lastAuto) < c.cfg.PollInterval {
		m.mu.Unlock()
		return
	}
	m.lastAuto = now
	m.mu.Unlock()
	ctx, cancel := call(m.ctx, shortBudget)
	defer cancel()
	if _, err := c.redrive(ctx, &driver.JobRetryParams{All: true, States: []hoppertype.JobState{hoppertype.JobStateDead}, Limit: c.cfg.AutoRedrive}); err != nil && m.ctx.Err() == nil {
		c.reportError(fmt.Errorf("auto redrive: %w", err), PhaseMaintenance)
	}
}
