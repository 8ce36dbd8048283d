-- hopper PostgreSQL schema, version 15: a change into running records when
-- the job was due (due_at, its run_at before the claim), so any process
-- reads each start's pickup lag (at - due_at) from the feed, not only the
-- process that claimed it (NULL for every other change); a run's status
-- change records where its history stood (attempt, seq: its last entry),
-- so a reader of the feed tells the steps an execution completed before
-- the change from those after it.
ALTER TABLE {schema}.changes ADD COLUMN due_at timestamptz;
ALTER TABLE {schema}.changes ADD COLUMN seq integer NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION {schema}.jobs_change_update() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = off AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
	SELECT greatest(pg_current_xact_id(), (SELECT c.tx FROM {schema}.changes c WHERE c.entity_id = n.id ORDER BY c.tx DESC LIMIT 1)),
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
END $$;

CREATE OR REPLACE FUNCTION {schema}.runs_change_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	last_attempt integer := 0;
	last_seq integer := 0;
BEGIN
	-- Where the history stands: one probe of its primary key, backwards.
	SELECT e.attempt, e.seq INTO last_attempt, last_seq FROM {schema}.run_events e
	WHERE e.run_id = NEW.id ORDER BY e.attempt DESC, e.seq DESC LIMIT 1;
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, fields, error, at, attempt, seq)
	VALUES (greatest(pg_current_xact_id(), (SELECT c.tx FROM {schema}.changes c WHERE c.entity_id = NEW.id ORDER BY c.tx DESC LIMIT 1)),
		'run', NEW.id, NEW.workflow, coalesce((SELECT j.queue FROM {schema}.jobs j WHERE j.id = NEW.id), ''), OLD.status, NEW.status,
		concat_ws(',',
			CASE WHEN OLD.ended_at IS DISTINCT FROM NEW.ended_at THEN 'ended_at' END,
			CASE WHEN OLD.error IS DISTINCT FROM NEW.error THEN 'error' END),
		NEW.error, statement_timestamp(), coalesce(last_attempt, 0), coalesce(last_seq, 0));
	RETURN NULL;
END $$;
