-- hopper PostgreSQL schema, version 9: the stuck changes of the feed, in
-- delivery order. The retry observer wants only those; with this index its
-- scan jumps from one to the next instead of reading every change between
-- them (a backlog of a million inserted jobs is a million changes to read).
-- Stuck changes are rare, so the index costs the hot path nothing.

CREATE INDEX changes_stuck ON {schema}.changes (tx, position) WHERE state = 'stuck';
