package pgdriver

import (
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// jobColumns are the jobs table's columns in the order scanJob reads them.
var jobColumns = []string{
	"id", "type", "queue", "state", "priority", "attempt", "lease_token", "attempt_timeout",
	"queued_at", "run_at", "started_at", "ended_at", "deadline", "lease_expires_at",
	"cancel_requested", "worker", "group_id", "parent_id", "fair_key", "unique_key",
	"retry", "metadata", "dependents", "error", "stuck", "input", "result",
	"concurrency_key", "concurrency_limit",
}

// jobArrayTypes are the array types insertJobs unnests, column by column.
var jobArrayTypes = []string{
	"text", "text", "text", "text", "int4", "int4", "int8", "int8",
	"timestamptz", "timestamptz", "timestamptz", "timestamptz", "timestamptz", "timestamptz",
	"bool", "text", "text", "text", "text", "text",
	"text", "text", "text", "text", "text", "bytea", "bytea",
	"text", "int4",
}

// cols lists the job columns, each prefixed with prefix (e.g. "j.").
func cols(prefix string) string {
	var b strings.Builder
	for i, c := range jobColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(prefix)
		b.WriteString(c)
	}
	return b.String()
}

// rowArgs returns "$1::text, $2::text, …" for the job columns.
func rowArgs() string { return jobArgs("") }

// unnestArgs returns "$1::text[], $2::text[], …" for the job columns.
func unnestArgs() string { return jobArgs("[]") }

// jobArgs returns the job columns' arguments, each cast to its type
// followed by suffix.
func jobArgs(suffix string) string {
	var b strings.Builder
	for i, t := range jobArrayTypes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString("::")
		b.WriteString(t)
		b.WriteString(suffix)
	}
	return b.String()
}

// Literal predicates shared by the indexes and the queries (see the
// migration): the planner matches partial indexes only on these words.
const (
	terminalStates = `('succeeded', 'dead', 'expired', 'cancelled')`
	dueStates      = `('scheduled', 'retrying')`
	liveUnique     = `unique_key IS NOT NULL AND state NOT IN ` + terminalStates
	// runningByID is the state a job found by its id must hold while it
	// is leased. It is a sub-select, not a literal: 'running' matches
	// jobs_lease's predicate, and the planner would walk every running
	// job's entry (and the dead ones left since the last vacuum) for the
	// one job instead of reading it by its key.
	runningByID = `(SELECT 'running'::text)`
)

// queries are the driver's statements for one schema. They are built once
// per Driver; pgx prepares and caches them per connection.
type queries struct {
	schema string // quoted
	// r writes the schema and column lists into a statement.
	r *strings.Replacer
	// claimLiteral caches claim statements by their claimKey.
	claimLiteral sync.Map // claimKey -> string

	insertJobs, insertOne, holders                                       string
	getJob, getJobs, countAll, countQueue, countGroup                    string
	promoteQueue, claim, claimTypes, promoteAll, nextRunAt, expiredLease string
	workersLeases                                                        string
	heartbeat, heartbeatNote, finish, existingIDs, cancel                string
	// finishClaimed is finish for items whose claimed rows the caller
	// passed: it returns what the driver cannot take from them.
	finishClaimed string
	// finishOwn and finishOwnOne are finishClaimed that write their own
	// changes (see finishOwnSQL), the second for one job in scalar
	// arguments.
	finishOwn, finishOwnOne                                             string
	retryMove, retryHolders, deleteFinished, deleteFinishedIDs          string
	groupInsert, groupGet, groupLock, groupUpdate                       string
	keySet, leaderAttempt, leaderGet, leaderResign, queueSet, queueList string
	keyDeleteExpired                                                    string
	scheduleUpsert, scheduleRecord, schedulePause, scheduleList         string
	scheduleDelete, scheduleDefine, scheduleUpsertStored                string
	scheduleRecordStored                                                string
	lockKey, runningOfKey, unclaim                                      string
	notify, notifyMany                                                  string

	// QueueDepthList's statements: every queue, and one queue.
	queueDepth, queueDepthOne string

	wake                                  string
	runInsert, runStart, runGet, runLoad  string
	runStartMany                          string
	runLoadMany                           string
	runUpdate                             string
	eventAppend, eventAppendTx, eventUndo string
	// A run's history append that moves no status: no UPDATE of runs, so
	// the runs' statement trigger does not fire for nothing.
	eventAppendOnly, eventAppendOnlyTx string
	// The change feed: final changes after a cursor ($1 position, $2
	// limit, $3 tx), an entity's changes ($3 entity), a transaction's own.
	changeFeed, changeEntity, changeOwn string
	// A feed scan: the last of the next $2 final changes after ($3, $1),
	// then the changes after ($1, $2) up to ($3, $4) that pass the filter
	// ($5 kinds, $6 types, $7 states; NULL for none), at most $8 (the
	// range holds no more).
	changeScanLast, changeScanRange, changeScanStuck string
	// The final changes before a cursor ($1 tx, $2 position), newest
	// first, $3 of them.
	changeBefore string
	// The last final change.
	changeTail string
	// A batch of runs' history appends, and one in which no run moves a
	// status (no UPDATE of runs; see eventAppendSQL).
	eventAppendMany, eventAppendManyOnly       string
	eventList, eventListAttempt                string
	hookInsert, hookGet, hookResume, hookByRun string
	streamLock, streamAppend, streamRead       string

	gates gateQueries
}

