-- hopper SQLite schema, version 2: workflow runs.
--
-- A run executes as the job with the same id (its input, output, attempts
-- and lease live in jobs); these tables hold what is particular to
-- workflows. Encodings as in version 1: times are INTEGER unix microseconds
-- (NULL for "none"; created_at and at are always set), the error is JSON
-- text, payloads are BLOBs (NULL for nil, a zero-length blob for empty), an
-- empty parent_id is NULL. No foreign keys: JobDeleteFinished deletes a
-- run's rows together with its job.

CREATE TABLE runs (
	id           TEXT PRIMARY KEY,
	workflow     TEXT NOT NULL,
	status       TEXT NOT NULL,
	parent_id    TEXT,
	code_version TEXT NOT NULL DEFAULT '',
	error        TEXT,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER,
	ended_at     INTEGER
);

-- RunList: newest first, unfiltered or by one status, workflow or parent.
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_status ON runs (status, created_at DESC, id DESC);
CREATE INDEX runs_workflow ON runs (workflow, created_at DESC, id DESC);
CREATE INDEX runs_parent ON runs (parent_id, created_at DESC, id DESC) WHERE parent_id IS NOT NULL;

-- A run's history: Seq counts from 1 within each attempt.
CREATE TABLE run_events (
	run_id  TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	name    TEXT NOT NULL DEFAULT '',
	data    BLOB,
	at      INTEGER NOT NULL,
	PRIMARY KEY (run_id, attempt, seq)
) WITHOUT ROWID;

CREATE TABLE hooks (
	token      TEXT PRIMARY KEY,
	run_id     TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL,
	payload    BLOB,
	created_at INTEGER NOT NULL,
	resumed_at INTEGER
);

-- HookListByRun, and the cascade of JobDeleteFinished.
CREATE INDEX hooks_run ON hooks (run_id, created_at, token);

-- A run's append-only stream: offsets are consecutive from 0 per run.
CREATE TABLE stream_chunks (
	run_id   TEXT NOT NULL,
	"offset" INTEGER NOT NULL,
	data     BLOB,
	at       INTEGER NOT NULL,
	PRIMARY KEY (run_id, "offset")
) WITHOUT ROWID;
