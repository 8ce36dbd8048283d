package sqlitedriver

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// terminalStates is the SQL list of terminal states, written literally so
// queries match the partial indexes that use it.
const terminalStates = `('succeeded', 'dead', 'expired', 'cancelled')`

const (
	// uniqueHolderSQL finds the non-terminal job holding (type, unique_key);
	// it repeats the jobs_unique predicate so that index serves it.
	uniqueHolderSQL = `SELECT ` + jobCols + ` FROM jobs INDEXED BY jobs_unique
	WHERE type = ? AND unique_key = ? AND unique_key IS NOT NULL AND state NOT IN ` + terminalStates

	getJobSQL = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?`

	getManySQL = `SELECT ` + jobCols + ` FROM jobs WHERE id IN (SELECT value FROM json_each(?))`

	jobExistsSQL = `SELECT 1 FROM jobs WHERE id = ?`
)

// uniqueKey is a (type, unique key) pair.
type uniqueKey struct{ typ, key string }

// jobInsertMany inserts jobs in order; see driver.Executor.JobInsertMany. The
// caller makes it atomic (a duplicate id must leave nothing inserted).
func (r *runner) jobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	out := make([]driver.JobInsertResult, len(params.Jobs))
	var (
		held    map[uniqueKey]*hoppertype.JobRow // keys taken by jobs of this call
		ids     = make(map[string]bool, len(params.Jobs))
		pending []*hoppertype.JobRow
	)
	for i, in := range params.Jobs {
		if in == nil || in.ID == "" {
			return nil, fmt.Errorf("insert jobs: job %d has no id", i)
		}
		if in.UniqueKey != "" {
			k := uniqueKey{in.Type, in.UniqueKey}
			if h := held[k]; h != nil {
				out[i] = driver.JobInsertResult{Job: h.Clone(), Existing: true}
				continue
			}
			holder, err := r.job(ctx, uniqueHolderSQL, in.Type, in.UniqueKey)
			if err == nil {
				out[i] = driver.JobInsertResult{Job: holder, Existing: true}
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("insert jobs: unique key of %q: %w", in.ID, err)
			}
		}
		if ids[in.ID] {
			return nil, fmt.Errorf("insert jobs: id %q: %w", in.ID, hoppertype.ErrDuplicateID)
		}
		ids[in.ID] = true
		stored := storedJob(in)
		out[i] = driver.JobInsertResult{Job: stored}
		pending = append(pending, in)
		if in.UniqueKey != "" && !in.State.Terminal() {
			if held == nil {
				held = make(map[uniqueKey]*hoppertype.JobRow)
			}
			held[uniqueKey{in.Type, in.UniqueKey}] = stored
		}
	}
	for _, n := range chunks(len(pending)) {
		chunk := pending[:n]
		pending = pending[n:]
		args := make([]any, 0, n*jobColCount)
		for _, j := range chunk {
			a, err := jobArgs(j)
			if err != nil {
				return nil, fmt.Errorf("insert jobs: job %q: %w", j.ID, err)
			}
			args = append(args, a...)
		}
		if _, err := r.exec(ctx, insertJobsSQLs[n], args...); err != nil {
			if isPrimaryKeyConflict(err) {
				return nil, r.duplicateOf(ctx, chunk)
			}
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
	}
	return out, nil
}

// duplicateOf names a job of chunk whose id already exists, for the error of
// an insert that hit the primary key.
func (r *runner) duplicateOf(ctx context.Context, chunk []*hoppertype.JobRow) error {
	ids := make([]string, len(chunk))
	for i, j := range chunk {
		ids[i] = j.ID
	}
	var dup string
	r.one(ctx, `SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1`,
		func(rows *sql.Rows) error { return rows.Scan(&dup) }, jsonList(ids))
	return fmt.Errorf("insert jobs: id %q: %w", dup, hoppertype.ErrDuplicateID)
}

// JobInsertManyTx inserts jobs through tx, a *sql.Tx on this database (from
// DB() or from the caller's own *sql.DB on the same file), with the same
// semantics as JobInsertMany: the jobs exist if and only if tx commits. Any
// other tx type is an error wrapping driver.ErrTxType. No notification is
// sent: the engine's poll picks the jobs up after the commit.
func (d *Driver) JobInsertManyTx(ctx context.Context, tx any, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("sqlitedriver: JobInsertManyTx needs a *sql.Tx, got %T: %w", tx, driver.ErrTxType)
	}
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return nil, err
	}
	r := &runner{q: stx, d: d}
	var out []driver.JobInsertResult
	err := r.savepoint(ctx, "hopper_insert", func() error {
		var err error
		out, err = r.jobInsertMany(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobGetTx reads a job through tx, a *sql.Tx JobInsertManyTx takes: it
// sees the jobs tx inserted. A missing job is hoppertype.ErrNotFound; any
// other tx type is an error wrapping driver.ErrTxType.
func (d *Driver) JobGetTx(ctx context.Context, tx any, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("sqlitedriver: JobGetTx needs a *sql.Tx, got %T: %w", tx, driver.ErrTxType)
	}
	if d.closed.Load() {
		return nil, driver.ErrClosed
	}
	r := &runner{q: stx, d: d}
	return r.jobGet(ctx, params.ID)
}

// jobGet returns one job.
func (r *runner) jobGet(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	j, err := r.job(ctx, getJobSQL, id)
	if err != nil {
		return nil, wrapErr(err, fmt.Sprintf("get job %q", id))
	}
	return j, nil
}

// jobGetMany returns the jobs that exist among ids, in the order of ids.
func (r *runner) jobGetMany(ctx context.Context, ids []string) ([]*hoppertype.JobRow, error) {
	if len(ids) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	rows, err := r.jobs(ctx, getManySQL, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	byID := make(map[string]*hoppertype.JobRow, len(rows))
	for _, j := range rows {
		byID[j.ID] = j
	}
	out := make([]*hoppertype.JobRow, 0, len(rows))
	used := make(map[string]bool, len(rows))
	for _, id := range ids {
		if j := byID[id]; j != nil {
			if used[id] {
				j = j.Clone() // a repeated id gets its own copy
			}
			used[id] = true
			out = append(out, j)
		}
	}
	return out, nil
}

// stateFilter is the condition of a listing by states, with its
// arguments. jobs_state_id leaves running jobs out (migration 14): a
// condition without running says so word for word, as the index's WHERE
// does, so the index applies; running jobs alone are read through the
// lease index (they are few). One state is an equality, so the index
// gives the jobs in id order without a sort.
func stateFilter[S ~string](states []S) (string, []any) {
	running := S(hoppertype.JobStateRunning)
	switch {
	case len(states) == 1 && states[0] == running:
		return "state = 'running'", nil
	case len(states) == 1:
		return "state = ? AND state <> 'running'", []any{string(states[0])}
	case slices.Contains(states, running):
		return "state IN (SELECT value FROM json_each(?))", []any{jsonList(states)}
	}
	return "state IN (SELECT value FROM json_each(?)) AND state <> 'running'", []any{jsonList(states)}
}

// jobList filters, orders by id and pages the jobs.
func (r *runner) jobList(ctx context.Context, p *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	if p.Limit <= 0 {
		return nil, errors.New("list jobs: limit must be > 0")
	}
	q, args := jobListSQL(p, jobCols, "")
	rows, err := r.jobs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	return rows, nil
}

// jobScan lists the jobs over a window of ScanLimit: it finds the window's
// last job by the indexed filters alone (jobScanEndSQL), then lists as
// jobList does up to it.
func (r *runner) jobScan(ctx context.Context, p *driver.JobScanParams) (*driver.JobScanResult, error) {
	if p.ScanLimit <= 0 {
		return nil, errors.New("scan jobs: scan limit must be > 0")
	}
	if !p.Unindexed() {
		rows, err := r.jobList(ctx, &p.JobListParams)
		return &driver.JobScanResult{Jobs: rows}, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("list jobs: limit must be > 0")
	}
	q, args := jobScanEndSQL(p)
	end, err := column[string](ctx, r, q, args...)
	if err != nil {
		return nil, fmt.Errorf("scan jobs: %w", err)
	}
	until := ""
	if len(end) > 0 {
		until = end[0]
	}
	q, args = jobListSQL(&p.JobListParams, jobCols, until)
	rows, err := r.jobs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("scan jobs: %w", err)
	}
	res := &driver.JobScanResult{Jobs: rows}
	if rows == nil {
		res.Jobs = []*hoppertype.JobRow{}
	}
	if until != "" && len(rows) < p.Limit {
		res.Next = until
	}
	return res, nil
}

// jobScanEndSQL selects the id of the last job of a JobScan's window: the
// ScanLimit-th job the indexed filters select (none when fewer do), read
// from the id index alone when no other filter is set.
func jobScanEndSQL(p *driver.JobScanParams) (string, []any) {
	w := p.Indexed()
	w.Limit = 1
	q, args := jobListSQL(&w, "id", "")
	return q + " OFFSET ?", append(args, p.ScanLimit-1)
}

// jobListSQL is jobList's statement and its arguments, selecting cols;
// until, when set, is the last id listed (inclusive).
func jobListSQL(p *driver.JobListParams, cols, until string) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	if len(p.IDs) > 0 {
		add("id IN (SELECT value FROM json_each(?))", jsonList(p.IDs))
	}
	if len(p.States) > 0 {
		cond, vs := stateFilter(p.States)
		add(cond, vs...)
	}
	// One type or queue by equality, so jobs_type_id or jobs_queue_id
	// yields its jobs in id order (a list of them is read and sorted).
	switch len(p.Types) {
	case 0:
	case 1:
		add("type = ?", p.Types[0])
	default:
		add("type IN (SELECT value FROM json_each(?))", jsonList(p.Types))
	}
	switch len(p.Queues) {
	case 0:
	case 1:
		add("queue = ?", p.Queues[0])
	default:
		add("queue IN (SELECT value FROM json_each(?))", jsonList(p.Queues))
	}
	if p.GroupID != "" {
		add("group_id = ?", p.GroupID)
	}
	if p.ParentID != "" {
		add("parent_id = ?", p.ParentID)
	}
	if !p.QueuedAfter.IsZero() {
		add("queued_at >= ?", trunc(p.QueuedAfter).UnixMicro())
	}
	if !p.QueuedBefore.IsZero() {
		add("queued_at < ?", trunc(p.QueuedBefore).UnixMicro())
	}
	if !p.EndedAfter.IsZero() {
		add("ended_at >= ?", trunc(p.EndedAfter).UnixMicro())
	}
	if !p.EndedBefore.IsZero() {
		add("ended_at < ?", trunc(p.EndedBefore).UnixMicro())
	}
	if p.UniqueKey != "" {
		add("unique_key = ?", p.UniqueKey)
	}
	if len(p.SkipRunStatuses) > 0 {
		add(skipRunsSQL, jsonList(p.SkipRunStatuses))
	}
	if p.ErrorContains != "" {
		add("instr(json_extract(error, '$.message'), ?) > 0", p.ErrorContains)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
		add("EXISTS (SELECT 1 FROM json_each(metadata) WHERE key = ? AND value = ?)", k, p.Metadata[k])
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	if p.Cursor != "" {
		if p.Ascending {
			add("id > ?", p.Cursor)
		} else {
			add("id < ?", p.Cursor)
		}
	}
	if until != "" {
		if p.Ascending {
			add("id <= ?", until)
		} else {
			add("id >= ?", until)
		}
	}
	q := "SELECT " + cols + " FROM jobs"
	if len(p.States) == 1 && p.States[0] == hoppertype.JobStateRunning {
		// The running jobs are few: read them all and sort, rather than
		// walk every job in id order looking for them.
		q += " INDEXED BY jobs_lease"
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id " + order + " LIMIT ?"
	return q, append(args, p.Limit)
}

// jobCountByState counts jobs per queue and state, ordered by queue and then
// by state in lifecycle order.
func (r *runner) jobCountByState(ctx context.Context, p *driver.JobCountParams) ([]driver.JobCount, error) {
	q := `SELECT queue, state, count(*) FROM jobs GROUP BY queue, state`
	var args []any
	switch {
	case p.GroupID != "":
		// jobs_group, in id order, up to the limit (-1: none).
		q = countGroupSQL
		args = append(args, p.GroupID, p.Queue, cmp.Or(p.Limit, -1))
	case p.Queue != "":
		q = `SELECT queue, state, count(*) FROM jobs WHERE queue = ? GROUP BY queue, state`
		args = append(args, p.Queue)
	}
	out := []driver.JobCount{}
	err := r.each(ctx, q, func(rows *sql.Rows) error {
		var c driver.JobCount
		var state string
		if err := rows.Scan(&c.Queue, &state, &c.Count); err != nil {
			return err
		}
		c.State = hoppertype.JobState(state)
		out = append(out, c)
		return nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	driver.SortJobCounts(out)
	return out, nil
}

// jobCancel cancels a waiting or stuck job, flags a running one and refuses
// a terminal one.
func (r *runner) jobCancel(ctx context.Context, p *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	what := fmt.Sprintf("cancel job %q", p.ID)
	cur, err := r.job(ctx, getJobSQL, p.ID)
	if err != nil {
		return nil, wrapErr(err, what)
	}
	switch {
	case cur.State.Terminal():
		return cur, fmt.Errorf("%s in state %s: %w", what, cur.State, hoppertype.ErrStateConflict)
	case cur.State == hoppertype.JobStateRunning:
		if cur.CancelRequested {
			return cur, nil
		}
		j, err := r.job(ctx, `UPDATE jobs SET cancel_requested = 1 WHERE id = ? RETURNING `+jobCols, p.ID)
		if err != nil {
			return nil, wrapErr(err, what)
		}
		return j, nil
	default:
		j, err := r.job(ctx, `UPDATE jobs SET state = 'cancelled', ended_at = ?, error = ? WHERE id = ? RETURNING `+jobCols,
			trunc(p.Now).UnixMicro(), jsonError(p.Error), p.ID)
		if err != nil {
			return nil, wrapErr(err, what)
		}
		return j, nil
	}
}

// retryJobSQL makes a job pending again as a fresh job. ?1 is the id, ?2 now.
const retryJobSQL = `UPDATE jobs SET state = 'pending', attempt = 0, run_at = ?2, result = NULL,
	ended_at = NULL, lease_expires_at = NULL, worker = '', cancel_requested = 0, stuck = NULL,
	deadline = CASE WHEN deadline <= ?2 THEN NULL ELSE deadline END
	WHERE id = ?1 RETURNING ` + jobCols

// retryPage is how many candidates JobRetry reads at a time when it selects
// by type or all jobs.
const retryPage = 256

// countGroupSQL counts a group's jobs (in the queue ?2, or every queue
// when ?2 is empty) by queue and state, the first ?3 in id order (-1: all).
const countGroupSQL = `SELECT queue, state, count(*) FROM (SELECT queue, state FROM jobs WHERE group_id = ?1 AND (?2 = '' OR queue = ?2) ORDER BY id LIMIT ?3) GROUP BY queue, state`

// skipRunsSQL leaves out the jobs of runs whose status is in a JSON list.
const skipRunsSQL = "NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = jobs.id AND r.status IN (SELECT value FROM json_each(?)))"

// runStatusIn says whether id is a run whose status is one of statuses.
func (r *runner) runStatusIn(ctx context.Context, id string, statuses []hoppertype.RunStatus) (bool, error) {
	if len(statuses) == 0 {
		return false, nil
	}
	n, err := column[int](ctx, r, "SELECT count(*) FROM runs WHERE id = ? AND status IN (SELECT value FROM json_each(?))", id, jsonList(statuses))
	return err == nil && len(n) == 1 && n[0] > 0, err
}

// jobRetry moves the selected jobs back to pending as fresh jobs.
func (r *runner) jobRetry(ctx context.Context, p *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	now := trunc(p.Now).UnixMicro()
	inStates := func(s hoppertype.JobState) bool { return len(p.States) == 0 || slices.Contains(p.States, s) }
	out := []driver.JobRetryResult{}
	full := func() bool { return p.Limit > 0 && len(out) >= p.Limit }
	// apply retries one candidate unless its unique key is held by another job.
	apply := func(cur *hoppertype.JobRow) error {
		if cur.UniqueKey != "" {
			holder, err := r.job(ctx, uniqueHolderSQL, cur.Type, cur.UniqueKey)
			if err == nil && holder.ID != cur.ID {
				return nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		j, err := r.job(ctx, retryJobSQL, cur.ID, now)
		if err != nil {
			return err
		}
		out = append(out, driver.JobRetryResult{Job: j, PrevState: cur.State})
		return nil
	}
	switch {
	case len(p.IDs) > 0:
		seen := make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			if full() {
				break
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			cur, err := r.job(ctx, getJobSQL, id)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("retry jobs: %w", err)
			}
			if !inStates(cur.State) {
				continue
			}
			if skip, err := r.runStatusIn(ctx, id, p.SkipRunStatuses); err != nil {
				return nil, fmt.Errorf("retry jobs: %w", err)
			} else if skip {
				continue
			}
			if err := apply(cur); err != nil {
				return nil, fmt.Errorf("retry job %q: %w", id, err)
			}
		}
	case p.Type != "" || p.All:
		var where []string
		var args []any
		if !p.All {
			where = append(where, "type = ?")
			args = append(args, p.Type)
		}
		if len(p.States) > 0 {
			cond, vs := stateFilter(p.States)
			where = append(where, cond)
			args = append(args, vs...)
		}
		if len(p.SkipRunStatuses) > 0 {
			where = append(where, skipRunsSQL)
			args = append(args, jsonList(p.SkipRunStatuses))
		}
		where = append(where, "id > ?")
		q := "SELECT " + jobCols + " FROM jobs WHERE " + strings.Join(where, " AND ") + " ORDER BY id LIMIT ?"
		cursor := ""
		for !full() {
			page, err := r.jobs(ctx, q, append(slices.Clone(args), cursor, retryPage)...)
			if err != nil {
				return nil, fmt.Errorf("retry jobs: %w", err)
			}
			for _, cur := range page {
				if full() {
					break
				}
				if err := apply(cur); err != nil {
					return nil, fmt.Errorf("retry job %q: %w", cur.ID, err)
				}
			}
			if len(page) < retryPage {
				break
			}
			cursor = page[len(page)-1].ID
		}
	}
	return out, nil
}

// jobDeleteFinished deletes terminal jobs of the given states (every
// terminal state when States is empty) that ended before Before, at most
// Limit (no limit when Limit <= 0), the workflow rows of the deleted jobs
// that are runs, and the rows of the settled groups whose last jobs they
// were. It writes several times; the caller makes it atomic.
func (r *runner) jobDeleteFinished(ctx context.Context, p *driver.JobDeleteFinishedParams) (int, error) {
	var states []string
	for _, s := range hoppertype.JobStates() {
		if s.Terminal() && (len(p.States) == 0 || slices.Contains(p.States, s)) {
			states = append(states, "'"+string(s)+"'")
		}
	}
	if len(states) == 0 {
		return 0, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	var ids, groups []string
	q, args := deleteFinishedSQL(states), []any{trunc(p.Before).UnixMicro(), limit}
	if len(p.IDs) > 0 {
		before := any(nil)
		if !p.Before.IsZero() {
			before = trunc(p.Before).UnixMicro()
		}
		q, args = deleteFinishedIDsSQL(states), []any{before, limit, jsonList(p.IDs)}
	}
	err := r.each(ctx, q, func(rows *sql.Rows) error {
		var id, group string
		err := rows.Scan(&id, &group)
		ids = append(ids, id)
		groups = append(groups, group)
		return err
	}, args...)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	// A deleted job that is a workflow run takes its run's rows with it.
	if err := r.deleteRunsOf(ctx, ids); err != nil {
		return 0, fmt.Errorf("delete finished jobs: workflow rows: %w", err)
	}
	if len(groups) > 0 {
		if _, err := r.exec(ctx, deleteEmptyGroupsSQL, jsonList(groups)); err != nil {
			return 0, fmt.Errorf("delete finished jobs: group rows: %w", err)
		}
	}
	return len(ids), nil
}

// deleteEmptyGroupsSQL deletes the settled groups among ?1 (a JSON list of
// ids) that no job belongs to any more.
const deleteEmptyGroupsSQL = `DELETE FROM groups WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'settled'
	AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.group_id = groups.id)`

// deleteFinishedSQL deletes terminal jobs in states (quoted SQL literals)
// that ended before ?1, at most ?2, and returns their ids. The first state
// term repeats the jobs_retention predicate so that index serves the query;
// the second narrows it to the states asked for.
func deleteFinishedSQL(states []string) string {
	return `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_retention
	WHERE state IN ` + terminalStates + ` AND state IN (` + strings.Join(states, ", ") + `)
	AND ended_at < ?1 LIMIT ?2) RETURNING id, group_id`
}

// deleteFinishedIDsSQL is deleteFinishedSQL for the jobs among ?3 (a JSON
// list of ids), looked up by key; a NULL ?1 bounds no end time.
func deleteFinishedIDsSQL(states []string) string {
	return `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs
	WHERE id IN (SELECT value FROM json_each(?3)) AND state IN (` + strings.Join(states, ", ") + `)
	AND (?1 IS NULL OR ended_at < ?1) LIMIT ?2) RETURNING id, group_id`
}

// RunStartInTx stores a run and its job through tx, a *sql.Tx on the
// database file, inside a savepoint; see driver.TxInserter.
func (d *Driver) RunStartInTx(ctx context.Context, tx any, params *driver.RunStartParams) (existing bool, err error) {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return false, fmt.Errorf("sqlitedriver: RunStartInTx needs a *sql.Tx, got %T: %w", tx, driver.ErrTxType)
	}
	if params == nil || params.Run == nil || params.Job == nil || params.Run.ID == "" || params.Job.ID != params.Run.ID {
		return false, errors.New("sqlitedriver: start run: a run and a job with the run's id are required")
	}
	if d.closed.Load() {
		return false, driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return false, err
	}
	r := &runner{q: stx, d: d}
	err = r.savepoint(ctx, "hopper_start", func() error {
		existing = false
		if err := r.runInsert(ctx, params.Run); errors.Is(err, hoppertype.ErrDuplicateID) {
			existing = true
			return nil
		} else if err != nil {
			return err
		}
		_, err := r.jobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{params.Job}})
		return err
	})
	return existing, err
}
