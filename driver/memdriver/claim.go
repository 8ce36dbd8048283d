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

// JobClaim promotes the queue's due jobs, then pops claimable jobs from the
// queue's pending heap. Entries of other types are set aside and pushed back,
// so the heap stays intact for other claimers.
func (x *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) (_ []*hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	q := t.st.queues[params.Queue]
	if q == nil {
		return []*hoppertype.JobRow{}, nil
	}
	now := trunc(params.Now)
	t.promote(q, now, -1)
	if qr := t.st.queueRows[params.Queue]; (qr != nil && qr.Paused) || params.Limit <= 0 {
		return []*hoppertype.JobRow{}, nil
	}
	expires := trunc(params.LeaseExpiresAt)
	out := make([]*hoppertype.JobRow, 0, min(params.Limit, q.livePending))
	var skipped []heapItem
	for len(out) < params.Limit {
		it, ok := q.pending.pop()
		if !ok {
			break
		}
		e, live := t.st.live(it)
		if !live {
			continue
		}
		if len(params.Types) > 0 && !slices.Contains(params.Types, e.row.Type) {
			skipped = append(skipped, it)
			continue
		}
		if k := e.row.ConcurrencyKey; k != "" && e.row.ConcurrencyLimit > 0 && t.st.keyRunning[k] >= e.row.ConcurrencyLimit {
			skipped = append(skipped, it) // its key is at its limit
			continue
		}
		row := e.row.Clone()
		row.State = hoppertype.JobStateRunning
		row.Attempt++
		row.LeaseToken = t.st.nextToken(row.LeaseToken)
		row.LeaseExpiresAt = expires
		row.Worker = params.Worker
		row.StartedAt = now
		if row.StartedAt.Before(row.RunAt) {
			// Made due after the claimer read its clock: it starts, and
			// its lease runs, from its RunAt.
			row.StartedAt = row.RunAt
			row.LeaseExpiresAt = row.RunAt.Add(expires.Sub(now))
		}
		t.putJob(row)
		out = append(out, row.Clone())
	}
	for _, it := range skipped {
		q.pending.push(it)
	}
	return out, nil
}

// promote makes the queue's scheduled and retrying jobs with RunAt <= now
// pending, at most limit of them (no limit when limit < 0), and returns how
// many it moved.
func (t *executor) promote(q *queueIndex, now time.Time, limit int) int {
	n := 0
	for limit < 0 || n < limit {
		e, ok := t.dueHead(q, now)
		if !ok {
			break
		}
		q.scheduled.pop()
		row := e.row.Clone()
		row.State = hoppertype.JobStatePending
		t.putJob(row)
		n++
	}
	return n
}

// dueHead drops stale entries from the top of the queue's scheduled heap and
// returns its earliest job if it is due at now.
func (t *executor) dueHead(q *queueIndex, now time.Time) (*jobEntry, bool) {
	e, ok := t.scheduledHead(q)
	if !ok || e.row.RunAt.After(now) {
		return nil, false
	}
	return e, true
}

// scheduledHead drops stale entries from the top of the queue's scheduled
// heap and returns the earliest live one.
func (t *executor) scheduledHead(q *queueIndex) (*jobEntry, bool) {
	for {
		it, ok := q.scheduled.peek()
		if !ok {
			return nil, false
		}
		if e, live := t.st.live(it); live {
			return e, true
		}
		q.scheduled.pop()
	}
}

// JobPromote promotes due jobs in every queue, earliest RunAt first across
// queues, at most Limit (no limit when Limit <= 0).
func (x *executor) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (_ int, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer x.end(t, &err)
	now := trunc(params.Now)
	if params.Limit <= 0 {
		n := 0
		for _, q := range t.st.queues {
			n += t.promote(q, now, -1)
		}
		return n, nil
	}
	n := 0
	for n < params.Limit {
		var best *queueIndex
		var bestRow *hoppertype.JobRow
		for _, q := range t.st.queues {
			e, ok := t.dueHead(q, now)
			if !ok {
				continue
			}
			if bestRow == nil || e.row.RunAt.Before(bestRow.RunAt) ||
				(e.row.RunAt.Equal(bestRow.RunAt) && e.row.ID < bestRow.ID) {
				best, bestRow = q, e.row
			}
		}
		if best == nil {
			break
		}
		n += t.promote(best, now, 1)
	}
	return n, nil
}

