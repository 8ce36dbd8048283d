package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

const (
	gateCols      = `id, cond_kind, cond_count, cond_of, total, done, succeeded, created_at`
	insertGateSQL = `INSERT INTO gates (` + gateCols + `) VALUES (?1, ?2, ?3, ?4, 0, 0, 0, ?5)`
	// insertGateWaitsSQL stores a gate's waits on the distinct ids of the
	// JSON array ?2, each with the state its job has now if terminal.
	insertGateWaitsSQL = `INSERT INTO gate_waits (gate_id, job_id, state)
	SELECT ?1, w.value, (SELECT j.state FROM jobs j WHERE j.id = w.value AND j.state IN ` + terminalStates + `)
	FROM (SELECT DISTINCT value FROM json_each(?2)) w`
	countGateSQL = `UPDATE gates SET
	total = (SELECT count(*) FROM gate_waits WHERE gate_id = ?1),
	done = (SELECT count(state) FROM gate_waits WHERE gate_id = ?1),
	succeeded = (SELECT count(*) FROM gate_waits WHERE gate_id = ?1 AND state = 'succeeded')
	WHERE id = ?1 RETURNING ` + gateCols
	insertGateQueueSQL = `INSERT INTO gate_queues (job_id, gate_id) VALUES (?, ?)`
	getGateSQL         = `SELECT ` + gateCols + ` FROM gates WHERE id = ?`
	listGateWaitsSQL   = `SELECT gate_id, job_id, state FROM gate_waits WHERE gate_id = ? ORDER BY job_id`
	gateWatchersSQL    = `SELECT gate_id FROM gate_waits WHERE job_id = ? ORDER BY gate_id LIMIT ?`
	// watchedSQL lists the waits on the jobs of the JSON array ?1.
	watchedSQL      = `SELECT gate_id, job_id, state FROM gate_waits WHERE job_id IN (SELECT value FROM json_each(?1))`
	setWaitSQL      = `UPDATE gate_waits SET state = ?3 WHERE gate_id = ?1 AND job_id = ?2`
	countDeltaSQL   = `UPDATE gates SET done = done + ?2, succeeded = succeeded + ?3 WHERE id = ?1 RETURNING ` + gateCols
	gateJobStateSQL = `SELECT state, stuck FROM jobs WHERE id = ?`
	// wakeGateSQL is driver.GateWake.
	wakeGateSQL  = `UPDATE jobs SET state = 'pending', run_at = ?2, stuck = NULL WHERE id = ?1 RETURNING queue`
	gateEdgesSQL = `SELECT g.gate_id, g.job_id FROM gate_waits g WHERE g.gate_id IN (SELECT value FROM json_each(?1))
	UNION ALL SELECT q.job_id, q.gate_id FROM gate_queues q WHERE q.job_id IN (SELECT value FROM json_each(?1))`
)

func scanGate(rows *sql.Rows) (*hoppertype.GateRow, error) {
	var g hoppertype.GateRow
	var kind, of string
	var created int64
	if err := rows.Scan(&g.ID, &kind, &g.Cond.Count, &of, &g.Total, &g.Done, &g.Succeeded, &created); err != nil {
		return nil, err
	}
	g.Cond.Kind, g.Cond.Of = hoppertype.GateConditionKind(kind), of
	g.CreatedAt = fromMicrosNN(created)
	return &g, nil
}

func (r *runner) gate(ctx context.Context, query string, args ...any) (*hoppertype.GateRow, error) {
	var g *hoppertype.GateRow
	err := r.one(ctx, query, func(rows *sql.Rows) error {
		var err error
		g, err = scanGate(rows)
		return err
	}, args...)
	return g, err
}

