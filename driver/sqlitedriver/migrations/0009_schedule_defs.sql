-- hopper SQLite schema, version 9: schedules defined in the store. A row
-- with a def_kind is run by every process that registers its target (a job
-- type or a workflow); a row without one belongs to a schedule registered
-- in a program's code.

ALTER TABLE schedules ADD COLUMN def_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN def_spec TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN def_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN def_at INTEGER;
ALTER TABLE schedules ADD COLUMN def_target TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN def_input BLOB;
ALTER TABLE schedules ADD COLUMN def_location TEXT NOT NULL DEFAULT '';
ALTER TABLE schedules ADD COLUMN def_catch_up INTEGER NOT NULL DEFAULT 0;
