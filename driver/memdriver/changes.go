package memdriver

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// changeEntry is one change of the feed; gone is set when its entity was
// deleted (the entry is dropped from the feed at the next compaction).
type changeEntry struct {
	ch   *hoppertype.Change
	gone bool
}

// feed is the store's change feed: entries in Position order (Tx equals
// Position: the store has one writer at a time), indexed by entity.
type feed struct {
	entries  []*changeEntry
	byEntity map[string][]*changeEntry
	seq      int64
	gone     int
	cursors  map[string]*driver.CursorRow
}

func newFeed() *feed {
	return &feed{byEntity: make(map[string][]*changeEntry), cursors: make(map[string]*driver.CursorRow)}
}

// appendChange records a change and how to take it back.
func (t *executor) appendChange(ch *hoppertype.Change) {
	f := t.st.feed
	f.seq++
	ch.Position, ch.Tx = f.seq, f.seq
	ch.At = trunc(t.st.now())
	e := &changeEntry{ch: ch}
	f.entries = append(f.entries, e)
	f.byEntity[ch.EntityID] = append(f.byEntity[ch.EntityID], e)
	t.undo = append(t.undo, func() {
		f.entries = f.entries[:len(f.entries)-1]
		list := f.byEntity[ch.EntityID]
		if len(list) <= 1 {
			delete(f.byEntity, ch.EntityID)
		} else {
			f.byEntity[ch.EntityID] = list[:len(list)-1]
		}
	})
}

// jobChanged records the change from old (nil for an insert) to row when
// the job's state differs.
func (t *executor) jobChanged(old, row *hoppertype.JobRow) {
	if old != nil && old.State == row.State {
		return
	}
	ch := &hoppertype.Change{Kind: hoppertype.ChangeJob, EntityID: row.ID, Type: row.Type, Queue: row.Queue,
		State: string(row.State), Attempt: row.Attempt, Worker: row.Worker,
		Error: cloneError(row.Error), Stuck: cloneStuck(row.Stuck)}
	if row.Type == hoppertype.GateType {
		ch.Kind = hoppertype.ChangeGate
	}
	if old != nil {
		ch.Prev = string(old.State)
		ch.Fields = jobFields(old, row)
		if row.State == hoppertype.JobStateRunning {
			ch.DueAt = trunc(old.RunAt)
		}
	}
	t.appendChange(ch)
}

// heartbeatChanged records a heartbeat's message as a change that leaves
// the running job running.
func (t *executor) heartbeatChanged(row *hoppertype.JobRow, message string) {
	ch := &hoppertype.Change{Kind: hoppertype.ChangeJob, EntityID: row.ID, Type: row.Type, Queue: row.Queue,
		Prev: string(row.State), State: string(row.State), Attempt: row.Attempt, Worker: row.Worker,
		Fields: []string{hoppertype.ChangeFieldHeartbeat}, Detail: message}
	if row.Type == hoppertype.GateType {
		ch.Kind = hoppertype.ChangeGate
	}
	t.appendChange(ch)
}

// jobFields names the fields besides the state that differ between a and b.
func jobFields(a, b *hoppertype.JobRow) []string {
	var out []string
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(a.Attempt != b.Attempt, "attempt")
	add(!a.RunAt.Equal(b.RunAt), "run_at")
	add(!a.StartedAt.Equal(b.StartedAt), "started_at")
	add(!a.EndedAt.Equal(b.EndedAt), "ended_at")
	add(a.Worker != b.Worker, "worker")
	add(!bytes.Equal(a.Result, b.Result) || (a.Result == nil) != (b.Result == nil), "result")
	add(!errorEqual(a.Error, b.Error), "error")
	add(!stuckEqual(a.Stuck, b.Stuck), "stuck")
	return out
}

