-- hopper PostgreSQL schema, version 8: jobs_group holds the members of a
-- group but not its root. Every job is the root of the group that bears its
-- id, and no state change of a job is a HOT update, so the full index took
-- an entry for every version of every job (its insert, each claim and each
-- finish). Listings by group read the root by its key.

DROP INDEX {schema}.jobs_group;
CREATE INDEX jobs_group ON {schema}.jobs (group_id, id) WHERE group_id <> id;
