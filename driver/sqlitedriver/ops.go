package sqlitedriver

import (
	"context"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// This file holds the Executor operations, implemented once on the executor
// type. On the Driver's executor (no transaction), a write queues itself to the
// writer as a one-operation call (group commit) and runs there on the
// call's executor; a read runs on the read pool. On a transaction's
// executor, everything runs on the writer's transaction.

// write runs fn as a top-level call in the writer.
func (d *Driver) write(ctx context.Context, single bool, fn func(ctx context.Context, t *executor) error) error {
	return d.writeCall(ctx, single, false, fn)
}

// writeCall runs fn as a top-level call in the writer; lax marks a call
// whose commit need not be synced before it returns (see writer.runBatch).
func (d *Driver) writeCall(ctx context.Context, single, lax bool, fn func(ctx context.Context, t *executor) error) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	if err := d.checkSchema(ctx); err != nil {
		return err
	}
	return d.w.do(ctx, single, lax, fn)
}

// call runs one write operation as its own call and returns its value (also
// alongside an error, as JobCancel needs).
func call[T any](ctx context.Context, d *Driver, fn func(ctx context.Context, t *executor) (T, error)) (T, error) {
	return callAs(ctx, d, false, fn)
}

// callAs is call; lax marks a call whose commit need not be synced before
// it returns (see writer.runBatch).
func callAs[T any](ctx context.Context, d *Driver, lax bool, fn func(ctx context.Context, t *executor) (T, error)) (T, error) {
	var out T
	err := d.writeCall(ctx, true, lax, func(ctx context.Context, t *executor) error {
		var err error
		out, err = fn(ctx, t)
		return err
	})
	return out, err
}

// JobInsertMany inserts jobs; a duplicate id undoes the whole call.
func (t *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]driver.JobInsertResult, error) {
			return t.JobInsertMany(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.JobInsertResult
	run := func() error {
		var err error
		out, err = t.r.jobInsertMany(ctx, params)
		return err
	}
	var err error
	if len(params.Jobs) > 1 {
		err = t.atomic(ctx, run)
	} else {
		err = run()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobGet returns one job, as this transaction sees it.
func (t *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobGet(ctx, params.ID)
}

// JobGetMany returns the jobs that exist among IDs, in their order.
func (t *executor) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobGetMany(ctx, params.IDs)
}

// JobList lists jobs.
func (t *executor) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobList(ctx, params)
}

// JobScan lists jobs over a bounded window.
func (t *executor) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobScan(ctx, params)
}

// JobCountByState counts jobs per queue and state.
func (t *executor) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobCountByState(ctx, params)
}

// JobClaim promotes and claims jobs.
//
// On the Driver's executor, under synchronous=FULL a batch of claims alone
// commits without syncing the log: a claim lost to a power loss leaves its
// jobs pending to be claimed again, and the log's next synced commit (any
// other write) makes it durable with everything before it. See the package
// doc, Durability.
func (t *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if t.r == nil {
		return callAs(ctx, t.d, true, func(ctx context.Context, t *executor) ([]*hoppertype.JobRow, error) { return t.JobClaim(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []*hoppertype.JobRow
	err := t.atomic(ctx, func() error {
		var err error
		out, err = t.r.jobClaim(ctx, params)
		return err
	})
	return out, err
}

// JobPromote promotes due jobs of every queue.
func (t *executor) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (int, error) { return t.JobPromote(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	return t.r.jobPromote(ctx, params)
}

// JobNextRunAt returns the earliest RunAt of a queue's waiting jobs.
func (t *executor) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return r.jobNextRunAt(ctx, params.Queue)
}

// JobHeartbeat extends held leases.
func (t *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]driver.JobHeartbeatResult, error) {
			return t.JobHeartbeat(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.JobHeartbeatResult
	err := t.atomic(ctx, func() error {
		var err error
		out, err = t.r.jobHeartbeat(ctx, params)
		return err
	})
	return out, err
}

// JobFinishMany applies workers' transitions.
func (t *executor) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]driver.JobFinishResult, error) {
			return t.JobFinishMany(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.JobFinishResult
	err := t.atomic(ctx, func() error {
		var err error
		if out, err = t.r.jobFinishMany(ctx, params); err != nil {
			return err
		}
		var changes []gateChange
		for _, res := range out {
			if res.Job != nil && res.Job.State.Terminal() {
				changes = append(changes, gateChange{id: res.Job.ID, state: res.Job.State, at: res.Job.EndedAt})
			}
		}
		return t.observe(ctx, changes)
	})
	return out, err
}

// JobListExpiredLeases lists running jobs whose lease expired.
func (t *executor) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.jobListExpiredLeases(ctx, params)
}

// JobCancel cancels a job.
func (t *executor) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*hoppertype.JobRow, error) { return t.JobCancel(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out *hoppertype.JobRow
	err := t.atomic(ctx, func() error {
		var err error
		if out, err = t.r.jobCancel(ctx, params); err != nil {
			return err
		}
		if out.State == hoppertype.JobStateCancelled {
			return t.observe(ctx, []gateChange{{id: out.ID, state: out.State, at: out.EndedAt}})
		}
		return nil
	})
	return out, err
}

// JobRetry moves jobs back to pending.
func (t *executor) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]driver.JobRetryResult, error) {
			return t.JobRetry(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []driver.JobRetryResult
	err := t.atomic(ctx, func() error {
		var err error
		if out, err = t.r.jobRetry(ctx, params); err != nil {
			return err
		}
		changes := make([]gateChange, 0, len(out))
		for _, res := range out {
			if res.PrevState.Terminal() {
				changes = append(changes, gateChange{id: res.Job.ID, state: res.Job.State, at: trunc(params.Now)})
			}
		}
		return t.observe(ctx, changes)
	})
	return out, err
}

// JobDeleteFinished deletes old terminal jobs.
func (t *executor) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (int, error) { return t.JobDeleteFinished(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	var n int
	err := t.atomic(ctx, func() error {
		var err error
		n, err = t.r.jobDeleteFinished(ctx, params)
		return err
	})
	return n, err
}

// GroupInsert stores a new group.
func (t *executor) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.GroupInsert(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.groupInsert(ctx, params.Row)
}

// GroupGet returns a group, as this transaction sees it.
func (t *executor) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.groupGet(ctx, params.ID)
}

// GroupUpdate changes a group; Fold runs here, under the write lock.
func (t *executor) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*driver.GroupUpdateResult, error) {
			return t.GroupUpdate(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.groupUpdate(ctx, params)
}

// KeyDeleteExpired deletes expired keys.
func (t *executor) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (int, error) { return t.KeyDeleteExpired(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	return t.r.keyDeleteExpired(ctx, params)
}

// KeySetIfAbsent stores a key unless it is held.
func (t *executor) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (bool, error) { return t.KeySetIfAbsent(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return false, err
	}
	return t.r.keySetIfAbsent(ctx, params)
}

// LeaderAttempt takes or renews a leadership.
func (t *executor) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*driver.LeaderRow, error) { return t.LeaderAttempt(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.leaderAttempt(ctx, params)
}

// LeaderResign gives up a leadership.
func (t *executor) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.LeaderResign(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.leaderResign(ctx, params)
}

// QueueSetPaused stores whether a queue is paused.
func (t *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.QueueSetPaused(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.queueSetPaused(ctx, params)
}

// QueueList returns the stored queue states.
func (t *executor) QueueList(ctx context.Context, _ *driver.QueueListParams) ([]*driver.QueueRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.queueList(ctx)
}

// QueueDepthList reads the queues' backlog in the transaction.
func (t *executor) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.queueDepthList(ctx, params)
}

// JobWake makes waiting jobs due now, in one statement.
func (t *executor) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]*hoppertype.JobRow, error) { return t.JobWake(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobWake(ctx, params)
}

// RunLoad returns a run and its history; see driver.Executor.
func (t *executor) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	return driver.RunLoadSeq(ctx, t, params)
}

