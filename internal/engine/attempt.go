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

// Attempt is one running attempt of a job: its claimed row and what it
// asks of the transaction that records its outcome (children to spawn, a
// group contribution, a workflow run's effect, extra writes).
type Attempt struct {
	e     *Engine
	row   *hoppertype.JobRow
	group jobGroup
	// run is set when the job is a workflow run's execution.
	run *RunEffect
	// fresh is the run this process just started, with no history yet,
	// when the attempt is its first execution, skipping the queue: the
	// execution need not read it back.
	fresh *hoppertype.RunRow
	// loaded is the run and its history, read with the other runs of the
	// claim that returned the job (see session.loadRuns); nil if not.
	loaded *driver.RunLoaded
	// effects, when set, run in the transaction that records the attempt.
	effects func(ctx context.Context, tx driver.Executor, updated *hoppertype.JobRow) error
	// hb is the heartbeat watchdog of a type with a HeartbeatTimeout
	// (hbEvery), nil otherwise; each heartbeat moves it on.
	hb      hclock.Timer
	hbEvery time.Duration
	// life holds the lifetimes of the session running the attempt (nil
	// outside one).
	life *lifetimes
	// tx is the success CompleteTx wrote through an application's
	// transaction, under txMu.
	txMu sync.Mutex
	tx   *txFinish
}

// NewAttempt returns an attempt of row outside a session: a handler run
// directly (tests, replays). Its outcome is not recorded by the engine.
func (e *Engine) NewAttempt(row *hoppertype.JobRow) *Attempt {
	return &Attempt{e: e, row: row}
}

// Engine returns the engine running the attempt.
func (a *Attempt) Engine() *Engine { return a.e }

// Row returns the attempt's claimed row. Callers must not change it.
func (a *Attempt) Row() *hoppertype.JobRow { return a.row }

// Heartbeat renews the job's lease now, recording message (if any) as the
// attempt's progress. It returns ErrLeaseLost if the job was taken from
// this worker and ErrCancelled if a cancel was requested.
func (a *Attempt) Heartbeat(ctx context.Context, message string) error {
	if a.hb != nil {
		a.hb.Reset(a.hbEvery) // the handler is alive: the watchdog starts over
	}
	e := a.e
	res, err := e.drv.JobHeartbeat(ctx, &driver.JobHeartbeatParams{
		Leases:    []driver.Lease{{ID: a.row.ID, Token: a.row.LeaseToken}},
		ExpiresAt: e.now().Add(e.cfg.Visibility),
		Message:   message,
	})
	if err != nil {
		return fmt.Errorf("hopper: heartbeat: %w", err)
	}
	if len(res) != 1 || !res[0].Held {
		return hoppertype.ErrLeaseLost
	}
	if res[0].CancelRequested {
		e.CancelLocal(a.row.ID)
		return hoppertype.ErrCancelled
	}
	return nil
}

// Claim wins a one-time, fleet-wide claim on key (see JobContext.Claim).
func (a *Attempt) Claim(ctx context.Context, key string) (bool, error) {
	e := a.e
	ok, err := e.drv.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "claim:" + key, Now: e.now()})
	if err != nil {
		return false, fmt.Errorf("hopper: claim %q: %w", key, err)
	}
	return ok, nil
}

// Spawn adds children to the attempt's group effect: they join the job's
// group and are stored with its success. An id given twice is refused.
func (a *Attempt) Spawn(rows ...*hoppertype.JobRow) error {
	if a.txDone() != nil {
		return fmt.Errorf("%w: spawn: job %s was completed in a transaction already (spawn before completing it)", hoppertype.ErrInvalidInput, a.row.ID)
	}
	for _, r := range rows {
		r.GroupID = a.row.GroupID
		r.ParentID = a.row.ID
	}
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	for _, r := range rows {
		for _, have := range a.group.eff.children {
			if have.ID == r.ID {
				return fmt.Errorf("%w: spawn: id %q given twice", hoppertype.ErrInvalidInput, r.ID)
			}
		}
		a.group.eff.children = append(a.group.eff.children, r)
	}
	return nil
}

// Spawned returns the ids of the jobs spawned so far, gates left out.
func (a *Attempt) Spawned() []string {
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	var ids []string
	for _, ch := range a.group.eff.children {
		if ch.Type != GateTypeName {
			ids = append(ids, ch.ID)
		}
	}
	return ids
}

// FinalizeGroup makes the job's result the group's value for good.
func (a *Attempt) FinalizeGroup() {
	a.group.mu.Lock()
	a.group.eff.final = true
	a.group.mu.Unlock()
}

// FoldGroup makes the job's contribution to its group a fold of the
// group's value (existing, set says whether there is one).
func (a *Attempt) FoldGroup(fold func(existing []byte, set bool) ([]byte, error)) {
	a.group.mu.Lock()
	a.group.eff.fold = fold
	a.group.mu.Unlock()
}

// Fail fails the attempt, whatever its handler returns: err aborts it
// (the first one given counts).
func (a *Attempt) Fail(err error) {
	a.group.mu.Lock()
	if a.group.err == nil {
		a.group.err = err
	}
	a.group.mu.Unlock()
}

// SetEffects has fn run in the transaction that records the attempt, after
// its transition applied.
func (a *Attempt) SetEffects(fn func(ctx context.Context, tx driver.Executor, updated *hoppertype.JobRow) error) {
	a.effects = fn
}

// SetRun marks the attempt as a workflow run's execution with effect eff.
func (a *Attempt) SetRun(eff *RunEffect) { a.run = eff }

// HardLife is the lifetime of the work that finishes what the attempt
// began: its session's hard lifetime (never ending outside a session,
// where only its calls' budgets bound it).
func (a *Attempt) HardLife() context.Context {
	if a == nil || a.life == nil {
		return context.Background()
	}
	return a.life.hard
}

// groupEffect returns what the attempt does to its group (nil: nothing
// beyond its arrival).
func (a *Attempt) groupEffect() *groupEffect {
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	if len(a.group.eff.children) == 0 && !a.group.eff.final && a.group.eff.fold == nil {
		return nil
	}
	eff := a.group.eff
	return &eff
}

// failure returns the error Fail gave, nil if none.
func (a *Attempt) failure() error {
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	return a.group.err
}
