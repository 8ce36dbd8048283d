-- hopper PostgreSQL schema, version 20: the update trigger keys a
-- statement's changes without looking up each job's previous change.
--
-- A change's key must be at least its transaction's id (a reader lists only
-- keys below every running transaction's id, so nothing is listed before
-- its transaction ends) and at least the key of the entity's previous
-- change (the feed is read in key order). Version 6 looked the previous key
-- up per job, one index probe per row. Now the key is the larger of the
-- transaction's id and the newest id the statement's snapshot saw complete
-- (its xmax - 1): the previous change's transaction committed before this
-- statement changed the row, so its id is at most that; and its own key,
-- taken the same way, named an id complete then, so complete now. The
-- snapshot is the trigger's INSERT's own, taken after the statement waited
-- for the rows it changed. One snapshot read per statement; a key raised
-- past the transaction's id is found by its writer through changes_raised
-- (version 19).
CREATE OR REPLACE FUNCTION {schema}.jobs_change_update() RETURNS trigger LANGUAGE plpgsql
	SET enable_nestloop = off SET enable_hashjoin = on AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
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
	FROM (SELECT greatest(pg_current_xact_id(),
			(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1)::text::xid8) AS tx) k,
		new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state;
	RETURN NULL;
END $$;
