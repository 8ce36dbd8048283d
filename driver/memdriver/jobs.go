package memdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobInsertMany inserts jobs in order; a duplicate id undoes the whole call.
func (x *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) (_ []driver.JobInsertResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	mark := len(t.undo)
	out := make([]driver.JobInsertResult, 0, len(params.Jobs))
	for i, in := range params.Jobs {
		if in == nil || in.ID == "" {
			t.undoTo(mark)
			return nil, fmt.Errorf("insert jobs: job %d has no id", i)
		}
		if in.UniqueKey != "" {
			if holder, ok := t.st.unique[uniqueKey{in.Type, in.UniqueKey}]; ok {
				out = append(out, driver.JobInsertResult{Job: t.st.jobs[holder].row.Clone(), Existing: true})
				continue
			}
		}
		if t.st.jobs[in.ID] != nil {
			t.undoTo(mark)
			return nil, fmt.Errorf("insert jobs: id %q: %w", in.ID, hoppertype.ErrDuplicateID)
		}
		row := in.Clone()
		truncJob(row)
		t.putJob(row)
		out = append(out, driver.JobInsertResult{Job: row.Clone()})
	}
	return out, nil
}

// JobGet returns a copy of one job.
func (x *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (_ *hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	e := t.st.jobs[params.ID]
	if e == nil {
		return nil, fmt.Errorf("get job %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	return e.row.Clone(), nil
}

// JobGetMany returns copies of the jobs that exist among IDs, in their order.
func (x *executor) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) (_ []*hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := make([]*hoppertype.JobRow, 0, len(params.IDs))
	for _, id := range params.IDs {
		if e := t.st.jobs[id]; e != nil {
			out = append(out, e.row.Clone())
		}
	}
	return out, nil
}

// JobList filters, orders by id and pages the jobs. It scans the store,
// which is fine for listings in a memory store.
func (x *executor) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	res, err := x.jobScan(ctx, params, 0, false)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// JobScan is JobList over a window of ScanLimit jobs; see driver.Executor.
func (x *executor) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	return x.jobScan(ctx, &params.JobListParams, params.ScanLimit, true)
}

// jobScan lists the jobs params selects; with scan > 0 and an unindexed
// filter, it applies that filter to the first scan jobs the others select.
// mustScan (JobScan) requires scan > 0.
func (x *executor) jobScan(ctx context.Context, params *driver.JobListParams, scan int, mustScan bool) (_ *driver.JobScanResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if mustScan && scan <= 0 {
		return nil, errors.New("scan jobs: scan limit must be > 0")
	}
	if params.Limit <= 0 {
		return nil, errors.New("list jobs: limit must be > 0")
	}
	states := stateSet(params.States)
	indexed := func(r *hoppertype.JobRow) bool {
		switch {
		case len(states) > 0 && !states[r.State],
			len(params.Types) > 0 && !slices.Contains(params.Types, r.Type),
			len(params.Queues) > 0 && !slices.Contains(params.Queues, r.Queue),
			params.GroupID != "" && r.GroupID != params.GroupID,
			params.ParentID != "" && r.ParentID != params.ParentID,
			!params.QueuedAfter.IsZero() && r.QueuedAt.Before(trunc(params.QueuedAfter)),
			!params.QueuedBefore.IsZero() && !r.QueuedAt.Before(trunc(params.QueuedBefore)),
			!params.EndedAfter.IsZero() && (r.EndedAt.IsZero() || r.EndedAt.Before(trunc(params.EndedAfter))),
			!params.EndedBefore.IsZero() && (r.EndedAt.IsZero() || !r.EndedAt.Before(trunc(params.EndedBefore))),
			params.Cursor != "" && params.Ascending && r.ID <= params.Cursor,
			params.Cursor != "" && !params.Ascending && r.ID >= params.Cursor,
			len(params.SkipRunStatuses) > 0 && t.st.runs[r.ID] != nil && slices.Contains(params.SkipRunStatuses, t.st.runs[r.ID].Status):
			return false
		}
		return true
	}
	unindexed := func(r *hoppertype.JobRow) bool {
		switch {
		case params.UniqueKey != "" && r.UniqueKey != params.UniqueKey,
			params.ErrorContains != "" && (r.Error == nil || !strings.Contains(r.Error.Message, params.ErrorContains)):
			return false
		}
		for k, v := range params.Metadata {
			if got, ok := r.Metadata[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	var rows []*hoppertype.JobRow
	if len(params.IDs) > 0 {
		seen := make(map[string]bool, len(params.IDs))
		for _, id := range params.IDs {
			if e := t.st.jobs[id]; e != nil && !seen[id] && indexed(e.row) {
				seen[id] = true
				rows = append(rows, e.row)
			}
		}
	} else {
		for _, e := range t.st.jobs {
			if indexed(e.row) {
				rows = append(rows, e.row)
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if params.Ascending {
			return rows[i].ID < rows[j].ID
		}
		return rows[i].ID > rows[j].ID
	})
	res := &driver.JobScanResult{}
	windowed := scan > 0 && params.Unindexed() && len(rows) >= scan
	if windowed {
		rows = rows[:scan]
	}
	out := []*hoppertype.JobRow{}
	for _, r := range rows {
		if len(out) == params.Limit {
			break
		}
		if unindexed(r) {
			out = append(out, r.Clone())
		}
	}
	if windowed && len(out) < params.Limit {
		res.Next = rows[len(rows)-1].ID
	}
	res.Jobs = out
	return res, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and then
// by state in lifecycle order.
func (x *executor) JobCountByState(ctx context.Context, params *driver.JobCountParams) (_ []driver.JobCount, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	type qs struct {
		queue string
		state hoppertype.JobState
	}
	var rows []*hoppertype.JobRow
	for _, e := range t.st.jobs {
		if (params.Queue == "" || e.row.Queue == params.Queue) && (params.GroupID == "" || e.row.GroupID == params.GroupID) {
			rows = append(rows, e.row)
		}
	}
	if params.GroupID != "" && params.Limit > 0 && len(rows) > params.Limit {
		slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int { return strings.Compare(a.ID, b.ID) })
		rows = rows[:params.Limit]
	}
	counts := make(map[qs]int)
	for _, r := range rows {
		counts[qs{r.Queue, r.State}]++
	}
	out := make([]driver.JobCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, driver.JobCount{Queue: k.queue, State: k.state, Count: n})
	}
	driver.SortJobCounts(out)
	return out, nil
}

// JobCancel cancels a waiting or stuck job, flags a running one, and refuses
// a terminal one.
func (x *executor) JobCancel(ctx context.Context, params *driver.JobCancelParams) (_ *hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	e := t.st.jobs[params.ID]
	if e == nil {
		return nil, fmt.Errorf("cancel job %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	cur := e.row
	switch {
	case cur.State.Terminal():
		return cur.Clone(), fmt.Errorf("cancel job %q in state %s: %w", params.ID, cur.State, hoppertype.ErrStateConflict)
	case cur.State == hoppertype.JobStateRunning:
		if cur.CancelRequested {
			return cur.Clone(), nil
		}
		row := cur.Clone()
		row.CancelRequested = true
		t.putJob(row)
		return row.Clone(), nil
	default:
		row := cur.Clone()
		row.State = hoppertype.JobStateCancelled
		row.EndedAt = trunc(params.Now)
		row.Error = cloneError(params.Error)
		t.putJob(row)
		t.observeGates(row.ID, cur.State, row.State, row.EndedAt)
		return row.Clone(), nil
	}
}

// JobRetry moves the selected jobs back to pending as fresh jobs.
func (x *executor) JobRetry(ctx context.Context, params *driver.JobRetryParams) (_ []driver.JobRetryResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	states := stateSet(params.States)
	inStates := func(r *hoppertype.JobRow) bool {
		if run := t.st.runs[r.ID]; run != nil && slices.Contains(params.SkipRunStatuses, run.Status) {
			return false
		}
		return len(states) == 0 || states[r.State]
	}
	var candidates []*hoppertype.JobRow
	switch {
	case len(params.IDs) > 0:
		seen := make(map[string]bool, len(params.IDs))
		for _, id := range params.IDs {
			if e := t.st.jobs[id]; e != nil && !seen[id] && inStates(e.row) {
				seen[id] = true
				candidates = append(candidates, e.row)
			}
		}
	case params.Type != "" || params.All:
		for _, e := range t.st.jobs {
			if (params.All || e.row.Type == params.Type) && inStates(e.row) {
				candidates = append(candidates, e.row)
			}
		}
		slices.SortFunc(candidates, func(a, b *hoppertype.JobRow) int { return strings.Compare(a.ID, b.ID) })
	}
	now := trunc(params.Now)
	var out []driver.JobRetryResult
	for _, cur := range candidates {
		if params.Limit > 0 && len(out) >= params.Limit {
			break
		}
		if cur.UniqueKey != "" {
			if holder, ok := t.st.unique[uniqueKey{cur.Type, cur.UniqueKey}]; ok && holder != cur.ID {
				continue
			}
		}
		row := cur.Clone()
		row.State = hoppertype.JobStatePending
		row.Attempt = 0
		row.RunAt = now
		row.Result = nil
		row.EndedAt = time.Time{}
		row.LeaseExpiresAt = time.Time{}
		row.Worker = ""
		row.CancelRequested = false
		row.Stuck = nil
		t.putJob(row)
		t.observeGates(row.ID, cur.State, row.State, now)
		out = append(out, driver.JobRetryResult{Job: row.Clone(), PrevState: cur.State})
	}
	return out, nil
}

// JobDeleteFinished deletes terminal jobs of the given states (every
// terminal state when States is empty) that ended before Before, oldest
// first, at most Limit (no limit when Limit <= 0). A deleted job that is a
// workflow run takes its run row, history, hooks and stream with it; a
// settled group whose last job it was, its group row.
func (x *executor) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (_ int, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer x.end(t, &err)
	states := stateSet(params.States)
	before := trunc(params.Before)
	match := func(r *hoppertype.JobRow) bool {
		return r.State.Terminal() && (len(states) == 0 || states[r.State]) &&
			(r.EndedAt.Before(before) || (len(params.IDs) > 0 && params.Before.IsZero()))
	}
	var victims []*hoppertype.JobRow
	if len(params.IDs) > 0 {
		seen := make(map[string]bool, len(params.IDs))
		for _, id := range params.IDs {
			if e := t.st.jobs[id]; e != nil && !seen[id] && match(e.row) {
				seen[id] = true
				victims = append(victims, e.row)
			}
		}
	} else {
		for _, e := range t.st.jobs {
			if match(e.row) {
				victims = append(victims, e.row)
			}
		}
	}
	slices.SortFunc(victims, func(a, b *hoppertype.JobRow) int {
		if c := a.EndedAt.Compare(b.EndedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if params.Limit > 0 && len(victims) > params.Limit {
		victims = victims[:params.Limit]
	}
	groups := map[string]bool{} // the deleted jobs' group rows: true while a job of the group remains
	for _, r := range victims {
		t.deleteJob(r.ID)
		t.deleteRunData(r.ID)
		t.deleteGateData(r.ID)
		if _, ok := t.st.groups[r.GroupID]; ok {
			groups[r.GroupID] = false
		}
	}
	if len(groups) > 0 {
		for _, e := range t.st.jobs {
			if _, ok := groups[e.row.GroupID]; ok {
				groups[e.row.GroupID] = true
			}
		}
		for id, remains := range groups {
			if !remains && t.st.groups[id].State == hoppertype.GroupSettled {
				t.deleteGroup(id)
			}
		}
	}
	return len(victims), nil
}
