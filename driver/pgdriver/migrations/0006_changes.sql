-- hopper PostgreSQL schema, version 6: the change feed (outbox) and its
-- cursors.
--
-- Statement-level triggers write the change rows of a statement that
-- inserts jobs or changes their state (or runs' status) in one INSERT …
-- SELECT over its transition tables, in the statement's transaction: a
-- transition and its changes commit together whichever statement makes it.
--
-- Transactions write changes concurrently, so positions (a sequence) are
-- not handed out in commit order. Each change keeps an ordering key (tx):
-- its top-level transaction id, raised to the key of the entity's previous
-- change when that is higher (a transaction that began before another can
-- change an entity after it: the row lock makes it wait, so the previous
-- change is committed and visible). Readers deliver in (tx, position)
-- order and only changes whose key is below the oldest transaction still
-- running (pg_snapshot_xmin): a key is an id handed out already, every
-- later key is at least its writer's own id, so no change can later commit
-- before them and a cursor moving through that order never skips one; and
-- an entity's changes come in the order they were made. A transaction left
-- open holds delivery back until it ends.

CREATE TABLE {schema}.changes (
	tx         xid8 NOT NULL DEFAULT pg_current_xact_id(),
	position   bigint GENERATED ALWAYS AS IDENTITY,
	kind       text COLLATE "C" NOT NULL,
	entity_id  text COLLATE "C" NOT NULL,
	type       text COLLATE "C" NOT NULL,
	queue      text COLLATE "C" NOT NULL DEFAULT '',
	prev_state text COLLATE "C",
	state      text COLLATE "C" NOT NULL,
	attempt    integer NOT NULL DEFAULT 0,
	worker     text COLLATE "C" NOT NULL DEFAULT '',
	fields     text NOT NULL DEFAULT '',
	error      text,
	stuck      text,
	at         timestamptz NOT NULL,
	PRIMARY KEY (tx, position)
);

-- An entity's changes, in order (their keys never decrease): the entity
-- listing and the triggers' look-up of the previous key.
CREATE INDEX changes_entity ON {schema}.changes (entity_id, tx, position);

CREATE FUNCTION {schema}.jobs_change_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.changes (kind, entity_id, type, queue, state, attempt, worker, error, stuck, at)
	SELECT CASE WHEN n.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, n.id, n.type, n.queue,
		n.state, n.attempt, n.worker, n.error, n.stuck, statement_timestamp()
	FROM new_rows n;
	RETURN NULL;
END $$;

CREATE TRIGGER jobs_change_insert AFTER INSERT ON {schema}.jobs
	REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_change_insert();

-- The update triggers join a statement's old and new rows. PL/pgSQL caches
-- the join's plan, which a small first statement would make a nested loop
-- over the transition tables: quadratic for the large claims and finishes
-- that follow. Without nested loops the cached plan is a hash join, linear
-- at every size.
CREATE FUNCTION {schema}.jobs_change_update() RETURNS trigger LANGUAGE plpgsql SET enable_nestloop = off AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at)
	SELECT greatest(pg_current_xact_id(), (SELECT max(c.tx) FROM {schema}.changes c WHERE c.entity_id = n.id)),
		CASE WHEN n.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, n.id, n.type, n.queue,
		o.state, n.state, n.attempt, n.worker,
		concat_ws(',',
			CASE WHEN o.attempt IS DISTINCT FROM n.attempt THEN 'attempt' END,
			CASE WHEN o.run_at IS DISTINCT FROM n.run_at THEN 'run_at' END,
			CASE WHEN o.started_at IS DISTINCT FROM n.started_at THEN 'started_at' END,
			CASE WHEN o.ended_at IS DISTINCT FROM n.ended_at THEN 'ended_at' END,
			CASE WHEN o.worker IS DISTINCT FROM n.worker THEN 'worker' END,
			CASE WHEN o.result IS DISTINCT FROM n.result THEN 'result' END,
			CASE WHEN o.error IS DISTINCT FROM n.error THEN 'error' END,
			CASE WHEN o.stuck IS DISTINCT FROM n.stuck THEN 'stuck' END),
		n.error, n.stuck, statement_timestamp()
	FROM new_rows n JOIN old_rows o ON o.id = n.id
	WHERE o.state IS DISTINCT FROM n.state;
	RETURN NULL;
END $$;

CREATE TRIGGER jobs_change_update AFTER UPDATE ON {schema}.jobs
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_change_update();

CREATE FUNCTION {schema}.jobs_change_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM {schema}.changes c USING old_rows o WHERE c.entity_id = o.id;
	RETURN NULL;
END $$;

CREATE TRIGGER jobs_change_delete AFTER DELETE ON {schema}.jobs
	REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_change_delete();

-- A run changes one row at a time, and most statements that touch runs
-- (history appends) leave its status alone: row triggers whose WHEN clause
-- is checked without calling a function cost those nothing.
CREATE FUNCTION {schema}.runs_change_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.changes (kind, entity_id, type, queue, state, error, at)
	VALUES ('run', NEW.id, NEW.workflow, coalesce((SELECT j.queue FROM {schema}.jobs j WHERE j.id = NEW.id), ''),
		NEW.status, NEW.error, statement_timestamp());
	RETURN NULL;
END $$;

CREATE TRIGGER runs_change_insert AFTER INSERT ON {schema}.runs
	FOR EACH ROW EXECUTE FUNCTION {schema}.runs_change_insert();

CREATE FUNCTION {schema}.runs_change_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, fields, error, at)
	VALUES (greatest(pg_current_xact_id(), (SELECT max(c.tx) FROM {schema}.changes c WHERE c.entity_id = NEW.id)),
		'run', NEW.id, NEW.workflow, coalesce((SELECT j.queue FROM {schema}.jobs j WHERE j.id = NEW.id), ''), OLD.status, NEW.status,
		concat_ws(',',
			CASE WHEN OLD.ended_at IS DISTINCT FROM NEW.ended_at THEN 'ended_at' END,
			CASE WHEN OLD.error IS DISTINCT FROM NEW.error THEN 'error' END),
		NEW.error, statement_timestamp());
	RETURN NULL;
END $$;

CREATE TRIGGER runs_change_update AFTER UPDATE OF status ON {schema}.runs
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION {schema}.runs_change_update();

-- Feed cursors: how far each named observer's delivery got, and which
-- process delivers it until when.
CREATE TABLE {schema}.feed_cursors (
	name       text COLLATE "C" PRIMARY KEY,
	owner      text COLLATE "C" NOT NULL DEFAULT '',
	expires_at timestamptz,
	tx         bigint NOT NULL DEFAULT 0,
	position   bigint NOT NULL DEFAULT 0,
	updated_at timestamptz
);
