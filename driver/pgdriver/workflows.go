package pgdriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobWake makes the named scheduled and retrying jobs pending with RunAt =
// Now, in one statement that locks them in id order, and returns them in the
// order of ids; other jobs and missing ids are skipped, and an id named
// twice is woken once.
func (e *executor) JobWake(ctx context.Context, p *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	if err := e.check(ctx, "wake jobs"); err != nil {
		return nil, err
	}
	pos := make(map[string]int, len(p.IDs))
	ids := make([]string, 0, len(p.IDs))
	for i, id := range p.IDs {
		if _, ok := pos[id]; !ok {
			pos[id] = i
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return []*hoppertype.JobRow{}, nil
	}
	slices.Sort(ids)
	rows, err := collectJobs(e.q.Query(ctx, e.d.q.wake, ids, p.Now))
	if err != nil {
		return nil, e.d.fail("wake jobs", err)
	}
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int { return pos[a.ID] - pos[b.ID] })
	return rows, nil
}

// scanRun reads a row of runColumns.
func scanRun(row pgx.Row) (*hoppertype.RunRow, error) {
	var (
		r              hoppertype.RunRow
		status         string
		parentID       pgtype.Text
		errInfo        []byte
		created        time.Time
		updated, ended pgtype.Timestamptz
	)
	if err := row.Scan(&r.ID, &r.Workflow, &status, &parentID, &r.CodeVersion, &errInfo, &created, &updated, &ended); err != nil {
		return nil, err
	}
	r.Status = hoppertype.RunStatus(status)
	r.ParentID = parentID.String
	r.CreatedAt, r.UpdatedAt, r.EndedAt = fromTime(created), fromTS(updated), fromTS(ended)
	var err error
	if r.Error, err = hoppertype.UnmarshalErrorInfo(errInfo); err != nil {
		return nil, fmt.Errorf("run %s: decode error: %w", r.ID, err)
	}
	return &r, nil
}

// collectRuns reads every row of rows as a run; err is the error of the
// query that made rows, returned as is. It never returns a nil slice
// without an error.
func collectRuns(rows pgx.Rows, err error) ([]*hoppertype.RunRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*hoppertype.RunRow{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunInsert stores a new run; an existing id is hoppertype.ErrDuplicateID
// (and, unlike a failed INSERT, leaves a surrounding transaction usable).
func (e *executor) RunInsert(ctx context.Context, params *driver.RunInsertParams) error {
	row := params.Row
	if err := e.check(ctx, "insert run"); err != nil {
		return err
	}
	if row == nil || row.ID == "" {
		return errors.New("pgdriver: insert run: run has no id")
	}
	op := fmt.Sprintf("insert run %q", row.ID)
	if !row.Status.Valid() {
		return fmt.Errorf("pgdriver: %s: invalid status %q", op, row.Status)
	}
	tag, err := e.q.Exec(ctx, e.d.q.runInsert, row.ID, row.Workflow, string(row.Status), optText(row.ParentID), row.CodeVersion,
		text(marshalError(row.Error)), pgtype.Timestamptz{Time: row.CreatedAt, Valid: true}, ts(row.UpdatedAt), ts(row.EndedAt))
	if err != nil {
		return e.d.fail(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrDuplicateID)
	}
	return nil
}

// RunStart stores a run and its job in one statement (see runStart); on
// the pool the notification is part of it, in a transaction it joins the
// transaction's buffered notifications.
func (e *executor) RunStart(ctx context.Context, p *driver.RunStartParams) (bool, error) {
	if err := e.check(ctx, "start run"); err != nil {
		return false, err
	}
	if e.tx == nil && !e.callerSQLTx {
		return e.d.starts.start(ctx, e, p)
	}
	return e.startOne(ctx, p)
}

// startOne is RunStart in one statement of its own.
func (e *executor) startOne(ctx context.Context, p *driver.RunStartParams) (bool, error) {
	args, op, err := e.startArgs(p)
	if err != nil {
		return false, err
	}
	var inserted bool
	var notified int64
	if err := e.q.QueryRow(ctx, e.d.q.runStart, args...).Scan(&inserted, &notified); err != nil {
		return false, e.d.fail(op, err)
	}
	if !inserted {
		return true, nil
	}
	if p.Job.State != hoppertype.JobStatePending || e.callerSQLTx {
		return false, nil
	}
	if e.tx == nil {
		e.d.sendLater([]note{{e.d.channel(driver.TopicJobAvailable), p.Job.Queue}})
		return false, nil
	}
	if err := e.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: p.Job.Queue}); err != nil {
		return false, err
	}
	return false, nil
}

