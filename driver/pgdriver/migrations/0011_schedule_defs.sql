-- hopper PostgreSQL schema, version 11: schedules defined in the store. A
-- row with a def_kind is run by every process that registers its target (a
-- job type or a workflow); a row without one belongs to a schedule
-- registered in a program's code.

ALTER TABLE {schema}.schedules
	ADD COLUMN def_kind text COLLATE "C" NOT NULL DEFAULT '',
	ADD COLUMN def_spec text NOT NULL DEFAULT '',
	ADD COLUMN def_version bigint NOT NULL DEFAULT 0,
	ADD COLUMN def_at timestamptz,
	ADD COLUMN def_target text COLLATE "C" NOT NULL DEFAULT '',
	ADD COLUMN def_input bytea,
	ADD COLUMN def_location text NOT NULL DEFAULT '',
	ADD COLUMN def_catch_up bigint NOT NULL DEFAULT 0;