func errorEqual(a, b *hoppertype.ErrorInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func stuckEqual(a, b *hoppertype.StuckInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Cause != b.Cause || a.Detail != b.Detail || !a.ObservedAt.Equal(b.ObservedAt) || !slices.Equal(a.BlockerIDs, b.BlockerIDs) {
		return false
	}
	if a.Retryable == nil || b.Retryable == nil {
		return a.Retryable == b.Retryable
	}
	return *a.Retryable == *b.Retryable
}

// runChanged records the change from old (nil for an insert) to row when
// the run's status differs.
func (t *executor) runChanged(old, row *hoppertype.RunRow) {
	if old != nil && old.Status == row.Status {
		return
	}
	ch := &hoppertype.Change{Kind: hoppertype.ChangeRun, EntityID: row.ID, Type: row.Workflow,
		State: string(row.Status), Error: cloneError(row.Error)}
	for _, ev := range t.st.events[row.ID] { // in (Attempt, Seq) order: the last is where it stands
		ch.Attempt, ch.Seq = ev.Attempt, ev.Seq
	}
	if old != nil {
		ch.Prev = string(old.Status)
		if !errorEqual(old.Error, row.Error) {
			ch.Fields = []string{"error"}
		}
		if !old.EndedAt.Equal(row.EndedAt) {
			ch.Fields = append([]string{"ended_at"}, ch.Fields...)
		}
	}
	if j := t.st.jobs[row.ID]; j != nil {
		ch.Queue = j.row.Queue
	}
	t.appendChange(ch)
}

// dropChanges removes an entity's changes with the entity, recording how
// to restore them.
func (t *executor) dropChanges(id string) {
	f := t.st.feed
	list := f.byEntity[id]
	if len(list) == 0 {
		return
	}
	delete(f.byEntity, id)
	for _, e := range list {
		e.gone = true
	}
	f.gone += len(list)
	t.undo = append(t.undo, func() {
		for _, e := range list {
			e.gone = false
		}
		f.gone -= len(list)
		f.byEntity[id] = list
	})
}

// dropUnownedChanges removes the worker and schedule changes written
// before before, recording how to restore them.
func (t *executor) dropUnownedChanges(before time.Time) {
	f := t.st.feed
	var dropped []*changeEntry
	for _, e := range f.entries {
		if !e.gone && (e.ch.Kind == hoppertype.ChangeWorker || e.ch.Kind == hoppertype.ChangeSchedule) && e.ch.At.Before(before) {
			e.gone = true
			dropped = append(dropped, e)
		}
	}
	if len(dropped) == 0 {
		return
	}
	f.gone += len(dropped)
	t.undo = append(t.undo, func() {
		for _, e := range dropped {
			e.gone = false
		}
		f.gone -= len(dropped)
	})
}

// compact drops deleted entries from the feed once they are many. It runs
// after a commit, never inside a transaction (whose undo log may point at
// entries).
func (f *feed) compact() {
	if f.gone < 1024 || f.gone < len(f.entries)/2 {
		return
	}
	kept := f.entries[:0]
	for _, e := range f.entries {
		if !e.gone {
			kept = append(kept, e)
		}
	}
	clear(f.entries[len(kept):])
	f.entries = kept
	f.gone = 0
}

func cloneChange(ch *hoppertype.Change) *hoppertype.Change {
	c := *ch
	c.Fields = slices.Clone(ch.Fields)
	c.Error = cloneError(ch.Error)
	c.Stuck = cloneStuck(ch.Stuck)
	return &c
}

// ChangeList reads the change feed; see driver.Executor. Outside a
// transaction, Own lists nothing.
func (x *executor) ChangeList(ctx context.Context, params *driver.ChangeListParams) (_ []*hoppertype.Change, err error) {
	if params.Own && !x.inTx {
		return nil, ctx.Err()
	}
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, fmt.Errorf("list changes: limit must be > 0")
	}
	f := t.st.feed
	var out []*hoppertype.Change
	if params.EntityID != "" {
		for _, e := range f.byEntity[params.EntityID] {
			if !e.gone && e.ch.Position > params.After.Position && len(out) < params.Limit {
				out = append(out, cloneChange(e.ch))
			}
		}
		return out, nil
	}
	// Own and feed listings both read the entries after a position: the
	// store has one writer, so the changes after a transaction's mark are
	// its own, and every committed change is final.
	after := params.After
	if params.Own {
		after.Tx = after.Position
	}
	i := sort.Search(len(f.entries), func(i int) bool { return after.Before(f.entries[i].ch) })
	for ; i < len(f.entries) && len(out) < params.Limit; i++ {
		if e := f.entries[i]; !e.gone {
			out = append(out, cloneChange(e.ch))
		}
	}
	return out, nil
}

