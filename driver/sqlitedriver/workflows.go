package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Workflow storage (schema version 2): runs, their history, hooks and
// streams, and JobWake, which resumes a waiting run's job.

const (
	// wakeSQL makes the waiting jobs among the ids of ?1 (a JSON array) due
	// at ?2. It repeats the state list of jobs_due; INDEXED BY pins the
	// primary key, which the ids select, over the partial due indexes.
	wakeSQL = `UPDATE jobs INDEXED BY sqlite_autoindex_jobs_1 SET state = 'pending', run_at = ?2
	WHERE id IN (SELECT value FROM json_each(?1)) AND state IN ('scheduled', 'retrying')
	RETURNING ` + jobCols

	runCols      = `id, workflow, status, parent_id, code_version, error, created_at, updated_at, ended_at`
	insertRunSQL = `INSERT INTO runs (` + runCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	getRunSQL    = `SELECT ` + runCols + ` FROM runs WHERE id = ?`

	// updateRunSQL sets the status (?2), the error when ?3 is not NULL, the
	// end time when ?4 is not NULL and updated_at (?5), if the status is in
	// the JSON array ?6 or ?6 is NULL.
	updateRunSQL = `UPDATE runs SET status = ?2,
	error = CASE WHEN ?7 THEN NULL ELSE coalesce(?3, error) END, ended_at = CASE WHEN ?7 THEN NULL ELSE coalesce(?4, ended_at) END,
	updated_at = ?5
	WHERE id = ?1 AND (?6 IS NULL OR status IN (SELECT value FROM json_each(?6)))
	RETURNING ` + runCols

	// setRunStatusSQL is RunEventAppend's RunStatus.
	setRunStatusSQL = `UPDATE runs SET status = ?1, updated_at = ?2, ended_at = coalesce(?4, ended_at) WHERE id = ?3 AND status <> ?1`

	// leaseHeldSQL is the lease fence of RunEventAppend without events.
	// INDEXED BY pins the primary key over the (state, id) list index.
	leaseHeldSQL = `SELECT 1 FROM jobs INDEXED BY sqlite_autoindex_jobs_1 WHERE id = ? AND state = 'running' AND lease_token = ?`

	eventCols            = `run_id, attempt, seq, kind, name, data, at`
	listEventsSQL        = `SELECT ` + eventCols + ` FROM run_events WHERE run_id = ? ORDER BY attempt, seq`
	listEventsAttemptSQL = `SELECT ` + eventCols + ` FROM run_events WHERE run_id = ? AND attempt = ? ORDER BY seq`

	hookCols      = `token, run_id, name, state, payload, created_at, resumed_at, request`
	insertHookSQL = `INSERT INTO hooks (` + hookCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	getHookSQL    = `SELECT ` + hookCols + ` FROM hooks WHERE token = ?`
	resumeHookSQL = `UPDATE hooks SET state = 'resumed', payload = ?2, resumed_at = ?3, request = ?4
	WHERE token = ?1 AND state = 'waiting' RETURNING ` + hookCols
	listHooksSQL = `SELECT ` + hookCols + ` FROM hooks WHERE run_id = ? ORDER BY created_at, token`

	chunkCols = `run_id, "offset", data, at`
	// streamTailSQL returns a run's last offset.
	streamTailSQL = `SELECT "offset" FROM stream_chunks WHERE run_id = ? ORDER BY "offset" DESC LIMIT 1`
	streamReadSQL = `SELECT ` + chunkCols + ` FROM stream_chunks WHERE run_id = ? AND "offset" >= ?
	ORDER BY "offset" LIMIT ?`
)

// eventColCount and chunkColCount are the values per row of the batch
// inserts.
var (
	eventColCount = strings.Count(eventCols, ",") + 1
	chunkColCount = strings.Count(chunkCols, ",") + 1
)

// insertEventsSQL inserts n events, their columns in eventCols order, if
// the job named by the two trailing parameters is running under the lease
// token: the lease fence and the write are one statement.
func insertEventsSQL(n int) string {
	return `INSERT INTO run_events (` + eventCols + `) SELECT * FROM (VALUES ` + valuesList(n, eventColCount) + `)
	WHERE EXISTS (SELECT 1 FROM jobs INDEXED BY sqlite_autoindex_jobs_1 WHERE id = ? AND state = 'running' AND lease_token = ?)`
}

