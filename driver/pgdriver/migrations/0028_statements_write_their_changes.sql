-- hopper PostgreSQL schema, version 28: every statement that changes jobs'
-- states writes their changes itself; the jobs' update trigger is gone.
--
-- A statement trigger that references its transition tables makes every
-- UPDATE of jobs copy each old and each new row into them, whether the
-- trigger then writes anything or not: a claim, which has written its own
-- change set since version 27, still paid for two copies of each of its
-- rows, and so did a finish. Without the trigger the driver's statements
-- that change a job's state (claims, finishes, promotions, wakes, cancels,
-- retries, hand-backs) record their changes in the statement, from its
-- RETURNING rows and the previous values they read under the rows' locks,
-- through record_job_changes (or, for a claim or a finish of claimed rows,
-- inline). The insert and delete triggers stay: an insert's new rows and a
-- delete's old rows are the changes themselves.
--
-- record_job_changes writes the changes of a statement's jobs whose states
-- changed, as the trigger did: one job's change is a row of the changes
-- table; two or more are a change set (4,096 entries at most each) but for
-- those that must be rows of their own (a gate, a job stuck before or after,
-- marked by single), which follow the sets. Each array holds one entry per
-- job, in the same order; due_ats holds the previous run_at of a job that
-- starts running, NULL otherwise. It returns the number of changes.
CREATE FUNCTION {schema}.record_job_changes(ids text[], types text[], queues text[], prevs text[],
	states text[], attempts int4[], workers text[], fields text[], errors text[], stucks text[],
	due_ats timestamptz[], singles boolean[]) RETURNS integer LANGUAGE plpgsql VOLATILE SET jit = off AS $$
DECLARE
	n integer := coalesce(cardinality(ids), 0);
	k xid8;
BEGIN
	IF n = 0 THEN
		RETURN 0;
	END IF;
	k := {schema}.change_key();
	IF n > 1 AND n <= 4096 AND NOT (true = ANY(singles)) THEN
		INSERT INTO {schema}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
			attempts, workers, fields, errors, due_ats)
		VALUES (k, nextval('{schema}.changes_position_seq'), statement_timestamp(), ids, types, queues, prevs,
			states, attempts, workers, fields, errors, due_ats);
		RETURN n;
	END IF;
	IF n > 1 THEN
		INSERT INTO {schema}.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
			attempts, workers, fields, errors, due_ats)
		SELECT k, nextval('{schema}.changes_position_seq'), statement_timestamp(),
			array_agg(c.id ORDER BY c.ord), array_agg(c.type ORDER BY c.ord), array_agg(c.queue ORDER BY c.ord),
			array_agg(c.prev ORDER BY c.ord), array_agg(c.state ORDER BY c.ord), array_agg(c.attempt ORDER BY c.ord),
			array_agg(c.worker ORDER BY c.ord), array_agg(c.fields ORDER BY c.ord), array_agg(c.error ORDER BY c.ord),
			array_agg(c.due_at ORDER BY c.ord)
		FROM (SELECT u.*, (row_number() OVER (ORDER BY u.ord) - 1) / 4096 AS chunk
			FROM unnest(ids, types, queues, prevs, states, attempts, workers, fields, errors, due_ats, singles)
				WITH ORDINALITY AS u(id, type, queue, prev, state, attempt, worker, fields, error, due_at, single, ord)
			WHERE NOT u.single) c
		GROUP BY c.chunk
		ORDER BY c.chunk;
	END IF;
	INSERT INTO {schema}.changes (tx, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields,
		error, stuck, at, due_at)
	SELECT k, CASE WHEN u.type = 'hopper.gate' THEN 'gate' ELSE 'job' END, u.id, u.type, u.queue, u.prev, u.state,
		u.attempt, u.worker, u.fields, u.error, u.stuck, statement_timestamp(), u.due_at
	FROM unnest(ids, types, queues, prevs, states, attempts, workers, fields, errors, stucks, due_ats, singles)
		WITH ORDINALITY AS u(id, type, queue, prev, state, attempt, worker, fields, error, stuck, due_at, single, ord)
	WHERE u.single OR n = 1
	ORDER BY u.ord;
	RETURN n;
END $$;

DROP TRIGGER jobs_change_update ON {schema}.jobs;
DROP FUNCTION {schema}.jobs_change_update();