// runColumns are the runs table's columns in the order scanRun reads them.
const runColumns = "id, workflow, status, parent_id, code_version, error, created_at, updated_at, ended_at"

// hookColumns are the hooks table's columns in the order scanHook reads them.
const hookColumns = "token, run_id, name, state, created_at, resumed_at, payload, request"

// newQueries builds the statements for schema (validated by the caller).
func newQueries(schema string) *queries {
	s := pgx.Identifier{schema}.Sanitize()
	r := strings.NewReplacer("{s}", s, "{cols}", cols(""), "{jcols}", cols("j."),
		"{rec}", strings.ReplaceAll(recordSQL(), "{s}", s), "{old}", oldColumns(""), "{jold}", oldColumns("j."),
		"{orefs}", oldRefs("o"),
		"{runcols}", runColumns, "{hookcols}", hookColumns,
		"{terminal}", terminalStates, "{due}", dueStates, "{live}", liveUnique,
		"{running_by_id}", runningByID)
	q := func(sql string) string { return r.Replace(sql) }
	qs := &queries{
		schema: s,
		r:      r,

		// One statement inserts the whole batch. dup refuses the batch when
		// any id exists (a race past it still fails on the primary key);
		// ON CONFLICT skips jobs whose unique key a live job holds; a
		// terminal job does not take a key, so it is skipped by hand when
		// the key is held.
		insertJobs: q(`WITH dup AS MATERIALIZED (
	SELECT id FROM {s}.jobs WHERE id = ANY($1::text[]) LIMIT 1
), ins AS (
	INSERT INTO {s}.jobs ({cols})
	SELECT u.* FROM unnest(` + unnestArgs() + `) AS u({cols})
	WHERE NOT EXISTS (SELECT 1 FROM dup)
	  AND NOT (u.unique_key IS NOT NULL AND u.state IN {terminal} AND EXISTS (
		SELECT 1 FROM {s}.jobs h
		WHERE h.type = u.type AND h.unique_key = u.unique_key
		  AND h.unique_key IS NOT NULL AND h.state NOT IN {terminal}))
	ON CONFLICT (type, unique_key) WHERE {live} DO NOTHING
	RETURNING id
)
SELECT id, false FROM ins
UNION ALL
SELECT id, true FROM dup`),
		// insertOne is insertJobs for one job without a unique key, in
		// scalar arguments. Unnest's arrays make the planner plan
		// insertJobs anew at every call (its generic plan, guessing 100
		// rows, always looks dearer), which costs about as much as the
		// insert itself; this statement keeps one generic plan.
		insertOne: q(`WITH dup AS MATERIALIZED (
	SELECT id FROM {s}.jobs WHERE id = $1::text
), ins AS (
	INSERT INTO {s}.jobs ({cols})
	SELECT ` + rowArgs() + `
	WHERE NOT EXISTS (SELECT 1 FROM dup)
	RETURNING id
)
SELECT id, false FROM ins
UNION ALL
SELECT id, true FROM dup`),
		holders: q(`SELECT {cols} FROM {s}.jobs
WHERE (type, unique_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
  AND {live}`),

		getJob:     q(`SELECT {cols} FROM {s}.jobs WHERE id = $1`),
		getJobs:    q(`SELECT {cols} FROM {s}.jobs WHERE id = ANY($1::text[])`),
		countAll:   q(`SELECT queue, state, count(*) FROM {s}.jobs GROUP BY queue, state`),
		countQueue: q(`SELECT queue, state, count(*) FROM {s}.jobs WHERE queue = $1 GROUP BY queue, state`),
		countGroup: q(`SELECT queue, state, count(*) FROM (SELECT queue, state FROM (
			(SELECT id, queue, state FROM {s}.jobs WHERE group_id = $1 AND group_id <> id AND ($2 = '' OR queue = $2) ORDER BY id LIMIT $3)
			UNION ALL (SELECT id, queue, state FROM {s}.jobs WHERE id = $1 AND group_id = $1 AND ($2 = '' OR queue = $2))) g
			ORDER BY id LIMIT $3) g GROUP BY queue, state`),

		// promoteQueue runs in a claim, on its generic plan: its limit is
		// in its text (as an argument the planner guesses a tenth of the
		// rows), and the update finds the due rows by ctid, as the claim
		// does (joined by id, the generic plan could merge-join them with
		// the whole primary key).
		promoteQueue: q(`WITH o AS MATERIALIZED (
	SELECT ctid AS tid, {old} FROM {s}.jobs
	WHERE queue = $1 AND state IN {due} AND run_at <= $2
	ORDER BY run_at
	LIMIT ` + strconv.Itoa(promoteBatch) + `
	FOR UPDATE SKIP LOCKED
), upd AS (
	UPDATE {s}.jobs j SET state = 'pending' FROM o WHERE j.ctid = o.tid
	RETURNING {jcols}, {orefs}
), {rec}
SELECT count(*) FROM upd, rec`),
		claim:      q(claimSQL(false, 0, false)),
		claimTypes: q(claimSQL(true, 0, false)),
		promoteAll: q(`WITH o AS MATERIALIZED (
	SELECT id, {old} FROM {s}.jobs
	WHERE state IN {due} AND run_at <= $1
	ORDER BY run_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), upd AS (
	UPDATE {s}.jobs j SET state = 'pending' FROM o WHERE j.id = o.id
	RETURNING {jcols}, {orefs}
), {rec}
SELECT count(*) FROM upd, rec`),
		nextRunAt: q(`SELECT min(run_at) FROM {s}.jobs WHERE queue = $1 AND state IN {due}`),
		expiredLease: q(`SELECT {cols} FROM {s}.jobs
WHERE state = 'running' AND lease_expires_at < $1
ORDER BY lease_expires_at, id
LIMIT $2`),
		workersLeases: q(`SELECT {cols} FROM {s}.jobs
WHERE state = 'running' AND lease_expires_at IS NOT NULL AND worker = ANY($1)
ORDER BY lease_expires_at, id
LIMIT $2`),

		// heartbeat, heartbeatNote and finish find their jobs by id. The
		// state they require ('running') comes as an array beside the ids
		// ($N: one 'running' per job), so it is a join clause: written as
		// a constant it would match jobs_lease's predicate, and with the
		// few running rows the statistics usually show, the planner then
		// hashes every entry of jobs_lease, live and dead (a busy queue
		// leaves one per finished attempt until vacuum) instead of looking
		// each job up by its key. That made large finishes cost 200 µs a
		// job.
		heartbeat: q(`UPDATE {s}.jobs j SET lease_expires_at = $3
FROM unnest($1::text[], $2::int8[], $4::text[]) AS l(id, token, state)
WHERE j.id = l.id AND j.lease_token = l.token AND j.state = l.state
RETURNING j.id, j.lease_token, j.cancel_requested`),
		// heartbeatNote is heartbeat that also records $4 as a heartbeat
		// change of each job still held, keyed past the job's previous
		// change (a row, or an entry of a change set).
		heartbeatNote: q(`WITH h AS (
	UPDATE {s}.jobs j SET lease_expires_at = $3
	FROM unnest($1::text[], $2::int8[], $5::text[]) AS l(id, token, state)
	WHERE j.id = l.id AND j.lease_token = l.token AND j.state = l.state
	RETURNING j.id, j.lease_token, j.cancel_requested, j.type, j.queue, j.state, j.attempt, j.worker, j.set_position
), c AS (
	INSERT INTO {s}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, detail, at)
	SELECT greatest(pg_current_xact_id(), (SELECT x.tx FROM {s}.changes x WHERE x.entity_id = h.id ORDER BY x.tx DESC LIMIT 1),
			(SELECT x.tx FROM {s}.change_sets x WHERE x.position = h.set_position AND x.prev_positions IS NOT NULL),
			(SELECT x.tx FROM {s}.change_sets x WHERE x.entity_ids @> ARRAY[h.id] AND x.prev_positions IS NULL
				ORDER BY x.tx DESC LIMIT 1)),
		CASE WHEN h.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, h.id, h.type, h.queue, h.state, h.state,
		h.attempt, h.worker, 'heartbeat', $4, statement_timestamp()
	FROM h
)
SELECT id, lease_token, cancel_requested FROM h`),
		finish:        q(finishSQL(false)),
		finishClaimed: q(finishSQL(true)),
		existingIDs:   q(`SELECT id FROM {s}.jobs WHERE id = ANY($1::text[])`),
		cancel: q(`WITH o AS MATERIALIZED (
	SELECT id, {old} FROM {s}.jobs
	WHERE id = $1 AND state NOT IN {terminal} AND NOT (state = 'running' AND cancel_requested)
	FOR UPDATE
), upd AS (
	UPDATE {s}.jobs j SET
		state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
		cancel_requested = j.cancel_requested OR j.state = 'running',
		ended_at = CASE WHEN j.state = 'running' THEN j.ended_at ELSE $2 END,
		error = CASE WHEN j.state = 'running' THEN j.error ELSE $3 END
	FROM o WHERE j.id = o.id
	RETURNING {jcols}, {orefs}
), {rec}
SELECT {cols} FROM upd, rec`),

		retryHolders: q(`SELECT type, unique_key, id FROM {s}.jobs
WHERE (type, unique_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
  AND {live}`),
		retryMove: q(`WITH o AS MATERIALIZED (
	SELECT j.id, r.ord, {jold}
	FROM {s}.jobs j JOIN unnest($1::text[]) WITH ORDINALITY AS r(id, ord) ON j.id = r.id
	ORDER BY j.id
	FOR UPDATE OF j
), upd AS (
	UPDATE {s}.jobs j SET
		state = 'pending', attempt = 0, run_at = $2, result = NULL, ended_at = NULL,
		lease_expires_at = NULL, worker = '', cancel_requested = false, stuck = NULL,
		deadline = CASE WHEN j.deadline <= $2 THEN NULL ELSE j.deadline END
	FROM o WHERE j.id = o.id
	RETURNING o.ord, {jcols}, {orefs}
), {rec}
SELECT ord, {cols} FROM upd, rec`),
		// A deleted job that is a workflow run takes its run row, history,
		// hooks and stream with it, in the same statement, and a settled
		// group whose last jobs it deleted takes its group row (the
		// statement's snapshot still shows the deleted jobs, so they are
		// left out of the look-up of the jobs that remain: the root by its
		// key, the members by jobs_group, which leaves roots out, each in
		// a scalar subquery, probed per group, where an anti-join would be
		// planned as a scan of jobs). Data-modifying
		// CTEs always run to completion; each probes its table's index by
		// the deleted ids.
		deleteFinished: q(`WITH victims AS MATERIALIZED (
	SELECT id FROM {s}.jobs
	WHERE state = ANY($1::text[]) AND state IN {terminal} AND ended_at < $2
	ORDER BY ended_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED
` + deleteVictimsSQL),
		// deleteFinished for the jobs among $4, found by key; a NULL $2
		// bounds no end time.
		deleteFinishedIDs: q(`WITH victims AS MATERIALIZED (
	SELECT id FROM {s}.jobs
	WHERE id = ANY($4::text[]) AND state = ANY($1::text[]) AND state IN {terminal}
	  AND ($2::timestamptz IS NULL OR ended_at < $2)
	ORDER BY id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
` + deleteVictimsSQL),

		groupInsert: q(`INSERT INTO {s}.groups (id, open, state, value_set, final, created_at, settled_at, value)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO NOTHING`),
		groupGet:  q(`SELECT id, open, state, value_set, final, created_at, settled_at, value FROM {s}.groups WHERE id = $1`),
		groupLock: q(`SELECT state, final, value_set, value FROM {s}.groups WHERE id = $1 FOR UPDATE`),
		groupUpdate: q(`UPDATE {s}.groups g SET
	value = CASE WHEN $2::boolean AND NOT g.final THEN $3::bytea ELSE g.value END,
	value_set = g.value_set OR ($2::boolean AND NOT g.final),
	final = g.final OR ($2::boolean AND $4::boolean),
	open = g.open + $5::integer,
	state = CASE
		WHEN g.state <> 'settled' AND $5::integer < 0 AND g.open + $5::integer <= 0 THEN 'settled'
		WHEN g.state = 'settled' AND g.open + $5::integer > 0 THEN 'open'
		ELSE g.state END,
	settled_at = CASE
		WHEN g.state <> 'settled' AND $5::integer < 0 AND g.open + $5::integer <= 0 THEN $6::timestamptz
		WHEN g.state = 'settled' AND g.open + $5::integer > 0 THEN NULL
		ELSE g.settled_at END
WHERE g.id = $1
RETURNING g.id, g.open, g.state, g.value_set, g.final, g.created_at, g.settled_at, g.value`),

		keySet: q(`INSERT INTO {s}.keys AS k (key, created_at, expires_at, value) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, value = EXCLUDED.value
WHERE k.expires_at IS NOT NULL AND k.expires_at < EXCLUDED.created_at
RETURNING true`),
		lockKey: q(`WITH ins AS (INSERT INTO {s}.concurrency_keys (key) VALUES ($1) ON CONFLICT DO NOTHING)
SELECT key FROM {s}.concurrency_keys WHERE key = $1 FOR UPDATE`),
		runningOfKey: q(`SELECT id FROM {s}.jobs WHERE concurrency_key = $1 AND state = 'running'`),
		// unclaim gives back jobs this process claimed (same lease token).
		unclaim: q(`WITH o AS MATERIALIZED (
	SELECT j.id, {jold}
	FROM {s}.jobs j JOIN unnest($1::text[], $2::int8[]) AS b(id, token) ON j.id = b.id
	WHERE j.lease_token = b.token AND j.state = {running_by_id}
	ORDER BY j.id
	FOR UPDATE OF j
), upd AS (
	UPDATE {s}.jobs j SET state = 'pending', attempt = j.attempt - 1, lease_expires_at = NULL, worker = ''
	FROM o WHERE j.id = o.id
	RETURNING {jcols}, {orefs}
), {rec}
SELECT count(*) FROM upd, rec`),
		keyDeleteExpired: q(`DELETE FROM {s}.keys WHERE key IN (
	SELECT key FROM {s}.keys WHERE expires_at < $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`),
		// One upsert takes the row when it is free, expired or already the
		// owner's, and raises the term when the owner changes.
		leaderAttempt: q(`INSERT INTO {s}.leaders AS l (name, owner, term, expires_at) VALUES ($1, $2, 1, $3)
ON CONFLICT (name) DO UPDATE SET
	owner = EXCLUDED.owner,
	term = CASE WHEN l.owner = EXCLUDED.owner THEN l.term ELSE l.term + 1 END,
	expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.owner = '' OR l.expires_at IS NULL OR l.expires_at <= $4
RETURNING name, owner, term, expires_at`),
		leaderGet:    q(`SELECT name, owner, term, expires_at FROM {s}.leaders WHERE name = $1`),
		leaderResign: q(`UPDATE {s}.leaders SET owner = '', expires_at = NULL WHERE name = $1 AND owner = $2 AND owner <> ''`),
		queueSet: q(`INSERT INTO {s}.queues (name, paused, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at`),
		queueList: q(`SELECT name, paused, updated_at FROM {s}.queues ORDER BY name`),
		// An occurrence recorded past the registration's next one keeps
		// the later next_at it stored (unless the spec changed). A row with
		// a definition keeps the spec its definition set; a process running
		// a stored schedule (the Stored statements) only updates a row that
		// still has its definition.
		// A registration, a record and a definition give a row its
		// first_seen_at when it has none.
		scheduleUpsert: q(`INSERT INTO {s}.schedules AS s (name, spec, next_at, updated_at, first_seen_at) VALUES ($1, $2, $3, $4, $4)
ON CONFLICT (name) DO UPDATE SET updated_at = EXCLUDED.updated_at,
	spec = CASE WHEN s.def_kind = '' THEN EXCLUDED.spec ELSE s.spec END,
	next_at = CASE WHEN (s.def_kind <> '' OR s.spec = EXCLUDED.spec) AND s.next_at > EXCLUDED.next_at THEN s.next_at ELSE EXCLUDED.next_at END,
	first_seen_at = coalesce(s.first_seen_at, EXCLUDED.first_seen_at)
RETURNING first_seen_at`),
		scheduleUpsertStored: q(`UPDATE {s}.schedules SET updated_at = $3,
	next_at = CASE WHEN next_at > $2 THEN next_at ELSE $2 END, first_seen_at = coalesce(first_seen_at, $3)
WHERE name = $1 AND def_kind <> '' AND def_version = $4
RETURNING first_seen_at`),
		// A paused schedule's occurrence is not counted.
		scheduleRecord: q(`INSERT INTO {s}.schedules AS s (name, occurrences, last_at, next_at, updated_at, spec, first_seen_at) VALUES ($1, 1, $2, $3, $4, $5, $4)
ON CONFLICT (name) DO UPDATE SET spec = CASE WHEN s.def_kind = '' THEN EXCLUDED.spec ELSE s.spec END,
	occurrences = s.occurrences + CASE WHEN s.paused THEN 0 ELSE 1 END,
	last_at = CASE WHEN s.paused THEN s.last_at ELSE EXCLUDED.last_at END,
	next_at = EXCLUDED.next_at, updated_at = EXCLUDED.updated_at,
	first_seen_at = coalesce(s.first_seen_at, EXCLUDED.first_seen_at)
RETURNING paused`),
		scheduleRecordStored: q(`UPDATE {s}.schedules SET occurrences = occurrences + CASE WHEN paused THEN 0 ELSE 1 END,
	last_at = CASE WHEN paused THEN last_at ELSE $2 END, next_at = $3, updated_at = $4,
	first_seen_at = coalesce(first_seen_at, $4)
WHERE name = $1 AND def_kind <> '' AND def_version = $5
RETURNING paused`),
		schedulePause: q(`INSERT INTO {s}.schedules (name, paused, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at`),
		scheduleList: q(`SELECT name, spec, paused, occurrences, last_at, next_at, updated_at, first_seen_at,
	def_kind, def_target, def_input, def_location, def_catch_up, def_spec, def_version, def_at FROM {s}.schedules ORDER BY name`),
		// A code schedule's row (no definition, and a spec, a next or last
		// occurrence or a count) is not taken over: no row changes.
		scheduleDefine: q(`INSERT INTO {s}.schedules AS s (name, spec, next_at, updated_at, def_kind, def_target, def_input, def_location, def_catch_up, def_spec, def_version, def_at, first_seen_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $2, $10, $11, $4)
ON CONFLICT (name) DO UPDATE SET spec = EXCLUDED.spec, next_at = EXCLUDED.next_at, updated_at = EXCLUDED.updated_at,
	first_seen_at = coalesce(s.first_seen_at, EXCLUDED.first_seen_at),
	def_kind = EXCLUDED.def_kind, def_target = EXCLUDED.def_target, def_input = EXCLUDED.def_input,
	def_location = EXCLUDED.def_location, def_catch_up = EXCLUDED.def_catch_up, def_spec = EXCLUDED.def_spec,
	def_version = EXCLUDED.def_version, def_at = EXCLUDED.def_at
WHERE s.def_kind <> '' OR (s.spec = '' AND s.next_at IS NULL AND s.last_at IS NULL AND s.occurrences = 0)`),
		scheduleDelete: q(`DELETE FROM {s}.schedules WHERE name = $1`),

		// JobWake locks the waiting jobs in id order, then makes them due.
		wake: q(`WITH o AS MATERIALIZED (
	SELECT id, {old} FROM {s}.jobs
	WHERE id = ANY($1::text[]) AND state IN {due}
	ORDER BY id
	FOR UPDATE
), upd AS (
	UPDATE {s}.jobs j SET state = 'pending', run_at = $2
	FROM o WHERE j.id = o.id
	RETURNING {jcols}, {orefs}
), {rec}
SELECT {cols} FROM upd, rec`),

		runInsert: q(`INSERT INTO {s}.runs ({runcols})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (id) DO NOTHING`),
		// RunStart in one statement: the run, then its job only if the
		// run was new, then (on the pool, the last parameter not NULL) the
		// notification. The job's columns come first, as in insertJobs,
		// then the run's.
		runStart: q(runStartSQL()),
		// runStartMany is RunStart for a group of runs (startGroup) in one
		// statement: the job columns' arrays first, as in insertJobs, then
		// the runs'; one row per run, in order, says whether it was new.
		runStartMany: q(runStartManySQL()),
		runGet:       q(`SELECT {runcols} FROM {s}.runs WHERE id = $1`),
		// RunLoad: the run's columns on every row, then one event per row
		// (NULLs for a run without history).
		runLoad: q(`SELECT r.id, r.workflow, r.status, r.parent_id, r.code_version, r.error, r.created_at, r.updated_at, r.ended_at,
	e.attempt, e.seq, e.kind, e.name, e.at, e.data
FROM {s}.runs r LEFT JOIN {s}.run_events e ON e.run_id = r.id
WHERE r.id = $1
ORDER BY e.attempt, e.seq`),
		// runLoadMany is runLoad for several runs, each run's rows together.
		runLoadMany: q(`SELECT r.id, r.workflow, r.status, r.parent_id, r.code_version, r.error, r.created_at, r.updated_at, r.ended_at,
	e.attempt, e.seq, e.kind, e.name, e.at, e.data
FROM {s}.runs r LEFT JOIN {s}.run_events e ON e.run_id = r.id
WHERE r.id = ANY($1::text[])
ORDER BY r.id, e.attempt, e.seq`),
		// RunUpdate's compare-and-set: $6 NULL expects any status.
		runUpdate: q(`UPDATE {s}.runs SET
	status = $2,
	error = CASE WHEN $7::bool THEN NULL ELSE coalesce($3, error) END,
	ended_at = CASE WHEN $7::bool THEN NULL ELSE coalesce($4, ended_at) END,
	updated_at = $5
WHERE id = $1 AND ($6::text[] IS NULL OR status = ANY($6::text[]))
RETURNING {runcols}`),

		eventAppendMany:     q(eventAppendManySQL(true)),
		eventAppendManyOnly: q(eventAppendManySQL(false)),
		// The feed's other queries read the change sets too (changesets.go).
		// changeScanStuck reads the stuck changes between two cursors from
		// changes_stuck (the literal predicate lets the planner use it).
		changeScanStuck: q(`SELECT ` + changeColumns + ` FROM {s}.changes
WHERE state = 'stuck' AND (tx, position) > ($1::bigint::text::xid8, $2) AND (tx, position) <= ($3::bigint::text::xid8, $4)
	AND ($5::text[] IS NULL OR kind = ANY($5)) AND ($6::text[] IS NULL OR type = ANY($6))
ORDER BY tx, position LIMIT $7`),
		eventAppend:       q(eventAppendSQL("", true)),
		eventAppendTx:     q(eventAppendSQL("\n\tON CONFLICT (run_id, attempt, seq) DO NOTHING", true)),
		eventAppendOnly:   q(eventAppendSQL("", false)),
		eventAppendOnlyTx: q(eventAppendSQL("\n\tON CONFLICT (run_id, attempt, seq) DO NOTHING", false)),
		eventUndo: q(`DELETE FROM {s}.run_events
WHERE run_id = $1 AND (attempt, seq) IN (SELECT * FROM unnest($2::int4[], $3::int4[]))`),
		eventList: q(`SELECT run_id, attempt, seq, kind, name, at, data FROM {s}.run_events
WHERE run_id = $1 ORDER BY attempt, seq`),
		eventListAttempt: q(`SELECT run_id, attempt, seq, kind, name, at, data FROM {s}.run_events
WHERE run_id = $1 AND attempt = $2 ORDER BY attempt, seq`),

		hookInsert: q(`INSERT INTO {s}.hooks ({hookcols}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (token) DO NOTHING`),
		hookGet: q(`SELECT {hookcols} FROM {s}.hooks WHERE token = $1`),
		hookResume: q(`UPDATE {s}.hooks SET state = 'resumed', payload = $2, resumed_at = $3, request = $4
WHERE token = $1 AND state = 'waiting'
RETURNING {hookcols}`),
		hookByRun: q(`SELECT {hookcols} FROM {s}.hooks WHERE run_id = $1 ORDER BY created_at, token`),

		// A run's appenders take its advisory lock (a statement of its own,
		// so the append's snapshot sees every earlier append), then the
		// chunks go at the offsets after the last one.
		streamLock: `SELECT pg_advisory_xact_lock($1)`,
		streamAppend: q(`INSERT INTO {s}.stream_chunks (run_id, "offset", at, data)
SELECT $1, b.next + u.ord - 1, $3, u.data
FROM (SELECT coalesce(max("offset") + 1, 0) AS next FROM {s}.stream_chunks WHERE run_id = $1) b,
	unnest($2::bytea[]) WITH ORDINALITY AS u(data, ord)
RETURNING "offset"`),
		streamRead: q(`SELECT "offset", at, data FROM {s}.stream_chunks
WHERE run_id = $1 AND "offset" >= $2
ORDER BY "offset"
LIMIT $3`),

		notify:     `SELECT pg_notify($1, $2)`,
		notifyMany: `SELECT pg_notify(n.c, n.p) FROM unnest($1::text[], $2::text[]) AS n(c, p)`,

		queueDepth:    q(queueDepthSQL(false)),
		queueDepthOne: q(queueDepthSQL(true)),

		gates: newGateQueries(q),
	}
	qs.changeFeed, qs.changeEntity, qs.changeOwn, qs.changeBefore, qs.changeTail, qs.changeScanLast, qs.changeScanRange = changeSetQueries(q)
	qs.finishOwn, qs.finishOwnOne = q(finishOwnSQL), q(finishOwnOneSQL)
	return qs
}

