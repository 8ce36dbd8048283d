package pgdriver

import "strings"

// The statements that change jobs' states and record their changes
// (schema version 28: no trigger writes a transition), and the finishes.

// changedColumns are the columns whose change a job's change lists in its
// fields, in the order it lists them.
var changedColumns = []string{"attempt", "run_at", "started_at", "ended_at", "worker", "result", "error", "stuck"}

// oldColumns reads, in a statement that changes jobs' states, the values
// its changes compare the new ones with, as o_<column>, from the row it
// locked before it changed it (see recordSQL); prefix qualifies them.
func oldColumns(prefix string) string {
	parts := []string{prefix + "state AS o_state"}
	for _, c := range changedColumns {
		parts = append(parts, prefix+c+" AS o_"+c)
	}
	return strings.Join(parts, ", ")
}

// oldRefs lists the old columns (see oldColumns) as read from cte.
func oldRefs(cte string) string {
	parts := []string{cte + ".o_state"}
	for _, c := range changedColumns {
		parts = append(parts, cte+".o_"+c)
	}
	return strings.Join(parts, ", ")
}

// lockedByKey: a statement that reads its jobs' old values as it locks
// them (the CTE o, FOR UPDATE) updates them joined by key, not by ctid. A
// row that another transaction changed and committed after the statement's
// snapshot was taken is locked in its newest version, which that snapshot
// does not see: found by its ctid it would be left out of the update;
// found by key, the update follows it to the newest version and rechecks
// it, as an UPDATE alone does. (A claim and a promotion join by ctid: a job
// they leave out stays pending or due, for the next one.)
//
// recordSQL is the CTE rec that records the changes of a statement's jobs
// (schema version 28: no trigger writes them). It reads the CTE upd,
// which returns each changed job's columns and its old ones (oldColumns),
// and hands the jobs whose states changed to record_job_changes, which
// writes them as the trigger did; its one row's column recorded counts
// them. A CTE that only reads runs only when read: the statement reads
// rec beside upd (FROM upd, rec), which leaves its rows as they were.
func recordSQL() string {
	var fields []string
	for _, c := range changedColumns {
		fields = append(fields, "CASE WHEN o_"+c+" IS DISTINCT FROM "+c+" THEN '"+c+"' END")
	}
	return `rec AS MATERIALIZED (
	SELECT {s}.record_job_changes(array_agg(id), array_agg(type), array_agg(queue), array_agg(o_state),
		array_agg(state), array_agg(attempt), array_agg(worker),
		array_agg(concat_ws(',', ` + strings.Join(fields, ", ") + `)),
		array_agg(error), array_agg(stuck), array_agg(CASE WHEN state = 'running' THEN o_run_at END),
		array_agg(type = 'hopper.gate' OR state = 'stuck' OR stuck IS NOT NULL OR o_stuck IS NOT NULL)) AS recorded
	FROM upd WHERE o_state IS DISTINCT FROM state
)`
}

// finishSQL is the finish of jobs by their leases: each item's job, found
// by its key, still in the state it had (prev) under the item's lease
// token (and, for a rescue, with a lease that expired before
// expired_before), takes the item's state, attempt, due time, result,
// error, end and stuck cause, and loses its lease. The jobs are locked in
// key order as they are read, with the values their changes compare with
// (see recordSQL), and updated by key (see lockedByKey). It returns each
// finished item's
// index with the job's row, or (narrow: finishClaimed) only with its
// cancel flag.
func finishSQL(narrow bool) string {
	ret := "idx, {cols}"
	if narrow {
		ret = "idx, cancel_requested"
	}
	return `WITH o AS MATERIALIZED (
	SELECT j.id, u.idx, u.state AS n_state, u.attempt AS n_attempt, u.run_at AS n_run_at,
		u.result AS n_result, u.error AS n_error, u.ended_at AS n_ended_at, u.stuck AS n_stuck, {jold}
	FROM unnest($1::int4[], $2::text[], $3::int8[], $4::text[], $5::int4[], $6::timestamptz[],
		$7::bytea[], $8::text[], $9::timestamptz[], $10::text[], $11::timestamptz[], $12::text[])
		AS u(idx, id, token, state, attempt, run_at, result, error, ended_at, stuck, expired_before, prev)
	JOIN {s}.jobs j ON j.id = u.id
	WHERE j.state = u.prev AND j.lease_token = u.token
	  AND (u.expired_before IS NULL OR j.lease_expires_at < u.expired_before)
	ORDER BY j.id
	FOR UPDATE OF j
), upd AS (
	UPDATE {s}.jobs j SET
		state = o.n_state, attempt = o.n_attempt, run_at = o.n_run_at, result = o.n_result, error = o.n_error,
		ended_at = o.n_ended_at, stuck = o.n_stuck, lease_expires_at = NULL, worker = ''
	FROM o WHERE j.id = o.id
	RETURNING o.idx, {jcols}, {orefs}
), {rec}
SELECT ` + ret + ` FROM upd, rec`
}