// RunGet returns a run or hoppertype.ErrNotFound.
func (e *executor) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	if err := e.check(ctx, "get run"); err != nil {
		return nil, err
	}
	r, err := scanRun(e.q.QueryRow(ctx, e.d.q.runGet, params.ID))
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("get run %q", params.ID), err)
	}
	return r, nil
}

// runStatusStrings converts statuses for an array argument.
func runStatusStrings(statuses []hoppertype.RunStatus) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}

// RunList returns the runs matching the filter, newest CreatedAt first and
// then by id descending (byte order), skipping Offset, at most Limit. The
// unfiltered listing walks runs_created; a status, workflow or parent
// filter its own index in the same order.
func (e *executor) RunList(ctx context.Context, p *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	if err := e.check(ctx, "list runs"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: list runs: limit must be > 0")
	}
	sql, args := e.d.q.runList(p)
	rows, err := collectRuns(e.q.Query(ctx, sql, args...))
	if err != nil {
		return nil, e.d.fail("list runs", err)
	}
	return rows, nil
}

// runList builds RunList's statement and arguments for a filter.
func (q *queries) runList(p *driver.RunListParams) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	switch len(p.Statuses) {
	case 0:
	case 1:
		add("status = $?", string(p.Statuses[0]))
	default:
		add("status = ANY($?::text[])", runStatusStrings(p.Statuses))
	}
	if p.Workflow != "" {
		add("workflow = $?", p.Workflow)
	}
	if p.ParentID != "" {
		add("parent_id = $?", p.ParentID)
	}
	if !p.CreatedAfter.IsZero() {
		add("created_at >= $?", p.CreatedAfter)
	}
	if !p.CreatedBefore.IsZero() {
		add("created_at < $?", p.CreatedBefore)
	}
	if !p.After.IsZero() {
		args = append(args, p.After.CreatedAt.Truncate(time.Microsecond), p.After.ID)
		n := len(args)
		// A row comparison the (created_at DESC, id DESC) indexes serve.
		where = append(where, "(created_at, id) < ($"+strconv.Itoa(n-1)+", $"+strconv.Itoa(n)+")")
	}
	var b strings.Builder
	b.WriteString("SELECT " + runColumns + " FROM " + q.schema + ".runs")
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY created_at DESC, id DESC")
	args = append(args, p.Limit)
	b.WriteString(" LIMIT $" + strconv.Itoa(len(args)))
	if p.Offset > 0 {
		args = append(args, p.Offset)
		b.WriteString(" OFFSET $" + strconv.Itoa(len(args)))
	}
	return b.String(), args
}

