-- hopper PostgreSQL schema, version 17: the dead letters' listing reads
-- the dead jobs, newest first, from an index of those alone. Without it,
-- a store with few dead jobs among millions was read backwards in full by
-- the primary key. Only transitions into and out of dead write it.
CREATE INDEX jobs_dead ON {schema}.jobs (id) WHERE state = 'dead';