// gateInsert stores gates and returns the ones whose jobs to check for a
// wake-up.
func (r *runner) gateInsert(ctx context.Context, p *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	now := trunc(p.Now).UnixMicro()
	out := make([]*hoppertype.GateRow, 0, len(p.Gates))
	for _, s := range p.Gates {
		c := s.Cond.Normalize()
		_, err := r.exec(ctx, insertGateSQL, s.ID, string(c.Kind), c.Count, c.Of, now)
		if isPrimaryKeyConflict(err) {
			return nil, fmt.Errorf("insert gate %q: %w", s.ID, hoppertype.ErrDuplicateID)
		} else if err != nil {
			return nil, fmt.Errorf("insert gate %q: %w", s.ID, err)
		}
		on := s.On
		if on == nil {
			on = []string{}
		}
		if _, err := r.exec(ctx, insertGateWaitsSQL, s.ID, jsonList(on)); err != nil {
			return nil, fmt.Errorf("insert gate %q: waits: %w", s.ID, err)
		}
		for _, q := range s.Queues {
			_, err := r.exec(ctx, insertGateQueueSQL, q, s.ID)
			if isPrimaryKeyConflict(err) {
				return nil, fmt.Errorf("insert gate %q: job %q is queued by another gate: %w", s.ID, q, hoppertype.ErrDuplicateID)
			} else if err != nil {
				return nil, fmt.Errorf("insert gate %q: %w", s.ID, err)
			}
		}
		g, err := r.gate(ctx, countGateSQL, s.ID)
		if err != nil {
			return nil, fmt.Errorf("insert gate %q: %w", s.ID, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// gateChange is a job's move into or out of a terminal state.
type gateChange struct {
	id    string
	state hoppertype.JobState
	at    time.Time
}

// observeGates records changes in the gates watching their jobs and returns
// the gates whose counts moved, each with the time of the change that
// moved it last.
func (r *runner) observeGates(ctx context.Context, changes []gateChange) ([]*hoppertype.GateRow, []time.Time, error) {
	if len(changes) == 0 {
		return nil, nil, nil
	}
	byJob := make(map[string]gateChange, len(changes))
	ids := make([]string, 0, len(changes))
	for _, c := range changes {
		if _, ok := byJob[c.id]; !ok {
			ids = append(ids, c.id)
		}
		byJob[c.id] = c
	}
	type move struct {
		done, ok int
		at       time.Time
	}
	moves := map[string]*move{}
	var order []string
	type wait struct{ gate, job, state string }
	var changed []wait
	err := r.each(ctx, watchedSQL, func(rows *sql.Rows) error {
		var w wait
		var st sql.NullString
		if err := rows.Scan(&w.gate, &w.job, &st); err != nil {
			return err
		}
		c := byJob[w.job]
		obs := driver.GateObserved(c.state)
		if hoppertype.JobState(st.String) == obs {
			return nil
		}
		d, s := driver.GateDelta(hoppertype.JobState(st.String), obs)
		m := moves[w.gate]
		if m == nil {
			m = &move{}
			moves[w.gate] = m
			order = append(order, w.gate)
		}
		m.done += d
		m.ok += s
		if c.at.After(m.at) {
			m.at = c.at
		}
		w.state = string(obs)
		changed = append(changed, w)
		return nil
	}, jsonList(ids))
	if err != nil {
		return nil, nil, fmt.Errorf("observe gates: %w", err)
	}
	for _, w := range changed {
		if _, err := r.exec(ctx, setWaitSQL, w.gate, w.job, nullString(w.state)); err != nil {
			return nil, nil, fmt.Errorf("observe gates: %w", err)
		}
	}
	slices.Sort(order)
	gates := make([]*hoppertype.GateRow, 0, len(order))
	ats := make([]time.Time, 0, len(order))
	for _, id := range order {
		m := moves[id]
		g, err := r.gate(ctx, countDeltaSQL, id, m.done, m.ok)
		if err != nil {
			return nil, nil, fmt.Errorf("observe gates: gate %q: %w", id, err)
		}
		gates = append(gates, g)
		ats = append(ats, m.at)
	}
	return gates, ats, nil
}

// wakeGate wakes g's job when driver.GateWakes says so and returns its
// queue ("" when it did not wake it).
func (r *runner) wakeGate(ctx context.Context, g *hoppertype.GateRow, now time.Time) (string, error) {
	// Only the state and stuck slot: a gate's input (its watched ids and
	// queued jobs) may be large.
	job := &hoppertype.JobRow{ID: g.ID}
	err := r.one(ctx, gateJobStateSQL, func(rows *sql.Rows) error {
		var state string
		var stuck sql.NullString
		if err := rows.Scan(&state, &stuck); err != nil {
			return err
		}
		job.State = hoppertype.JobState(state)
		if stuck.Valid && stuck.String != "" {
			var s hoppertype.StuckInfo
			if err := json.Unmarshal([]byte(stuck.String), &s); err != nil {
				return err
			}
			job.Stuck = &s
		}
		return nil
	}, g.ID)
	if err == sql.ErrNoRows {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("wake gate %q: %w", g.ID, err)
	}
	if !driver.GateWakes(g, job) {
		return "", nil
	}
	var queue string
	err = r.one(ctx, wakeGateSQL, func(rows *sql.Rows) error { return rows.Scan(&queue) }, g.ID, trunc(now).UnixMicro())
	if err != nil {
		return "", fmt.Errorf("wake gate %q: %w", g.ID, err)
	}
	return queue, nil
}

func (r *runner) gateGet(ctx context.Context, id string) (*hoppertype.GateRow, error) {
	g, err := r.gate(ctx, getGateSQL, id)
	if err != nil {
		return nil, wrapErr(err, fmt.Sprintf("get gate %q", id))
	}
	return g, nil
}

func (r *runner) gateWaitList(ctx context.Context, gateID string) ([]*hoppertype.GateWait, error) {
	out := []*hoppertype.GateWait{}
	err := r.each(ctx, listGateWaitsSQL, func(rows *sql.Rows) error {
		var w hoppertype.GateWait
		var st sql.NullString
		if err := rows.Scan(&w.GateID, &w.JobID, &st); err != nil {
			return err
		}
		w.State = hoppertype.JobState(st.String)
		out = append(out, &w)
		return nil
	}, gateID)
	if err != nil {
		return nil, fmt.Errorf("list waits of gate %q: %w", gateID, err)
	}
	return out, nil
}

func (r *runner) gateWatchers(ctx context.Context, p *driver.GateWatcherListParams) ([]string, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("list gate watchers: limit %d: %w", p.Limit, hoppertype.ErrInvalidInput)
	}
	out, err := column[string](ctx, r, gateWatchersSQL, p.JobID, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list gates watching %q: %w", p.JobID, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (r *runner) gateEdges(ctx context.Context, ids []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(ids) == 0 {
		return out, nil
	}
	err := r.each(ctx, gateEdgesSQL, func(rows *sql.Rows) error {
		var from, to string
		if err := rows.Scan(&from, &to); err != nil {
			return err
		}
		out[from] = append(out[from], to)
		return nil
	}, jsonList(ids))
	if err != nil {
		return nil, fmt.Errorf("gate edges: %w", err)
	}
	return out, nil
}

// GateInsert stores gates and wakes those already decided.
func (t *executor) GateInsert(ctx context.Context, params *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]*hoppertype.GateRow, error) {
			return t.GateInsert(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []*hoppertype.GateRow
	err := t.atomic(ctx, func() error {
		var err error
		if out, err = t.r.gateInsert(ctx, params); err != nil {
			return err
		}
		for _, g := range out {
			if err := t.wakeGate(ctx, g, params.Now); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// wakeGate wakes a gate's job if it should and notifies its queue.
func (t *executor) wakeGate(ctx context.Context, g *hoppertype.GateRow, now time.Time) error {
	q, err := t.r.wakeGate(ctx, g, now)
	if err != nil || q == "" {
		return err
	}
	return t.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: q})
}

// observe records transitions in the gates watching their jobs and wakes
// the gates they decide.
func (t *executor) observe(ctx context.Context, changes []gateChange) error {
	gates, ats, err := t.r.observeGates(ctx, changes)
	if err != nil {
		return err
	}
	for i, g := range gates {
		if err := t.wakeGate(ctx, g, ats[i]); err != nil {
			return err
		}
	}
	return nil
}

// GateGet returns a gate, as this transaction sees it.
func (t *executor) GateGet(ctx context.Context, params *driver.GateGetParams) (*hoppertype.GateRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.gateGet(ctx, params.ID)
}

// GateWaitList returns a gate's waits, as this transaction sees them.
func (t *executor) GateWaitList(ctx context.Context, params *driver.GateWaitListParams) ([]*hoppertype.GateWait, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.gateWaitList(ctx, params.GateID)
}

// GateEdges returns gate graph edges, as this transaction sees them.
func (t *executor) GateEdges(ctx context.Context, params *driver.GateEdgesParams) (map[string][]string, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.gateEdges(ctx, params.IDs)
}

// GateWatcherList returns the gates watching a job, as this transaction
// sees them.
func (t *executor) GateWatcherList(ctx context.Context, params *driver.GateWatcherListParams) ([]string, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.gateWatchers(ctx, params)
}

// GateObserve records the jobs' states in the gates watching them.
func (t *executor) GateObserve(ctx context.Context, params *driver.GateObserveParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.GateObserve(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	changes := make([]gateChange, len(params.Jobs))
	for i, j := range params.Jobs {
		changes[i] = gateChange{id: j.ID, state: j.State, at: trunc(params.Now)}
	}
	return t.atomic(ctx, func() error { return t.observe(ctx, changes) })
}
