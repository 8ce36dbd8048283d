-- hopper PostgreSQL schema, version 1.
--
-- {schema} stands for the driver's (quoted) schema; the driver substitutes
-- it before running this file. Every name below lives in that schema, so
-- several applications can share one database.
--
-- Conventions:
--   * Keys and labels are text COLLATE "C": byte order, so keyset paging by
--     id matches Go's string order, and comparisons are memcmp-cheap.
--   * Times are timestamptz (microsecond precision, the driver contract's).
--     queued_at and run_at are NOT NULL (a zero Go time is stored as
--     0001-01-01 UTC); every other time is NULL for "none".
--   * JSON values (error, stuck, retry, metadata, dependents) are text: the
--     hot path neither parses nor indexes them, and text round-trips
--     anything encoding/json writes (jsonb refuses \u0000).
--   * input and result are bytea; a NULL result is a nil Go slice, an empty
--     one is an empty slice.
--   * Partial-index predicates are literal, and the driver's queries repeat
--     them word for word, so the planner can match them.
--   * No GIN indexes and no foreign keys: a state change is never a HOT
--     update, so each transition writes an entry into every index whose
--     predicate the new row version matches. Indexes stay few and partial.

CREATE TABLE {schema}.jobs (
	id               text COLLATE "C" PRIMARY KEY,
	type             text COLLATE "C" NOT NULL,
	queue            text COLLATE "C" NOT NULL,
	state            text COLLATE "C" NOT NULL CHECK (state IN
		('pending', 'scheduled', 'running', 'retrying', 'succeeded', 'dead', 'expired', 'cancelled', 'stuck')),
	priority         integer NOT NULL DEFAULT 0,
	attempt          integer NOT NULL DEFAULT 0,
	lease_token      bigint NOT NULL DEFAULT 0,
	attempt_timeout  bigint NOT NULL DEFAULT 0,
	queued_at        timestamptz NOT NULL,
	run_at           timestamptz NOT NULL,
	started_at       timestamptz,
	ended_at         timestamptz,
	deadline         timestamptz,
	lease_expires_at timestamptz,
	cancel_requested boolean NOT NULL DEFAULT false,
	worker           text COLLATE "C" NOT NULL DEFAULT '',
	group_id         text COLLATE "C" NOT NULL DEFAULT '',
	parent_id        text COLLATE "C",
	fair_key         text COLLATE "C" NOT NULL DEFAULT '',
	unique_key       text COLLATE "C",
	retry            text NOT NULL,
	metadata         text,
	dependents       text,
	error            text,
	stuck            text,
	input            bytea,
	result           bytea
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Claim: the pending jobs of a queue in claim order.
CREATE INDEX jobs_claim ON {schema}.jobs (queue, priority DESC, run_at, id)
	WHERE state = 'pending';

-- Due jobs of one queue (promotion before a claim, JobNextRunAt) and of
-- every queue (JobPromote).
CREATE INDEX jobs_due_queue ON {schema}.jobs (queue, run_at)
	WHERE state IN ('scheduled', 'retrying');
CREATE INDEX jobs_due ON {schema}.jobs (run_at)
	WHERE state IN ('scheduled', 'retrying');

-- Expired leases (the rescuer).
CREATE INDEX jobs_lease ON {schema}.jobs (lease_expires_at, id)
	WHERE state = 'running';

-- A unique key is held by at most one non-terminal job of a type.
CREATE UNIQUE INDEX jobs_unique ON {schema}.jobs (type, unique_key)
	WHERE unique_key IS NOT NULL AND state NOT IN ('succeeded', 'dead', 'expired', 'cancelled');

-- Retention of terminal jobs.
CREATE INDEX jobs_retention ON {schema}.jobs (state, ended_at)
	WHERE state IN ('succeeded', 'dead', 'expired', 'cancelled');

-- Listing helpers: a group's and a parent's jobs.
CREATE INDEX jobs_group ON {schema}.jobs (group_id, id);
CREATE INDEX jobs_parent ON {schema}.jobs (parent_id, id)
	WHERE parent_id IS NOT NULL;

-- Lease tokens: every claim takes a fresh one (and never one at or below the
-- job's current token).
CREATE SEQUENCE {schema}.lease_tokens AS bigint;

CREATE TABLE {schema}.groups (
	id         text COLLATE "C" PRIMARY KEY,
	open       integer NOT NULL,
	state      text COLLATE "C" NOT NULL,
	value_set  boolean NOT NULL DEFAULT false,
	final      boolean NOT NULL DEFAULT false,
	created_at timestamptz,
	settled_at timestamptz,
	value      bytea
);

CREATE TABLE {schema}.keys (
	key        text COLLATE "C" PRIMARY KEY,
	created_at timestamptz,
	expires_at timestamptz,
	value      bytea
);

-- A resigned leadership keeps its row (owner '' and no expiry) so the term
-- stays monotonic.
CREATE TABLE {schema}.leaders (
	name       text COLLATE "C" PRIMARY KEY,
	owner      text COLLATE "C" NOT NULL DEFAULT '',
	term       bigint NOT NULL,
	expires_at timestamptz
);

CREATE TABLE {schema}.queues (
	name       text COLLATE "C" PRIMARY KEY,
	paused     boolean NOT NULL DEFAULT false,
	updated_at timestamptz
);