// insertChunksSQL inserts n stream chunks, their columns in chunkCols order.
func insertChunksSQL(n int) string {
	return `INSERT INTO stream_chunks (` + chunkCols + `) VALUES ` + valuesList(n, chunkColCount)
}

var (
	insertEventsSQLs = map[int]string{}
	insertChunksSQLs = map[int]string{}
)

func init() {
	for _, q := range []string{wakeSQL, insertRunSQL, getRunSQL, updateRunSQL, leaseHeldSQL, listEventsSQL,
		listEventsAttemptSQL, insertHookSQL, getHookSQL, resumeHookSQL, listHooksSQL, streamTailSQL, streamReadSQL} {
		hotStatements[q] = true
	}
	for _, n := range chunkSizes {
		insertEventsSQLs[n] = insertEventsSQL(n)
		insertChunksSQLs[n] = insertChunksSQL(n)
		hotStatements[insertEventsSQLs[n]] = true
		hotStatements[insertChunksSQLs[n]] = true
	}
}

// jobWake makes the named scheduled and retrying jobs pending, due now, in
// one statement, and returns them in the order of ids.
func (r *runner) jobWake(ctx context.Context, p *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	if len(p.IDs) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	rows, err := r.jobs(ctx, wakeSQL, jsonList(p.IDs), trunc(p.Now).UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("wake jobs: %w", err)
	}
	// RETURNING order is not guaranteed: return the jobs in the order asked.
	pos := make(map[string]int, len(p.IDs))
	for i, id := range p.IDs {
		if _, ok := pos[id]; !ok {
			pos[id] = i
		}
	}
	slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int { return pos[a.ID] - pos[b.ID] })
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	return rows, nil
}

// runArgs returns the values of a run's columns in runCols order.
func runArgs(row *hoppertype.RunRow) []any {
	return []any{row.ID, row.Workflow, string(row.Status), nullString(row.ParentID), row.CodeVersion,
		jsonError(row.Error), row.CreatedAt.UnixMicro(), micros(trunc(row.UpdatedAt)), micros(trunc(row.EndedAt))}
}

// scanRun reads a row whose columns are runCols.
func scanRun(rows *sql.Rows) (*hoppertype.RunRow, error) {
	var (
		run              hoppertype.RunRow
		status           string
		parent, errJSON  sql.NullString
		created          int64
		updated, endedAt sql.NullInt64
	)
	if err := rows.Scan(&run.ID, &run.Workflow, &status, &parent, &run.CodeVersion, &errJSON, &created,
		&updated, &endedAt); err != nil {
		return nil, fmt.Errorf("scan run: %w", err)
	}
	run.Status = hoppertype.RunStatus(status)
	run.ParentID = parent.String
	run.CreatedAt = fromMicrosNN(created)
	run.UpdatedAt = fromMicros(updated)
	run.EndedAt = fromMicros(endedAt)
	if errJSON.Valid {
		var err error
		if run.Error, err = hoppertype.UnmarshalErrorInfo([]byte(errJSON.String)); err != nil {
			return nil, fmt.Errorf("decode error of run %s: %w", run.ID, err)
		}
	}
	return &run, nil
}

// runs runs query, whose columns are runCols, and returns its rows.
func (r *runner) runs(ctx context.Context, query string, args ...any) ([]*hoppertype.RunRow, error) {
	out := []*hoppertype.RunRow{}
	err := r.each(ctx, query, func(rows *sql.Rows) error {
		run, err := scanRun(rows)
		if err == nil {
			out = append(out, run)
		}
		return err
	}, args...)
	return out, err
}

// run runs query, whose columns are runCols, and returns its first row or
// sql.ErrNoRows.
func (r *runner) run(ctx context.Context, query string, args ...any) (*hoppertype.RunRow, error) {
	var run *hoppertype.RunRow
	err := r.one(ctx, query, func(rows *sql.Rows) error {
		var err error
		run, err = scanRun(rows)
		return err
	}, args...)
	return run, err
}

// runInsert stores a new run.
func (r *runner) runInsert(ctx context.Context, row *hoppertype.RunRow) error {
	if row == nil || row.ID == "" {
		return errors.New("insert run: no id")
	}
	_, err := r.exec(ctx, insertRunSQL, runArgs(row)...)
	if isPrimaryKeyConflict(err) {
		return fmt.Errorf("insert run %q: %w", row.ID, hoppertype.ErrDuplicateID)
	}
	if err != nil {
		return fmt.Errorf("insert run %q: %w", row.ID, err)
	}
	return nil
}

