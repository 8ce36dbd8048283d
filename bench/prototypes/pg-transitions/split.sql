-- The split design (hot-path design 1): a claim deletes from a narrow ready
-- table, inserts a narrow lease row and reads the job rows, leaving them
-- alone; a finish rewrites the job row once and deletes the lease. Same
-- counts as current.sql; no change feed.
\set ON_ERROR_STOP on
\timing on
DO $$ DECLARE n int; BEGIN FOR i IN 1..200 LOOP
	WITH picked AS (
		DELETE FROM hopper.proto_ready r WHERE r.ctid IN (
			SELECT ctid FROM hopper.proto_ready WHERE queue = current_setting('proto.queue')
			ORDER BY priority DESC, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED)
		RETURNING r.id),
	leased AS (
		INSERT INTO hopper.proto_leases (id, token, worker, expires_at, attempt, started_at)
		SELECT id, nextval('hopper.lease_tokens'), 'w', now() + interval '30 s', 1, now() FROM picked
		RETURNING id)
	SELECT count(j.input) INTO n FROM hopper.jobs j JOIN leased l ON l.id = j.id;
END LOOP; END $$;
DO $$ BEGIN FOR i IN 1..200 LOOP
	WITH done AS (
		DELETE FROM hopper.proto_leases
		WHERE id = ANY(ARRAY(SELECT id FROM hopper.proto_order WHERE ord >= (i - 1) * 50 AND ord < i * 50))
		RETURNING id)
	UPDATE hopper.jobs j SET state = 'succeeded', ended_at = now(), result = '\x01', attempt = 1
	FROM done WHERE j.id = done.id;
END LOOP; END $$;