// RunUpdate sets a run's status (and its error and end time when given) as
// a compare-and-set on ExpectStatuses: the run is locked and updated in one
// round trip and one transaction, so a conflict reports the status that
// refused the update.
func (e *executor) RunUpdate(ctx context.Context, p *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	if err := e.check(ctx, "update run"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("update run %q", p.ID)
	if !p.Status.Valid() {
		return nil, fmt.Errorf("pgdriver: %s: invalid status %q", op, p.Status)
	}
	var expect any
	if len(p.ExpectStatuses) > 0 {
		expect = runStatusStrings(p.ExpectStatuses)
	}
	// One statement applies the compare-and-set; only when it matched
	// nothing does a second one tell a missing run from a conflict (the
	// status it reports is as of that read).
	updated, err := scanRun(e.q.QueryRow(ctx, e.d.q.runUpdate, p.ID, string(p.Status), text(marshalError(p.Error)), ts(p.EndedAt), ts(p.Now), expect, p.Reset))
	if err == nil {
		return updated, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, e.d.fail(op, err)
	}
	cur, err := scanRun(e.q.QueryRow(ctx, e.d.q.runGet, p.ID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrNotFound)
	case err != nil:
		return nil, e.d.fail(op, err)
	}
	return cur, fmt.Errorf("pgdriver: %s in status %s: %w", op, cur.Status, hoppertype.ErrStateConflict)
}

// RunEventAppend appends events in one statement fenced by the run's lease
// (see eventAppendSQL): ErrLeaseLost when the run's job is not running
// under LeaseToken, ErrDuplicateID when an event's key exists (or appears
// twice in the call); either way nothing of the call is written, and a
// surrounding transaction stays usable.
func (e *executor) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	if err := e.check(ctx, "append run events"); err != nil {
		return err
	}
	op := fmt.Sprintf("append events to run %q", p.RunID)
	n := len(p.Events)
	var (
		attempts, seqs = make([]int32, n), make([]int32, n)
		kinds, names   = make([]string, n), make([]string, n)
		at             = make(pgtype.FlatArray[pgtype.Timestamptz], n)
		data           = make(pgtype.FlatArray[[]byte], n)
	)
	for i, ev := range p.Events {
		switch {
		case ev == nil:
			return fmt.Errorf("pgdriver: %s: event %d is nil", op, i)
		case ev.RunID != "" && ev.RunID != p.RunID:
			return fmt.Errorf("pgdriver: %s: event %d belongs to run %q", op, i, ev.RunID)
		case ev.Attempt != int(int32(ev.Attempt)) || ev.Seq != int(int32(ev.Seq)):
			return fmt.Errorf("pgdriver: %s: event %d: attempt %d or seq %d out of range", op, i, ev.Attempt, ev.Seq)
		}
		attempts[i], seqs[i] = int32(ev.Attempt), int32(ev.Seq)
		kinds[i], names[i], at[i], data[i] = ev.Kind, ev.Name, ts(ev.At), ev.Data
	}
	args := []any{p.RunID, p.LeaseToken, attempts, seqs, kinds, names, at, data}
	sql, sqlTx := e.d.q.eventAppendOnly, e.d.q.eventAppendOnlyTx
	if p.RunStatus != "" {
		sql, sqlTx = e.d.q.eventAppend, e.d.q.eventAppendTx
		args = append(args, string(p.RunStatus), ts(p.Now), ts(p.EndedAt))
	}
	if e.tx != nil {
		sql = sqlTx
	}
	var (
		held, dup            bool
		attempt, seq         pgtype.Int4
		insAttempts, insSeqs []int32
	)
	// On its generic plan, by key: a custom plan for each call's arrays
	// cost more than the append (on a table never analyzed, as
	// run_events is until autovacuum first gets to it, PostgreSQL kept
	// choosing one).
	err := e.queryGeneric(ctx, func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&held, &dup, &attempt, &seq}, func() error {
			if attempt.Valid {
				insAttempts, insSeqs = append(insAttempts, attempt.Int32), append(insSeqs, seq.Int32)
			}
			return nil
		})
		return err
	}, sql, args...)
	if err != nil {
		return e.d.fail(op, err)
	}
	switch {
	case !held:
		return fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrLeaseLost)
	case dup:
		return fmt.Errorf("pgdriver: %s: an event's (attempt, seq) exists: %w", op, hoppertype.ErrDuplicateID)
	case len(insAttempts) == n:
		return nil
	}
	// In a transaction, ON CONFLICT skipped an event whose key appears twice
	// in the call or another transaction committed after the statement's
	// snapshot: undo the events this call wrote, which are still its own
	// (the run's status was left alone: it changes only when every event
	// went in).
	if len(insAttempts) > 0 {
		if _, err := e.q.Exec(ctx, e.d.q.eventUndo, p.RunID, insAttempts, insSeqs); err != nil {
			return e.d.fail(op, err)
		}
	}
	return fmt.Errorf("pgdriver: %s: an event's (attempt, seq) exists: %w", op, hoppertype.ErrDuplicateID)
}

