-- hopper PostgreSQL schema, version 24: the change sets' arrays compress
-- with lz4 where the server has it.
--
-- A set of 500 jobs carries about 20 KB of arrays, stored out of line and
-- compressed: with the default pglz, compressing them was the server's
-- largest single function at 2,000 workers (3% of its CPU); lz4 does the
-- same work at a fraction of the cost. A server built without lz4 (or
-- older than 14) keeps its default.
DO $$
BEGIN
	EXECUTE 'ALTER TABLE {schema}.change_sets
		ALTER COLUMN entity_ids SET COMPRESSION lz4, ALTER COLUMN types SET COMPRESSION lz4,
		ALTER COLUMN queues SET COMPRESSION lz4, ALTER COLUMN prev_states SET COMPRESSION lz4,
		ALTER COLUMN states SET COMPRESSION lz4, ALTER COLUMN attempts SET COMPRESSION lz4,
		ALTER COLUMN workers SET COMPRESSION lz4, ALTER COLUMN fields SET COMPRESSION lz4,
		ALTER COLUMN errors SET COMPRESSION lz4, ALTER COLUMN due_ats SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
	NULL;
END $$;
