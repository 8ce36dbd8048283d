-- Shared set-up: every job of the schema back to pending, the side tables
-- of the split design filled, everything vacuumed and analyzed. Run with
-- psql -v queue=<the kept run's queue>; triggers are off while it resets.
SET session_replication_role = replica;
UPDATE hopper.jobs SET state = 'pending', attempt = 0, ended_at = NULL, worker = '',
	lease_expires_at = NULL, started_at = NULL;
SET session_replication_role = origin;
CREATE TABLE IF NOT EXISTS hopper.proto_ready (queue text COLLATE "C" NOT NULL, priority int NOT NULL,
	run_at timestamptz NOT NULL, id text COLLATE "C" NOT NULL);
CREATE INDEX IF NOT EXISTS proto_ready_claim ON hopper.proto_ready (queue, priority DESC, run_at, id);
CREATE TABLE IF NOT EXISTS hopper.proto_leases (id text COLLATE "C" PRIMARY KEY, token bigint NOT NULL,
	worker text NOT NULL, expires_at timestamptz NOT NULL, attempt int NOT NULL, started_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS proto_leases_expiry ON hopper.proto_leases (expires_at);
TRUNCATE hopper.proto_ready, hopper.proto_leases;
INSERT INTO hopper.proto_ready SELECT queue, priority, run_at, id FROM hopper.jobs;
-- The finish order: the claim order, so each finish takes 50 claimed jobs by key.
DROP TABLE IF EXISTS hopper.proto_order;
CREATE TABLE hopper.proto_order AS
	SELECT row_number() OVER (ORDER BY priority DESC, run_at, id) - 1 AS ord, id FROM hopper.jobs;
CREATE INDEX ON hopper.proto_order (ord);
VACUUM ANALYZE hopper.jobs;
VACUUM ANALYZE hopper.proto_ready;
VACUUM ANALYZE hopper.proto_leases;
ANALYZE hopper.proto_order;