// ChangeListBefore reads the feed backwards; see driver.Executor.
func (x *executor) ChangeListBefore(ctx context.Context, params *driver.ChangeListBeforeParams) (_ []*hoppertype.Change, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, fmt.Errorf("list changes before: limit must be > 0")
	}
	f := t.st.feed
	out := []*hoppertype.Change{}
	before := &hoppertype.Change{Tx: params.Before.Tx, Position: params.Before.Position}
	i := sort.Search(len(f.entries), func(i int) bool { return !hoppertype.CursorOf(f.entries[i].ch).Before(before) }) - 1
	for ; i >= 0 && len(out) < params.Limit; i-- {
		if e := f.entries[i]; !e.gone {
			out = append(out, cloneChange(e.ch))
		}
	}
	return out, nil
}

// ChangeScan reads the feed, returning what passes the filter; see
// driver.Executor.
func (x *executor) ChangeScan(ctx context.Context, params *driver.ChangeScanParams) (_ *driver.ChangeScanResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, fmt.Errorf("scan changes: limit must be > 0")
	}
	f := t.st.feed
	out := &driver.ChangeScanResult{Changes: []*hoppertype.Change{}, Next: params.After}
	i := sort.Search(len(f.entries), func(i int) bool { return params.After.Before(f.entries[i].ch) })
	for n := 0; i < len(f.entries) && n < params.Limit; i++ {
		e := f.entries[i]
		if e.gone {
			continue
		}
		n++
		out.Next = hoppertype.CursorOf(e.ch)
		if params.MatchChange(e.ch) {
			out.Changes = append(out.Changes, cloneChange(e.ch))
		}
	}
	return out, nil
}

// ChangeTail returns the last change's cursor; see driver.Executor.
func (x *executor) ChangeTail(ctx context.Context, _ *driver.ChangeTailParams) (_ hoppertype.ChangeCursor, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return hoppertype.ChangeCursor{}, err
	}
	defer x.end(t, &err)
	f := t.st.feed
	for i := len(f.entries) - 1; i >= 0; i-- {
		if !f.entries[i].gone {
			return hoppertype.CursorOf(f.entries[i].ch), nil
		}
	}
	return hoppertype.ChangeCursor{}, nil
}

// ChangeMark returns the last position written; see driver.Executor.
func (x *executor) ChangeMark(ctx context.Context, _ *driver.ChangeMarkParams) (_ int64, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer x.end(t, &err)
	return t.st.feed.seq, nil
}

// CursorLease takes or renews a feed cursor; see driver.Executor.
func (x *executor) CursorLease(ctx context.Context, params *driver.CursorLeaseParams) (_ *driver.CursorRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Owner == "" || params.Name == "" {
		return nil, fmt.Errorf("lease cursor %q: empty name or owner", params.Name)
	}
	now := trunc(params.Now)
	cur := t.st.feed.cursors[params.Name]
	if cur != nil && cur.Owner != params.Owner && cur.Owner != "" && cur.ExpiresAt.After(now) {
		c := *cur
		return &c, nil
	}
	next := &driver.CursorRow{Name: params.Name, Owner: params.Owner, ExpiresAt: trunc(params.Now.Add(params.TTL)), UpdatedAt: now}
	if cur != nil {
		next.At = cur.At
	}
	put(t, t.st.feed.cursors, params.Name, next)
	c := *next
	return &c, nil
}

// CursorAdvance moves a held cursor forward; see driver.Executor.
func (x *executor) CursorAdvance(ctx context.Context, params *driver.CursorAdvanceParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	now := trunc(params.Now)
	cur := t.st.feed.cursors[params.Name]
	if cur == nil || cur.Owner != params.Owner || !cur.ExpiresAt.After(now) {
		return fmt.Errorf("advance cursor %q: %w", params.Name, hoppertype.ErrLeaseLost)
	}
	next := *cur
	if cur.At.Before(&hoppertype.Change{Tx: params.At.Tx, Position: params.At.Position}) {
		next.At = params.At
	}
	next.ExpiresAt, next.UpdatedAt = trunc(params.Now.Add(params.TTL)), now
	put(t, t.st.feed.cursors, params.Name, &next)
	return nil
}

// CursorList returns the feed cursors by name; see driver.Executor.
func (x *executor) CursorList(ctx context.Context, _ *driver.CursorListParams) (_ []*driver.CursorRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := make([]*driver.CursorRow, 0, len(t.st.feed.cursors))
	for _, c := range t.st.feed.cursors {
		cc := *c
		out = append(out, &cc)
	}
	slices.SortFunc(out, func(a, b *driver.CursorRow) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}
