-- hopper SQLite schema, version 5: worker processes.
--
-- Each started client refreshes its row while it runs (seen_at) and
-- deletes it when it stops; retention removes rows not seen for long.
-- info is the JSON the worker reports of itself.

CREATE TABLE workers (
	id         TEXT PRIMARY KEY,
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL,
	info       BLOB
);
