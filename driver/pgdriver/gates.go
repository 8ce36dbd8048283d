package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// gateQueries are the statements of gates.
type gateQueries struct {
	insert, insertWaits, insertQueues, count, get, waits string
	watched, setWaits, addCounts, gateJobs, wake, edges  string
	watchers                                             string
}

const gateColumns = "id, cond_kind, cond_count, cond_of, total, done, succeeded, created_at"

func newGateQueries(q func(string) string) gateQueries {
	return gateQueries{
		insert: q(`INSERT INTO {s}.gates (` + gateColumns + `) VALUES ($1, $2, $3, $4, 0, 0, 0, $5)`),
		// The watched jobs are read FOR SHARE: a transition of one of them
		// in flight finishes first (and its state is counted here), and one
		// that starts later waits for this transaction and then sees its
		// waits.
		insertWaits: q(`WITH locked AS MATERIALIZED (
	SELECT id, state FROM {s}.jobs WHERE id = ANY($2::text[]) ORDER BY id FOR SHARE
)
INSERT INTO {s}.gate_waits (gate_id, job_id, state)
SELECT $1, w.id, CASE WHEN l.state IN {terminal} THEN l.state END
FROM (SELECT DISTINCT unnest($2::text[]) AS id) w LEFT JOIN locked l ON l.id = w.id`),
		insertQueues: q(`INSERT INTO {s}.gate_queues (job_id, gate_id) SELECT unnest($2::text[]), $1`),
		count: q(`UPDATE {s}.gates g SET total = c.total, done = c.done, succeeded = c.succeeded
FROM (SELECT count(*) AS total, count(state) AS done, count(*) FILTER (WHERE state = 'succeeded') AS succeeded
	FROM {s}.gate_waits WHERE gate_id = $1) c
WHERE g.id = $1
RETURNING ` + prefixCols("g.", gateColumns)),
		get:      q(`SELECT ` + gateColumns + ` FROM {s}.gates WHERE id = $1`),
		waits:    q(`SELECT gate_id, job_id, state FROM {s}.gate_waits WHERE gate_id = $1 ORDER BY job_id`),
		watchers: q(`SELECT gate_id FROM {s}.gate_waits WHERE job_id = $1 ORDER BY gate_id LIMIT $2`),
		// watched locks the waits on the jobs of $1, in one order for
		// every transaction.
		watched: q(`SELECT gate_id, job_id, state FROM {s}.gate_waits WHERE job_id = ANY($1::text[])
ORDER BY gate_id, job_id FOR UPDATE`),
		setWaits: q(`UPDATE {s}.gate_waits w SET state = v.state
FROM unnest($1::text[], $2::text[], $3::text[]) AS v(gate_id, job_id, state)
WHERE w.gate_id = v.gate_id AND w.job_id = v.job_id`),
		addCounts: q(`UPDATE {s}.gates g SET done = g.done + v.done, succeeded = g.succeeded + v.succeeded
FROM (SELECT * FROM unnest($1::text[], $2::int[], $3::int[]) AS v(id, done, succeeded) ORDER BY id) v
WHERE g.id = v.id
RETURNING ` + prefixCols("g.", gateColumns)),
		// gateJobs reads only the state and stuck slot: a gate's input (its
		// watched ids and queued jobs) may be large.
		gateJobs: q(`SELECT id, state, stuck FROM {s}.jobs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`),
		wake: q(`WITH o AS MATERIALIZED (
	SELECT j.id, v.at, {jold}
	FROM {s}.jobs j JOIN unnest($1::text[], $2::timestamptz[]) AS v(id, at) ON j.id = v.id
	ORDER BY j.id
	FOR UPDATE OF j
), upd AS (
	UPDATE {s}.jobs j SET state = 'pending', run_at = o.at, stuck = NULL
	FROM o WHERE j.id = o.id
	RETURNING {jcols}, {orefs}
), {rec}
SELECT queue FROM upd, rec`),
		edges: q(`SELECT gate_id, job_id FROM {s}.gate_waits WHERE gate_id = ANY($1::text[])
UNION ALL SELECT job_id, gate_id FROM {s}.gate_queues WHERE job_id = ANY($1::text[])`),
	}
}

