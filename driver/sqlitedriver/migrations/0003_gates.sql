-- hopper SQLite schema, version 3: gates.
--
-- A gate is a job (jobs.id = gates.id) plus a row that counts the jobs it
-- watches. The counts are kept by the transitions of those jobs (see the
-- driver package's "Gates"); gate_waits remembers what the gate observed
-- of each watched job (a terminal state, or NULL), so a job deleted by
-- retention is not mistaken for a failure. gate_queues names, for each
-- job a gate will queue when it fires, that gate (the edges cycle
-- detection walks). No foreign keys: JobDeleteFinished deletes a gate's
-- rows with its job.

CREATE TABLE gates (
	id         TEXT PRIMARY KEY,
	cond_kind  TEXT NOT NULL,
	cond_count INTEGER NOT NULL DEFAULT 0,
	cond_of    TEXT NOT NULL DEFAULT '',
	total      INTEGER NOT NULL,
	done       INTEGER NOT NULL,
	succeeded  INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);

CREATE TABLE gate_waits (
	gate_id TEXT NOT NULL,
	job_id  TEXT NOT NULL,
	state   TEXT,
	PRIMARY KEY (gate_id, job_id)
) WITHOUT ROWID;

-- The transitions of a job find the gates watching it.
CREATE INDEX gate_waits_job ON gate_waits (job_id);

CREATE TABLE gate_queues (
	job_id  TEXT PRIMARY KEY,
	gate_id TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX gate_queues_gate ON gate_queues (gate_id);

-- KeyDeleteExpired (retention of expiring keys).
CREATE INDEX keys_expiry ON keys (expires_at) WHERE expires_at IS NOT NULL;
