-- hopper PostgreSQL schema, version 14: the request that resumed a hook
-- through its webhook (method, headers without credentials, query), as
-- JSON, beside its payload; NULL for a hook resumed otherwise.
ALTER TABLE {schema}.hooks ADD COLUMN request bytea;
