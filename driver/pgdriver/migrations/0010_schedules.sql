-- hopper PostgreSQL schema, version 10: the schedules' stored state.
--
-- Schedules are registered in code by each process that runs them; their
-- row holds what the fleet shares: whether the schedule is paused, how many
-- occurrences fired, the latest one and the next one known. A process
-- writes it when it starts the schedule and in the transaction of each
-- occurrence it fires (the row lock orders processes that fire at once).

CREATE TABLE {schema}.schedules (
	name        text COLLATE "C" PRIMARY KEY,
	spec        text NOT NULL DEFAULT '',
	paused      boolean NOT NULL DEFAULT false,
	occurrences bigint NOT NULL DEFAULT 0,
	last_at     timestamptz,
	next_at     timestamptz,
	updated_at  timestamptz
);