// JobNextRunAt returns the earliest RunAt of the queue's scheduled and
// retrying jobs, or the zero time.
func (x *executor) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (_ time.Time, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer x.end(t, &err)
	q := t.st.queues[params.Queue]
	if q == nil {
		return time.Time{}, nil
	}
	e, ok := t.scheduledHead(q)
	if !ok {
		return time.Time{}, nil
	}
	return e.row.RunAt, nil
}

// held returns the job if it is running under token.
func (t *executor) held(id string, token int64) (*hoppertype.JobRow, error) {
	e := t.st.jobs[id]
	if e == nil {
		return nil, hoppertype.ErrNotFound
	}
	if e.row.State != hoppertype.JobStateRunning || e.row.LeaseToken != token {
		return nil, hoppertype.ErrLeaseLost
	}
	return e.row, nil
}

// JobHeartbeat extends the leases still held and reports each lease.
func (x *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) (_ []driver.JobHeartbeatResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	expires := trunc(params.ExpiresAt)
	out := make([]driver.JobHeartbeatResult, len(params.Leases))
	for i, l := range params.Leases {
		out[i].ID = l.ID
		cur, err := t.held(l.ID, l.Token)
		if err != nil {
			continue
		}
		row := cur.Clone()
		row.LeaseExpiresAt = expires
		t.putJob(row)
		if params.Message != "" {
			t.heartbeatChanged(row, params.Message)
		}
		out[i].Held = true
		out[i].CancelRequested = row.CancelRequested
	}
	return out, nil
}

// JobFinishMany applies each transition whose lease still holds.
func (x *executor) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) (_ []driver.JobFinishResult, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := make([]driver.JobFinishResult, len(params.Items))
	for i := range params.Items {
		p := &params.Items[i]
		cur, err := t.held(p.ID, p.LeaseToken)
		if err == nil && !p.RequireLeaseExpiredBefore.IsZero() &&
			!cur.LeaseExpiresAt.Before(trunc(p.RequireLeaseExpiredBefore)) {
			err = hoppertype.ErrLeaseLost
		}
		if err != nil {
			out[i].Err = fmt.Errorf("finish job %q: %w", p.ID, err)
			continue
		}
		row := cur.Clone()
		row.State = p.State
		row.Attempt = p.Attempt
		row.RunAt = trunc(p.RunAt)
		row.Result = cloneBytes(p.Result)
		row.Error = cloneError(p.Error)
		row.EndedAt = trunc(p.EndedAt)
		row.Stuck = cloneStuck(p.Stuck)
		row.LeaseExpiresAt = time.Time{}
		row.Worker = ""
		t.putJob(row)
		t.observeGates(row.ID, cur.State, row.State, row.EndedAt)
		out[i].Job = row.Clone()
	}
	return out, nil
}

// JobListExpiredLeases returns running jobs whose lease expired before Now,
// or held by one of Workers, oldest expiry first, at most Limit (no limit
// when Limit <= 0).
func (x *executor) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) (_ []*hoppertype.JobRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	now := trunc(params.Now)
	var rows []*hoppertype.JobRow
	for id := range t.st.running {
		if r := t.st.jobs[id].row; r.LeaseExpiresAt.Before(now) || slices.Contains(params.Workers, r.Worker) {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int {
		if c := a.LeaseExpiresAt.Compare(b.LeaseExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if params.Limit > 0 && len(rows) > params.Limit {
		rows = rows[:params.Limit]
	}
	out := make([]*hoppertype.JobRow, len(rows))
	for i, r := range rows {
		out[i] = r.Clone()
	}
	return out, nil
}
