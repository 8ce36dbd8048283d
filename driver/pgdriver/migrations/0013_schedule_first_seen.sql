-- hopper PostgreSQL schema, version 13: when the store first heard of each
-- schedule. No occurrence before it fires: a schedule first registered in
-- code at 23:59:30 does not fire its 23:59 occurrence, while a process
-- restarted after an outage still catches up what it missed since.
--
-- A row stored before this version gets the earliest time it is known to
-- have been seen: its definition, else its latest occurrence or its last
-- update. A row that was only paused has none until a process runs it.

ALTER TABLE {schema}.schedules ADD COLUMN first_seen_at timestamptz;

UPDATE {schema}.schedules SET first_seen_at = CASE
		WHEN def_kind <> '' THEN coalesce(def_at, updated_at)
		ELSE least(last_at, updated_at)
	END
WHERE def_kind <> '' OR spec <> '' OR next_at IS NOT NULL OR last_at IS NOT NULL OR occurrences > 0;
