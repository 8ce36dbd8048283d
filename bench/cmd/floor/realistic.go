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
}

func newRealistic(ctx context.Context, db *sql.DB) (*realisticStore, error) {
	if _, err := db.ExecContext(ctx, realisticSchema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &realisticStore{db: db}, nil
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
		RETURNING id, type, attempt, input, metadata`,
		micros(now), token, micros(now.Add(time.Minute)), n)
	if err != nil {
		return nil, 0, err
	}
	var ids []string
	for rows.Next() {
		var (
			id, typ  string
			attempt  int
			input    []byte
			metadata sql.NullString
		)
		if err := rows.Scan(&id, &typ, &attempt, &input, &metadata); err != nil {
			rows.Close()
			return nil, 0, err
		}
		ids = append(ids, id)
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
	res, err := tx.ExecContext(ctx, `
		UPDATE jobs SET state = 'succeeded', ended_at = ?, lease_expires_at = NULL, result = NULL
		WHERE id IN (SELECT value FROM json_each(?)) AND state = 'running'`, micros(now), string(arr))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if err := s.changes(ctx, tx, batch, "running", "succeeded", 1, "floor", now); err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}

func (s *realisticStore) count(ctx context.Context, state int) (n int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE state = ?`, realisticState(state)).Scan(&n)
	return n, err
}