// RunEventAppendMany makes appends to distinct runs in one statement (see
// eventAppendMany). A key another transaction commits meanwhile fails the
// statement, which then writes nothing; in a transaction the statement runs
// in a savepoint, and such a failure is retried one append at a time.
func (e *executor) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	if err := e.check(ctx, "append run events"); err != nil {
		return nil, err
	}
	if e.tx == nil {
		return e.appendMany(ctx, params.Events)
	}
	var errs []error
	err := e.savepoint(ctx, func(ctx context.Context, tx driver.Executor) error {
		var err error
		errs, err = tx.(*executor).appendMany(ctx, params.Events)
		return err
	})
	if err == nil {
		return errs, nil
	}
	if ctx.Err() != nil || !errors.Is(err, hoppertype.ErrDuplicateID) {
		return nil, err
	}
	return driver.RunEventAppendManyTx(ctx, e, params)
}

// appendMany runs eventAppendMany.
func (e *executor) appendMany(ctx context.Context, params []*driver.RunEventAppendParams) ([]error, error) {
	n := len(params)
	var (
		runIDs         = make([]string, n)
		tokens         = make([]int64, n)
		statuses       = make(pgtype.FlatArray[pgtype.Text], n)
		nows, ends     = make(pgtype.FlatArray[pgtype.Timestamptz], n), make(pgtype.FlatArray[pgtype.Timestamptz], n)
		evRuns         []string
		attempts, seqs []int32
		kinds, names   []string
		ats            []pgtype.Timestamptz
		datas          [][]byte
		index          = make(map[string]int, n)
		moves          bool // a run's status moves
	)
	for i, p := range params {
		if _, twice := index[p.RunID]; twice {
			return nil, fmt.Errorf("pgdriver: append run events: run %q appears twice in one call", p.RunID)
		}
		index[p.RunID] = i
		runIDs[i], tokens[i], nows[i], ends[i] = p.RunID, p.LeaseToken, ts(p.Now), ts(p.EndedAt)
		if p.RunStatus != "" {
			statuses[i] = pgtype.Text{String: string(p.RunStatus), Valid: true}
			moves = true
		}
		for j, ev := range p.Events {
			switch {
			case ev == nil:
				return nil, fmt.Errorf("pgdriver: append events to run %q: event %d is nil", p.RunID, j)
			case ev.RunID != "" && ev.RunID != p.RunID:
				return nil, fmt.Errorf("pgdriver: append events to run %q: event %d belongs to run %q", p.RunID, j, ev.RunID)
			case ev.Attempt != int(int32(ev.Attempt)) || ev.Seq != int(int32(ev.Seq)):
				return nil, fmt.Errorf("pgdriver: append events to run %q: event %d: attempt %d or seq %d out of range", p.RunID, j, ev.Attempt, ev.Seq)
			}
			evRuns = append(evRuns, p.RunID)
			attempts, seqs = append(attempts, int32(ev.Attempt)), append(seqs, int32(ev.Seq))
			kinds, names = append(kinds, ev.Kind), append(names, ev.Name)
			ats, datas = append(ats, ts(ev.At)), append(datas, ev.Data)
		}
	}
	// On its generic plan, by key (see sqlGenericOn): its arrays would
	// have it planned at every call. With no status to move, without
	// the update of runs, whose statement trigger would fire for nothing.
	sql := e.d.q.eventAppendManyOnly
	if moves {
		sql = e.d.q.eventAppendMany
	}
	var errs []error
	err := e.queryGeneric(ctx, func(rows pgx.Rows) error {
		var err error
		errs, err = readAppendMany(rows, index)
		return err
	}, sql, runIDs, tokens, statuses, nows, ends, evRuns, attempts, seqs, kinds, names, ats, datas)
	if err != nil {
		return nil, e.d.fail("append run events", err)
	}
	return errs, nil
}

