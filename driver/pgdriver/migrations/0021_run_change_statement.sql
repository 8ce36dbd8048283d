-- hopper PostgreSQL schema, version 21: a run's status changes are written
-- by one trigger call per statement, as a job's are, instead of one per
-- row. A statement that moves many runs (a batch of history appends, a
-- batch of completions) paid a PL/pgSQL call and three look-ups per run.
-- The key is taken as the jobs' (version 20): the larger of the
-- transaction's id and the newest id the trigger's snapshot saw complete,
-- with no look-up of the run's previous change. The run's queue and where
-- its history stands are read per run by key. A trigger with transition
-- tables takes no column list: it fires for every update of runs, and
-- writes a change for those whose status moved.
DROP TRIGGER runs_change_update ON {schema}.runs;

CREATE OR REPLACE FUNCTION {schema}.runs_change_update() RETURNS trigger LANGUAGE plpgsql
	SET enable_hashjoin = on AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, fields, error, at, attempt, seq)
	SELECT k.tx, 'run', n.id, n.workflow,
		coalesce((SELECT j.queue FROM {schema}.jobs j WHERE j.id = n.id), ''), o.status, n.status,
		concat_ws(',',
			CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
			CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END),
		n.error, statement_timestamp(), coalesce(h.attempt, 0), coalesce(h.seq, 0)
	FROM (SELECT greatest(pg_current_xact_id(),
			(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1)::text::xid8) AS tx) k,
		new_rows n JOIN old_rows o ON o.id = n.id
		LEFT JOIN LATERAL (
			-- Where the history stands: one probe of its primary key, backwards.
			SELECT e.attempt, e.seq FROM {schema}.run_events e
			WHERE e.run_id = n.id ORDER BY e.attempt DESC, e.seq DESC LIMIT 1
		) h ON true
	WHERE o.status IS DISTINCT FROM n.status;
	RETURN NULL;
END $$;

CREATE TRIGGER runs_change_update AFTER UPDATE ON {schema}.runs
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.runs_change_update();
