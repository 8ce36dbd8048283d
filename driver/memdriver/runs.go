package memdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobWake makes the named scheduled and retrying jobs pending with RunAt =
// Now and returns them in the order of ids; other jobs and missing ids are
// skipped, and an id named twice is woken once.
func (x *executor) JobWake(ctx context.Context, params *driver.JobWakeParams) (_ []*hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	now := trunc(params.Now)
	out := make([]*hoppertype.JobRow, 0, len(params.IDs))
	for _, id := range params.IDs {
		e := t.st.jobs[id]
		if e == nil || (e.row.State != hoppertype.JobStateScheduled && e.row.State != hoppertype.JobStateRetrying) {
			continue
		}
		row := e.row.Clone()
		row.State = hoppertype.JobStatePending
		row.RunAt = now
		t.putJob(row)
		out = append(out, row.Clone())
	}
	return out, nil
}

// RunLoad returns a run and its history; see driver.Executor.
func (x *executor) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	return driver.RunLoadSeq(ctx, x, params)
}

// RunEventAppendMany makes several appends; see driver.Executor.
func (x *executor) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	return driver.RunEventAppendManyTx(ctx, x, params)
}

// RunStart stores a run and its job at once; see driver.Executor.
func (x *executor) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return driver.RunStartTx(ctx, x, params)
}

// RunInsert stores a new run row.
func (x *executor) RunInsert(ctx context.Context, params *driver.RunInsertParams) (err error) {
	row := params.Row
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	if row == nil || row.ID == "" {
		return errors.New("insert run: run has no id")
	}
	if t.st.runs[row.ID] != nil {
		return fmt.Errorf("insert run %q: %w", row.ID, hoppertype.ErrDuplicateID)
	}
	r := cloneRun(row)
	r.CreatedAt = trunc(r.CreatedAt)
	r.UpdatedAt = trunc(r.UpdatedAt)
	r.EndedAt = trunc(r.EndedAt)
	t.putRun(r)
	return nil
}