// prefixCols qualifies a ", "-separated column list with prefix.
func prefixCols(prefix, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, c := range parts {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}

func scanGate(row pgx.Row) (*hoppertype.GateRow, error) {
	var g hoppertype.GateRow
	var kind string
	var created pgtype.Timestamptz
	if err := row.Scan(&g.ID, &kind, &g.Cond.Count, &g.Cond.Of, &g.Total, &g.Done, &g.Succeeded, &created); err != nil {
		return nil, err
	}
	g.Cond.Kind = hoppertype.GateConditionKind(kind)
	g.CreatedAt = fromTS(created)
	return &g, nil
}

func scanGates(rows pgx.Rows) ([]*hoppertype.GateRow, error) {
	defer rows.Close()
	var out []*hoppertype.GateRow
	for rows.Next() {
		g, err := scanGate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// GateInsert stores gates and wakes those already decided; see
// driver.Executor.
func (e *executor) GateInsert(ctx context.Context, p *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	if err := e.check(ctx, "insert gates"); err != nil {
		return nil, err
	}
	var out []*hoppertype.GateRow
	err := e.atomic(ctx, func(tx *executor) error {
		out = make([]*hoppertype.GateRow, 0, len(p.Gates))
		for _, s := range p.Gates {
			c := s.Cond.Normalize()
			if _, err := tx.q.Exec(ctx, e.d.q.gates.insert, s.ID, string(c.Kind), c.Count, c.Of, ts(trunc(p.Now))); err != nil {
				return gateDup(fmt.Sprintf("insert gate %q", s.ID), err)
			}
			on := s.On
			if on == nil {
				on = []string{}
			}
			if _, err := tx.q.Exec(ctx, e.d.q.gates.insertWaits, s.ID, on); err != nil {
				return err
			}
			if len(s.Queues) > 0 {
				if _, err := tx.q.Exec(ctx, e.d.q.gates.insertQueues, s.ID, s.Queues); err != nil {
					return gateDup(fmt.Sprintf("insert gate %q: a job it queues is queued by another gate", s.ID), err)
				}
			}
			g, err := scanGate(tx.q.QueryRow(ctx, e.d.q.gates.count, s.ID))
			if err != nil {
				return err
			}
			out = append(out, g)
		}
		ats := make([]time.Time, len(out))
		for i := range ats {
			ats[i] = trunc(p.Now)
		}
		return tx.wakeGates(ctx, out, ats)
	})
	if err != nil {
		return nil, e.d.fail("insert gates", err)
	}
	return out, nil
}

// gateDup maps a primary key violation of gates or gate_queues to
// hoppertype.ErrDuplicateID, saying what op was. Not the server's Detail:
// it quotes the row's key values, the database's words for them.
func gateDup(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation &&
		(pgErr.ConstraintName == "gates_pkey" || pgErr.ConstraintName == "gate_queues_pkey") {
		return fmt.Errorf("%s: %w", op, hoppertype.ErrDuplicateID)
	}
	return err
}

// atomic runs fn in e's transaction, or in a new one on the pool. (In a
// transaction, a failed statement aborts the whole transaction, so fn needs
// no savepoint of its own.)
func (e *executor) atomic(ctx context.Context, fn func(tx *executor) error) error {
	if e.tx != nil {
		return fn(e)
	}
	return e.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return fn(tx.(*executor)) })
}

// gateWait is a row of the watched query.
type gateWait struct {
	gate, job string
	state     hoppertype.JobState
}

// readWaits reads the rows of the watched query.
func readWaits(rows pgx.Rows) ([]gateWait, error) {
	var out []gateWait
	var w gateWait
	var state pgtype.Text
	_, err := pgx.ForEachRow(rows, []any{&w.gate, &w.job, &state}, func() error {
		w.state = hoppertype.JobState(state.String)
		out = append(out, w)
		return nil
	})
	return out, err
}

// gateChange is a job's move into or out of a terminal state.
type gateChange struct {
	id    string
	state hoppertype.JobState
	at    time.Time
}

// observe records changes in the gates watching their jobs, given the waits
// on those jobs as locked by the watched query, and wakes the gates they
// decide. It runs in a transaction.
func (e *executor) observe(ctx context.Context, changes []gateChange, waits []gateWait) error {
	if len(waits) == 0 {
		return nil
	}
	byJob := make(map[string]gateChange, len(changes))
	for _, c := range changes {
		byJob[c.id] = c
	}
	type move struct {
		done, ok int32
		at       time.Time
	}
	moves := map[string]*move{}
	var wg, wj, ws []string
	for _, w := range waits {
		c, ok := byJob[w.job]
		if !ok {
			continue
		}
		obs := driver.GateObserved(c.state)
		if w.state == obs {
			continue
		}
		d, s := driver.GateDelta(w.state, obs)
		m := moves[w.gate]
		if m == nil {
			m = &move{}
			moves[w.gate] = m
		}
		m.done += int32(d)
		m.ok += int32(s)
		if c.at.After(m.at) {
			m.at = c.at
		}
		wg, wj, ws = append(wg, w.gate), append(wj, w.job), append(ws, string(obs))
	}
	if len(wg) == 0 {
		return nil
	}
	states := make([]pgtype.Text, len(ws))
	for i, s := range ws {
		states[i] = pgtype.Text{String: s, Valid: s != ""}
	}
	if _, err := e.q.Exec(ctx, e.d.q.gates.setWaits, wg, wj, states); err != nil {
		return err
	}
	ids := make([]string, 0, len(moves))
	for id := range moves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dd, ds := make([]int32, len(ids)), make([]int32, len(ids))
	for i, id := range ids {
		dd[i], ds[i] = moves[id].done, moves[id].ok
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.addCounts, ids, dd, ds)
	if err != nil {
		return err
	}
	gates, err := scanGates(rows)
	if err != nil {
		return err
	}
	ats := make([]time.Time, len(gates))
	for i, g := range gates {
		ats[i] = moves[g.ID].at
	}
	return e.wakeGates(ctx, gates, ats)
}

// wakeGates wakes the jobs of gates that driver.GateWakes says to wake, at
// the matching time of ats, and notifies their queues.
func (e *executor) wakeGates(ctx context.Context, gates []*hoppertype.GateRow, ats []time.Time) error {
	if len(gates) == 0 {
		return nil
	}
	byID := make(map[string]int, len(gates))
	ids := make([]string, len(gates))
	for i, g := range gates {
		byID[g.ID], ids[i] = i, g.ID
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.gateJobs, ids)
	if err != nil {
		return err
	}
	var wake []string
	var at []pgtype.Timestamptz
	for rows.Next() {
		job := &hoppertype.JobRow{}
		var state string
		var stuck []byte
		if err := rows.Scan(&job.ID, &state, &stuck); err != nil {
			rows.Close()
			return err
		}
		job.State = hoppertype.JobState(state)
		var err error
		if job.Stuck, err = unmarshalStuck(stuck); err != nil {
			rows.Close()
			return err
		}
		i := byID[job.ID]
		if driver.GateWakes(gates[i], job) {
			wake = append(wake, job.ID)
			at = append(at, pgtype.Timestamptz{Time: trunc(ats[i]), Valid: true})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(wake) == 0 {
		return err
	}
	rows, err = e.q.Query(ctx, e.d.q.gates.wake, wake, at)
	if err != nil {
		return err
	}
	var queues []string
	var q string
	if _, err := pgx.ForEachRow(rows, []any{&q}, func() error { queues = append(queues, q); return nil }); err != nil {
		return err
	}
	slices.Sort(queues)
	for _, q := range slices.Compact(queues) {
		if err := e.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: q}); err != nil {
			return err
		}
	}
	return nil
}

// observeChanges locks the waits on the changed jobs and records the
// changes (the path for operations that did not pipeline the lock).
func (e *executor) observeChanges(ctx context.Context, changes []gateChange) error {
	if len(changes) == 0 {
		return nil
	}
	ids := make([]string, len(changes))
	for i, c := range changes {
		ids[i] = c.id
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.watched, ids)
	if err != nil {
		return err
	}
	waits, err := readWaits(rows)
	if err != nil {
		return err
	}
	return e.observe(ctx, changes, waits)
}

// GateGet returns a gate; see driver.Executor.
func (e *executor) GateGet(ctx context.Context, params *driver.GateGetParams) (*hoppertype.GateRow, error) {
	if err := e.check(ctx, "get gate"); err != nil {
		return nil, err
	}
	g, err := scanGate(e.q.QueryRow(ctx, e.d.q.gates.get, params.ID))
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("get gate %q", params.ID), err)
	}
	return g, nil
}

