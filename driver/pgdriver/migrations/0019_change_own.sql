-- hopper PostgreSQL schema, version 19: a change remembers the transaction
-- that wrote it (xid), apart from its key (tx). The key is raised past the
-- entity's previous change when that change's transaction took its id later
-- (see version 6), so a transaction's own changes are not all keyed by its
-- id, and its InCommit observers, which list them by that id, missed the
-- raised ones. A raised change (xid <> tx) is rare and alone indexed by its
-- writer; the others are found by their key as before. Existing changes
-- keep a NULL xid: their transactions are over.
ALTER TABLE {schema}.changes ADD COLUMN xid xid8;
ALTER TABLE {schema}.changes ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX changes_raised ON {schema}.changes (xid, position) WHERE xid <> tx;
