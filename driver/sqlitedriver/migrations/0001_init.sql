-- hopper SQLite schema, version 1.
--
-- Times are INTEGER unix microseconds (NULL for "none"; queued_at and run_at
-- are always set). Durations are INTEGER nanoseconds. Structured values are
-- JSON text. Partial-index predicates are literal so the planner can match
-- them against the driver's queries, which repeat them word for word.

CREATE TABLE hopper_meta (
	key   TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;

-- lease_token is the last lease token handed out.
INSERT INTO hopper_meta (key, value) VALUES ('lease_token', 0);

CREATE TABLE jobs (
	id               TEXT PRIMARY KEY,
	type             TEXT NOT NULL,
	queue            TEXT NOT NULL,
	state            TEXT NOT NULL,
	priority         INTEGER NOT NULL DEFAULT 0,
	attempt          INTEGER NOT NULL DEFAULT 0,
	input            BLOB,
	result           BLOB,
	error            TEXT,
	group_id         TEXT NOT NULL DEFAULT '',
	parent_id        TEXT,
	dependents       TEXT,
	fair_key         TEXT NOT NULL DEFAULT '',
	unique_key       TEXT,
	metadata         TEXT,
	retry            TEXT NOT NULL,
	attempt_timeout  INTEGER NOT NULL DEFAULT 0,
	deadline         INTEGER,
	queued_at        INTEGER NOT NULL,
	run_at           INTEGER NOT NULL,
	started_at       INTEGER,
	ended_at         INTEGER,
	lease_token      INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	worker           TEXT NOT NULL DEFAULT '',
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	stuck            TEXT
);

-- Claim: the pending jobs of a queue in claim order (type rides along so a
-- type filter needs no table lookup).
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id, type) WHERE state = 'pending';

-- Due jobs of a queue (promotion at claim, next run-at) and of every queue
-- (JobPromote).
CREATE INDEX jobs_due ON jobs (queue, run_at, id) WHERE state IN ('scheduled', 'retrying');
CREATE INDEX jobs_due_all ON jobs (run_at, id) WHERE state IN ('scheduled', 'retrying');

-- Expired leases.
CREATE INDEX jobs_lease ON jobs (lease_expires_at, id) WHERE state = 'running';

-- A unique key is held by at most one non-terminal job of a type.
CREATE UNIQUE INDEX jobs_unique ON jobs (type, unique_key)
	WHERE unique_key IS NOT NULL AND state NOT IN ('succeeded', 'dead', 'expired', 'cancelled');

-- Retention of terminal jobs.
CREATE INDEX jobs_retention ON jobs (state, ended_at)
	WHERE state IN ('succeeded', 'dead', 'expired', 'cancelled');

-- Listing.
CREATE INDEX jobs_state_id ON jobs (state, id);
CREATE INDEX jobs_type_id ON jobs (type, id);
CREATE INDEX jobs_queue_id ON jobs (queue, id);
CREATE INDEX jobs_group ON jobs (group_id, id);
CREATE INDEX jobs_parent ON jobs (parent_id, id) WHERE parent_id IS NOT NULL;

CREATE TABLE groups (
	id         TEXT PRIMARY KEY,
	open       INTEGER NOT NULL,
	state      TEXT NOT NULL,
	value      BLOB,
	value_set  INTEGER NOT NULL DEFAULT 0,
	final      INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER,
	settled_at INTEGER
);

CREATE TABLE keys (
	key        TEXT PRIMARY KEY,
	value      BLOB,
	created_at INTEGER,
	expires_at INTEGER
);

CREATE TABLE leaders (
	name       TEXT PRIMARY KEY,
	owner      TEXT NOT NULL DEFAULT '',
	term       INTEGER NOT NULL,
	expires_at INTEGER
);

CREATE TABLE queues (
	name       TEXT PRIMARY KEY,
	paused     INTEGER NOT NULL DEFAULT 0,
	updated_at INTEGER
);
