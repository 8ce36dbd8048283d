-- hopper SQLite schema, version 4: fleet-wide concurrency keys.
--
-- A job with a concurrency key and a limit > 0 is claimed only while fewer
-- than its limit of jobs with that key are running. An empty key is NULL.

ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;

-- The claim counts the running jobs of a key.
CREATE INDEX jobs_concurrency ON jobs (concurrency_key, state) WHERE concurrency_key IS NOT NULL;
