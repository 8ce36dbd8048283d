-- Change-feed variants for the jobs table's update trigger, swapped in by
-- run.sh. "stmt" writes one row of arrays per statement with the
-- transaction's own key (no look-up of an entity's previous key: the
-- per-entity order would then come from snapshot-bounded reading, hot-path
-- design 6); "keyed" keeps the previous-key guarantee with a column on the
-- job row that a row trigger moves, and indexes the entities with GIN.
CREATE TABLE IF NOT EXISTS hopper.proto_changes (
	tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
	position bigint GENERATED ALWAYS AS IDENTITY (INCREMENT BY 4096),
	kind text COLLATE "C" NOT NULL,
	entity_ids text[] COLLATE "C" NOT NULL,
	types text[] NOT NULL, queues text[] NOT NULL, prev_states text[], states text[] NOT NULL,
	attempts int[] NOT NULL, workers text[] NOT NULL, fields text[] NOT NULL, errors text[], stucks text[],
	at timestamptz NOT NULL, due_ats timestamptz[],
	PRIMARY KEY (tx, position));
ALTER TABLE hopper.jobs ADD COLUMN IF NOT EXISTS proto_change_tx xid8;

CREATE OR REPLACE FUNCTION hopper.proto_change_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.state IS DISTINCT FROM OLD.state THEN
		NEW.proto_change_tx := greatest(pg_current_xact_id(), OLD.proto_change_tx);
	END IF;
	RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION hopper.proto_change_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO hopper.proto_changes (tx, kind, entity_ids, types, queues, prev_states, states, attempts, workers,
		fields, errors, stucks, at, due_ats)
	SELECT coalesce(max(n.proto_change_tx), pg_current_xact_id()), 'job', array_agg(n.id), array_agg(n.type),
		array_agg(n.queue), array_agg(o.state), array_agg(n.state), array_agg(n.attempt), array_agg(n.worker),
		array_agg(concat_ws(',',
			CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
			CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
			CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
			CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
			CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
			CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
			CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
			CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END)),
		array_agg(n.error), array_agg(n.stuck), statement_timestamp(),
		array_agg(CASE WHEN n.state = 'running' THEN o.run_at END)
	FROM new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state
	HAVING count(*) > 0;
	RETURN NULL;
END $$ SET enable_hashjoin = on SET enable_nestloop = off;

-- "max": one change row per job, with one look-up per
-- statement instead of one per job: the key is raised to the feed's
-- largest key rather than to the entity's previous one (any key at least
-- the transaction's own keeps finality; at least the largest committed key
-- keeps every entity's order).
CREATE OR REPLACE FUNCTION hopper.proto_change_max() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO hopper.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
	SELECT k.tx,
		CASE WHEN n.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, n.id, n.type, n.queue,
		o.state, n.state, n.attempt, n.worker,
		concat_ws(',',
			CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
			CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
			CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
			CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
			CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
			CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
			CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
			CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END),
		n.error, n.stuck, statement_timestamp(),
		CASE WHEN n.state = 'running' THEN o.run_at END
	FROM (SELECT greatest(pg_current_xact_id(), (SELECT c.tx FROM hopper.changes c ORDER BY c.tx DESC LIMIT 1)) AS tx) k,
		new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state;
	RETURN NULL;
END $$ SET enable_nestloop = off SET enable_hashjoin = on;

-- "lookup": the update trigger of schemas 6-19, for comparison: each job's
-- key raised past its previous change, found by one index probe per job.
CREATE OR REPLACE FUNCTION hopper.proto_change_lookup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO hopper.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
	SELECT greatest(pg_current_xact_id(), (SELECT c.tx FROM hopper.changes c WHERE c.entity_id = n.id ORDER BY c.tx DESC LIMIT 1)),
		CASE WHEN n.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, n.id, n.type, n.queue,
		o.state, n.state, n.attempt, n.worker,
		concat_ws(',',
			CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
			CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
			CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
			CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
			CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
			CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
			CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
			CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END),
		n.error, n.stuck, statement_timestamp(),
		CASE WHEN n.state = 'running' THEN o.run_at END
	FROM new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state;
	RETURN NULL;
END $$ SET enable_nestloop = off SET enable_hashjoin = on;
