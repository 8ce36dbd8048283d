package pgdriver

import (
	"strconv"
	"strings"
)

// The statements of workflow runs built by function: a run's start (one, or
// a group of them), and its history appends (one run's, or a batch's), each
// with and without the update of the run's status.

// eventAppendManySQL is RunEventAppendMany's statement: each run's fence
// (its job locked FOR SHARE, in id order) and key check apply to its events
// and status alone; one row per run says whether its lease held and whether
// a key existed. The job's state is checked as runningByID says.
// Parameters: $1-$5 per run (id, token, status, now, ended), $6-$12 per
// event (run id, attempt, seq, kind, name, at, data). Without status the
// statement leaves runs alone (see eventAppendSQL): for a batch in which no
// run moves a status.
func eventAppendManySQL(status bool) string {
	update := `, status AS (
	UPDATE {s}.runs r SET status = q.status, updated_at = q.now, ended_at = coalesce(q.ended, r.ended_at)
	FROM req q
	WHERE r.id = q.run_id AND q.status IS NOT NULL AND r.status <> q.status AND q.run_id IN (SELECT id FROM ok)
)`
	if !status {
		update = ""
	}
	return `WITH req AS (
	SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::timestamptz[], $5::timestamptz[])
		AS r(run_id, token, status, now, ended)
), lease AS MATERIALIZED (
	SELECT j.id FROM {s}.jobs j JOIN req ON j.id = req.run_id AND j.lease_token = req.token
	WHERE j.state = {running_by_id}
	ORDER BY j.id
	FOR SHARE OF j
), ev AS (
	SELECT * FROM unnest($6::text[], $7::int4[], $8::int4[], $9::text[], $10::text[], $11::timestamptz[], $12::bytea[])
		AS e(run_id, attempt, seq, kind, name, at, data)
), dup AS MATERIALIZED (
	SELECT DISTINCT e.run_id FROM ev e
	JOIN {s}.run_events x ON x.run_id = e.run_id AND x.attempt = e.attempt AND x.seq = e.seq
), ok AS MATERIALIZED (
	SELECT id FROM lease WHERE id NOT IN (SELECT run_id FROM dup)
), ins AS (
	INSERT INTO {s}.run_events (run_id, attempt, seq, kind, name, at, data)
	SELECT e.run_id, e.attempt, e.seq, e.kind, e.name, e.at, e.data FROM ev e
	WHERE e.run_id IN (SELECT id FROM ok)
)` + update + `
SELECT q.run_id, q.run_id IN (SELECT id FROM lease), q.run_id IN (SELECT run_id FROM dup) FROM req q`
}

