package sqlitedriver

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// The hot statements. State predicates are written literally, word for word
// as in the partial indexes, so those indexes apply; INDEXED BY pins them,
// since without statistics the planner may prefer the (state, id) list index
// and sort.
const (
	// promoteQueueSQL makes due jobs of one queue pending (jobs_due).
	promoteQueueSQL = `UPDATE jobs SET state = 'pending' WHERE rowid IN (
	SELECT rowid FROM jobs INDEXED BY jobs_due WHERE queue = ? AND state IN ('scheduled', 'retrying') AND run_at <= ?
	ORDER BY run_at, id LIMIT ?)`

	// promoteAllSQL makes due jobs of every queue pending (jobs_due_all).
	promoteAllSQL = `UPDATE jobs SET state = 'pending' WHERE rowid IN (
	SELECT rowid FROM jobs INDEXED BY jobs_due_all WHERE state IN ('scheduled', 'retrying') AND run_at <= ?
	ORDER BY run_at, id LIMIT ?)`

	// claimSQL claims up to ?6 pending jobs of queue ?5 in claim order
	// (jobs_claim) unless the queue is paused. Each job's new lease token is
	// one more than the token counter ?1, or one more than its current token
	// if that is higher: a token is unique per job, not per claim (the
	// fence is the pair), and one value for the whole claim spares the
	// statement a window over its rows. It returns the claimed rows' rowids
	// (claimedRowsSQL reads them). %s is an optional type filter on ?7.
	claimSQL = `UPDATE jobs SET state = 'running', attempt = jobs.attempt + 1,
	lease_token = max(?1 + 1, jobs.lease_token + 1), lease_expires_at = max(?2, jobs.run_at + (?2 - ?4)), worker = ?3, started_at = max(?4, jobs.run_at)
	WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_claim
		WHERE state = 'pending' AND queue = ?5 %s
		AND NOT EXISTS (SELECT 1 FROM queues WHERE name = ?5 AND paused = 1)
		AND (concurrency_key IS NULL OR concurrency_limit <= 0 OR concurrency_limit >
			(SELECT count(*) FROM jobs AS r WHERE r.concurrency_key = jobs.concurrency_key AND r.state = 'running'))
		ORDER BY priority DESC, run_at, id LIMIT ?6)
	RETURNING rowid`

	// claimedRowsSQL reads the rows a claim took, by rowid, in the claim's
	// transaction. Cheaper than the claim returning them: RETURNING builds
	// each of its rows (29 columns) into a temporary table first (about
	// +3% jobs/s in eight alternated pairs).
	claimedRowsSQL = `SELECT ` + jobCols + ` FROM jobs WHERE rowid IN (SELECT value FROM json_each(?))`

	claimTypesFilter = `AND type IN (SELECT value FROM json_each(?7))`

	// runningOfKeySQL lists the running jobs of a concurrency key.
	runningOfKeySQL = `SELECT id FROM jobs INDEXED BY jobs_concurrency WHERE concurrency_key = ? AND state = 'running'`
	// unclaimSQL gives a job claimed in this transaction back.
	unclaimSQL = `UPDATE jobs SET state = 'pending', attempt = attempt - 1, lease_expires_at = NULL, worker = ''
	WHERE id = ?`

	leaseCounterSQL    = `SELECT value FROM hopper_meta WHERE key = 'lease_token'`
	setLeaseCounterSQL = `UPDATE hopper_meta SET value = max(value, ?) WHERE key = 'lease_token'`

	nextRunAtSQL = `SELECT run_at FROM jobs INDEXED BY jobs_due WHERE queue = ? AND state IN ('scheduled', 'retrying')
	ORDER BY run_at LIMIT 1`

	heartbeatSQL = `UPDATE jobs SET lease_expires_at = ?3
	WHERE id = ?1 AND state = 'running' AND lease_token = ?2 RETURNING cancel_requested`

	// heartbeatChangeSQL records a held heartbeat's message as a change
	// that leaves the job running.
	heartbeatChangeSQL = `INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, detail, at)
	SELECT CASE WHEN type = 'hopper.gate' THEN 'gate' ELSE 'job' END, id, type, queue, state, state, attempt, worker,
		'` + hoppertype.ChangeFieldHeartbeat + `', ?2, CAST(unixepoch('subsec') * 1000000 AS INTEGER)
	FROM jobs WHERE id = ?1`

	// finishSQL applies one transition if the lease is held; ?10, when not
	// NULL, also requires the lease to expire before it (a missing expiry
	// counts as the zero time, ?11).
	finishSQL = `UPDATE jobs SET state = ?3, attempt = ?4, run_at = ?5, result = ?6, error = ?7,
	ended_at = ?8, stuck = ?9, lease_expires_at = NULL, worker = ''
	WHERE id = ?1 AND state = 'running' AND lease_token = ?2
	AND (?10 IS NULL OR coalesce(lease_expires_at, ?11) < ?10)
	RETURNING ` + jobCols

	expiredLeasesSQL = `SELECT ` + jobCols + ` FROM jobs INDEXED BY jobs_lease WHERE state = 'running' AND lease_expires_at < ?
	ORDER BY lease_expires_at, id LIMIT ?`

	// workersLeasesSQL lists the running jobs of the workers in a JSON
	// list, through the running jobs' index (they are few).
	workersLeasesSQL = `SELECT ` + jobCols + ` FROM jobs INDEXED BY jobs_lease WHERE state = 'running'
	AND lease_expires_at IS NOT NULL AND worker IN (SELECT value FROM json_each(?))
	ORDER BY lease_expires_at, id LIMIT ?`
)

