-- hopper PostgreSQL schema, version 18: the update trigger's join of a
-- statement's old and new rows keeps its hash join when the statement that
-- fires it runs with hash joins off. The driver plans the statements that
-- look their rows up by key from arrays (finishes, heartbeats, history
-- appends) with sequential scans and hash and merge joins off, so that a
-- plan made while a table is small (a new schema, statistics not yet
-- gathered) does not scan the whole table at every call once it is large;
-- the trigger runs inside such a statement, under its settings.
ALTER FUNCTION {schema}.jobs_change_update() SET enable_hashjoin = on;
