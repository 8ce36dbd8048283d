-- hopper PostgreSQL schema, version 2: workflow runs.
--
-- A run executes as the job with the same id (its input, output, attempts
-- and lease live in jobs); these tables hold what is particular to
-- workflows. Conventions as in version 1: keys and labels are text
-- COLLATE "C", times are timestamptz (created_at is NOT NULL, a zero Go
-- time stored as 0001-01-01 UTC; every other time is NULL for "none"), the
-- error is JSON text, and payloads (event data, hook payloads, stream
-- chunks) are bytea, NULL for nil and empty for empty. An empty parent_id
-- is NULL. No foreign keys: JobDeleteFinished deletes a run's rows in the
-- statement that deletes its job.

CREATE TABLE {schema}.runs (
	id           text COLLATE "C" PRIMARY KEY,
	workflow     text COLLATE "C" NOT NULL,
	status       text COLLATE "C" NOT NULL CHECK (status IN
		('pending', 'running', 'waiting', 'completed', 'failed', 'compensating', 'compensated',
		 'cancelled', 'quarantined', 'stuck')),
	parent_id    text COLLATE "C",
	code_version text COLLATE "C" NOT NULL DEFAULT '',
	error        text,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz,
	ended_at     timestamptz
);

-- RunList: newest first (created_at DESC, id DESC), unfiltered or by one
-- status, workflow or parent.
CREATE INDEX runs_created ON {schema}.runs (created_at DESC, id DESC);
CREATE INDEX runs_status ON {schema}.runs (status, created_at DESC, id DESC);
CREATE INDEX runs_workflow ON {schema}.runs (workflow, created_at DESC, id DESC);
CREATE INDEX runs_parent ON {schema}.runs (parent_id, created_at DESC, id DESC)
	WHERE parent_id IS NOT NULL;

-- A run's history, in (attempt, seq) order by its primary key: seq counts
-- from 1 within each history attempt.
CREATE TABLE {schema}.run_events (
	run_id  text COLLATE "C" NOT NULL,
	attempt integer NOT NULL,
	seq     integer NOT NULL,
	kind    text COLLATE "C" NOT NULL,
	name    text COLLATE "C" NOT NULL DEFAULT '',
	at      timestamptz,
	data    bytea,
	PRIMARY KEY (run_id, attempt, seq)
);

-- Durable waits for an external payload, found by token.
CREATE TABLE {schema}.hooks (
	token      text COLLATE "C" PRIMARY KEY,
	run_id     text COLLATE "C" NOT NULL,
	name       text COLLATE "C" NOT NULL DEFAULT '',
	state      text COLLATE "C" NOT NULL CHECK (state IN ('waiting', 'resumed')),
	created_at timestamptz NOT NULL,
	resumed_at timestamptz,
	payload    bytea
);

-- HookListByRun, and the cascade of JobDeleteFinished.
CREATE INDEX hooks_run ON {schema}.hooks (run_id, created_at, token);

-- A run's append-only stream: offsets are consecutive from 0 per run
-- (StreamAppend serialises a run's appenders on an advisory lock).
CREATE TABLE {schema}.stream_chunks (
	run_id   text COLLATE "C" NOT NULL,
	"offset" bigint NOT NULL,
	at       timestamptz,
	data     bytea,
	PRIMARY KEY (run_id, "offset")
);
