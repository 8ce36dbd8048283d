-- hopper PostgreSQL schema, version 3: gates.
--
-- A gate is a job (jobs.id = gates.id) plus a row that counts the jobs it
-- watches. The counts are kept by the transitions of those jobs (see the
-- driver package's "Gates"): a transition locks the waits on its job, then
-- the gate row, so concurrent transitions count exactly; GateInsert reads
-- the watched jobs FOR SHARE, so a gate inserted beside a finishing job
-- sees its state or is seen by it. gate_waits remembers what the gate
-- observed of each watched job (a terminal state, or NULL), so a job
-- deleted by retention is not mistaken for a failure. gate_queues names,
-- for each job a gate will queue, that gate (the edges cycle detection
-- walks). No foreign keys: JobDeleteFinished deletes a gate's rows with
-- its job.

CREATE TABLE {schema}.gates (
	id         text COLLATE "C" PRIMARY KEY,
	cond_kind  text COLLATE "C" NOT NULL CHECK (cond_kind IN ('all-success', 'all-done', 'count')),
	cond_count integer NOT NULL DEFAULT 0,
	cond_of    text COLLATE "C" NOT NULL DEFAULT '',
	total      integer NOT NULL,
	done       integer NOT NULL,
	succeeded  integer NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE {schema}.gate_waits (
	gate_id text COLLATE "C" NOT NULL,
	job_id  text COLLATE "C" NOT NULL,
	state   text COLLATE "C",
	PRIMARY KEY (gate_id, job_id)
);

-- The transitions of a job find the gates watching it.
CREATE INDEX gate_waits_job ON {schema}.gate_waits (job_id);

CREATE TABLE {schema}.gate_queues (
	job_id  text COLLATE "C" PRIMARY KEY,
	gate_id text COLLATE "C" NOT NULL
);

CREATE INDEX gate_queues_gate ON {schema}.gate_queues (gate_id);

-- KeyDeleteExpired (retention of expiring keys).
CREATE INDEX keys_expiry ON {schema}.keys (expires_at) WHERE expires_at IS NOT NULL;