// claimSQLAny and claimSQLTypes are claimSQL without and with the type filter.
var (
	claimSQLAny   = fmt.Sprintf(claimSQL, "")
	claimSQLTypes = fmt.Sprintf(claimSQL, claimTypesFilter)
)

// promoteBound caps how many due jobs one claim promotes, so a large backlog
// of due jobs is promoted over several claims instead of stalling one.
func promoteBound(limit int) int { return max(1000, 4*limit) }

// jobClaim promotes the queue's due jobs, then claims pending jobs in claim
// order; see driver.Executor.JobClaim. It writes several times; the caller
// makes it atomic.
func (r *runner) jobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	now := trunc(p.Now).UnixMicro()
	if _, err := r.exec(ctx, promoteQueueSQL, p.Queue, now, promoteBound(p.Limit)); err != nil {
		return nil, fmt.Errorf("claim jobs: promote: %w", err)
	}
	if p.Limit <= 0 {
		return []*hoppertype.JobRow{}, nil
	}
	var base int64
	if err := r.one(ctx, leaseCounterSQL, func(rows *sql.Rows) error { return rows.Scan(&base) }); err != nil {
		return nil, fmt.Errorf("claim jobs: lease counter: %w", err)
	}
	q, args := claimSQLAny, []any{base, micros(trunc(p.LeaseExpiresAt)), p.Worker, now, p.Queue, p.Limit}
	if len(p.Types) > 0 {
		q, args = claimSQLTypes, append(args, jsonList(p.Types))
	}
	rowids, err := column[int64](ctx, r, q, args...)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if len(rowids) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	ridJSON, err := json.Marshal(rowids)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	rows, err := r.jobs(ctx, claimedRowsSQL, string(ridJSON))
	if err != nil {
		return nil, fmt.Errorf("claim jobs: read claimed rows: %w", err)
	}
	if len(rows) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	// RETURNING order is not guaranteed: restore claim order.
	slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	top := base
	for _, j := range rows {
		top = max(top, j.LeaseToken)
	}
	if _, err := r.exec(ctx, setLeaseCounterSQL, top); err != nil {
		return nil, fmt.Errorf("claim jobs: lease counter: %w", err)
	}
	return r.admitKeyed(ctx, rows)
}

