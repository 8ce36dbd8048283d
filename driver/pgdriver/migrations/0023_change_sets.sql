-- hopper PostgreSQL schema, version 23: a statement's job transitions are
-- one row of arrays (a change set) instead of a row per job.
--
-- A claim or a finish of 500 jobs wrote 500 change rows, each with two index
-- entries (the key and the entity's listing): a third of what the
-- transition cost the server. Now the jobs' update trigger writes the
-- statement's job changes as one change_sets row per 4,096 jobs, whose
-- arrays the reader expands: entry i (from 0) of a set at position p is the
-- change at position p + i. Positions are drawn from the changes' own
-- sequence, now in steps of 4,096, so a set's entries never meet another
-- row's position and the feed keeps one order, (tx, position), across both
-- tables. A set is keyed as the statement's scalar changes were (version
-- 20), so the feed's guarantees hold as they did: in the transaction,
-- listed once final, in each entity's order (a statement changes a job at
-- most once).
--
-- What stays a row of its own: a job's insert (a job's first change, which
-- anchors its listing and goes with the job), gates, stuck jobs and every
-- change of a job whose stuck column is set (changes_stuck reads those),
-- heartbeats, runs, workers and schedules.
--
-- An entity's listing finds its sets by a GIN index on the entities, from
-- its first change on (a deleted job has none, so a later job of the same id
-- is not shown the earlier one's). Sets go by age, by the server's clock
-- (retention's TransitionsOlderThan), not with each job.
ALTER TABLE {schema}.changes ALTER COLUMN position SET INCREMENT BY 4096;

CREATE TABLE {schema}.change_sets (
	tx          xid8 NOT NULL,
	position    bigint NOT NULL,
	xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
	at          timestamptz NOT NULL,
	entity_ids  text[] COLLATE "C" NOT NULL,
	types       text[] COLLATE "C" NOT NULL,
	queues      text[] COLLATE "C" NOT NULL,
	prev_states text[] COLLATE "C" NOT NULL,
	states      text[] COLLATE "C" NOT NULL,
	attempts    integer[] NOT NULL,
	workers     text[] COLLATE "C" NOT NULL,
	fields      text[] NOT NULL,
	errors      text[] NOT NULL,
	due_ats     timestamptz[] NOT NULL,
	PRIMARY KEY (tx, position)
);
-- A transaction's own sets whose key was raised past its id (see
-- changes_raised).
CREATE INDEX change_sets_raised ON {schema}.change_sets (xid, position) WHERE xid <> tx;
CREATE INDEX change_sets_entities ON {schema}.change_sets USING gin (entity_ids);
-- Retention by age: sets are written in age order, so a block range index
-- finds the old ones without an entry per row.
CREATE INDEX change_sets_at ON {schema}.change_sets USING brin (at);

-- Nested loops stay off (the transition tables are joined by hash), and
-- so JIT is off too: the general path's joins with the one-row key k are
-- nested loops all the same, which that setting prices past JIT's
-- thresholds (500 ms of compiling a statement).
--
-- The common statement (a claim, a finish, a promotion: jobs only, none
-- stuck, at most 4,096) takes the short path, one aggregate; the general
-- path splits the changes into sets and single rows.
CREATE OR REPLACE FUNCTION {schema}.jobs_change_update() RETURNS trigger LANGUAGE plpgsql
	SET enable_nestloop = off SET enable_hashjoin = on SET jit = off AS $$
DECLARE
	single boolean := EXISTS (SELECT 1 FROM new_rows n WHERE n.type = 'hopper.gate' OR n.state = 'stuck' OR n.stuck IS NOT NULL)
		OR EXISTS (SELECT 1 FROM old_rows o WHERE o.stuck IS NOT NULL);
	many boolean := (SELECT count(*) FROM new_rows) > 4096;
BEGIN
	IF NOT single AND NOT many THEN
		INSERT INTO {schema}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
			attempts, workers, fields, errors, due_ats)
		SELECT (SELECT greatest(pg_current_xact_id(),
				(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1)::text::xid8)),
			nextval(pg_get_serial_sequence('{schema}.changes', 'position')), statement_timestamp(),
			array_agg(n.id), array_agg(n.type), array_agg(n.queue), array_agg(o.state), array_agg(n.state),
			array_agg(n.attempt), array_agg(n.worker),
			array_agg(concat_ws(',',
				CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
				CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
				CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
				CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
				CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
				CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
				CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
				CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END)),
			array_agg(n.error), array_agg(CASE WHEN n.state = 'running' THEN o.run_at END)
		FROM new_rows n JOIN old_rows o ON o.id = n.id
		WHERE o.state IS DISTINCT FROM n.state
		HAVING count(*) > 0;
		RETURN NULL;
	END IF;
	WITH d AS MATERIALIZED (
		SELECT n.id, n.type, n.queue, o.state AS prev, n.state, n.attempt, n.worker,
			concat_ws(',',
				CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
				CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
				CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
				CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
				CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
				CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
				CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
				CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END) AS fields,
			n.error, n.stuck,
			CASE WHEN n.state = 'running' THEN o.run_at END AS due_at,
			(n.type = 'hopper.gate' OR n.state = 'stuck' OR n.stuck IS NOT NULL OR o.stuck IS NOT NULL) AS single
		FROM new_rows n JOIN old_rows o ON o.id = n.id
		WHERE o.state IS DISTINCT FROM n.state
	), k AS MATERIALIZED (
		SELECT greatest(pg_current_xact_id(),
			(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1)::text::xid8) AS tx,
			pg_get_serial_sequence('{schema}.changes', 'position')::regclass AS seq
	), chunked AS (
		SELECT d.*, (row_number() OVER () - 1) / 4096 AS chunk FROM d WHERE NOT d.single
	), sets AS (
		INSERT INTO {schema}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
			attempts, workers, fields, errors, due_ats)
		SELECT k.tx, nextval(k.seq), statement_timestamp(),
			array_agg(m.id), array_agg(m.type), array_agg(m.queue), array_agg(m.prev), array_agg(m.state),
			array_agg(m.attempt), array_agg(m.worker), array_agg(m.fields), array_agg(m.error), array_agg(m.due_at)
		FROM chunked m, k
		GROUP BY k.tx, k.seq, m.chunk
	)
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
	SELECT k.tx, CASE WHEN d.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, d.id, d.type, d.queue,
		d.prev, d.state, d.attempt, d.worker, d.fields, d.error, d.stuck, statement_timestamp(), d.due_at
	FROM d, k
	WHERE d.single;
	RETURN NULL;
END $$;
