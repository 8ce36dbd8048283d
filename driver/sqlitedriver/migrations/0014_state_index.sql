-- hopper SQLite schema, version 14: the (state, id) listing index leaves
-- running jobs out. Every claim and every finish moved a job into or out of
-- running, so each maintained two entries of this index that no listing
-- needs: running jobs are few, and a listing of them reads the lease index
-- (jobs_lease). A listing of other states names `state <> 'running'`, word
-- for word, so this index applies to it.

DROP INDEX jobs_state_id;
CREATE INDEX jobs_state_id ON jobs (state, id) WHERE state <> 'running';
