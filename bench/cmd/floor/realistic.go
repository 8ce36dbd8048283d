package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The realistic SQLite floor writes what a durable queue with a change feed
// must write, and nothing an engine adds around it:
//
//   - a job row as a queue keeps it: a text UUIDv7 key, type, queue, state,
//     priority, attempt, input, result, error, metadata, a retry policy,
//     enqueue/run/start/end times, a lease (token, expiry, worker);
//   - the indexes a queue needs: the claim order of pending jobs, running
//     jobs by lease expiry, terminal jobs by end time (retention), and
//     listings by type and by queue;
//   - one change row per transition (queued, started, succeeded) in the
//     transition's transaction, indexed by entity;
//   - claims of --claim jobs (100 by default) in one transaction, finishes
//     of the same jobs in one transaction, inserts of 5,000 in one.
//
// One writer connection, WAL, synchronous=FULL by default (one WAL fsync
// per commit). The change rows are written by the statement after each
// transition (INSERT … SELECT over the batch's ids), as a queue's single
// writer can, rather than by a row trigger.
const realisticSchema = `
CREATE TABLE jobs (
	id               TEXT PRIMARY KEY,
	type             TEXT NOT NULL,
	queue            TEXT NOT NULL,
	state            TEXT NOT NULL,
	priority         INTEGER NOT NULL DEFAULT 0,
	attempt          INTEGER NOT NULL DEFAULT 0,
	input            BLOB,
	result           BLOB,
	error            TEXT,
	metadata         TEXT,
	retry            TEXT NOT NULL,
	queued_at        INTEGER NOT NULL,
	run_at           INTEGER NOT NULL,
	started_at       INTEGER,
	ended_at         INTEGER,
	lease_token      INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	worker           TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX jobs_lease ON jobs (lease_expires_at, id) WHERE state = 'running';
CREATE INDEX jobs_retention ON jobs (state, ended_at) WHERE state IN ('succeeded', 'dead', 'cancelled');
CREATE INDEX jobs_type_id ON jobs (type, id);
CREATE INDEX jobs_queue_id ON jobs (queue, id);
CREATE TABLE changes (
	position   INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	entity_id  TEXT NOT NULL,
	type       TEXT NOT NULL,
	queue      TEXT NOT NULL,
	prev_state TEXT,
	state      TEXT NOT NULL,
	attempt    INTEGER NOT NULL DEFAULT 0,
	worker     TEXT NOT NULL DEFAULT '',
	at         INTEGER NOT NULL
);
CREATE INDEX changes_entity ON changes (entity_id, position);`

// The realistic floor's extras add, one by one, what hopper's SQLite store
// writes beyond it, so a run says what each costs (--extra a,b,…):
//
//   - state-index: a listing index on (state, id), which every transition
//     moves;
//   - more-indexes: hopper's other job indexes (due jobs by queue and of
//     every queue, unique keys, groups, parents, concurrency keys) and the
//     columns they index;
//   - trigger-feed: change rows written by row triggers that also list the
//     changed fields, instead of one INSERT … SELECT per batch;
//   - wide-returning: claims and finishes return every column of the row
//     (29), not five.
var realisticExtras = []string{"state-index", "more-indexes", "trigger-feed", "wide-returning"}

const stateIndexSQL = `CREATE INDEX jobs_state_id ON jobs (state, id);`

const moreIndexesSQL = `
ALTER TABLE jobs ADD COLUMN group_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN parent_id TEXT;
ALTER TABLE jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN dependents TEXT;
ALTER TABLE jobs ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN attempt_timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN deadline INTEGER;
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stuck TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_due ON jobs (queue, run_at, id) WHERE state IN ('scheduled', 'retrying');
CREATE INDEX jobs_due_all ON jobs (run_at, id) WHERE state IN ('scheduled', 'retrying');
CREATE UNIQUE INDEX jobs_unique ON jobs (type, unique_key)
	WHERE unique_key IS NOT NULL AND state NOT IN ('succeeded', 'dead', 'expired', 'cancelled');
CREATE INDEX jobs_group ON jobs (group_id, id);
CREATE INDEX jobs_parent ON jobs (parent_id, id) WHERE parent_id IS NOT NULL;
CREATE INDEX jobs_concurrency ON jobs (concurrency_key, state) WHERE concurrency_key IS NOT NULL;`

