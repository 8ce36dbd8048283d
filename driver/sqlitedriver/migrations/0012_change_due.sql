-- hopper SQLite schema, version 12: a change into running records when
-- the job was due (due_at, its run_at before the claim, unix
-- microseconds), so any process reads each start's pickup lag (at -
-- due_at) from the feed, not only the process that claimed it. NULL for
-- every other change.
ALTER TABLE changes ADD COLUMN due_at INTEGER;

DROP TRIGGER jobs_change_update;

CREATE TRIGGER jobs_change_update AFTER UPDATE OF state ON jobs WHEN OLD.state IS NOT NEW.state BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, due_at)
	VALUES (CASE WHEN NEW.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, NEW.id, NEW.type, NEW.queue,
		OLD.state, NEW.state, NEW.attempt, NEW.worker,
		rtrim(
			CASE WHEN OLD.attempt IS NOT NEW.attempt THEN 'attempt,' ELSE '' END ||
			CASE WHEN OLD.run_at IS NOT NEW.run_at THEN 'run_at,' ELSE '' END ||
			CASE WHEN OLD.started_at IS NOT NEW.started_at THEN 'started_at,' ELSE '' END ||
			CASE WHEN OLD.ended_at IS NOT NEW.ended_at THEN 'ended_at,' ELSE '' END ||
			CASE WHEN OLD.worker IS NOT NEW.worker THEN 'worker,' ELSE '' END ||
			CASE WHEN OLD.result IS NOT NEW.result THEN 'result,' ELSE '' END ||
			CASE WHEN OLD.error IS NOT NEW.error THEN 'error,' ELSE '' END ||
			CASE WHEN OLD.stuck IS NOT NEW.stuck THEN 'stuck,' ELSE '' END, ','),
		NEW.error, NEW.stuck, CAST(unixepoch('subsec') * 1000000 AS INTEGER),
		CASE WHEN NEW.state = 'running' THEN OLD.run_at END);
END;