// RunEventAppendMany makes several appends in the transaction; see
// driver.Executor.
func (t *executor) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	return driver.RunEventAppendManyTx(ctx, t, params)
}

// RunStart stores a run and its job at once; see driver.Executor.
func (t *executor) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return driver.RunStartTx(ctx, t, params)
}

// RunInsert stores a new run row in the transaction.
func (t *executor) RunInsert(ctx context.Context, params *driver.RunInsertParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.RunInsert(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.runInsert(ctx, params.Row)
}

// RunGet returns a workflow run, as this transaction sees it.
func (t *executor) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.runGet(ctx, params.ID)
}

// RunList lists workflow runs.
func (t *executor) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.runList(ctx, params)
}

// RunUpdate sets a run's status.
func (t *executor) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*hoppertype.RunRow, error) { return t.RunUpdate(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.runUpdate(ctx, params)
}

// RunEventAppend appends to a run's history under its lease; a duplicate
// event undoes the whole call.
func (t *executor) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.RunEventAppend(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	run := func() error { return t.r.runEventAppend(ctx, params) }
	if len(chunks(len(params.Events))) > 1 || params.RunStatus != "" {
		return t.atomic(ctx, run)
	}
	return run()
}

// RunEventList returns a run's history, as this transaction sees it.
func (t *executor) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.runEventList(ctx, params)
}

// HookInsert stores a waiting hook.
func (t *executor) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.HookInsert(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.hookInsert(ctx, params.Row)
}

// HookGet returns a hook, as this transaction sees it.
func (t *executor) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.hookGet(ctx, params.Token)
}

// HookResume delivers a payload to a waiting hook.
func (t *executor) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*hoppertype.HookRow, error) { return t.HookResume(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.hookResume(ctx, params)
}

// HookListByRun returns a run's hooks, as this transaction sees them.
func (t *executor) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.hookListByRun(ctx, params.RunID)
}

// StreamAppend appends chunks to a run's stream.
func (t *executor) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) ([]*hoppertype.StreamChunk, error) {
			return t.StreamAppend(ctx, params)
		})
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	var out []*hoppertype.StreamChunk
	run := func() error {
		var err error
		out, err = t.r.streamAppend(ctx, params)
		return err
	}
	var err error
	if len(chunks(len(params.Chunks))) > 1 {
		err = t.atomic(ctx, run)
	} else {
		err = run()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// StreamRead reads a run's stream, as this transaction sees it.
func (t *executor) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.streamRead(ctx, params)
}

// RunLoadMany reads several runs and their histories, one by one; see
// driver.RunBatchLoader.
func (t *executor) RunLoadMany(ctx context.Context, params *driver.RunLoadManyParams) (map[string]*driver.RunLoaded, error) {
	return driver.RunLoadManySeq(ctx, t, params)
}