// eventAppendSQL is RunEventAppend's statement: one INSERT … SELECT from
// unnest'ed events that writes only while the run's job is running under
// the lease token (the job row is locked FOR SHARE, so a transition of the
// job waits for the append's transaction, and one that came first makes it
// write nothing) and while none of the events' keys exists. It returns one
// row per inserted event, or one row with NULL keys when none was inserted,
// each with whether the lease held and whether a key existed. conflict is
// empty on the pool (a key another transaction committed meanwhile fails
// the statement, which then writes nothing) or ON CONFLICT DO NOTHING in a
// transaction (the caller undoes a partial insert rather than abort the
// transaction). With the events applied, the run's status becomes $9 unless
// that is NULL (and its end becomes $11 unless that is NULL). Parameters:
// $1 run id, $2 lease token, $3 attempts, $4 seqs, $5 kinds, $6 names, $7
// times, $8 data, $9 run status, $10 now, $11 ended at. The job's state is
// checked as runningByID says. Without status the statement has no update
// of runs and takes $1…$8 alone: a statement trigger fires for a statement
// that updates no row, and the runs' (a PL/pgSQL call and an INSERT …
// SELECT over empty transition tables) cost about as much as the append
// itself, at every step of every run.
func eventAppendSQL(conflict string, status bool) string {
	update := `, status AS (
	UPDATE {s}.runs SET status = $9, updated_at = $10, ended_at = coalesce($11, ended_at)
	WHERE id = $1 AND $9::text IS NOT NULL AND status <> $9
		AND EXISTS (SELECT 1 FROM lease) AND NOT EXISTS (SELECT 1 FROM dup)
		AND (SELECT count(*) FROM ins) = cardinality($3::int4[])
)`
	if !status {
		update = ""
	}
	return `WITH lease AS MATERIALIZED (
	SELECT id FROM {s}.jobs WHERE id = $1 AND state = {running_by_id} AND lease_token = $2
	FOR SHARE
), dup AS MATERIALIZED (
	SELECT 1 FROM {s}.run_events e, unnest($3::int4[], $4::int4[]) AS k(attempt, seq)
	WHERE e.run_id = $1 AND e.attempt = k.attempt AND e.seq = k.seq
	LIMIT 1
), ins AS (
	INSERT INTO {s}.run_events (run_id, attempt, seq, kind, name, at, data)
	SELECT $1, u.attempt, u.seq, u.kind, u.name, u.at, u.data
	FROM unnest($3::int4[], $4::int4[], $5::text[], $6::text[], $7::timestamptz[], $8::bytea[])
		AS u(attempt, seq, kind, name, at, data)
	WHERE EXISTS (SELECT 1 FROM lease) AND NOT EXISTS (SELECT 1 FROM dup)` + conflict + `
	RETURNING attempt, seq
)` + update + `
SELECT EXISTS (SELECT 1 FROM lease), EXISTS (SELECT 1 FROM dup), ins.attempt, ins.seq
FROM (SELECT 1) one LEFT JOIN ins ON true`
}

// runStartSQL is the RunStart statement; its parameters are the job's
// columns (scalars, as in insertOne: arrays would have it planned at every
// call), the run's nine, then the notification channel. The job's insert
// reads the run's to its end (a count, not EXISTS), so the runs' statement
// trigger is queued first and a run's first change precedes its job's.
func runStartSQL() string {
	n := len(jobColumns)
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	runArgs := make([]string, 9)
	for i := range runArgs {
		runArgs[i] = p(i + 1)
	}
	return `WITH run AS (
	INSERT INTO {s}.runs ({runcols})
	VALUES (` + strings.Join(runArgs, ", ") + `)
	ON CONFLICT (id) DO NOTHING
	RETURNING id
), ins AS (
	INSERT INTO {s}.jobs ({cols})
	SELECT ` + rowArgs() + `
	WHERE (SELECT count(*) FROM run) = 1
	RETURNING state, queue
)
SELECT EXISTS (SELECT 1 FROM run),
	(SELECT count(pg_notify(` + p(10) + `::text, i.queue)) FROM ins i WHERE i.state = 'pending' AND ` + p(10) + `::text IS NOT NULL)`
}

// runStartManySQL is the statement of a group of run starts, whose ids
// differ: each run, then its job only if the run was new (the jobs'
// insert reads the runs' whole, so the runs' changes come first). The jobs' column
// arrays are $1…$29, as in insertJobs; the runs' follow, one array per run
// column. It returns, for each run in order, whether it was inserted.
func runStartManySQL() string {
	n := len(jobColumns)
	runTypes := []string{"text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "timestamptz"}
	runArgs := make([]string, len(runTypes))
	for i, t := range runTypes {
		runArgs[i] = "$" + strconv.Itoa(n+i+1) + "::" + t + "[]"
	}
	return `WITH rq AS (
	SELECT * FROM unnest(` + strings.Join(runArgs, ", ") + `) WITH ORDINALITY
		AS r(id, workflow, status, parent_id, code_version, error, created_at, updated_at, ended_at, ord)
), run AS (
	INSERT INTO {s}.runs ({runcols})
	SELECT id, workflow, status, parent_id, code_version, error, created_at, updated_at, ended_at FROM rq ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING id
), ins AS (
	INSERT INTO {s}.jobs ({cols})
	SELECT u.* FROM unnest(` + unnestArgs() + `) AS u({cols})
	WHERE u.id IN (SELECT id FROM run)
)
SELECT rq.id IN (SELECT id FROM run) FROM rq ORDER BY rq.ord`
}