// admitKeyed keeps the claimed jobs whose concurrency keys have room: the
// claim's filter counts the jobs running before it, so one claim may take
// more of a key than its limit. The key's other running jobs count first;
// this claim's jobs of the key are admitted in claim order while they fit
// under their limit, and the rest go back to pending, attempts unused.
func (r *runner) admitKeyed(ctx context.Context, rows []*hoppertype.JobRow) ([]*hoppertype.JobRow, error) {
	keys := map[string]bool{}
	for _, j := range rows {
		if j.ConcurrencyKey != "" && j.ConcurrencyLimit > 0 {
			keys[j.ConcurrencyKey] = true
		}
	}
	if len(keys) == 0 {
		return rows, nil
	}
	mine := map[string]bool{}
	for _, j := range rows {
		mine[j.ID] = true
	}
	running := map[string]int{} // the key's running jobs outside this claim
	for key := range keys {
		err := r.each(ctx, runningOfKeySQL, func(rs *sql.Rows) error {
			var id string
			if err := rs.Scan(&id); err != nil {
				return err
			}
			if !mine[id] {
				running[key]++
			}
			return nil
		}, key)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: concurrency key %q: %w", key, err)
		}
	}
	over := driver.ConcurrencyOverflow(rows, running)
	kept := rows[:0]
	for _, j := range rows {
		if !over[j.ID] {
			kept = append(kept, j)
			continue
		}
		if _, err := r.exec(ctx, unclaimSQL, j.ID); err != nil {
			return nil, fmt.Errorf("claim jobs: give back job %q: %w", j.ID, err)
		}
	}
	return kept, nil
}

// jobPromote makes due jobs of every queue pending, earliest first, at most
// Limit (no limit when Limit <= 0).
func (r *runner) jobPromote(ctx context.Context, p *driver.JobPromoteParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	res, err := r.exec(ctx, promoteAllSQL, trunc(p.Now).UnixMicro(), limit)
	if err != nil {
		return 0, fmt.Errorf("promote jobs: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// jobNextRunAt returns the earliest RunAt of the queue's scheduled and
// retrying jobs, or the zero time.
func (r *runner) jobNextRunAt(ctx context.Context, queue string) (time.Time, error) {
	var v int64
	err := r.one(ctx, nextRunAtSQL, func(rows *sql.Rows) error { return rows.Scan(&v) }, queue)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("next run at of queue %q: %w", queue, err)
	}
	return fromMicrosNN(v), nil
}

// jobHeartbeat extends the leases still held and reports each lease.
func (r *runner) jobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	expires := micros(trunc(p.ExpiresAt))
	out := make([]driver.JobHeartbeatResult, len(p.Leases))
	for i, l := range p.Leases {
		out[i].ID = l.ID
		err := r.one(ctx, heartbeatSQL, func(rows *sql.Rows) error {
			out[i].Held = true
			return rows.Scan(&out[i].CancelRequested)
		}, l.ID, l.Token, expires)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("heartbeat job %q: %w", l.ID, err)
		}
		if out[i].Held && p.Message != "" {
			if _, err := r.exec(ctx, heartbeatChangeSQL, l.ID, p.Message); err != nil {
				return nil, fmt.Errorf("heartbeat job %q: record message: %w", l.ID, err)
			}
		}
	}
	return out, nil
}

// jobFinishMany applies each transition whose lease still holds, many per
// statement. It writes several times; the caller makes it atomic.
func (r *runner) jobFinishMany(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	out := make([]driver.JobFinishResult, len(p.Items))
	index := make(map[string]int, len(p.Items))
	for i := range p.Items {
		if _, dup := index[p.Items[i].ID]; dup {
			// The same job twice: items apply in order, one at a time.
			return r.jobFinishEach(ctx, p)
		}
		index[p.Items[i].ID] = i
	}
	// Items whose claimed rows the caller passed return only what the
	// store may have changed since; the others return their whole row.
	var claimed, whole []*driver.JobFinishParams
	for i := range p.Items {
		if it := &p.Items[i]; it.Claimed != nil && it.Claimed.ID == it.ID && it.Claimed.LeaseToken == it.LeaseToken {
			claimed = append(claimed, it)
		} else {
			whole = append(whole, it)
		}
	}
	// Each group in chunks: its statements, and how a returned row is read.
	groups := []struct {
		items []*driver.JobFinishParams
		sqls  map[int]string
		read  func(rows *sql.Rows) error
	}{
		{whole, finishJobsSQLs, func(rows *sql.Rows) error {
			j, err := scanJob(rows)
			if err == nil {
				out[index[j.ID]].Job = j
			}
			return err
		}},
		{claimed, finishClaimedSQLs, func(rows *sql.Rows) error {
			var id string
			var cancel bool
			if err := rows.Scan(&id, &cancel); err != nil {
				return err
			}
			i, ok := index[id]
			if !ok {
				return fmt.Errorf("finished a job not asked for: %q", id)
			}
			out[i].Job = driver.FinishedRow(&p.Items[i], cancel)
			return nil
		}},
	}
	for _, g := range groups {
		for items := g.items; len(items) > 0; {
			n := chunks(len(items))[0]
			args, err := finishChunkArgs(items[:n])
			if err != nil {
				return nil, err
			}
			items = items[n:]
			if err := r.each(ctx, g.sqls[n], g.read, args...); err != nil {
				return nil, fmt.Errorf("finish jobs: %w", err)
			}
		}
	}
	// Not applied: tell a missing job from a lost lease.
	var missed []string
	for i := range out {
		if out[i].Job == nil {
			missed = append(missed, p.Items[i].ID)
		}
	}
	if len(missed) == 0 {
		return out, nil
	}
	found, err := column[string](ctx, r, `SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?))`, jsonList(missed))
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	exists := make(map[string]bool, len(found))
	for _, id := range found {
		exists[id] = true
	}
	for i := range out {
		if out[i].Job == nil {
			lost := hoppertype.ErrNotFound
			if exists[p.Items[i].ID] {
				lost = hoppertype.ErrLeaseLost
			}
			out[i].Err = fmt.Errorf("finish job %q: %w", p.Items[i].ID, lost)
		}
	}
	return out, nil
}