// finishOwnSQL is finishClaimed writing its own changes inline, as the
// claim does (see claimSQL), without reading the jobs' old rows: for a
// batch whose items all pass the rows they claimed, whose jobs are
// neither gates nor stuck before or after, and whose states all change.
// The batch knows what the old rows hold: each job was running under the
// item's lease (only its lease's expiry and cancel flag move meanwhile),
// so its previous state is prev and the fields that change ($9, one list
// per item) are computed by the caller from the claimed row. The jobs'
// changes are a set chained from their rows, as a claim's (see chainSQL).
// The items come sorted by key, so the jobs are locked in
// key order. Its arguments are only what such a batch varies (no stuck
// cause, no rescue's bound, every job running: $10, a scalar the planner
// cannot match to jobs_lease's predicate on a generic plan), and it
// returns each item's position in its arrays, from 1: a finish sends a
// few hundred items, and each byte of its arguments is encoded, grown and
// copied by the client.
const finishOwnSQL = `WITH k AS MATERIALIZED (
	SELECT {s}.change_key() AS tx, nextval('{s}.changes_position_seq') AS pos
), upd AS (
UPDATE {s}.jobs j SET
	state = u.state, attempt = u.attempt, run_at = u.run_at, result = u.result, error = u.error,
	ended_at = u.ended_at, stuck = NULL, lease_expires_at = NULL, worker = '',
	set_position = (SELECT pos FROM k), prev_set_position = j.set_position
FROM unnest($1::text[], $2::int8[], $3::text[], $4::int4[], $5::timestamptz[], $6::bytea[], $7::text[],
	$8::timestamptz[], $9::text[]) WITH ORDINALITY
	AS u(id, token, state, attempt, run_at, result, error, ended_at, fields, ord)
WHERE j.id = u.id AND j.state = $10::text AND j.lease_token = u.token
RETURNING u.ord::int4 AS idx, j.cancel_requested, j.id, j.type, j.queue, $10::text AS prev, j.state, j.attempt, j.error,
	u.fields, j.prev_set_position AS old_set
), own AS MATERIALIZED (
	SELECT count(*) AS changed,
		array_agg(id) AS ids, array_agg(type) AS types, array_agg(queue) AS queues, array_agg(prev) AS prevs,
		array_agg(state) AS states, array_agg(attempt) AS attempts, array_agg(fields) AS fields, array_agg(error) AS errors,
		array_agg(old_set) AS old_sets
	FROM upd
), ins AS (
	INSERT INTO {s}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
		attempts, workers, fields, errors, due_ats, prev_positions)
	SELECT (SELECT tx FROM k), (SELECT pos FROM k), statement_timestamp(),
		o.ids, o.types, o.queues, o.prevs, o.states, o.attempts, array_fill(''::text, ARRAY[o.changed::int]),
		o.fields, o.errors, array_fill(NULL::timestamptz, ARRAY[o.changed::int]), o.old_sets
	FROM own o
	WHERE o.changed > 0
)
SELECT idx, cancel_requested FROM upd`

// finishOwnOneSQL is finishOwnSQL for one job, in scalar arguments (an
// array's statement is planned anew at every call unless it runs on its
// generic plan, which takes statements of its own): its change is a row.
// The required state is a sub-select, which the planner cannot match to
// jobs_lease's predicate as it would the value 'running' (its first plans
// are made with the arguments' values), so the job is read by its key.
const finishOwnOneSQL = `WITH upd AS (
UPDATE {s}.jobs j SET
	state = $4::text, attempt = $5::int4, run_at = $6::timestamptz, result = $7::bytea, error = $8::text,
	ended_at = $9::timestamptz, stuck = $10::text, lease_expires_at = NULL, worker = ''
WHERE j.id = $2::text AND j.state = (SELECT $12::text) AND j.lease_token = $3::int8
  AND ($11::timestamptz IS NULL OR j.lease_expires_at < $11::timestamptz)
RETURNING j.cancel_requested, j.id, j.type, j.queue, j.state, j.attempt, j.error
), one_row AS (
	INSERT INTO {s}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, at)
	SELECT (SELECT {s}.change_key()), 'job', upd.id, upd.type, upd.queue, $12::text, upd.state, upd.attempt, '',
		$13::text, upd.error, statement_timestamp()
	FROM upd
)
SELECT $1::int4, cancel_requested FROM upd`
