package memdriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// schedule returns a copy of the named schedule's row, or a new row.
func (t *executor) schedule(name string) *driver.ScheduleRow {
	if cur := t.st.schedules[name]; cur != nil {
		c := *cur
		return &c
	}
	return &driver.ScheduleRow{Name: name}
}

// stale reports whether a process running a stored schedule (stored) at
// version runs a definition row no longer has.
func stale(row *driver.ScheduleRow, stored bool, version int64) bool {
	return stored && (row.Def == nil || row.Def.Version != version)
}

// seen gives row a FirstSeenAt (now) unless it has one.
func seen(row *driver.ScheduleRow, now time.Time) {
	if row.FirstSeenAt.IsZero() {
		row.FirstSeenAt = trunc(now)
	}
}

// ScheduleUpsert stores a schedule's registration; see driver.Executor.
func (x *executor) ScheduleUpsert(ctx context.Context, params *driver.ScheduleUpsertParams) (_ time.Time, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer x.end(t, &err)
	row := t.schedule(params.Name)
	if stale(row, params.Stored, params.Version) {
		return time.Time{}, nil
	}
	seen(row, params.Now)
	spec := params.Spec
	if row.Def != nil {
		spec = row.Spec
	}
	next := trunc(params.NextAt)
	if row.Spec != spec || next.IsZero() || !row.NextAt.After(next) {
		row.NextAt = next
	}
	row.Spec, row.UpdatedAt = spec, trunc(params.Now)
	put(t, t.st.schedules, row.Name, row)
	return row.FirstSeenAt, nil
}

// ScheduleDefine stores a schedule defined in the store; see
// driver.Executor.
func (x *executor) ScheduleDefine(ctx context.Context, params *driver.ScheduleDefineParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	row := t.schedule(params.Name)
	if row.Def == nil && (row.Spec != "" || !row.NextAt.IsZero() || !row.LastAt.IsZero() || row.Occurrences > 0) {
		return fmt.Errorf("define schedule %q: a schedule in code has the name: %w", params.Name, hoppertype.ErrStateConflict)
	}
	def := params.Def
	def.Input = slices.Clone(def.Input)
	def.DefinedAt = trunc(def.DefinedAt)
	seen(row, params.Now)
	row.Spec, row.Def, row.NextAt, row.UpdatedAt = def.Spec, &def, trunc(params.NextAt), trunc(params.Now)
	put(t, t.st.schedules, row.Name, row)
	return nil
}

// ScheduleRecord records a fired occurrence; see driver.Executor.
func (x *executor) ScheduleRecord(ctx context.Context, params *driver.ScheduleRecordParams) (_ bool, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return false, err
	}
	defer x.end(t, &err)
	row := t.schedule(params.Name)
	if stale(row, params.Stored, params.Version) {
		return false, fmt.Errorf("record occurrence of schedule %q: %w", params.Name, hoppertype.ErrNotFound)
	}
	seen(row, params.Now)
	if !row.Paused {
		row.Occurrences++
		row.LastAt = trunc(params.At)
		t.appendChange(&hoppertype.Change{Kind: hoppertype.ChangeSchedule, EntityID: row.Name, State: hoppertype.ChangeStateFired,
			Attempt: int(row.Occurrences), DueAt: row.LastAt})
	}
	if row.Def == nil {
		row.Spec = params.Spec
	}
	row.NextAt, row.UpdatedAt = trunc(params.NextAt), trunc(params.Now)
	put(t, t.st.schedules, row.Name, row)
	return row.Paused, nil
}

// ScheduleSetPaused stores whether a schedule is paused; see
// driver.Executor.
func (x *executor) ScheduleSetPaused(ctx context.Context, params *driver.ScheduleSetPausedParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	row := t.schedule(params.Name)
	row.Paused, row.UpdatedAt = params.Paused, trunc(params.Now)
	put(t, t.st.schedules, row.Name, row)
	return nil
}

// ScheduleList returns copies of the stored schedules by name; see
// driver.Executor.
func (x *executor) ScheduleList(ctx context.Context, _ *driver.ScheduleListParams) (_ []*driver.ScheduleRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := make([]*driver.ScheduleRow, 0, len(t.st.schedules))
	for _, s := range t.st.schedules {
		c := *s
		if s.Def != nil {
			def := *s.Def
			def.Input = slices.Clone(def.Input)
			c.Def = &def
		}
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *driver.ScheduleRow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ScheduleDelete removes a schedule's stored row; see driver.Executor.
func (x *executor) ScheduleDelete(ctx context.Context, params *driver.ScheduleDeleteParams) (_ bool, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return false, err
	}
	defer x.end(t, &err)
	name := params.Name
	old, had := t.st.schedules[name]
	if !had {
		return false, nil
	}
	delete(t.st.schedules, name)
	t.undo = append(t.undo, func() { t.st.schedules[name] = old })
	return true, nil
}