// RunGet returns a copy of a run.
func (x *executor) RunGet(ctx context.Context, params *driver.RunGetParams) (_ *hoppertype.RunRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	r := t.st.runs[params.ID]
	if r == nil {
		return nil, fmt.Errorf("get run %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	return cloneRun(r), nil
}

// RunList filters, orders (newest CreatedAt first, then id descending) and
// pages the runs. It scans the store, which is fine for listings in a
// memory store.
func (x *executor) RunList(ctx context.Context, params *driver.RunListParams) (_ []*hoppertype.RunRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, errors.New("list runs: limit must be > 0")
	}
	after, before := trunc(params.CreatedAfter), trunc(params.CreatedBefore)
	key := params.After
	key.CreatedAt = trunc(key.CreatedAt)
	var rows []*hoppertype.RunRow
	for _, r := range t.st.runs {
		switch {
		case !key.IsZero() && !runBefore(r, key):
			continue
		case len(params.Statuses) > 0 && !slices.Contains(params.Statuses, r.Status),
			params.Workflow != "" && r.Workflow != params.Workflow,
			params.ParentID != "" && r.ParentID != params.ParentID,
			!after.IsZero() && r.CreatedAt.Before(after),
			!before.IsZero() && !r.CreatedAt.Before(before):
			continue
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *hoppertype.RunRow) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	rows = rows[min(max(params.Offset, 0), len(rows)):]
	rows = rows[:min(params.Limit, len(rows))]
	out := make([]*hoppertype.RunRow, len(rows))
	for i, r := range rows {
		out[i] = cloneRun(r)
	}
	return out, nil
}

// runBefore says whether r comes after key in a listing (newest CreatedAt
// first, then id descending): (created_at, id) < key.
func runBefore(r *hoppertype.RunRow, key driver.RunKey) bool {
	if c := r.CreatedAt.Compare(key.CreatedAt); c != 0 {
		return c < 0
	}
	return r.ID < key.ID
}

// RunUpdate sets a run's status, and its error and end time when given,
// after checking ExpectStatuses.
func (x *executor) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (_ *hoppertype.RunRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	cur := t.st.runs[params.ID]
	if cur == nil {
		return nil, fmt.Errorf("update run %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	if len(params.ExpectStatuses) > 0 && !slices.Contains(params.ExpectStatuses, cur.Status) {
		return cloneRun(cur), fmt.Errorf("update run %q in status %s: %w", params.ID, cur.Status, hoppertype.ErrStateConflict)
	}
	r := cloneRun(cur)
	r.Status = params.Status
	if params.Error != nil {
		r.Error = cloneError(params.Error)
	}
	if !params.EndedAt.IsZero() {
		r.EndedAt = trunc(params.EndedAt)
	}
	if params.Reset {
		r.Error, r.EndedAt = nil, time.Time{}
	}
	r.UpdatedAt = trunc(params.Now)
	t.putRun(r)
	return cloneRun(r), nil
}

// RunEventAppend adds events to a run's history while the run's job is
// running under the lease token. The whole call applies or none of it does.
func (x *executor) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	if _, err := t.held(params.RunID, params.LeaseToken); err != nil {
		// A run whose job is gone has lost its lease as surely as one
		// re-claimed by another worker.
		return fmt.Errorf("append events to run %q: %w", params.RunID, hoppertype.ErrLeaseLost)
	}
	cur := t.st.events[params.RunID]
	evs := cur
	for i, in := range params.Events {
		if in == nil {
			return fmt.Errorf("append events to run %q: event %d is nil", params.RunID, i)
		}
		ev := cloneEvent(in)
		ev.RunID = params.RunID
		ev.At = trunc(ev.At)
		at, found := slices.BinarySearchFunc(evs, ev, compareEvents)
		if found {
			return fmt.Errorf("append events to run %q: attempt %d seq %d: %w", params.RunID, ev.Attempt, ev.Seq, hoppertype.ErrDuplicateID)
		}
		if at == len(evs) {
			// Appending may write into the spare capacity of the stored
			// slice, past its length: no stored or saved slice sees it.
			evs = append(evs, ev)
		} else {
			// Inserting shifts elements: do it on a copy.
			evs = slices.Insert(slices.Clip(evs), at, ev)
		}
	}
	if len(params.Events) > 0 {
		t.setEvents(params.RunID, evs)
	}
	if params.RunStatus != "" {
		if cur := t.st.runs[params.RunID]; cur != nil && cur.Status != params.RunStatus {
			r := cloneRun(cur)
			r.Status, r.UpdatedAt = params.RunStatus, trunc(params.Now)
			if !params.EndedAt.IsZero() {
				r.EndedAt = trunc(params.EndedAt)
			}
			t.putRun(r)
		}
	}
	return nil
}

// RunEventList returns copies of a run's events, of one attempt when
// Attempt > 0.
func (x *executor) RunEventList(ctx context.Context, params *driver.RunEventListParams) (_ []*hoppertype.RunEvent, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	evs := t.st.events[params.RunID]
	if params.Attempt > 0 {
		lo, _ := slices.BinarySearchFunc(evs, params.Attempt, func(e *hoppertype.RunEvent, a int) int { return cmp.Compare(e.Attempt, a) })
		hi, _ := slices.BinarySearchFunc(evs, params.Attempt+1, func(e *hoppertype.RunEvent, a int) int { return cmp.Compare(e.Attempt, a) })
		evs = evs[lo:hi]
	}
	out := make([]*hoppertype.RunEvent, len(evs))
	for i, ev := range evs {
		out[i] = cloneEvent(ev)
	}
	return out, nil
}

func compareEvents(a, b *hoppertype.RunEvent) int {
	if c := cmp.Compare(a.Attempt, b.Attempt); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// putRun stores a run row and records how to restore the previous one.
func (t *executor) putRun(row *hoppertype.RunRow) {
	t.runChanged(t.st.runs[row.ID], row)
	put(t, t.st.runs, row.ID, row)
}

// setEvents stores a run's history (none when evs is empty) and records how
// to restore the previous one. Stored events are never modified.
func (t *executor) setEvents(runID string, evs []*hoppertype.RunEvent) {
	setOrDelete(t, t.st.events, runID, evs)
}

// deleteRunData removes what a run keeps beside its job: the run row, its
// history, its hooks and its stream, recording how to restore them.
func (t *executor) deleteRunData(id string) {
	st := t.st
	if old, ok := st.runs[id]; ok {
		delete(st.runs, id)
		t.undo = append(t.undo, func() { st.runs[id] = old })
	}
	if _, ok := st.events[id]; ok {
		t.setEvents(id, nil)
	}
	if tokens := st.runHooks[id]; len(tokens) > 0 {
		for _, tok := range slices.Sorted(maps.Keys(tokens)) {
			t.deleteHook(tok)
		}
	}
	if _, ok := st.streams[id]; ok {
		t.setStream(id, nil)
	}
}

func cloneRun(r *hoppertype.RunRow) *hoppertype.RunRow {
	c := *r
	c.Error = cloneError(r.Error)
	return &c
}

func cloneEvent(e *hoppertype.RunEvent) *hoppertype.RunEvent {
	c := *e
	c.Data = cloneBytes(e.Data)
	return &c
}

// RunLoadMany reads several runs and their histories, one by one; see
// driver.RunBatchLoader.
func (x *executor) RunLoadMany(ctx context.Context, params *driver.RunLoadManyParams) (map[string]*driver.RunLoaded, error) {
	return driver.RunLoadManySeq(ctx, x, params)
}