// runGet returns one run.
func (r *runner) runGet(ctx context.Context, id string) (*hoppertype.RunRow, error) {
	run, err := r.run(ctx, getRunSQL, id)
	if err != nil {
		return nil, wrapErr(err, fmt.Sprintf("get run %q", id))
	}
	return run, nil
}

// runList filters the runs and pages them newest first.
func (r *runner) runList(ctx context.Context, p *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	if p.Limit <= 0 {
		return nil, errors.New("list runs: limit must be > 0")
	}
	q, args := runListSQL(p)
	out, err := r.runs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// runListSQL builds the query of RunList. One status, a workflow or a
// parent each have an index in the list's order; several statuses are one
// IN list.
func runListSQL(p *driver.RunListParams) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	switch len(p.Statuses) {
	case 0:
	case 1:
		add("status = ?", string(p.Statuses[0]))
	default:
		add("status IN (SELECT value FROM json_each(?))", jsonList(p.Statuses))
	}
	if p.Workflow != "" {
		add("workflow = ?", p.Workflow)
	}
	if p.ParentID != "" {
		add("parent_id = ?", p.ParentID)
	}
	if !p.CreatedAfter.IsZero() {
		add("created_at >= ?", trunc(p.CreatedAfter).UnixMicro())
	}
	if !p.CreatedBefore.IsZero() {
		add("created_at < ?", trunc(p.CreatedBefore).UnixMicro())
	}
	if !p.After.IsZero() {
		// A row value comparison the (created_at DESC, id DESC) indexes serve.
		add("(created_at, id) < (?, ?)", trunc(p.After.CreatedAt).UnixMicro(), p.After.ID)
	}
	q := "SELECT " + runCols + " FROM runs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
	return q, append(args, p.Limit, max(p.Offset, 0))
}

// runUpdate sets a run's status, if it is one of the expected ones, in one
// statement; when it changed nothing, a read tells a missing run from a
// conflict.
func (r *runner) runUpdate(ctx context.Context, p *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	what := fmt.Sprintf("update run %q", p.ID)
	var expect any
	if len(p.ExpectStatuses) > 0 {
		expect = jsonList(p.ExpectStatuses)
	}
	run, err := r.run(ctx, updateRunSQL, p.ID, string(p.Status), jsonError(p.Error), micros(trunc(p.EndedAt)),
		trunc(p.Now).UnixMicro(), expect, p.Reset)
	if err == nil {
		return run, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cur, err := r.run(ctx, getRunSQL, p.ID)
	if err != nil {
		return nil, wrapErr(err, what)
	}
	return cur, fmt.Errorf("%s in status %s: %w", what, cur.Status, hoppertype.ErrStateConflict)
}

// runEventAppend appends events under the run's lease fence; see
// driver.Executor.RunEventAppend. Each statement carries the fence; when
// the events take more than one statement the caller makes the call atomic
// (a duplicate in a later chunk must undo the earlier ones).
func (r *runner) runEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	what := fmt.Sprintf("append events to run %q", p.RunID)
	if len(p.Events) == 0 {
		err := r.one(ctx, leaseHeldSQL, func(*sql.Rows) error { return nil }, p.RunID, p.LeaseToken)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: %w", what, hoppertype.ErrLeaseLost)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return r.setRunStatus(ctx, p, what)
	}
	for i, e := range p.Events {
		if e == nil {
			return fmt.Errorf("%s: event %d is nil", what, i)
		}
		if e.RunID != "" && e.RunID != p.RunID {
			return fmt.Errorf("%s: event %d belongs to run %q", what, i, e.RunID)
		}
	}
	events := p.Events
	for _, n := range chunks(len(events)) {
		chunk := events[:n]
		events = events[n:]
		args := make([]any, 0, n*eventColCount+2)
		for _, e := range chunk {
			args = append(args, p.RunID, e.Attempt, e.Seq, e.Kind, e.Name, e.Data, e.At.UnixMicro())
		}
		args = append(args, p.RunID, p.LeaseToken)
		res, err := r.exec(ctx, insertEventsSQLs[n], args...)
		if isPrimaryKeyConflict(err) {
			return fmt.Errorf("%s: %w", what, r.duplicateEvent(ctx, p.RunID, chunk))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if got, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		} else if got == 0 {
			// Only the first statement can miss the fence: nothing else
			// writes between the statements of one call.
			return fmt.Errorf("%s: %w", what, hoppertype.ErrLeaseLost)
		}
	}
	return r.setRunStatus(ctx, p, what)
}