// claimSQL is the claim statement: a MATERIALIZED CTE picks the rows with
// every predicate inside it (so nothing outside the LIMIT can waste a slot
// and the planner cannot run it twice), in claim order, skipping rows other
// claimers hold; the UPDATE marks them running under a fresh lease token.
// With limit 0 its arguments are $1 queue, $2 limit, $3 lease expiry, $4
// worker, $5 now (and $6 types when typed);
// with a limit it is written into the text and the arguments after the
// queue move down one. A LIMIT the planner cannot see makes it guess a tenth
// of the pending jobs: the generic plan then always looks dearer than a
// custom one, and every claim is planned anew, which costs as much as a
// small claim itself. With the limit in the text the statement keeps one
// generic plan (see claimStmt).
//
// The claim writes its own changes (schema versions 27 and 28): every row
// goes from pending to running one attempt up, and the picked rows carry
// the two other fields a claim may change (worker and start), so the set
// is built from the update's RETURNING rows (a row of the changes table
// when the claim is of one job), keyed by change_key (see the migration).
// A claim of a gate or of a stuck job, or of more than 4,096 jobs, hands
// its changes to record_job_changes instead (such changes are rows of
// their own, or several sets), in rec, which the statement reads beside
// upd (a CTE that only reads runs only when read).
//
// The update finds the picked rows by their ctid (a TID scan), not by a
// second walk down the primary key. A picked row is locked, so no one else
// moves it before the update; were a row version ever out of date, the
// update's recheck of the newest version would leave that job out of the
// claim (still pending), never claim a wrong one.
func claimSQL(typed bool, limit int, after bool) string {
	arg := func(n int) string {
		if limit > 0 && n > 2 {
			n--
		}
		return "$" + strconv.Itoa(n)
	}
	lim, typeFilter := "$2", ""
	if limit > 0 {
		lim = strconv.Itoa(limit)
	}
	next := 6 // the first argument after the types
	if typed {
		typeFilter = "\n\t  AND type = ANY(" + arg(6) + "::text[])"
		next = 7
	}
	const filters = `
	  AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = $1 AND paused)
	  AND (concurrency_key IS NULL OR concurrency_limit <= 0 OR concurrency_limit >
	    (SELECT count(*) FROM {s}.jobs r WHERE r.concurrency_key = jobs.concurrency_key AND r.state = 'running'))`
	picked := `WITH picked AS MATERIALIZED (
	SELECT ctid AS tid, worker AS old_worker, started_at AS old_started FROM {s}.jobs
	WHERE queue = $1 AND state = 'pending'` + typeFilter + filters + `
	ORDER BY priority DESC, run_at, id
	LIMIT ` + lim + `
	FOR UPDATE SKIP LOCKED
)`
	if after {
		// The claim cursor (see claimCursor): the jobs of higher priority
		// than its key, then those of its priority after it, each walk
		// starting at its bound in jobs_claim rather than at the head of
		// the queue's entries.
		prio, runAt, id := arg(next), arg(next+1), arg(next+2)
		picked = `WITH above AS MATERIALIZED (
	SELECT ctid AS tid, worker AS old_worker, started_at AS old_started FROM {s}.jobs
	WHERE queue = $1 AND state = 'pending' AND priority > ` + prio + `::int4` + typeFilter + filters + `
	ORDER BY priority DESC, run_at, id
	LIMIT ` + lim + `
	FOR UPDATE SKIP LOCKED
), level AS MATERIALIZED (
	SELECT ctid AS tid, worker AS old_worker, started_at AS old_started FROM {s}.jobs
	WHERE queue = $1 AND state = 'pending' AND priority = ` + prio + `::int4
	  AND (run_at, id) > (` + runAt + `::timestamptz, ` + id + `::text)` + typeFilter + filters + `
	ORDER BY run_at, id
	LIMIT (` + lim + ` - (SELECT count(*) FROM above))
	FOR UPDATE SKIP LOCKED
), picked AS (
	SELECT * FROM above UNION ALL SELECT * FROM level
)`
	}
	// The claimed jobs' changes are a set chained from their rows (schema
	// version 29): its key is drawn before the update (k, read only once a
	// row is updated), each row takes its position and keeps the one before
	// (see chainSQL). A gate's or a stuck job's change is a row of its own,
	// written by record_job_changes; its row's chain is left as it was.
	return picked + `, k AS MATERIALIZED (
	SELECT {s}.change_key() AS tx, nextval('{s}.changes_position_seq') AS pos
), upd AS (
UPDATE {s}.jobs j SET
	state = 'running',
	attempt = j.attempt + 1,
	lease_token = GREATEST(nextval('{s}.lease_tokens'), j.lease_token + 1),
	lease_expires_at = GREATEST(` + arg(3) + `::timestamptz, j.run_at + (` + arg(3) + `::timestamptz - ` + arg(5) + `::timestamptz)),
	worker = ` + arg(4) + `,
	started_at = GREATEST(` + arg(5) + `, j.run_at),
	set_position = CASE WHEN j.type = 'hopper.gate' OR j.stuck IS NOT NULL THEN j.set_position ELSE (SELECT pos FROM k) END,
	prev_set_position = CASE WHEN j.type = 'hopper.gate' OR j.stuck IS NOT NULL THEN j.prev_set_position ELSE j.set_position END
FROM picked WHERE j.ctid = picked.tid
RETURNING {jcols}, picked.old_worker, picked.old_started, j.prev_set_position AS old_set,
	(j.type = 'hopper.gate' OR j.stuck IS NOT NULL) AS single
), own AS MATERIALIZED (
	SELECT count(*) AS changed,
		array_agg(id) AS ids, array_agg(type) AS types, array_agg(queue) AS queues,
		array_agg(attempt) AS attempts, array_agg(worker) AS workers,
		array_agg(concat_ws(',', 'attempt',
			CASE WHEN old_started IS DISTINCT FROM started_at THEN 'started_at' END,
			CASE WHEN old_worker IS DISTINCT FROM worker THEN 'worker' END)) AS fields,
		array_agg(error) AS errors, array_agg(run_at) AS due_ats, array_agg(old_set) AS prevs
	FROM upd
	WHERE NOT single
), ins AS (
	INSERT INTO {s}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
		attempts, workers, fields, errors, due_ats, prev_positions)
	SELECT (SELECT tx FROM k), (SELECT pos FROM k), statement_timestamp(),
		o.ids, o.types, o.queues, array_fill('pending'::text, ARRAY[o.changed::int]),
		array_fill('running'::text, ARRAY[o.changed::int]),
		o.attempts, o.workers, o.fields, o.errors, o.due_ats, o.prevs
	FROM own o
	WHERE o.changed > 0
), rec AS MATERIALIZED (
	SELECT {s}.record_job_changes(array_agg(id), array_agg(type), array_agg(queue),
		array_agg('pending'::text), array_agg(state), array_agg(attempt), array_agg(worker),
		array_agg(concat_ws(',', 'attempt',
			CASE WHEN old_started IS DISTINCT FROM started_at THEN 'started_at' END,
			CASE WHEN old_worker IS DISTINCT FROM worker THEN 'worker' END)),
		array_agg(error), array_agg(stuck), array_agg(run_at), array_agg(true)) AS recorded
	FROM upd
	WHERE single
	HAVING count(*) > 0
)
SELECT {cols} FROM upd LEFT JOIN rec ON true`
}