// triggerFeedSQL writes the change rows as hopper's SQLite schema does.
const triggerFeedSQL = `
ALTER TABLE changes ADD COLUMN fields TEXT NOT NULL DEFAULT '';
ALTER TABLE changes ADD COLUMN error TEXT;
CREATE TRIGGER jobs_change_insert AFTER INSERT ON jobs BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, state, attempt, worker, error, at)
	VALUES (CASE WHEN NEW.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, NEW.id, NEW.type, NEW.queue,
		NEW.state, NEW.attempt, NEW.worker, NEW.error, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;
CREATE TRIGGER jobs_change_update AFTER UPDATE OF state ON jobs WHEN OLD.state IS NOT NEW.state BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, at)
	VALUES (CASE WHEN NEW.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, NEW.id, NEW.type, NEW.queue,
		OLD.state, NEW.state, NEW.attempt, NEW.worker,
		rtrim(
			CASE WHEN OLD.attempt IS NOT NEW.attempt THEN 'attempt,' ELSE '' END ||
			CASE WHEN OLD.run_at IS NOT NEW.run_at THEN 'run_at,' ELSE '' END ||
			CASE WHEN OLD.started_at IS NOT NEW.started_at THEN 'started_at,' ELSE '' END ||
			CASE WHEN OLD.ended_at IS NOT NEW.ended_at THEN 'ended_at,' ELSE '' END ||
			CASE WHEN OLD.worker IS NOT NEW.worker THEN 'worker,' ELSE '' END ||
			CASE WHEN OLD.result IS NOT NEW.result THEN 'result,' ELSE '' END ||
			CASE WHEN OLD.error IS NOT NEW.error THEN 'error,' ELSE '' END, ','),
		NEW.error, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;`

// realisticRetry is a retry policy as a queue stores it with each job.
const realisticRetry = `{"max_attempts":25,"initial":1000000000,"max":3600000000000,"factor":2,"jitter":0.1}`

// realisticConfig describes the realistic floor in a result's config.
func realisticConfig(claim int) string {
	return fmt.Sprintf("realistic shape: a queue's 18-column job row with a text UUIDv7 key, "+
		"indexes for claim, lease, retention and listing by type and queue, one change row per transition "+
		"(indexed by entity), claims of %d and finishes of %d in one transaction each, "+
		"inserts of 5000 in one transaction", claim, claim)
}

type realisticStore struct {
	db    *sql.DB
	lease atomic.Int64
	// triggers: the change rows come from row triggers; returning: the
	// columns claims and finishes return.
	triggers  bool
	returning string
}

// narrowReturning is what the realistic floor's claims return by default;
// wideReturning every column a queue's row has (hopper's 29).
const (
	narrowReturning = "id, type, attempt, input, metadata"
	wideReturning   = `id, type, queue, state, priority, attempt, input, result, error, group_id, parent_id,
	dependents, fair_key, unique_key, metadata, retry, attempt_timeout, deadline, queued_at, run_at,
	started_at, ended_at, lease_token, lease_expires_at, worker, cancel_requested, stuck,
	concurrency_key, concurrency_limit`
)

