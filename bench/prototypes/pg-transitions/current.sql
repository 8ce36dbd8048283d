-- Today's transitions: 200 claims of 50 (the claim statement's shape: the
-- claim index in order, SKIP LOCKED, the wide job row rewritten), then 200
-- finishes of 50 by key (the job row rewritten again). The change feed's
-- trigger fires or not as run.sh set it.
\set ON_ERROR_STOP on
\timing on
DO $$ BEGIN FOR i IN 1..200 LOOP
	WITH picked AS MATERIALIZED (
		SELECT ctid AS tid FROM hopper.jobs WHERE queue = current_setting('proto.queue') AND state = 'pending'
		ORDER BY priority DESC, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED)
	UPDATE hopper.jobs j SET state = 'running', attempt = j.attempt + 1,
		lease_token = GREATEST(nextval('hopper.lease_tokens'), j.lease_token + 1),
		lease_expires_at = now() + interval '30 s', worker = 'w', started_at = now()
	FROM picked WHERE j.ctid = picked.tid;
END LOOP; END $$;
DO $$ BEGIN FOR i IN 1..200 LOOP
	UPDATE hopper.jobs j SET state = 'succeeded', ended_at = now(), result = '\x01'
	WHERE j.id = ANY(ARRAY(SELECT id FROM hopper.proto_order WHERE ord >= (i - 1) * 50 AND ord < i * 50));
END LOOP; END $$;
