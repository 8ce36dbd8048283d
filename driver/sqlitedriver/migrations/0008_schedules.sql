-- hopper SQLite schema, version 8: the schedules' stored state.
--
-- Schedules are registered in code by each process that runs them; their
-- row holds what the fleet shares: whether the schedule is paused, how many
-- occurrences fired, the latest one and the next one known. A process
-- writes it when it starts the schedule and in the transaction of each
-- occurrence it fires.

CREATE TABLE schedules (
	name        TEXT PRIMARY KEY,
	spec        TEXT NOT NULL DEFAULT '',
	paused      INTEGER NOT NULL DEFAULT 0,
	occurrences INTEGER NOT NULL DEFAULT 0,
	last_at     INTEGER,
	next_at     INTEGER,
	updated_at  INTEGER
);
