-- hopper PostgreSQL schema, version 7: a change row may carry a detail (a
-- heartbeat's message; see driver.JobHeartbeatParams.Message).

ALTER TABLE {schema}.changes ADD COLUMN detail text;
