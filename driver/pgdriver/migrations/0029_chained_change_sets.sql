-- hopper PostgreSQL schema, version 29: the change sets of claims and of
-- finishes of claimed jobs are found from their jobs' rows, not by an index
-- on their entities.
--
-- The GIN index on the sets' entities took an entry per job per set (two a
-- job: its claim and its finish), and merging its pending list into the
-- index cost about a tenth of the server's time at 2,000 workers. Those two
-- statements now chain their sets instead: a job's row keeps the position
-- of the latest such set holding its change (set_position; prev_set_position
-- is the one before, which the statement that moves it returns), and each
-- set keeps, for each entry, the position of its job's set before it
-- (prev_positions, NULL where there was none). An entity's listing walks
-- its chain back from its row, a look-up by position a step; a job deleted
-- has no row and so no chain, as it had no sets listed before. Every other
-- statement's sets (written by record_job_changes) carry no chain
-- (prev_positions IS NULL) and stay in the GIN index, now partial, which
-- also keeps the sets written before this version.
ALTER TABLE {schema}.jobs ADD COLUMN set_position bigint, ADD COLUMN prev_set_position bigint;
ALTER TABLE {schema}.change_sets ADD COLUMN prev_positions bigint[];

DROP INDEX {schema}.change_sets_entities;
CREATE INDEX change_sets_entities ON {schema}.change_sets USING gin (entity_ids) WHERE prev_positions IS NULL;
CREATE UNIQUE INDEX change_sets_chained ON {schema}.change_sets (position) WHERE prev_positions IS NOT NULL;

-- The new array compresses as the others do (version 24).
DO $$
BEGIN
	EXECUTE 'ALTER TABLE {schema}.change_sets ALTER COLUMN prev_positions SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
	NULL;
END $$;
