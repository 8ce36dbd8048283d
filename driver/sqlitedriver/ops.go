package sqlitedriver

import (
	"context"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// This file routes the Executor operations. On the Driver, writes queue to
// the writer as one-operation calls (group commit) and reads run on the read
// pool. On a transaction's executor (txExec), everything runs on the
// writer's transaction.

// write runs fn as a top-level call in the writer.
func (d *Driver) write(ctx context.Context, single bool, fn func(ctx context.Context, t *txExec) error) error {
	return d.writeCall(ctx, single, false, fn)
}

// writeCall runs fn as a top-level call in the writer; lax marks a call
// whose commit need not be synced before it returns (see writer.runBatch).
func (d *Driver) writeCall(ctx context.Context, single, lax bool, fn func(ctx context.Context, t *txExec) error) error {
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
func call[T any](ctx context.Context, d *Driver, fn func(ctx context.Context, t *txExec) (T, error)) (T, error) {
	return callAs(ctx, d, false, fn)
}

// callAs is call; lax marks a call whose commit need not be synced before
// it returns (see writer.runBatch).
func callAs[T any](ctx context.Context, d *Driver, lax bool, fn func(ctx context.Context, t *txExec) (T, error)) (T, error) {
	var out T
	err := d.writeCall(ctx, true, lax, func(ctx context.Context, t *txExec) error {
		var err error
		out, err = fn(ctx, t)
		return err
	})
	return out, err
}

// read runs one read operation on the read pool.
func read[T any](ctx context.Context, d *Driver, fn func(r *runner) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	r, err := d.reader(ctx)
	if err != nil {
		return zero, err
	}
	return fn(r)
}

// InTx runs fn in a write transaction, queued to the writer and committed
// with the other calls of its batch; see driver.Executor.InTx. fn runs on the
// writer goroutine while it holds the database's write lock: it must use tx,
// never the Driver (a write on the Driver from inside fn fails), and should
// be quick. When fn returns an error or panics, its writes are rolled back
// and its notifications dropped; a panic is re-raised in the caller.
//
// fn may run twice: when SQLite aborts the batch's whole transaction because
// of another call (a disk-full error, say), the calls that had succeeded in
// it are run once more in the next batch, so fn should have no effects
// outside tx. InTx returns only after the commit that includes fn's writes,
// or with an error and none of them.
func (d *pool) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.write(ctx, false, func(ctx context.Context, t *txExec) error { return fn(ctx, t) })
}

// JobInsertMany inserts jobs atomically; see driver.Executor.
func (d *pool) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]driver.JobInsertResult, error) {
		return t.JobInsertMany(ctx, params)
	})
}

// JobGet returns one job; see driver.Executor.
func (d *pool) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	return read(ctx, d.Driver, func(r *runner) (*hoppertype.JobRow, error) { return r.jobGet(ctx, params.ID) })
}

// JobGetMany returns the jobs that exist among IDs; see driver.Executor.
func (d *pool) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.JobRow, error) { return r.jobGetMany(ctx, params.IDs) })
}

// JobList lists jobs; see driver.Executor.
func (d *pool) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.JobRow, error) { return r.jobList(ctx, params) })
}

// JobScan lists jobs over a bounded window; see driver.Executor.
func (d *pool) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	return read(ctx, d.Driver, func(r *runner) (*driver.JobScanResult, error) { return r.jobScan(ctx, params) })
}

// JobCountByState counts jobs per queue and state; see driver.Executor.
func (d *pool) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	return read(ctx, d.Driver, func(r *runner) ([]driver.JobCount, error) { return r.jobCountByState(ctx, params) })
}

// JobClaim claims due jobs under a lease; see driver.Executor.
//
// Under synchronous=FULL a batch of claims alone commits without syncing
// the log: a claim lost to a power loss leaves its jobs pending to be
// claimed again, and the log's next synced commit (any other write) makes
// it durable with everything before it. See the package doc, Durability.
func (d *pool) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	return callAs(ctx, d.Driver, true, func(ctx context.Context, t *txExec) ([]*hoppertype.JobRow, error) { return t.JobClaim(ctx, params) })
}

// JobPromote makes due scheduled and retrying jobs pending; see
// driver.Executor.
func (d *pool) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (int, error) { return t.JobPromote(ctx, params) })
}

// JobNextRunAt returns the earliest RunAt of a queue's waiting jobs; see
// driver.Executor.
func (d *pool) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	return read(ctx, d.Driver, func(r *runner) (time.Time, error) { return r.jobNextRunAt(ctx, params.Queue) })
}

// JobHeartbeat extends held leases; see driver.Executor.
func (d *pool) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]driver.JobHeartbeatResult, error) {
		return t.JobHeartbeat(ctx, params)
	})
}

// JobFinishMany applies workers' transitions; see driver.Executor.
func (d *pool) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]driver.JobFinishResult, error) {
		return t.JobFinishMany(ctx, params)
	})
}