// readAppendMany reads eventAppendMany's rows: an error per run of index
// (run id → its place in the call).
func readAppendMany(rows pgx.Rows, index map[string]int) ([]error, error) {
	n := len(index)
	errs := make([]error, n)
	seen := 0
	var (
		id        string
		held, dup bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &held, &dup}, func() error {
		i, ok := index[id]
		if !ok {
			return fmt.Errorf("unknown run %q in the answer", id)
		}
		seen++
		op := fmt.Sprintf("append events to run %q", id)
		switch {
		case !held:
			errs[i] = fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrLeaseLost)
		case dup:
			errs[i] = fmt.Errorf("pgdriver: %s: an event's (attempt, seq) exists: %w", op, hoppertype.ErrDuplicateID)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if seen != n {
		return nil, fmt.Errorf("%d answers for %d runs", seen, n)
	}
	return errs, nil
}

// RunEventList returns a run's history in (attempt, seq) order, of one
// attempt when Attempt > 0.
func (e *executor) RunEventList(ctx context.Context, p *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	if err := e.check(ctx, "list run events"); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	var err error
	if p.Attempt > 0 {
		rows, err = e.q.Query(ctx, e.d.q.eventListAttempt, p.RunID, p.Attempt)
	} else {
		rows, err = e.q.Query(ctx, e.d.q.eventList, p.RunID)
	}
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("list events of run %q", p.RunID), err)
	}
	out := []*hoppertype.RunEvent{}
	for rows.Next() {
		var ev hoppertype.RunEvent
		var at pgtype.Timestamptz
		if err := rows.Scan(&ev.RunID, &ev.Attempt, &ev.Seq, &ev.Kind, &ev.Name, &at, &ev.Data); err != nil {
			rows.Close()
			return nil, e.d.fail(fmt.Sprintf("list events of run %q", p.RunID), err)
		}
		ev.At = fromTS(at)
		out = append(out, &ev)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, e.d.fail(fmt.Sprintf("list events of run %q", p.RunID), err)
	}
	return out, nil
}

// scanHook reads a row of hookColumns.
func scanHook(row pgx.Row) (*hoppertype.HookRow, error) {
	var (
		h       hoppertype.HookRow
		state   string
		created time.Time
		resumed pgtype.Timestamptz
	)
	if err := row.Scan(&h.Token, &h.RunID, &h.Name, &state, &created, &resumed, &h.Payload, &h.Request); err != nil {
		return nil, err
	}
	h.State = hoppertype.HookState(state)
	h.CreatedAt, h.ResumedAt = fromTime(created), fromTS(resumed)
	return &h, nil
}

// HookInsert stores a hook (an empty State is stored as waiting); an
// existing token is hoppertype.ErrDuplicateID (and leaves a surrounding
// transaction usable).
func (e *executor) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	row := params.Row
	if err := e.check(ctx, "insert hook"); err != nil {
		return err
	}
	if row == nil || row.Token == "" {
		return errors.New("pgdriver: insert hook: hook has no token")
	}
	op := fmt.Sprintf("insert hook %q", row.Token)
	state := row.State
	if state == "" {
		state = hoppertype.HookWaiting
	}
	if state != hoppertype.HookWaiting && state != hoppertype.HookResumed {
		return fmt.Errorf("pgdriver: %s: invalid state %q", op, row.State)
	}
	tag, err := e.q.Exec(ctx, e.d.q.hookInsert, row.Token, row.RunID, row.Name, string(state),
		pgtype.Timestamptz{Time: row.CreatedAt, Valid: true}, ts(row.ResumedAt), row.Payload, row.Request)
	if err != nil {
		return e.d.fail(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrDuplicateID)
	}
	return nil
}

// HookGet returns a hook by token or hoppertype.ErrNotFound.
func (e *executor) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	if err := e.check(ctx, "get hook"); err != nil {
		return nil, err
	}
	h, err := scanHook(e.q.QueryRow(ctx, e.d.q.hookGet, params.Token))
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("get hook %q", params.Token), err)
	}
	return h, nil
}

