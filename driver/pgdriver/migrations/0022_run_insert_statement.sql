-- hopper PostgreSQL schema, version 22: a run's first change is written by
-- one trigger call per statement, as its status changes are (version 21),
-- instead of a PL/pgSQL call per row. Concurrent run starts are stored as
-- one statement of many runs, which paid a call and a look-up of the job's
-- queue per run. The job a run starts with is inserted by the same
-- statement (before the trigger fires), so its queue is read by key.
DROP TRIGGER runs_change_insert ON {schema}.runs;

CREATE OR REPLACE FUNCTION {schema}.runs_change_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.changes (kind, entity_id, type, queue, state, error, at)
	SELECT 'run', n.id, n.workflow, coalesce((SELECT j.queue FROM {schema}.jobs j WHERE j.id = n.id), ''),
		n.status, n.error, statement_timestamp()
	FROM new_rows n;
	RETURN NULL;
END $$;

CREATE TRIGGER runs_change_insert AFTER INSERT ON {schema}.runs
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.runs_change_insert();