// maxLiteralClaim is the largest claim whose limit is written into the
// statement's text: each limit is a statement of its own, prepared once per
// connection.
const maxLiteralClaim = 256

// claimKey names a claim statement in queries.claimLiteral.
type claimKey struct {
	limit        int // 0: the limit is the second argument
	typed, after bool
}

// claimStmt returns the claim statement for limit (after a claim cursor's
// key when after is set) and whether it takes the limit as its second
// argument.
func (q *queries) claimStmt(typed bool, limit int, after bool) (sql string, limitArg bool) {
	if limit > maxLiteralClaim {
		limit = 0
	}
	if limit == 0 && !after {
		if typed {
			return q.claimTypes, true
		}
		return q.claim, true
	}
	key := claimKey{limit, typed, after}
	if s, ok := q.claimLiteral.Load(key); ok {
		return s.(string), limit == 0
	}
	s, _ := q.claimLiteral.LoadOrStore(key, q.r.Replace(claimSQL(typed, limit, after)))
	return s.(string), limit == 0
}

// deleteVictimsSQL ends the statements that delete finished jobs (those
// in the CTE victims) with what is kept beside them, as deleteFinished
// describes, and returns how many jobs went.
const deleteVictimsSQL = `), del AS (
	DELETE FROM {s}.jobs j USING victims v WHERE j.id = v.id
	RETURNING j.id, j.group_id
), gone AS MATERIALIZED (
	SELECT array_agg(id) AS ids, array_agg(DISTINCT group_id) AS groups FROM del
), del_groups AS (
	DELETE FROM {s}.groups g
	WHERE g.id = ANY((SELECT groups FROM gone)::text[]) AND g.state = 'settled'
	  AND (SELECT j.id FROM {s}.jobs j WHERE j.id = g.id
		AND j.id <> ALL((SELECT ids FROM gone)::text[])) IS NULL
	  AND (SELECT j.id FROM {s}.jobs j WHERE j.group_id = g.id AND j.group_id <> j.id
		AND j.id <> ALL((SELECT ids FROM gone)::text[]) LIMIT 1) IS NULL
), del_runs AS (
	DELETE FROM {s}.runs WHERE id = ANY((SELECT ids FROM gone)::text[])
), del_events AS (
	DELETE FROM {s}.run_events WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_hooks AS (
	DELETE FROM {s}.hooks WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_chunks AS (
	DELETE FROM {s}.stream_chunks WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_gates AS (
	DELETE FROM {s}.gates WHERE id = ANY((SELECT ids FROM gone)::text[])
), del_waits AS (
	DELETE FROM {s}.gate_waits WHERE gate_id = ANY((SELECT ids FROM gone)::text[])
), del_queued AS (
	DELETE FROM {s}.gate_queues WHERE gate_id = ANY((SELECT ids FROM gone)::text[])
)
SELECT coalesce(cardinality(ids), 0) FROM gone`
