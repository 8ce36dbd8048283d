-- hopper SQLite schema, version 6: the change feed (outbox) and its cursors.
--
-- Triggers write a change row in the statement that changes a job's state
-- (or a run's status), so a transition and its change commit together
-- whichever statement makes it. The store has one writer at a time, so
-- positions are assigned in commit order and every committed change is
-- final; AUTOINCREMENT keeps a position from being reused after the newest
-- rows are deleted. A job's changes are deleted with the job.

CREATE TABLE changes (
	position   INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT NOT NULL,
	entity_id  TEXT NOT NULL,
	type       TEXT NOT NULL,
	queue      TEXT NOT NULL DEFAULT '',
	prev_state TEXT,
	state      TEXT NOT NULL,
	attempt    INTEGER NOT NULL DEFAULT 0,
	worker     TEXT NOT NULL DEFAULT '',
	fields     TEXT NOT NULL DEFAULT '',
	error      TEXT,
	stuck      TEXT,
	at         INTEGER NOT NULL
);

CREATE INDEX changes_entity ON changes (entity_id, position);

CREATE TRIGGER jobs_change_insert AFTER INSERT ON jobs BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, state, attempt, worker, error, stuck, at)
	VALUES (CASE WHEN NEW.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, NEW.id, NEW.type, NEW.queue,
		NEW.state, NEW.attempt, NEW.worker, NEW.error, NEW.stuck, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER jobs_change_update AFTER UPDATE OF state ON jobs WHEN OLD.state IS NOT NEW.state BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at)
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
		NEW.error, NEW.stuck, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER jobs_change_delete AFTER DELETE ON jobs BEGIN
	DELETE FROM changes WHERE entity_id = OLD.id;
END;

CREATE TRIGGER runs_change_insert AFTER INSERT ON runs BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, state, error, at)
	VALUES ('run', NEW.id, NEW.workflow, coalesce((SELECT queue FROM jobs WHERE id = NEW.id), ''),
		NEW.status, NEW.error, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER runs_change_update AFTER UPDATE OF status ON runs WHEN OLD.status IS NOT NEW.status BEGIN
	INSERT INTO changes (kind, entity_id, type, queue, prev_state, state, fields, error, at)
	VALUES ('run', NEW.id, NEW.workflow, coalesce((SELECT queue FROM jobs WHERE id = NEW.id), ''),
		OLD.status, NEW.status,
		rtrim(
			CASE WHEN OLD.ended_at IS NOT NEW.ended_at THEN 'ended_at,' ELSE '' END ||
			CASE WHEN OLD.error IS NOT NEW.error THEN 'error,' ELSE '' END, ','),
		NEW.error, CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

-- Feed cursors: how far each named observer's delivery got, and which
-- process delivers it until when.
CREATE TABLE feed_cursors (
	name       TEXT PRIMARY KEY,
	owner      TEXT NOT NULL DEFAULT '',
	expires_at INTEGER,
	tx         INTEGER NOT NULL DEFAULT 0,
	position   INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER
);
