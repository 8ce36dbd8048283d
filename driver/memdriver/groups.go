package memdriver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// GroupInsert stores a copy of row.
func (x *executor) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) (err error) {
	row := params.Row
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	if _, ok := t.st.groups[row.ID]; ok {
		return fmt.Errorf("insert group %q: %w", row.ID, hoppertype.ErrDuplicateID)
	}
	g := cloneGroup(row)
	g.CreatedAt = trunc(g.CreatedAt)
	g.SettledAt = trunc(g.SettledAt)
	t.putGroup(g)
	return nil
}

// GroupGet returns a copy of a group.
func (x *executor) GroupGet(ctx context.Context, params *driver.GroupGetParams) (_ *hoppertype.GroupRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	g := t.st.groups[params.ID]
	if g == nil {
		return nil, fmt.Errorf("get group %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	return cloneGroup(g), nil
}

// GroupUpdate applies a contribution and an open delta. Fold runs under the
// driver's lock, so concurrent folds are serialised and exact.
func (x *executor) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (_ *driver.GroupUpdateResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	cur := t.st.groups[params.ID]
	if cur == nil {
		return nil, fmt.Errorf("update group %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	g := cloneGroup(cur)
	if params.Contribute && !g.Final {
		v := params.Value
		if params.Fold != nil {
			var err error
			v, err = params.Fold(cloneBytes(cur.Value), cur.ValueSet)
			if err != nil {
				return nil, fmt.Errorf("update group %q: fold: %w", params.ID, err)
			}
		}
		g.Value = cloneBytes(v)
		g.ValueSet = true
		if params.Final {
			g.Final = true
		}
	}
	g.Open += params.OpenDelta
	settled := false
	switch {
	case g.State != hoppertype.GroupSettled && params.OpenDelta < 0 && g.Open <= 0:
		g.State = hoppertype.GroupSettled
		g.SettledAt = trunc(params.Now)
		settled = true
	case g.State == hoppertype.GroupSettled && g.Open > 0:
		g.State = hoppertype.GroupOpen
		g.SettledAt = time.Time{}
	}
	t.putGroup(g)
	return &driver.GroupUpdateResult{Group: cloneGroup(g), Settled: settled}, nil
}

// KeySetIfAbsent stores the key unless it exists and has not expired. A key
// with an ExpiresAt can be taken again once Now is after it.
func (x *executor) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (_ bool, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return false, err
	}
	defer x.end(t, &err)
	now := trunc(params.Now)
	if cur, ok := t.st.keys[params.Key]; ok && (cur.expiresAt.IsZero() || !cur.expiresAt.Before(now)) {
		return false, nil
	}
	t.putKey(params.Key, keyRow{value: cloneBytes(params.Value), expiresAt: trunc(params.ExpiresAt)})
	return true, nil
}

// LeaderAttempt takes the leadership when it is free or expired (a new term)
// or renews it for its holder (the same term), and returns the holder.
func (x *executor) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (_ *driver.LeaderRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Owner == "" {
		return nil, fmt.Errorf("attempt leadership %q: empty owner", params.Name)
	}
	now := trunc(params.Now)
	expires := trunc(params.Now.Add(params.TTL))
	cur := t.st.leaders[params.Name]
	var next *driver.LeaderRow
	switch {
	case cur == nil:
		next = &driver.LeaderRow{Name: params.Name, Owner: params.Owner, Term: 1, ExpiresAt: expires}
	case cur.Owner == params.Owner:
		next = &driver.LeaderRow{Name: params.Name, Owner: params.Owner, Term: cur.Term, ExpiresAt: expires}
	case cur.Owner == "" || !cur.ExpiresAt.After(now):
		next = &driver.LeaderRow{Name: params.Name, Owner: params.Owner, Term: cur.Term + 1, ExpiresAt: expires}
	default:
		c := *cur
		return &c, nil
	}
	t.putLeader(next)
	c := *next
	return &c, nil
}

// LeaderResign frees the leadership if Owner holds it. The term is kept, so
// the next holder's term is still higher.
func (x *executor) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	cur := t.st.leaders[params.Name]
	if cur == nil || cur.Owner != params.Owner || params.Owner == "" {
		return nil
	}
	t.putLeader(&driver.LeaderRow{Name: cur.Name, Term: cur.Term})
	return nil
}

// QueueSetPaused stores the queue's paused flag.
func (x *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	t.putQueue(&driver.QueueRow{Name: params.Name, Paused: params.Paused, UpdatedAt: trunc(params.Now)})
	return nil
}

// QueueList returns copies of the stored queue rows ordered by name.
func (x *executor) QueueList(ctx context.Context, _ *driver.QueueListParams) (_ []*driver.QueueRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := make([]*driver.QueueRow, 0, len(t.st.queueRows))
	for _, q := range t.st.queueRows {
		c := *q
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *driver.QueueRow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// QueueDepthList reads each queue's backlog. The memory store walks its
// jobs (it holds no more than fit in memory), counting as the contract
// says, so its figures match the other stores'.
func (x *executor) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) (_ []*driver.QueueDepthRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Cap <= 0 {
		return nil, fmt.Errorf("queue depth: cap must be > 0")
	}
	now := trunc(params.Now)
	rows := map[string]*driver.QueueDepthRow{}
	get := func(q string) *driver.QueueDepthRow {
		r := rows[q]
		if r == nil {
			r = &driver.QueueDepthRow{Queue: q}
			rows[q] = r
		}
		return r
	}
	if params.Queue != "" {
		get(params.Queue)
	} else {
		for name := range t.st.queueRows {
			get(name)
		}
	}
	for _, e := range t.st.jobs {
		j := e.row
		if params.Queue != "" && j.Queue != params.Queue {
			continue
		}
		due := false
		switch j.State {
		case hoppertype.JobStatePending:
			due = true
		case hoppertype.JobStateScheduled, hoppertype.JobStateRetrying:
			if j.RunAt.After(now) {
				get(j.Queue).Delayed++
				continue
			}
			due = true
		case hoppertype.JobStateRunning:
			get(j.Queue).Running++
		}
		if due {
			r := get(j.Queue)
			r.Due++
			if r.OldestDueAt.IsZero() || j.RunAt.Before(r.OldestDueAt) {
				r.OldestDueAt = j.RunAt
			}
		}
	}
	out := make([]*driver.QueueDepthRow, 0, len(rows))
	for _, r := range rows {
		r.Due = min(r.Due, params.Cap+1)
		r.Delayed = min(r.Delayed, params.Cap+1)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *driver.QueueDepthRow) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// KeyDeleteExpired deletes keys that expired before Before, at most Limit.
func (x *executor) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (_ int, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer x.end(t, &err)
	before := trunc(params.Before)
	var victims []string
	for k, row := range t.st.keys {
		if !row.expiresAt.IsZero() && row.expiresAt.Before(before) {
			victims = append(victims, k)
		}
	}
	slices.Sort(victims)
	if params.Limit > 0 && len(victims) > params.Limit {
		victims = victims[:params.Limit]
	}
	for _, k := range victims {
		old := t.st.keys[k]
		delete(t.st.keys, k)
		t.undo = append(t.undo, func() { t.st.keys[k] = old })
	}
	return len(victims), nil
}

// WorkerUpsert stores a copy of a worker's row.
func (x *executor) WorkerUpsert(ctx context.Context, params *driver.WorkerUpsertParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	c := *params.Row
	c.StartedAt, c.SeenAt, c.Info = trunc(c.StartedAt), trunc(c.SeenAt), cloneBytes(c.Info)
	if _, ok := t.st.workers[c.ID]; !ok {
		t.appendChange(&hoppertype.Change{Kind: hoppertype.ChangeWorker, EntityID: c.ID, State: hoppertype.ChangeStateJoined})
	}
	put(t, t.st.workers, c.ID, &c)
	return nil
}

// WorkerList returns copies of the workers seen at or after SeenAfter.
func (x *executor) WorkerList(ctx context.Context, params *driver.WorkerListParams) (_ []*driver.WorkerRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := []*driver.WorkerRow{}
	for _, id := range slices.Sorted(maps.Keys(t.st.workers)) {
		w := t.st.workers[id]
		if !w.SeenAt.Before(trunc(params.SeenAfter)) {
			c := *w
			c.Info = cloneBytes(w.Info)
			out = append(out, &c)
		}
	}
	return out, nil
}

// WorkerDelete removes one worker, or those last seen before Before.
func (x *executor) WorkerDelete(ctx context.Context, params *driver.WorkerDeleteParams) (_ int, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer x.end(t, &err)
	var victims []string
	for id, w := range t.st.workers {
		if (params.ID != "" && id == params.ID) || (params.ID == "" && w.SeenAt.Before(trunc(params.Before))) {
			victims = append(victims, id)
		}
	}
	slices.Sort(victims)
	for _, id := range victims {
		old := t.st.workers[id]
		delete(t.st.workers, id)
		t.undo = append(t.undo, func() { t.st.workers[id] = old })
		t.appendChange(&hoppertype.Change{Kind: hoppertype.ChangeWorker, EntityID: id, Prev: hoppertype.ChangeStateJoined, State: hoppertype.ChangeStateLeft})
	}
	if !params.ChangesBefore.IsZero() {
		t.dropUnownedChanges(trunc(params.ChangesBefore))
	}
	return len(victims), nil
}