// finishChunkArgs returns the values of items for one finishJobsSQL (or
// finishClaimedSQL) statement.
func finishChunkArgs(items []*driver.JobFinishParams) ([]any, error) {
	args := make([]any, 0, len(items)*finishCols)
	for _, it := range items {
		a, err := finishArgs(it)
		if err != nil {
			return nil, err
		}
		args = append(args, a...)
	}
	return args, nil
}

// finishArgs returns the values of one item of finishJobsSQL (and, in the
// same order, of finishSQL).
func finishArgs(it *driver.JobFinishParams) ([]any, error) {
	stuck, err := jsonStuck(it.Stuck)
	if err != nil {
		return nil, fmt.Errorf("finish job %q: %w", it.ID, err)
	}
	var require any
	if !it.RequireLeaseExpiredBefore.IsZero() {
		require = trunc(it.RequireLeaseExpiredBefore).UnixMicro()
	}
	return []any{it.ID, it.LeaseToken, string(it.State), it.Attempt, trunc(it.RunAt).UnixMicro(), it.Result,
		jsonError(it.Error), micros(trunc(it.EndedAt)), stuck, require}, nil
}

// jobFinishEach applies the items one statement each, in order.
func (r *runner) jobFinishEach(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	out := make([]driver.JobFinishResult, len(p.Items))
	for i := range p.Items {
		it := &p.Items[i]
		args, err := finishArgs(it)
		if err != nil {
			return nil, err
		}
		j, err := r.job(ctx, finishSQL, append(args, zeroMicros)...)
		if err == nil {
			out[i].Job = j
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("finish job %q: %w", it.ID, err)
		}
		lost := hoppertype.ErrLeaseLost
		err = r.one(ctx, jobExistsSQL, func(*sql.Rows) error { return nil }, it.ID)
		if errors.Is(err, sql.ErrNoRows) {
			lost = hoppertype.ErrNotFound
		} else if err != nil {
			return nil, fmt.Errorf("finish job %q: %w", it.ID, err)
		}
		out[i].Err = fmt.Errorf("finish job %q: %w", it.ID, lost)
	}
	return out, nil
}

// jobListExpiredLeases returns running jobs whose lease expired before Now,
// or held by one of Workers, oldest expiry first, at most Limit (no limit
// when Limit <= 0).
func (r *runner) jobListExpiredLeases(ctx context.Context, p *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := r.jobs(ctx, expiredLeasesSQL, trunc(p.Now).UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired leases: %w", err)
	}
	if len(p.Workers) > 0 {
		held, err := r.jobs(ctx, workersLeasesSQL, jsonList(p.Workers), limit)
		if err != nil {
			return nil, fmt.Errorf("list dead workers' leases: %w", err)
		}
		rows = driver.MergeLeases(rows, held, p.Limit)
	}
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	return rows, nil
}