// GateWaitList returns a gate's waits; see driver.Executor.
func (e *executor) GateWaitList(ctx context.Context, params *driver.GateWaitListParams) ([]*hoppertype.GateWait, error) {
	if err := e.check(ctx, "list gate waits"); err != nil {
		return nil, err
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.waits, params.GateID)
	if err != nil {
		return nil, e.d.fail("list gate waits", err)
	}
	out := []*hoppertype.GateWait{}
	var w hoppertype.GateWait
	var state pgtype.Text
	_, err = pgx.ForEachRow(rows, []any{&w.GateID, &w.JobID, &state}, func() error {
		c := w
		c.State = hoppertype.JobState(state.String)
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, e.d.fail("list gate waits", err)
	}
	return out, nil
}

// GateEdges returns gate graph edges; see driver.Executor.
func (e *executor) GateEdges(ctx context.Context, params *driver.GateEdgesParams) (map[string][]string, error) {
	if err := e.check(ctx, "gate edges"); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	if len(params.IDs) == 0 {
		return out, nil
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.edges, params.IDs)
	if err != nil {
		return nil, e.d.fail("gate edges", err)
	}
	var from, to string
	_, err = pgx.ForEachRow(rows, []any{&from, &to}, func() error { out[from] = append(out[from], to); return nil })
	if err != nil {
		return nil, e.d.fail("gate edges", err)
	}
	return out, nil
}

// GateWatcherList returns the gates watching a job; see driver.Executor.
func (e *executor) GateWatcherList(ctx context.Context, params *driver.GateWatcherListParams) ([]string, error) {
	if err := e.check(ctx, "list gate watchers"); err != nil {
		return nil, err
	}
	if params.Limit <= 0 {
		return nil, fmt.Errorf("list gate watchers: limit %d: %w", params.Limit, hoppertype.ErrInvalidInput)
	}
	rows, err := e.q.Query(ctx, e.d.q.gates.watchers, params.JobID, params.Limit)
	if err != nil {
		return nil, e.d.fail("list gate watchers", err)
	}
	out := []string{}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { out = append(out, id); return nil })
	if err != nil {
		return nil, e.d.fail("list gate watchers", err)
	}
	return out, nil
}

// GateObserve records the jobs' states in the gates watching them; see
// driver.Executor.
func (e *executor) GateObserve(ctx context.Context, p *driver.GateObserveParams) error {
	if err := e.check(ctx, "observe gates"); err != nil {
		return err
	}
	changes := make([]gateChange, len(p.Jobs))
	for i, j := range p.Jobs {
		changes[i] = gateChange{id: j.ID, state: j.State, at: trunc(p.Now)}
	}
	err := e.atomic(ctx, func(tx *executor) error { return tx.observeChanges(ctx, changes) })
	return e.d.fail("observe gates", err)
}
