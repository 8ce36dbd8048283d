-- hopper SQLite schema, version 12: a change into running records when
-- the job was due (due_at, its run_at before the claim, unix
-- microseconds), so any process reads each start's pickup lag (at -
-- due_at) from the feed, not only the process that claimed it (NULL for
-- every other change); a run's status change records where its history
-- stood (attempt, seq: its last entry), so a reader of the feed tells the
-- steps an execution completed before the change from those after it.
ALTER TABLE changes ADD COLUMN due_at INTEGER;
ALTER TABLE changes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;

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

DROP TRIGGER runs_change_update;

CREATE TRIGGER runs_change_update AFTER UPDATE OF status ON runs WHEN OLD.status IS NOT NEW.status BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, fields, error, at, attempt, seq)
	VALUES ('run', NEW.id, NEW.workflow, coalesce((SELECT queue FROM jobs WHERE id = NEW.id), ''),
		OLD.status, NEW.status,
		rtrim(
			CASE WHEN OLD.ended_at IS NOT NEW.ended_at THEN 'ended_at,' ELSE '' END ||
			CASE WHEN OLD.error IS NOT NEW.error THEN 'error,' ELSE '' END, ','),
		NEW.error, CAST(unixepoch('subsec') * 1000000 AS INTEGER),
		coalesce((SELECT e.attempt FROM run_events e WHERE e.run_id = NEW.id ORDER BY e.attempt DESC, e.seq DESC LIMIT 1), 0),
		coalesce((SELECT e.seq FROM run_events e WHERE e.run_id = NEW.id ORDER BY e.attempt DESC, e.seq DESC LIMIT 1), 0));
END;