// JobListExpiredLeases lists running jobs whose lease expired; see
// driver.Executor.
func (d *pool) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.JobRow, error) { return r.jobListExpiredLeases(ctx, params) })
}

// JobCancel cancels a job; see driver.Executor.
func (d *pool) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (*hoppertype.JobRow, error) { return t.JobCancel(ctx, params) })
}

// JobRetry moves jobs back to pending; see driver.Executor.
func (d *pool) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]driver.JobRetryResult, error) { return t.JobRetry(ctx, params) })
}

// JobDeleteFinished deletes old terminal jobs; see driver.Executor.
func (d *pool) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (int, error) { return t.JobDeleteFinished(ctx, params) })
}

// GroupInsert stores a new group; see driver.Executor.
func (d *pool) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.GroupInsert(ctx, params) })
}

// GroupGet returns a group; see driver.Executor.
func (d *pool) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	return read(ctx, d.Driver, func(r *runner) (*hoppertype.GroupRow, error) { return r.groupGet(ctx, params.ID) })
}

// GroupUpdate changes a group atomically; see driver.Executor. Fold runs on
// the writer goroutine while the write lock is held.
func (d *pool) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (*driver.GroupUpdateResult, error) {
		return t.GroupUpdate(ctx, params)
	})
}

// KeyDeleteExpired deletes expired keys; see driver.Executor.
func (d *pool) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (int, error) { return t.KeyDeleteExpired(ctx, params) })
}

// KeySetIfAbsent stores a key unless it is held; see driver.Executor.
func (d *pool) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (bool, error) { return t.KeySetIfAbsent(ctx, params) })
}

// LeaderAttempt takes or renews a leadership; see driver.Executor.
func (d *pool) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (*driver.LeaderRow, error) { return t.LeaderAttempt(ctx, params) })
}

// LeaderResign gives up a leadership; see driver.Executor.
func (d *pool) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.LeaderResign(ctx, params) })
}

// QueueSetPaused stores whether a queue is paused; see driver.Executor.
func (d *pool) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.QueueSetPaused(ctx, params) })
}

// QueueList returns the stored queue states; see driver.Executor.
func (d *pool) QueueList(ctx context.Context, _ *driver.QueueListParams) ([]*driver.QueueRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*driver.QueueRow, error) { return r.queueList(ctx) })
}

// QueueDepthList reads the queues' backlog; see driver.Executor.
func (d *pool) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*driver.QueueDepthRow, error) { return r.queueDepthList(ctx, params) })
}

// JobWake makes waiting jobs due now; see driver.Executor.
func (d *pool) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]*hoppertype.JobRow, error) { return t.JobWake(ctx, params) })
}

// RunLoad returns a run and its history; see driver.Executor.
func (d *pool) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	return driver.RunLoadSeq(ctx, d, params)
}

// RunEventAppendMany makes several appends in one transaction; see
// driver.Executor.
func (d *pool) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	return driver.RunEventAppendManyTx(ctx, d, params)
}

// RunStart stores a run and its job at once; see driver.Executor.
func (d *pool) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return driver.RunStartTx(ctx, d, params)
}

// RunInsert stores a new run row; see driver.Executor.
func (d *pool) RunInsert(ctx context.Context, params *driver.RunInsertParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.RunInsert(ctx, params) })
}

// RunGet returns a workflow run; see driver.Executor.
func (d *pool) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	return read(ctx, d.Driver, func(r *runner) (*hoppertype.RunRow, error) { return r.runGet(ctx, params.ID) })
}

// RunList lists workflow runs, newest first; see driver.Executor.
func (d *pool) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.RunRow, error) { return r.runList(ctx, params) })
}

// RunUpdate sets a run's status; see driver.Executor.
func (d *pool) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (*hoppertype.RunRow, error) { return t.RunUpdate(ctx, params) })
}

// RunEventAppend appends to a run's history under its lease; see
// driver.Executor.
func (d *pool) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.RunEventAppend(ctx, params) })
}

// RunEventList returns a run's history; see driver.Executor.
func (d *pool) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.RunEvent, error) { return r.runEventList(ctx, params) })
}

// HookInsert stores a waiting hook; see driver.Executor.
func (d *pool) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	return d.write(ctx, true, func(ctx context.Context, t *txExec) error { return t.HookInsert(ctx, params) })
}

// HookGet returns a hook by token; see driver.Executor.
func (d *pool) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	return read(ctx, d.Driver, func(r *runner) (*hoppertype.HookRow, error) { return r.hookGet(ctx, params.Token) })
}

// HookResume delivers a payload to a waiting hook; see driver.Executor.
func (d *pool) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) (*hoppertype.HookRow, error) { return t.HookResume(ctx, params) })
}

// HookListByRun returns a run's hooks; see driver.Executor.
func (d *pool) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.HookRow, error) { return r.hookListByRun(ctx, params.RunID) })
}

