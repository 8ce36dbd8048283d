-- hopper PostgreSQL schema, version 16: the change feed records worker
-- processes joining and leaving (their row stored, their row deleted) and
-- schedules firing (each occurrence counted), so any process reads them as
-- events. These changes have no job: retention deletes them by age.

CREATE FUNCTION {schema}.workers_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO {schema}.changes (kind, entity_id, type, state, at)
		VALUES ('worker', NEW.id, '', 'joined', statement_timestamp());
	ELSE
		INSERT INTO {schema}.changes (kind, entity_id, type, prev_state, state, at)
		VALUES ('worker', OLD.id, '', 'joined', 'left', statement_timestamp());
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER workers_change AFTER INSERT OR DELETE ON {schema}.workers
	FOR EACH ROW EXECUTE FUNCTION {schema}.workers_change();

CREATE FUNCTION {schema}.schedules_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.occurrences > (CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE OLD.occurrences END) THEN
		INSERT INTO {schema}.changes (kind, entity_id, type, state, attempt, at, due_at)
		VALUES ('schedule', NEW.name, '', 'fired', NEW.occurrences, statement_timestamp(), NEW.last_at);
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER schedules_change AFTER INSERT OR UPDATE OF occurrences ON {schema}.schedules
	FOR EACH ROW EXECUTE FUNCTION {schema}.schedules_change();

-- Retention's read of the changes that have no job, by age.
CREATE INDEX changes_unowned ON {schema}.changes (at) WHERE kind IN ('worker', 'schedule');
