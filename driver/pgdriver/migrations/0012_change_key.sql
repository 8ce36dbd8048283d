-- hopper PostgreSQL schema, version 12: each job keeps the ordering key of
-- its last change (change_tx), so the trigger that records a state change
-- reads the entity's previous key from the row it already holds instead of
-- looking it up in changes_entity (a tenth of the server's work per job).
--
-- The statements that change a job's state set
--   change_tx = greatest(pg_current_xact_id(), change_tx)
-- (leaving NULL as NULL) which is the key the trigger gives the change: at least the writer's own
-- transaction id (so no reader has passed it) and at least the entity's
-- previous key (so an entity's changes stay in order). A statement may set
-- it without writing a change: a key on the row above the last change's is
-- still safe. Where the row cannot vouch for the key (a job stored before
-- this version: NULL, for good; or a statement that left the key where it was, as in
-- the rare case of a transaction older than the previous change) the
-- trigger looks the previous key up as before. So it does for the job of
-- a workflow run: the run's changes (the runs triggers) share its id and
-- do not move the job's key. Probing runs' primary key costs far less than
-- the look-up in changes_entity, and next to nothing when there are no runs.
--
-- Adding a nullable column with no default rewrites nothing; the default
-- gives new jobs the key of their insert change.

ALTER TABLE {schema}.jobs ADD COLUMN change_tx xid8;
ALTER TABLE {schema}.jobs ALTER COLUMN change_tx SET DEFAULT pg_current_xact_id();

CREATE OR REPLACE FUNCTION {schema}.jobs_change_update() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = off AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at)
	SELECT CASE WHEN o.change_tx IS NOT NULL AND n.change_tx > o.change_tx
				AND NOT EXISTS (SELECT 1 FROM {schema}.runs r WHERE r.id = n.id)
			THEN greatest(pg_current_xact_id(), n.change_tx)
			ELSE greatest(pg_current_xact_id(), (SELECT max(c.tx) FROM {schema}.changes c WHERE c.entity_id = n.id)) END,
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
		n.error, n.stuck, statement_timestamp()
	FROM new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state;
	RETURN NULL;
END $$;
