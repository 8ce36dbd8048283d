-- hopper PostgreSQL schema, version 4: fleet-wide concurrency keys.
--
-- A job with a concurrency key and a limit > 0 is claimed only while fewer
-- than its limit of jobs with that key are running. The claim skips keys
-- at their limit; claimers that raced past it are settled by admission,
-- which takes the key's row in concurrency_keys FOR UPDATE (one claimer
-- per key at a time) and gives back the jobs ranked past the limit.

ALTER TABLE {schema}.jobs ADD COLUMN concurrency_key text COLLATE "C";
ALTER TABLE {schema}.jobs ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0;

-- The claim counts the running jobs of a key.
CREATE INDEX jobs_concurrency ON {schema}.jobs (concurrency_key)
	WHERE state = 'running' AND concurrency_key IS NOT NULL;

CREATE TABLE {schema}.concurrency_keys (
	key text COLLATE "C" PRIMARY KEY
);
