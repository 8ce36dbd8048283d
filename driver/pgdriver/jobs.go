package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobGet returns one job or hoppertype.ErrNotFound.
func (e *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	if err := e.check(ctx, "get job"); err != nil {
		return nil, err
	}
	r, err := scanJob(e.q.QueryRow(ctx, e.d.q.getJob, params.ID))
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("get job %q", params.ID), err)
	}
	return r, nil
}

// JobGetMany returns the jobs that exist among IDs, in the order of IDs.
func (e *executor) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	if err := e.check(ctx, "get jobs"); err != nil {
		return nil, err
	}
	if len(params.IDs) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	rows, err := collectJobs(e.q.Query(ctx, e.d.q.getJobs, params.IDs))
	if err != nil {
		return nil, e.d.fail("get jobs", err)
	}
	byID := make(map[string]*hoppertype.JobRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	out := make([]*hoppertype.JobRow, 0, len(rows))
	used := make(map[string]bool, len(rows))
	for _, id := range params.IDs {
		r := byID[id]
		switch {
		case r == nil:
		case used[id]:
			out = append(out, r.Clone()) // a repeated id gets its own copy
		default:
			used[id] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// stateStrings converts states for an array argument.
func stateStrings(states []hoppertype.JobState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// JobList returns the jobs matching the filter ordered by id; see
// driver.Executor. Ids compare byte-wise (COLLATE "C"), as Go strings do.
func (e *executor) JobList(ctx context.Context, p *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	if err := e.check(ctx, "list jobs"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: list jobs: limit must be > 0")
	}
	sql, args := e.d.q.jobList(p)
	rows, err := collectJobs(e.q.Query(ctx, sql, args...))
	if err != nil {
		return nil, e.d.fail("list jobs", err)
	}
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	return rows, nil
}

// JobScan is JobList over a window of ScanLimit jobs; see driver.Executor.
// It finds the window's last job by the indexed filters alone, then lists as
// JobList does up to it.
func (e *executor) JobScan(ctx context.Context, p *driver.JobScanParams) (*driver.JobScanResult, error) {
	if err := e.check(ctx, "scan jobs"); err != nil {
		return nil, err
	}
	if p.ScanLimit <= 0 {
		return nil, errors.New("pgdriver: scan jobs: scan limit must be > 0")
	}
	if !p.Unindexed() {
		rows, err := e.JobList(ctx, &p.JobListParams)
		if err != nil {
			return nil, err
		}
		return &driver.JobScanResult{Jobs: rows}, nil
	}
	if err := e.check(ctx, "scan jobs"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: list jobs: limit must be > 0")
	}
	sql, args := e.d.q.jobScanEnd(p)
	var until string
	if err := e.q.QueryRow(ctx, sql, args...).Scan(&until); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, e.d.fail("scan jobs", err)
	}
	sql, args = e.d.q.jobListUntil(&p.JobListParams, cols(""), until)
	rows, err := collectJobs(e.q.Query(ctx, sql, args...))
	if err != nil {
		return nil, e.d.fail("scan jobs", err)
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

// jobScanEnd selects the id of the last job of a JobScan's window: the
// ScanLimit-th job the indexed filters select (no row when fewer do).
func (q *queries) jobScanEnd(p *driver.JobScanParams) (string, []any) {
	w := p.Indexed()
	w.Limit = p.ScanLimit
	sql, args := q.jobListUntil(&w, "id", "")
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	args = append(args, p.ScanLimit-1)
	return "SELECT id FROM (" + sql + ") w ORDER BY id " + order + " OFFSET $" + strconv.Itoa(len(args)) + " LIMIT 1", args
}

// jobList is JobList's statement and arguments.
func (q *queries) jobList(p *driver.JobListParams) (string, []any) {
	return q.jobListUntil(p, cols(""), "")
}

// jobListUntil is jobList selecting sel; until, when set, is the last id
// listed (inclusive).
func (q *queries) jobListUntil(p *driver.JobListParams, sel, until string) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if len(p.IDs) > 0 {
		add("id = ANY($?::text[])", p.IDs)
	}
	if len(p.States) > 0 {
		add("state = ANY($?::text[])", stateStrings(p.States))
	}
	if len(p.Types) > 0 {
		add("type = ANY($?::text[])", p.Types)
	}
	if len(p.Queues) > 0 {
		add("queue = ANY($?::text[])", p.Queues)
	}
	if p.ParentID != "" {
		add("parent_id = $?", p.ParentID)
	}
	if !p.QueuedAfter.IsZero() {
		add("queued_at >= $?", p.QueuedAfter)
	}
	if !p.QueuedBefore.IsZero() {
		add("queued_at < $?", p.QueuedBefore)
	}
	if !p.EndedAfter.IsZero() {
		add("ended_at >= $?", p.EndedAfter)
	}
	if !p.EndedBefore.IsZero() {
		add("ended_at < $?", p.EndedBefore)
	}
	if p.UniqueKey != "" {
		add("unique_key = $?", p.UniqueKey)
	}
	if len(p.SkipRunStatuses) > 0 {
		statuses := make([]string, len(p.SkipRunStatuses))
		for i, st := range p.SkipRunStatuses {
			statuses[i] = string(st)
		}
		add("NOT EXISTS (SELECT 1 FROM "+q.schema+".runs r WHERE r.id = jobs.id AND r.status = ANY($?::text[]))", statuses)
	}
	// error and metadata are JSON text; a row with a \u0000 escape, which
	// json's text operators refuse, does not match rather than fail the
	// listing (CASE keeps the operator from reading it).
	if p.ErrorContains != "" {
		add(`CASE WHEN strpos(error, '\u0000') = 0 THEN strpos(error::json ->> 'message', $?) > 0 ELSE false END`, p.ErrorContains)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
		args = append(args, k, p.Metadata[k])
		where = append(where, fmt.Sprintf(`CASE WHEN strpos(metadata, '\u0000') = 0 THEN metadata::json ->> $%d::text = $%d ELSE false END`, len(args)-1, len(args)))
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	if p.Cursor != "" {
		if p.Ascending {
			add("id > $?", p.Cursor)
		} else {
			add("id < $?", p.Cursor)
		}
	}
	if until != "" {
		if p.Ascending {
			add("id <= $?", until)
		} else {
			add("id >= $?", until)
		}
	}
	args = append(args, p.Limit)
	limit := " ORDER BY id " + order + " LIMIT $" + strconv.Itoa(len(args))
	from := func(extra ...string) string {
		conds := append(slices.Clip(where), extra...)
		s := "SELECT " + sel + " FROM " + q.schema + ".jobs"
		if len(conds) > 0 {
			s += " WHERE " + strings.Join(conds, " AND ")
		}
		return s
	}
	if p.GroupID == "" {
		return from() + limit, args
	}
	// jobs_group holds a group's members but not its root (the job whose
	// id the group bears): each job is its own group's root, and indexing
	// those would add an entry to every version of every job. The root
	// comes by its key, and the literal predicate lets the planner use
	// jobs_group for the rest.
	args = append(args, p.GroupID)
	g := "$" + strconv.Itoa(len(args))
	return "(" + from("group_id = "+g, "group_id <> id") + limit + ") UNION ALL (" +
		from("id = "+g, "group_id = "+g) + ")" + limit, args
}

// JobCountByState counts jobs per queue and state, ordered by queue and then
// by state in lifecycle order.
func (e *executor) JobCountByState(ctx context.Context, p *driver.JobCountParams) ([]driver.JobCount, error) {
	if err := e.check(ctx, "count jobs"); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	var err error
	switch {
	case p.GroupID != "":
		// The members by jobs_group (see jobListSQL) and the root by its
		// key, up to the limit (NULL: none).
		var limit *int
		if p.Limit > 0 {
			limit = &p.Limit
		}
		rows, err = e.q.Query(ctx, e.d.q.countGroup, p.GroupID, p.Queue, limit)
	case p.Queue == "":
		rows, err = e.q.Query(ctx, e.d.q.countAll)
	default:
		rows, err = e.q.Query(ctx, e.d.q.countQueue, p.Queue)
	}
	if err != nil {
		return nil, e.d.fail("count jobs", err)
	}
	out := []driver.JobCount{}
	var c driver.JobCount
	var state string
	if _, err := pgx.ForEachRow(rows, []any{&c.Queue, &state, &c.Count}, func() error {
		c.State = hoppertype.JobState(state)
		out = append(out, c)
		return nil
	}); err != nil {
		return nil, e.d.fail("count jobs", err)
	}
	driver.SortJobCounts(out)
	return out, nil
}

// JobCancel cancels a waiting or stuck job, flags a running one and refuses
// a terminal one; see driver.Executor.
func (e *executor) JobCancel(ctx context.Context, p *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	if err := e.check(ctx, "cancel job"); err != nil {
		return nil, err
	}
	var row *hoppertype.JobRow
	err := e.atomic(ctx, func(tx *executor) error {
		var err error
		row, err = tx.cancel(ctx, p)
		if err == nil && row.State == hoppertype.JobStateCancelled {
			if err := tx.observeChanges(ctx, []gateChange{{id: row.ID, state: row.State, at: row.EndedAt}}); err != nil {
				return e.d.fail(fmt.Sprintf("cancel job %q: gates", p.ID), err)
			}
		}
		return err
	})
	return row, err
}

func (e *executor) cancel(ctx context.Context, p *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	op := fmt.Sprintf("cancel job %q", p.ID)
	errInfo := text(marshalError(p.Error))
	for range 3 {
		row, err := scanJob(e.q.QueryRow(ctx, e.d.q.cancel, p.ID, ts(p.Now), errInfo))
		if err == nil {
			return row, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, e.d.fail(op, err)
		}
		// Nothing changed: the job is missing, terminal, or running with a
		// cancel already requested.
		cur, err := scanJob(e.q.QueryRow(ctx, e.d.q.getJob, p.ID))
		if err != nil {
			return nil, e.d.fail(op, err)
		}
		switch {
		case cur.State.Terminal():
			return cur, fmt.Errorf("pgdriver: %s in state %s: %w", op, cur.State, hoppertype.ErrStateConflict)
		case cur.State == hoppertype.JobStateRunning && cur.CancelRequested:
			return cur, nil
		}
		// The job changed between the two statements: try again.
	}
	return nil, fmt.Errorf("pgdriver: %s: the job kept changing state", op)
}

// JobDeleteFinished deletes terminal jobs of the given states (every
// terminal state when States is empty) that ended before Before, oldest
// first, at most Limit (no limit when Limit <= 0). A deleted job that is a
// workflow run takes its run row, history, hooks and stream chunks with it,
// in the same statement.
func (e *executor) JobDeleteFinished(ctx context.Context, p *driver.JobDeleteFinishedParams) (int, error) {
	if err := e.check(ctx, "delete finished jobs"); err != nil {
		return 0, err
	}
	states := stateStrings(p.States)
	if len(states) == 0 {
		states = []string{"succeeded", "dead", "expired", "cancelled"}
	}
	var n int
	sql, args := e.d.q.deleteFinished, []any{states, ts(p.Before), limitArg(p.Limit)}
	if len(p.IDs) > 0 {
		sql, args = e.d.q.deleteFinishedIDs, append(args, p.IDs)
	}
	if err := e.q.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, e.d.fail("delete finished jobs", err)
	}
	return n, nil
}

// retryPage is how many candidates JobRetry locks and examines at a time
// when it selects by type or takes all.
const retryPage = 500

// retryCand is a job JobRetry may move, as locked.
type retryCand struct {
	id, typ, key string
	state        hoppertype.JobState
}

// JobRetry moves the selected jobs back to pending as fresh jobs, skipping a
// job whose unique key another live job holds; see driver.Executor. The
// candidates are locked, their keys' holders read, and the chosen jobs
// moved in one statement, all in one transaction.
func (e *executor) JobRetry(ctx context.Context, p *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	if err := e.check(ctx, "retry jobs"); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		var out []driver.JobRetryResult
		err := e.withTx(ctx, func(tx *executor) error {
			var err error
			out, err = tx.retry(ctx, p)
			return err
		})
		var pgErr *pgconn.PgError
		if err != nil && e.tx == nil && attempt < 3 && errors.As(err, &pgErr) &&
			pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == "jobs_unique" {
			continue // a job took a key between the holder check and the move
		}
		if err != nil {
			return nil, e.d.fail("retry jobs", err)
		}
		return out, nil
	}
}

func (e *executor) retry(ctx context.Context, p *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	states := stateStrings(p.States)
	held := make(map[uniqueKey]string) // key → live holder id, as far as examined
	var out []driver.JobRetryResult
	switch {
	case len(p.IDs) > 0:
		cands, err := e.retryCandidates(ctx, p, states, "")
		if err != nil {
			return nil, err
		}
		pos := make(map[string]int, len(p.IDs))
		for i, id := range p.IDs {
			if _, ok := pos[id]; !ok {
				pos[id] = i
			}
		}
		slices.SortFunc(cands, func(a, b retryCand) int { return pos[a.id] - pos[b.id] })
		return e.retryMove(ctx, p, cands, held, out)
	case p.Type != "" || p.All:
		after := ""
		for {
			cands, err := e.retryCandidates(ctx, p, states, after)
			if err != nil {
				return nil, err
			}
			if out, err = e.retryMove(ctx, p, cands, held, out); err != nil {
				return nil, err
			}
			if len(cands) < retryPage || (p.Limit > 0 && len(out) >= p.Limit) {
				return out, nil
			}
			after = cands[len(cands)-1].id
		}
	}
	return nil, nil
}

// retryCandidates locks and returns the jobs JobRetry selects: the ids
// given, or one page (after the id after) of the type or of all jobs.
func (e *executor) retryCandidates(ctx context.Context, p *driver.JobRetryParams, states []string, after string) ([]retryCand, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	byIDs := len(p.IDs) > 0
	switch {
	case byIDs:
		add("id = ANY($?::text[])", p.IDs)
	case p.Type != "":
		add("type = $?", p.Type)
	}
	if len(states) > 0 {
		add("state = ANY($?::text[])", states)
	}
	if len(p.SkipRunStatuses) > 0 {
		statuses := make([]string, len(p.SkipRunStatuses))
		for i, st := range p.SkipRunStatuses {
			statuses[i] = string(st)
		}
		add("NOT EXISTS (SELECT 1 FROM "+e.d.q.schema+".runs r WHERE r.id = jobs.id AND r.status = ANY($?::text[]))", statuses)
	}
	if !byIDs && after != "" {
		add("id > $?", after)
	}
	sql := "SELECT id, state, type, unique_key FROM " + e.d.q.schema + ".jobs"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY id"
	if !byIDs {
		args = append(args, retryPage)
		sql += " LIMIT $" + strconv.Itoa(len(args))
	}
	sql += " FOR UPDATE"
	rows, err := e.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []retryCand
	var c retryCand
	var state string
	var key pgtype.Text
	_, err = pgx.ForEachRow(rows, []any{&c.id, &state, &c.typ, &key}, func() error {
		c.state, c.key = hoppertype.JobState(state), key.String
		out = append(out, c)
		return nil
	})
	return out, err
}

// retryMove moves the candidates whose keys are free (or their own), up to
// the limit, appending the results to out.
func (e *executor) retryMove(ctx context.Context, p *driver.JobRetryParams, cands []retryCand, held map[uniqueKey]string, out []driver.JobRetryResult) ([]driver.JobRetryResult, error) {
	var types, keys []string
	for _, c := range cands {
		if _, known := held[uniqueKey{c.typ, c.key}]; c.key != "" && !known {
			types = append(types, c.typ)
			keys = append(keys, c.key)
		}
	}
	if len(types) > 0 {
		rows, err := e.q.Query(ctx, e.d.q.retryHolders, types, keys)
		if err != nil {
			return nil, err
		}
		var k uniqueKey
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&k.typ, &k.key, &id}, func() error { held[k] = id; return nil }); err != nil {
			return nil, err
		}
	}
	var ids []string
	var prev []hoppertype.JobState
	for _, c := range cands {
		if p.Limit > 0 && len(out)+len(ids) >= p.Limit {
			break
		}
		if c.key != "" {
			k := uniqueKey{c.typ, c.key}
			if h, ok := held[k]; ok && h != c.id {
				continue
			}
			held[k] = c.id
		}
		ids = append(ids, c.id)
		prev = append(prev, c.state)
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := e.q.Query(ctx, e.d.q.retryMove, ids, ts(p.Now))
	if err != nil {
		return nil, err
	}
	moved := make([]*hoppertype.JobRow, len(ids))
	var ord int64
	sc := newJobScanner(&ord)
	for rows.Next() {
		r, err := sc.scan(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		moved[ord-1] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var changes []gateChange
	for i, r := range moved {
		if r != nil {
			out = append(out, driver.JobRetryResult{Job: r, PrevState: prev[i]})
			if prev[i].Terminal() {
				changes = append(changes, gateChange{id: r.ID, state: r.State, at: trunc(p.Now)})
			}
		}
	}
	if err := e.observeChanges(ctx, changes); err != nil {
		return nil, err
	}
	return out, nil
}