func newRealistic(ctx context.Context, db *sql.DB, extras []string) (*realisticStore, error) {
	if _, err := db.ExecContext(ctx, realisticSchema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s := &realisticStore{db: db, returning: narrowReturning}
	has := map[string]bool{}
	for _, e := range extras {
		has[e] = true
	}
	if has["wide-returning"] && !has["more-indexes"] {
		return nil, fmt.Errorf("--extra wide-returning needs more-indexes (the columns it returns)")
	}
	for _, e := range extras {
		var q string
		switch e {
		case "state-index":
			q = stateIndexSQL
		case "more-indexes":
			q = moreIndexesSQL
		case "trigger-feed":
			q, s.triggers = triggerFeedSQL, true
		case "wide-returning":
			s.returning = wideReturning
			continue
		default:
			return nil, fmt.Errorf("--extra %q: one of %s", e, strings.Join(realisticExtras, ", "))
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("--extra %s: %w", e, err)
		}
	}
	return s, nil
}

func realisticState(state int) string {
	switch state {
	case stateAvailable:
		return "pending"
	case stateRunning:
		return "running"
	case stateCompleted:
		return "succeeded"
	default:
		return "scheduled"
	}
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func (s *realisticStore) insert(ctx context.Context, n, state int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now()
	runAt := now
	if state == stateScheduled {
		runAt = now.AddDate(100, 0, 0)
	}
	st := realisticState(state)
	const perStmt = 500
	for left := n; left > 0; left -= perStmt {
		k := min(left, perStmt)
		var b strings.Builder
		b.WriteString("INSERT INTO jobs (id, type, queue, state, input, retry, queued_at, run_at) VALUES ")
		args := make([]any, 0, 8*k)
		ids := make([]string, 0, k)
		for i := range k {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?,?)")
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			ids = append(ids, id.String())
			args = append(args, id.String(), "noop", "default", st, payload, realisticRetry, micros(now), micros(runAt))
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		if err := s.changes(ctx, tx, ids, "", st, 0, "", now); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// changes writes one change row per job of ids for a transition from prev
// to state.
func (s *realisticStore) changes(ctx context.Context, tx *sql.Tx, ids []string, prev, state string, attempt int, worker string, at time.Time) error {
	if s.triggers {
		return nil // written by the statement's row triggers
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	var p any
	if prev != "" {
		p = prev
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, attempt, worker, at)
		SELECT 'job', value, 'noop', 'default', ?, ?, ?, ?, ? FROM json_each(?)`,
		p, state, attempt, worker, micros(at), string(arr))
	return err
}

func (s *realisticStore) claim(ctx context.Context, n int) (any, int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	now := time.Now()
	token := s.lease.Add(1)
	rows, err := tx.QueryContext(ctx, `
		UPDATE jobs SET state = 'running', attempt = attempt + 1, started_at = ?, lease_token = ?,
			lease_expires_at = ?, worker = 'floor'
		WHERE id IN (SELECT id FROM jobs WHERE queue = 'default' AND state = 'pending'
			ORDER BY priority DESC, run_at, id LIMIT ?)
		RETURNING `+s.returning,
		micros(now), token, micros(now.Add(time.Minute)), n)
	if err != nil {
		return nil, 0, err
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, 0, err
	}
	if err := rows.Close(); err != nil {
		return nil, 0, err
	}
	if len(ids) == 0 {
		return nil, 0, nil
	}
	if err := s.changes(ctx, tx, ids, "pending", "running", 1, "floor", now); err != nil {
		return nil, 0, err
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, err
	}
	return ids, len(ids), nil
}

func (s *realisticStore) complete(ctx context.Context, ids any) (int, error) {
	batch := ids.([]string)
	arr, err := json.Marshal(batch)
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now()
	rows, err := tx.QueryContext(ctx, `
		UPDATE jobs SET state = 'succeeded', ended_at = ?, lease_expires_at = NULL, result = NULL
		WHERE id IN (SELECT value FROM json_each(?)) AND state = 'running'
		RETURNING `+s.returning, micros(now), string(arr))
	if err != nil {
		return 0, err
	}
	done, err := scanIDs(rows)
	if err != nil {
		return 0, err
	}
	n := len(done)
	if err := s.changes(ctx, tx, batch, "running", "succeeded", 1, "floor", now); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// scanIDs reads the rows a claim or a finish returned, every column as a
// queue's code would (the first is the id), and closes them.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var ids []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		id, _ := vals[0].(string)
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (s *realisticStore) count(ctx context.Context, state int) (n int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE state = ?`, realisticState(state)).Scan(&n)
	return n, err
}
