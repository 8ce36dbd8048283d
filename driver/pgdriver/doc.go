// Package pgdriver is hopper's PostgreSQL driver, built on pgx/v5 and
// pgxpool, for many worker processes on many machines sharing one database.
// It passes the conformance suite in driver/drivertest. It needs PostgreSQL
// 13 or newer (MinServerVersion); migrating refuses an older server by name.
//
// # Opening
//
// Open connects to a postgres:// or postgresql:// URL and owns the pool it
// makes (connections default to READ COMMITTED); New uses a pool the
// application owns and leaves it open on Close.
//
//	d, err := pgdriver.Open(ctx, "postgres://app@db/app?pool_max_conns=16", nil)
//
// Both apply the embedded, versioned migrations (migrations/*.sql) first, in
// one transaction under pg_advisory_xact_lock, so processes starting
// together do not race; Options.NoMigrate skips that (Driver.Migrate runs it
// later). A schema newer than the binary knows is refused with an error
// wrapping ErrSchemaTooNew that names both versions.
//
// Every table lives in one schema, Options.Schema ("hopper" by default), and
// every statement names it, so several applications can share a database
// without seeing each other's jobs or notifications.
//
// # Schema
//
// jobs is one narrow-as-possible hot table: text id primary key, text keys
// and labels in COLLATE "C" (byte order, as Go compares strings),
// timestamptz times (microseconds, the contract's precision), bytea input
// and result (a NULL result is nil, an empty one is empty), and JSON text
// for the cold structured fields (error, stuck, retry policy, metadata,
// dependents). Its indexes are partial where they can be: no state change is
// a HOT update, so a transition writes an entry into every index whose
// predicate the new row version matches, and fewer, narrower indexes mean
// cheaper transitions:
//
//	jobs_claim      (queue, priority DESC, run_at, id) WHERE state = 'pending'
//	jobs_due_queue  (queue, run_at)   WHERE state IN ('scheduled', 'retrying')
//	jobs_due        (run_at)          WHERE state IN ('scheduled', 'retrying')
//	jobs_lease      (lease_expires_at, id) WHERE state = 'running'
//	jobs_unique     UNIQUE (type, unique_key) WHERE unique_key IS NOT NULL
//	                    AND state NOT IN ('succeeded', 'dead', 'expired', 'cancelled')
//	jobs_retention  (state, ended_at) WHERE state is terminal
//	jobs_group      (group_id, id) WHERE group_id <> id (a group's root by key)
//	jobs_parent     (parent_id, id) WHERE parent_id IS NOT NULL
//
// The jobs table has no GIN indexes and there are no foreign keys.
// groups, keys, leaders and queues hold the other rows; a sequence hands
// out lease tokens.
//
// Workflows (schema version 2) add four tables beside jobs, where a run
// executes as the job with the same id:
//
//	runs           id PK; runs_created (created_at DESC, id DESC) and the
//	               same order after status, workflow and parent_id (partial,
//	               parent_id IS NOT NULL), so RunList reads newest first
//	run_events     PK (run_id, attempt, seq): a run's history in order
//	hooks          token PK; hooks_run (run_id, created_at, token)
//	stream_chunks  PK (run_id, "offset")
//
// The change feed is two tables (schema version 23): changes, a row per
// change (a job's insert, gates, stuck jobs, heartbeats with a message,
// the transition of a statement that changes one job (schema version 26),
// runs, workers, schedules), and change_sets, one row of arrays for the
// transitions one statement makes of 2 to 4,096 jobs (a claim, of one job
// too, a finish, a promotion). Inserts and deletes write theirs through statement
// triggers; no trigger writes a transition (schema version 28): an update
// trigger's transition tables copied each old and new row of every update,
// claims' and finishes' included, a tenth of a job's cost at 2,000
// workers. Each statement that changes jobs' states records its changes
// itself: a claim, and a finish of the rows the caller claimed, build
// their set or row from their RETURNING rows (a claim knows its changes;
// the caller computes a finish's changed fields from the claimed rows);
// every other reads the old values as it locks its rows and hands the
// changes to record_job_changes, which writes them as the trigger did.
// Entry i of a set at
// position p is the change at position p + i: positions come from one
// sequence in steps of 4,096, so the feed keeps one (key, position) order
// across both, and every listing reads a page of rows and a page of sets
// by their primary keys and expands the sets. A claim's set, and a
// finish's of claimed rows, is chained from its jobs' rows (schema version
// 29): each row keeps the position of its latest such set and each set
// the position of each entry's set before it, so an entity's listing walks
// the chain back from its row, a look-up by position a step; a claim's set
// holds at most 4,096 jobs, and a larger claim is several. Every other
// statement's sets are found by a GIN index on their entities (partial to
// them: the chained sets took an entry per job per set there), from the
// entity's first row on. A job's rows go with it; sets go by age, by the server's clock
// (driver.WorkerDeleteParams.TransitionsOlderThan). One set in place of
// 500 rows, each with two index entries, is a tenth less of the server's
// work per job at 2,000 workers. A set's arrays (about 20 KB for 500 jobs)
// are stored out of line, compressed with lz4 where the server has it
// (schema version 24): pglz had been the server's costliest function.
//
// Event data, hook payloads and stream chunks are bytea (nil and empty
// stay distinct); a run's error is JSON text. JobDeleteFinished deletes a
// deleted job's run row, events, hooks and chunks in the statement that
// deletes the job.
//
// # Transactions
//
// InTx begins a READ COMMITTED transaction; a nested InTx is a savepoint.
// An operation that needs more than one statement runs them in one
// transaction, pipelined into one round trip when they do not depend on each
// other (a claim's promotion and claim, a group's lock and update, a
// leadership's upsert and read), so each operation on the Driver is atomic
// on its own. Inside InTx a failed statement aborts the transaction, as
// PostgreSQL does, so fn should return the error (or run the statement in a
// nested InTx to recover from it). Operations that can fail on conflict
// without aborting (a duplicate job id, a duplicate group id) check rather
// than fail where they can.
//
// JobInsertManyTx inserts jobs through the application's own transaction
// (transactional enqueue) and notifies the queues inside it: a pgx.Tx, or a
// *sql.Tx opened through pgx's database/sql driver (pgx/v5/stdlib), which
// passes pgx's array arguments through (the COPY path is not used there).
//
// # Hot path
//
// A claim is one statement after the promotion of the queue's due jobs: a
// MATERIALIZED CTE selects the ids with every predicate inside it (queue,
// state, types, not paused) in claim order, LIMIT n FOR UPDATE SKIP LOCKED,
// and an UPDATE … FROM it marks them running under fresh lease tokens; the
// rows are sorted back into claim order in Go. A claim that follows a full
// one of the same queue and types in the process starts after its last job,
// so that it does not walk the dead index entries of the jobs claimed since
// the last vacuum; one that comes back short there takes the rest of its
// limit from the head of the queue, and the cursor lasts 64 claims or a
// second at most. Completions (JobFinishMany) and heartbeats are one UPDATE
// per batch over unnest'ed arrays with the compare-and-set in the WHERE;
// rows are locked in id order so concurrent batches cannot deadlock. An
// insert is one INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING (COPY
// for large batches without unique keys), after which the holders of
// conflicting unique keys are read.
//
// Plans: the statements over arrays that find their rows by key (batch
// finishes, heartbeats, history appends, one run's or many runs') run on
// their generic plans, made with sequential scans and hash and merge joins
// off (set_config in their transaction, given back after them; on the pool
// one statement ahead of them, whose settings end with the batch's
// implicit transaction), so that each row is read by its index whatever
// the table's statistics say. A job's required state is a sub-select where
// it is found by id: the literal 'running' matches jobs_lease's predicate,
// and the planner would walk every running job's entry for the one job. A
// connection keeps a plan until the statistics change; one made on a new
// schema's small tables read the whole table at every call as it grew. The
// claim's transaction keeps sequential and bitmap scans off for the same
// reason. The runs' change trigger, which joins a statement's old and new
// rows, sets its own join settings.
//
// # Workflow operations
//
// RunStart on the pool is one statement (the run's insert and its job's,
// the job's columns as scalars); concurrent starts share one statement
// and round trip: a start that arrives while a group is being stored waits
// for it and goes in the next group (up to 64), which the first of the
// waiters stores for all, the runs' and jobs' columns as arrays (a group
// that names a run twice is one statement per start, in one transaction).
// Each start still commits before it returns and has its own outcome: when
// a group's statement fails, its starts are made again one by one. Starts
// inside a transaction are not grouped.
// RunLoadMany reads the runs and histories of several runs in one
// statement (the engine's read of a claim's workflow runs).
//
// RunEventAppend is one INSERT … SELECT from unnest'ed events that writes
// only while the run's job is running under the lease token: it locks the
// job row FOR SHARE, so a transition of the job (a finish, a rescue, a
// heartbeat) waits for the append's transaction and the history is complete
// before the job moves on. The same statement checks the events' keys
// first, so an existing (run, attempt, seq) is hoppertype.ErrDuplicateID
// with nothing written and no failed statement; a key another transaction
// commits meanwhile fails the statement on the pool (which writes nothing)
// and, inside InTx, is skipped by ON CONFLICT DO NOTHING, after which the
// call deletes the events it wrote, so the transaction stays usable. An
// append's RunStatus is an UPDATE of the run in the same statement.
// Inserts of runs and hooks use ON CONFLICT DO NOTHING for the same reason.
// RunUpdate is one UPDATE carrying its compare-and-set; only when it
// matches nothing does a read tell a missing run from a conflict. JobWake is one UPDATE over the ids, locked in id order.
// StreamAppend takes a per-run advisory transaction lock (a hash of the
// schema and run id) in one statement, then inserts at the offsets after
// the run's last chunk in the next, both in one round trip, so concurrent
// appends to a run get consecutive offsets.
//
// # Notifications
//
// Notify is pg_notify on the channel "<schema>:<topic>" (a digest when that
// is longer than PostgreSQL's 63 bytes). Inside InTx notifications are
// buffered, de-duplicated and sent in one statement just after COMMIT, so
// they are sent only if the transaction commits, once per distinct (topic,
// payload). They are sent after the commit, not in it, because PostgreSQL
// serializes the commits of notifying transactions (a database-wide lock
// held through the commit's flush to disk): small transactions that each
// notify, such as workflow starts from many goroutines, would commit one at
// a time. Sends that pile up meanwhile go together in the next statement.
// A notification lost to a crash between a commit and its send is made good
// by the listeners' poll fallback, as any missed one is. RunStart on the
// pool sends its notification the same way; a caller's own transaction
// (JobInsertManyTx) carries its notifications. Listen shares one dedicated connection per
// Driver (application_name "hopper-listen:<schema>") that LISTENs on the
// subscribed channels; it reconnects with backoff after a loss and then
// sends an empty payload ("something may have changed, look again") on
// every subscription, because notifications may have been missed.
package pgdriver