// StreamAppend appends chunks to a run's stream; see driver.Executor.
func (d *pool) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	return call(ctx, d.Driver, func(ctx context.Context, t *txExec) ([]*hoppertype.StreamChunk, error) {
		return t.StreamAppend(ctx, params)
	})
}

// StreamRead reads a run's stream; see driver.Executor.
func (d *pool) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	return read(ctx, d.Driver, func(r *runner) ([]*hoppertype.StreamChunk, error) { return r.streamRead(ctx, params) })
}

// The transaction's executor.

// JobInsertMany inserts jobs; a duplicate id undoes the whole call.
func (t *txExec) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
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
func (t *txExec) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobGet(ctx, params.ID)
}

// JobGetMany returns the jobs that exist among IDs, in their order.
func (t *txExec) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobGetMany(ctx, params.IDs)
}

// JobList lists jobs.
func (t *txExec) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobList(ctx, params)
}

// JobScan lists jobs over a bounded window.
func (t *txExec) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobScan(ctx, params)
}

// JobCountByState counts jobs per queue and state.
func (t *txExec) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobCountByState(ctx, params)
}

// JobClaim promotes and claims jobs.
func (t *txExec) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
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
func (t *txExec) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	return t.r.jobPromote(ctx, params)
}

// JobNextRunAt returns the earliest RunAt of a queue's waiting jobs.
func (t *txExec) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	if err := t.check(ctx); err != nil {
		return time.Time{}, err
	}
	return t.r.jobNextRunAt(ctx, params.Queue)
}

// JobHeartbeat extends held leases.
func (t *txExec) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
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
func (t *txExec) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
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
func (t *txExec) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobListExpiredLeases(ctx, params)
}

// JobCancel cancels a job.
func (t *txExec) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
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
func (t *txExec) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
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
func (t *txExec) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
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
func (t *txExec) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.groupInsert(ctx, params.Row)
}

// GroupGet returns a group, as this transaction sees it.
func (t *txExec) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.groupGet(ctx, params.ID)
}

// GroupUpdate changes a group; Fold runs here, under the write lock.
func (t *txExec) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.groupUpdate(ctx, params)
}

// KeyDeleteExpired deletes expired keys.
func (t *txExec) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	return t.r.keyDeleteExpired(ctx, params)
}

// KeySetIfAbsent stores a key unless it is held.
func (t *txExec) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	if err := t.check(ctx); err != nil {
		return false, err
	}
	return t.r.keySetIfAbsent(ctx, params)
}

// LeaderAttempt takes or renews a leadership.
func (t *txExec) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.leaderAttempt(ctx, params)
}

// LeaderResign gives up a leadership.
func (t *txExec) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.leaderResign(ctx, params)
}

// QueueSetPaused stores whether a queue is paused.
func (t *txExec) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.queueSetPaused(ctx, params)
}

// QueueList returns the stored queue states.
func (t *txExec) QueueList(ctx context.Context, _ *driver.QueueListParams) ([]*driver.QueueRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.queueList(ctx)
}

// QueueDepthList reads the queues' backlog in the transaction.
func (t *txExec) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.queueDepthList(ctx, params)
}

// JobWake makes waiting jobs due now, in one statement.
func (t *txExec) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.jobWake(ctx, params)
}

// RunLoad returns a run and its history; see driver.Executor.
func (t *txExec) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	return driver.RunLoadSeq(ctx, t, params)
}

// RunEventAppendMany makes several appends in the transaction; see
// driver.Executor.
func (t *txExec) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	return driver.RunEventAppendManyTx(ctx, t, params)
}

// RunStart stores a run and its job at once; see driver.Executor.
func (t *txExec) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return driver.RunStartTx(ctx, t, params)
}

// RunInsert stores a new run row in the transaction.
func (t *txExec) RunInsert(ctx context.Context, params *driver.RunInsertParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.runInsert(ctx, params.Row)
}

// RunGet returns a workflow run, as this transaction sees it.
func (t *txExec) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.runGet(ctx, params.ID)
}

// RunList lists workflow runs.
func (t *txExec) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.runList(ctx, params)
}

// RunUpdate sets a run's status.
func (t *txExec) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.runUpdate(ctx, params)
}

// RunEventAppend appends to a run's history under its lease; a duplicate
// event undoes the whole call.
func (t *txExec) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
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
func (t *txExec) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.runEventList(ctx, params)
}

// HookInsert stores a waiting hook.
func (t *txExec) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.hookInsert(ctx, params.Row)
}

// HookGet returns a hook, as this transaction sees it.
func (t *txExec) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.hookGet(ctx, params.Token)
}

// HookResume delivers a payload to a waiting hook.
func (t *txExec) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.hookResume(ctx, params)
}

// HookListByRun returns a run's hooks, as this transaction sees them.
func (t *txExec) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.hookListByRun(ctx, params.RunID)
}

// StreamAppend appends chunks to a run's stream.
func (t *txExec) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
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
func (t *txExec) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t.r.streamRead(ctx, params)
}
