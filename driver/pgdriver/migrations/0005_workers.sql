-- hopper PostgreSQL schema, version 5: worker processes.
--
-- Each started client refreshes its row while it runs (seen_at) and
-- deletes it when it stops; retention removes rows not seen for long.
-- info is the JSON the worker reports of itself.

CREATE TABLE {schema}.workers (
	id         text COLLATE "C" PRIMARY KEY,
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL,
	info       bytea
);
