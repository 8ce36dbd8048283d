-- hopper SQLite schema, version 13: the change feed records worker
-- processes joining and leaving (their row stored, their row deleted) and
-- schedules firing (each occurrence counted), so any process reads them as
-- events. These changes have no job: retention deletes them by age.

CREATE TRIGGER workers_change_insert AFTER INSERT ON workers BEGIN
	INSERT INTO changes (kind, entity_id, type, state, at)
	VALUES ('worker', NEW.id, '', 'joined', CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER workers_change_delete AFTER DELETE ON workers BEGIN
	INSERT INTO changes (kind, entity_id, type, prev_state, state, at)
	VALUES ('worker', OLD.id, '', 'joined', 'left', CAST(unixepoch('subsec') * 1000000 AS INTEGER));
END;

CREATE TRIGGER schedules_change_insert AFTER INSERT ON schedules WHEN NEW.occurrences > 0 BEGIN
	INSERT INTO changes (kind, entity_id, type, state, attempt, at, due_at)
	VALUES ('schedule', NEW.name, '', 'fired', NEW.occurrences, CAST(unixepoch('subsec') * 1000000 AS INTEGER), NEW.last_at);
END;

CREATE TRIGGER schedules_change_update AFTER UPDATE OF occurrences ON schedules WHEN NEW.occurrences > OLD.occurrences BEGIN
	INSERT INTO changes (kind, entity_id, type, state, attempt, at, due_at)
	VALUES ('schedule', NEW.name, '', 'fired', NEW.occurrences, CAST(unixepoch('subsec') * 1000000 AS INTEGER), NEW.last_at);
END;

-- Retention's read of the changes that have no job, by age.
CREATE INDEX changes_unowned ON changes (at) WHERE kind IN ('worker', 'schedule');
