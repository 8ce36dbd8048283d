package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// groupEffect is what a succeeded attempt does to its fan-out group, beyond
// its own arrival at a terminal state: the children it spawned and how its
// result contributes to the group value.
type groupEffect struct {
	children []*hoppertype.JobRow
	final    bool
	fold     func(existing []byte, set bool) ([]byte, error)
}

// jobGroup collects a running attempt's group effect.
type jobGroup struct {
	mu  sync.Mutex
	eff groupEffect
	// err, set by a Then that could not be built, fails the attempt.
	err error
}

// groupSettled runs once a group's settle committed: waiters, the
// group-done event and the orphan check (whose call ends with ctx).
func (e *Engine) groupSettled(ctx context.Context, g *hoppertype.GroupRow, at time.Time) {
	e.waiters.groupDone(g.ID)
	e.emit(hoppertype.Event{Kind: hoppertype.EventGroupDone, GroupID: g.ID, Result: rawJSON(g.Value), At: at})
	if e.cfg.Hooks.OnOrphanGroup == nil {
		return
	}
	// Waiters mark the groups they await with this key; taking it here
	// means nobody did, and makes this the one process that reports it.
	ctx, cancel := call(ctx, shortBudget)
	defer cancel()
	orphan, err := e.markAwaited(ctx, g.ID)
	if err != nil {
		e.reportError(fmt.Errorf("orphan check of group %s: %w", g.ID, err), hoppertype.PhaseHook)
		return
	}
	if orphan {
		func() {
			defer func() {
				if r := recover(); r != nil {
					e.reportError(fmt.Errorf("orphan group hook panicked for group %s: %w", g.ID, PanicCause(r)), hoppertype.PhaseHook)
				}
			}()
			e.cfg.Hooks.OnOrphanGroup(g)
		}()
	}
}

// MarkAwaited records that group id is awaited (see markAwaited).
func (e *Engine) MarkAwaited(ctx context.Context, id string) (bool, error) {
	return e.markAwaited(ctx, id)
}

// markAwaited records that group id is (or was) awaited, once across the
// fleet; it reports whether this call recorded it. The mark lasts as long
// as a succeeded job is kept.
func (e *Engine) markAwaited(ctx context.Context, id string) (bool, error) {
	now := e.now()
	keep := e.cfg.Retention.Succeeded
	if keep <= 0 {
		keep = 24 * time.Hour
	}
	return e.drv.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "hopper.awaited:" + id, Now: now, ExpiresAt: now.Add(keep)})
}

// applyGroup records a terminal job's effect on its group in tx: its
// spawned children (on success), one fewer open job, and its contribution.
// A root job that spawned nothing is a group of one and needs no row. It
// returns the children inserted and the group if this settled it.
func (e *Engine) applyGroup(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow, eff *groupEffect) ([]driver.JobInsertResult, []*hoppertype.GroupRow, error) {
	if eff == nil {
		eff = &groupEffect{}
	}
	succeeded := job.State == hoppertype.JobStateSucceeded
	var inserted []driver.JobInsertResult
	added := 0
	if succeeded && len(eff.children) > 0 {
		res, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: eff.children})
		if err != nil {
			return nil, nil, fmt.Errorf("insert spawned jobs: %w", err)
		}
		for _, r := range res {
			if !r.Existing {
				added++
				inserted = append(inserted, r)
			}
		}
		if err := e.insertGates(ctx, tx, res); err != nil {
			return nil, nil, err
		}
		if err := notifyQueues(ctx, tx, res); err != nil {
			return nil, nil, err
		}
	}
	contribute := succeeded && (job.Result != nil || eff.fold != nil)
	now := e.now()
	if job.GroupID == job.ID {
		if added == 0 {
			return inserted, nil, nil
		}
		g := &hoppertype.GroupRow{ID: job.ID, Open: added, State: hoppertype.GroupOpen, CreatedAt: now}
		if contribute {
			g.Value, g.ValueSet, g.Final = job.Result, true, eff.final
			if eff.fold != nil {
				v, err := eff.fold(nil, false)
				if err != nil {
					return nil, nil, err
				}
				g.Value = v
			}
		}
		if err := tx.GroupInsert(ctx, &driver.GroupInsertParams{Row: g}); err != nil {
			return nil, nil, fmt.Errorf("create group %s: %w", job.ID, err)
		}
		return inserted, nil, nil
	}
	p := &driver.GroupUpdateParams{ID: job.GroupID, OpenDelta: added - 1, Now: now}
	if contribute {
		p.Contribute, p.Value, p.Final, p.Fold = true, job.Result, eff.final, eff.fold
	}
	res, err := tx.GroupUpdate(ctx, p)
	if err != nil {
		if errors.Is(err, hoppertype.ErrNotFound) {
			return inserted, nil, nil
		}
		return nil, nil, fmt.Errorf("update group %s: %w", job.GroupID, err)
	}
	if res.Settled {
		if err := tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicGroupDone, Payload: job.GroupID}); err != nil {
			return nil, nil, err
		}
		return inserted, []*hoppertype.GroupRow{res.Group}, nil
	}
	return inserted, nil, nil
}
