-- hopper SQLite schema, version 11: the request that resumed a hook
-- through its webhook (method, headers without credentials, query), as
-- JSON, beside its payload; NULL for a hook resumed otherwise.
ALTER TABLE hooks ADD COLUMN request BLOB;