// setRunStatus applies an append's RunStatus, once its events are in.
func (r *runner) setRunStatus(ctx context.Context, p *driver.RunEventAppendParams, what string) error {
	if p.RunStatus == "" {
		return nil
	}
	if _, err := r.exec(ctx, setRunStatusSQL, string(p.RunStatus), trunc(p.Now).UnixMicro(), p.RunID, micros(trunc(p.EndedAt))); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// duplicateEvent names the event of chunk whose (attempt, seq) is taken, for
// the error of an append that hit the primary key.
func (r *runner) duplicateEvent(ctx context.Context, runID string, chunk []*hoppertype.RunEvent) error {
	seen := make(map[[2]int]bool, len(chunk))
	for _, e := range chunk {
		k := [2]int{e.Attempt, e.Seq}
		if seen[k] {
			return fmt.Errorf("event (%d, %d) twice: %w", e.Attempt, e.Seq, hoppertype.ErrDuplicateID)
		}
		seen[k] = true
		err := r.one(ctx, `SELECT 1 FROM run_events WHERE run_id = ? AND attempt = ? AND seq = ?`,
			func(*sql.Rows) error { return nil }, runID, e.Attempt, e.Seq)
		if err == nil {
			return fmt.Errorf("event (%d, %d) exists: %w", e.Attempt, e.Seq, hoppertype.ErrDuplicateID)
		}
	}
	return hoppertype.ErrDuplicateID
}

// runEventList returns a run's history in (attempt, seq) order, or one
// attempt's when Attempt > 0.
func (r *runner) runEventList(ctx context.Context, p *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	q, args := listEventsSQL, []any{p.RunID}
	if p.Attempt > 0 {
		q, args = listEventsAttemptSQL, append(args, p.Attempt)
	}
	out := []*hoppertype.RunEvent{}
	err := r.each(ctx, q, func(rows *sql.Rows) error {
		var e hoppertype.RunEvent
		var at int64
		if err := rows.Scan(&e.RunID, &e.Attempt, &e.Seq, &e.Kind, &e.Name, blob{&e.Data}, &at); err != nil {
			return err
		}
		e.At = fromMicrosNN(at)
		out = append(out, &e)
		return nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("list events of run %q: %w", p.RunID, err)
	}
	return out, nil
}

// scanHook reads a row whose columns are hookCols.
func scanHook(rows *sql.Rows) (*hoppertype.HookRow, error) {
	var (
		h       hoppertype.HookRow
		state   string
		created int64
		resumed sql.NullInt64
	)
	if err := rows.Scan(&h.Token, &h.RunID, &h.Name, &state, blob{&h.Payload}, &created, &resumed, blob{&h.Request}); err != nil {
		return nil, fmt.Errorf("scan hook: %w", err)
	}
	h.State = hoppertype.HookState(state)
	h.CreatedAt = fromMicrosNN(created)
	h.ResumedAt = fromMicros(resumed)
	return &h, nil
}

// hook runs query, whose columns are hookCols, and returns its first row or
// sql.ErrNoRows.
func (r *runner) hook(ctx context.Context, query string, args ...any) (*hoppertype.HookRow, error) {
	var h *hoppertype.HookRow
	err := r.one(ctx, query, func(rows *sql.Rows) error {
		var err error
		h, err = scanHook(rows)
		return err
	}, args...)
	return h, err
}

// hookInsert stores a new hook; a hook without a state is waiting.
func (r *runner) hookInsert(ctx context.Context, h *hoppertype.HookRow) error {
	if h == nil || h.Token == "" {
		return errors.New("insert hook: no token")
	}
	state := h.State
	if state == "" {
		state = hoppertype.HookWaiting
	}
	_, err := r.exec(ctx, insertHookSQL, h.Token, h.RunID, h.Name, string(state), h.Payload,
		h.CreatedAt.UnixMicro(), micros(trunc(h.ResumedAt)), h.Request)
	if isPrimaryKeyConflict(err) {
		return fmt.Errorf("insert hook %q: %w", h.Token, hoppertype.ErrDuplicateID)
	}
	if err != nil {
		return fmt.Errorf("insert hook %q: %w", h.Token, err)
	}
	return nil
}

// hookGet returns one hook.
func (r *runner) hookGet(ctx context.Context, token string) (*hoppertype.HookRow, error) {
	h, err := r.hook(ctx, getHookSQL, token)
	if err != nil {
		return nil, wrapErr(err, fmt.Sprintf("get hook %q", token))
	}
	return h, nil
}

// hookResume resumes a waiting hook in one statement; when it changed
// nothing, a read tells a missing hook from one already resumed.
func (r *runner) hookResume(ctx context.Context, p *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	what := fmt.Sprintf("resume hook %q", p.Token)
	h, err := r.hook(ctx, resumeHookSQL, p.Token, p.Payload, trunc(p.Now).UnixMicro(), p.Request)
	if err == nil {
		return h, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cur, err := r.hook(ctx, getHookSQL, p.Token)
	if err != nil {
		return nil, wrapErr(err, what)
	}
	return cur, fmt.Errorf("%s in state %s: %w", what, cur.State, hoppertype.ErrStateConflict)
}

// hookListByRun returns a run's hooks by creation time, then token.
func (r *runner) hookListByRun(ctx context.Context, runID string) ([]*hoppertype.HookRow, error) {
	out := []*hoppertype.HookRow{}
	err := r.each(ctx, listHooksSQL, func(rows *sql.Rows) error {
		h, err := scanHook(rows)
		if err == nil {
			out = append(out, h)
		}
		return err
	}, runID)
	if err != nil {
		return nil, fmt.Errorf("list hooks of run %q: %w", runID, err)
	}
	return out, nil
}

// streamAppend appends chunks after the run's last offset, read in the same
// write transaction. When the chunks take more than one statement the
// caller makes the call atomic.
func (r *runner) streamAppend(ctx context.Context, p *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	what := fmt.Sprintf("append to the stream of run %q", p.RunID)
	if len(p.Chunks) == 0 {
		return []*hoppertype.StreamChunk{}, nil
	}
	next := int64(0)
	err := r.one(ctx, streamTailSQL, func(rows *sql.Rows) error {
		if err := rows.Scan(&next); err != nil {
			return err
		}
		next++
		return nil
	}, p.RunID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	at := trunc(p.Now)
	out := make([]*hoppertype.StreamChunk, len(p.Chunks))
	for i, data := range p.Chunks {
		c := &hoppertype.StreamChunk{RunID: p.RunID, Offset: next + int64(i), At: at}
		if data != nil {
			c.Data = append([]byte{}, data...)
		}
		out[i] = c
	}
	rest := out
	for _, n := range chunks(len(rest)) {
		chunk := rest[:n]
		rest = rest[n:]
		args := make([]any, 0, n*chunkColCount)
		for _, c := range chunk {
			args = append(args, c.RunID, c.Offset, c.Data, at.UnixMicro())
		}
		if _, err := r.exec(ctx, insertChunksSQLs[n], args...); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return out, nil
}

// streamRead returns a run's chunks from offset From, at most Limit.
func (r *runner) streamRead(ctx context.Context, p *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	if p.Limit <= 0 {
		return nil, errors.New("read stream: limit must be > 0")
	}
	out := []*hoppertype.StreamChunk{}
	err := r.each(ctx, streamReadSQL, func(rows *sql.Rows) error {
		var c hoppertype.StreamChunk
		var at int64
		if err := rows.Scan(&c.RunID, &c.Offset, blob{&c.Data}, &at); err != nil {
			return err
		}
		c.At = fromMicrosNN(at)
		out = append(out, &c)
		return nil
	}, p.RunID, p.From, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("read the stream of run %q: %w", p.RunID, err)
	}
	return out, nil
}

// deleteRunsSQLs delete the rows kept beside the jobs whose ids are in the
// JSON array ?1: a run's row, history, hooks and stream chunks; a gate's
// row, waits and queued ids.
var deleteRunsSQLs = []string{
	`DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM run_events WHERE run_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM hooks WHERE run_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM stream_chunks WHERE run_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM gates WHERE id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM gate_waits WHERE gate_id IN (SELECT value FROM json_each(?1))`,
	`DELETE FROM gate_queues WHERE gate_id IN (SELECT value FROM json_each(?1))`,
}

// deleteRunsOf deletes the workflow rows of deleted jobs.
func (r *runner) deleteRunsOf(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	list := jsonList(ids)
	for _, q := range deleteRunsSQLs {
		if _, err := r.exec(ctx, q, list); err != nil {
			return err
		}
	}
	return nil
}
