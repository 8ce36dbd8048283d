package hopper

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

// Spawn fans out: the jobs join this job's group and are stored atomically
// with this attempt's success — if the attempt fails or its result cannot be
// recorded, none of them exists. The group settles once every job in it,
// spawned ones included, is terminal. A job that spawns and returns no value
// of its own (output None) only delegates: its group's value comes from its
// children. Spawn validates each job at once and returns the first error.
func (j *JobContext) Spawn(specs ...*JobSpec) error {
	now := j.c.now()
	rows := make([]*hoppertype.JobRow, 0, len(specs))
	for _, s := range specs {
		row, err := j.c.buildRow(s, now)
		if err != nil {
			return fmt.Errorf("hopper: spawn: %w", err)
		}
		row.GroupID = j.row.GroupID
		row.ParentID = j.row.ID
		rows = append(rows, row)
	}
	j.group.mu.Lock()
	defer j.group.mu.Unlock()
	for _, r := range rows {
		for _, have := range j.group.eff.children {
			if have.ID == r.ID {
				return fmt.Errorf("%w: spawn: id %q given twice", ErrInvalidInput, r.ID)
			}
		}
		j.group.eff.children = append(j.group.eff.children, r)
	}
	return nil
}

// FinalizeGroup makes this job's result the group's value for good: later
// contributions (children finishing after it) do not change it.
func (j *JobContext) FinalizeGroup() {
	j.group.mu.Lock()
	j.group.eff.final = true
	j.group.mu.Unlock()
}

// FoldGroup makes the job's contribution to its group a fold: when the job
// succeeds, the group value becomes fold(current) — current is the zero T
// when no job has contributed yet. The fold runs inside the transaction that
// records the job's success, holding the group, so concurrent contributions
// are exact (none is lost). Call it from a handler; T must round-trip
// through the client's codec.
func FoldGroup[T any](ctx context.Context, fold func(acc T) T) error {
	j := JobFromContext(ctx)
	if j == nil {
		return errors.New("hopper: FoldGroup outside a job handler")
	}
	codec := j.c.codec
	j.group.mu.Lock()
	defer j.group.mu.Unlock()
	j.group.eff.fold = func(existing []byte, set bool) ([]byte, error) {
		var acc T
		if set && len(existing) > 0 {
			if err := codec.Unmarshal(existing, &acc); err != nil {
				return nil, fmt.Errorf("fold group: decode current value: %w", err)
			}
		}
		return codec.Marshal(fold(acc))
	}
	return nil
}

func (j *JobContext) groupEffect() *groupEffect {
	j.group.mu.Lock()
	defer j.group.mu.Unlock()
	if len(j.group.eff.children) == 0 && !j.group.eff.final && j.group.eff.fold == nil {
		return nil
	}
	e := j.group.eff
	return &e
}

// groupSettled runs once a group's settle committed: waiters, the
// group-done event and the orphan check (whose call ends with ctx).
func (c *Client) groupSettled(ctx context.Context, g *hoppertype.GroupRow, at time.Time) {
	c.waiters.groupDone(g.ID)
	c.emit(Event{Kind: EventGroupDone, GroupID: g.ID, Result: rawJSON(g.Value), At: at})
	if c.cfg.OnOrphanGroup == nil {
		return
	}
	// Waiters mark the groups they await with this key; taking it here
	// means nobody did, and makes this the one process that reports it.
	ctx, cancel := call(ctx, shortBudget)
	defer cancel()
	orphan, err := c.markAwaited(ctx, g.ID)
	if err != nil {
		c.reportError(fmt.Errorf("orphan check of group %s: %w", g.ID, err), PhaseHook)
		return
	}
	if orphan {
		gv := &GroupValue{ID: g.ID, Value: g.Value, Set: g.ValueSet, Settled: true, codec: c.codec}
		func() {
			defer func() {
				if r := recover(); r != nil {
					c.reportError(fmt.Errorf("orphan group hook panicked for group %s: %v", g.ID, r), PhaseHook)
				}
			}()
			c.cfg.OnOrphanGroup(gv)
		}()
	}
}

// markAwaited records that group id is (or was) awaited, once across the
// fleet; it reports whether this call recorded it. The mark lasts as long
// as a succeeded job is kept.
func (c *Client) markAwaited(ctx context.Context, id string) (bool, error) {
	now := c.now()
	keep := c.cfg.Retention.Succeeded
	if keep <= 0 {
		keep = 24 * time.Hour
	}
	return c.drv.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "hopper.awaited:" + id, Now: now, ExpiresAt: now.Add(keep)})
}

// GroupDecode decodes a settled group's value into a T. It is the typed
// accessor of a group value: the compiler checks T against your use, not
// against what the group's jobs produced, so T must match the type they
// contribute (or fold into).
func GroupDecode[T any](g *GroupValue) (T, error) {
	var v T
	err := g.Decode(&v)
	return v, err
}

// applyGroup records a terminal job's effect on its group in tx: its
// spawned children (on success), one fewer open job, and its contribution.
// A root job that spawned nothing is a group of one and needs no row. It
// returns the children inserted and the group if this settled it.
func (c *Client) applyGroup(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow, eff *groupEffect) ([]driver.JobInsertResult, []*hoppertype.GroupRow, error) {
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
		if err := c.insertGates(ctx, tx, res); err != nil {
			return nil, nil, err
		}
		if err := notifyQueues(ctx, tx, res); err != nil {
			return nil, nil, err
		}
	}
	contribute := succeeded && (job.Result != nil || eff.fold != nil)
	now := c.now()
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
		if err := tx.GroupInsert(ctx, g); err != nil {
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
		if err := tx.Notify(ctx, driver.TopicGroupDone, job.GroupID); err != nil {
			return nil, nil, err
		}
		return inserted, []*hoppertype.GroupRow{res.Group}, nil
	}
	return inserted, nil, nil
}