// HookResume moves a waiting hook to resumed with the payload in one
// UPDATE; when it does not apply, the hook is read to tell a resumed hook
// (hoppertype.ErrStateConflict, with the hook) from a missing one.
func (e *executor) HookResume(ctx context.Context, p *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	if err := e.check(ctx, "resume hook"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("resume hook %q", p.Token)
	for range 3 {
		h, err := scanHook(e.q.QueryRow(ctx, e.d.q.hookResume, p.Token, p.Payload, ts(p.Now), p.Request))
		if err == nil {
			return h, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, e.d.fail(op, err)
		}
		cur, err := scanHook(e.q.QueryRow(ctx, e.d.q.hookGet, p.Token))
		if err != nil {
			return nil, e.d.fail(op, err)
		}
		if cur.State != hoppertype.HookWaiting {
			return cur, fmt.Errorf("pgdriver: %s in state %s: %w", op, cur.State, hoppertype.ErrStateConflict)
		}
		// The hook was inserted after the UPDATE's snapshot: try again.
	}
	return nil, fmt.Errorf("pgdriver: %s: the hook kept changing", op)
}

// HookListByRun returns a run's hooks by creation time, then token.
func (e *executor) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	if err := e.check(ctx, "list hooks"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("list hooks of run %q", params.RunID)
	rows, err := e.q.Query(ctx, e.d.q.hookByRun, params.RunID)
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	defer rows.Close()
	out := []*hoppertype.HookRow{}
	for rows.Next() {
		h, err := scanHook(rows)
		if err != nil {
			return nil, e.d.fail(op, err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, e.d.fail(op, err)
	}
	return out, nil
}

// streamLockKey is the advisory lock that serialises the appenders of one
// run's stream (a collision only serialises two streams needlessly).
func (d *Driver) streamLockKey(runID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hopper/pgdriver/stream:" + d.schema + "\x00" + runID))
	return int64(h.Sum64())
}

// StreamAppend appends chunks at the offsets after the run's last chunk.
// The run's advisory lock (held to the end of the transaction) and the
// insert go in one round trip and one transaction, so concurrent appends to
// one run get consecutive offsets without gaps or collisions.
func (e *executor) StreamAppend(ctx context.Context, p *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	if err := e.check(ctx, "append stream"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("append to stream of run %q", p.RunID)
	n := len(p.Chunks)
	if n == 0 {
		return []*hoppertype.StreamChunk{}, nil
	}
	b := &pgx.Batch{}
	b.Queue(e.d.q.streamLock, e.d.streamLockKey(p.RunID))
	b.Queue(e.d.q.streamAppend, p.RunID, p.Chunks, ts(p.Now))
	var offsets []int64
	err := e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var off int64
		_, err = pgx.ForEachRow(rows, []any{&off}, func() error { offsets = append(offsets, off); return nil })
		return err
	})
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	if len(offsets) != n {
		return nil, fmt.Errorf("pgdriver: %s: %d of %d chunks written", op, len(offsets), n)
	}
	first := slices.Min(offsets)
	at := fromTime(trunc(p.Now))
	out := make([]*hoppertype.StreamChunk, n)
	for i, c := range p.Chunks {
		out[i] = &hoppertype.StreamChunk{RunID: p.RunID, Offset: first + int64(i), Data: bytes.Clone(c), At: at}
	}
	return out, nil
}

// StreamRead returns a run's chunks from offset From in order, at most
// Limit.
func (e *executor) StreamRead(ctx context.Context, p *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	if err := e.check(ctx, "read stream"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: read stream: limit must be > 0")
	}
	op := fmt.Sprintf("read stream of run %q", p.RunID)
	rows, err := e.q.Query(ctx, e.d.q.streamRead, p.RunID, p.From, p.Limit)
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	out := []*hoppertype.StreamChunk{}
	var (
		off  int64
		at   pgtype.Timestamptz
		data []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&off, &at, &data}, func() error {
		out = append(out, &hoppertype.StreamChunk{RunID: p.RunID, Offset: off, Data: data, At: fromTS(at)})
		return nil
	}); err != nil {
		return nil, e.d.fail(op, err)
	}
	return out, nil
}
