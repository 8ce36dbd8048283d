package pgdriver

import (
	"context"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// The Driver's operations run on the pool, each atomic on its own; see
// driver.Executor for their contracts.

// InTx runs fn in a transaction at READ COMMITTED; a nested InTx on the
// transaction's executor is a savepoint. Notifications made through tx are
// sent, de-duplicated, just before the commit. When fn returns an error (or
// panics) everything is rolled back and InTx returns fn's error. A statement
// that fails inside fn aborts the transaction, as in PostgreSQL: fn should
// return the error (or run the statement in a nested InTx to recover).
func (d *Driver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.root.InTx(ctx, fn)
}

// Notify sends a notification at once with pg_notify on the topic's
// schema-prefixed channel; notifications sent at the same moment from many
// goroutines share statements (see executor.Notify).
func (d *Driver) Notify(ctx context.Context, topic, payload string) error {
	return d.root.Notify(ctx, topic, payload)
}

// JobInsertMany inserts jobs in one statement (COPY for large batches
// without unique keys); see driver.Executor.
func (d *Driver) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	return d.root.JobInsertMany(ctx, params)
}

// JobGet returns one job or hoppertype.ErrNotFound.
func (d *Driver) JobGet(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	return d.root.JobGet(ctx, id)
}

// JobGetMany returns the jobs that exist among ids, in the order of ids.
func (d *Driver) JobGetMany(ctx context.Context, ids []string) ([]*hoppertype.JobRow, error) {
	return d.root.JobGetMany(ctx, ids)
}

// JobList lists jobs by id; see driver.Executor.
func (d *Driver) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	return d.root.JobList(ctx, params)
}

// JobCountByState counts jobs per queue and state.
func (d *Driver) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	return d.root.JobCountByState(ctx, params)
}

// JobClaim promotes the queue's due jobs and claims pending ones under a
// lease; see driver.Executor. ctx is checked before the claim is sent; once
// sent, the claim runs to its end (for at most 10s) even if ctx ends, so a
// claim never commits without its caller receiving the jobs.
func (d *Driver) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	return d.root.JobClaim(ctx, params)
}

// JobPromote makes due scheduled and retrying jobs pending in every queue.
func (d *Driver) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	return d.root.JobPromote(ctx, params)
}

// JobNextRunAt returns the earliest RunAt of the queue's scheduled and
// retrying jobs, or the zero time.
func (d *Driver) JobNextRunAt(ctx context.Context, queue string) (time.Time, error) {
	return d.root.JobNextRunAt(ctx, queue)
}

// JobHeartbeat extends the leases still held; see driver.Executor.
func (d *Driver) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	return d.root.JobHeartbeat(ctx, params)
}

// JobFinishMany applies workers' transitions; see driver.Executor.
func (d *Driver) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	return d.root.JobFinishMany(ctx, params)
}

// JobListExpiredLeases lists running jobs whose lease expired.
func (d *Driver) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	return d.root.JobListExpiredLeases(ctx, params)
}

// JobCancel cancels a job; see driver.Executor.
func (d *Driver) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	return d.root.JobCancel(ctx, params)
}

// JobRetry moves jobs back to pending; see driver.Executor.
func (d *Driver) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	return d.root.JobRetry(ctx, params)
}

// JobDeleteFinished deletes old terminal jobs.
func (d *Driver) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
	return d.root.JobDeleteFinished(ctx, params)
}

// GroupInsert stores a new group.
func (d *Driver) GroupInsert(ctx context.Context, row *hoppertype.GroupRow) error {
	return d.root.GroupInsert(ctx, row)
}

// GroupGet returns a group or hoppertype.ErrNotFound.
func (d *Driver) GroupGet(ctx context.Context, id string) (*hoppertype.GroupRow, error) {
	return d.root.GroupGet(ctx, id)
}

// GroupUpdate changes a group atomically; see driver.Executor.
func (d *Driver) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	return d.root.GroupUpdate(ctx, params)
}

// KeySetIfAbsent stores a key unless it is held.
func (d *Driver) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	return d.root.KeySetIfAbsent(ctx, params)
}

// LeaderAttempt takes or renews a leadership and returns its holder.
func (d *Driver) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	return d.root.LeaderAttempt(ctx, params)
}

// LeaderResign gives up a leadership Owner holds.
func (d *Driver) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	return d.root.LeaderResign(ctx, params)
}

// QueueSetPaused stores whether a queue is paused.
func (d *Driver) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	return d.root.QueueSetPaused(ctx, params)
}

// QueueList returns the stored queue states by name.
func (d *Driver) QueueList(ctx context.Context) ([]*driver.QueueRow, error) {
	return d.root.QueueList(ctx)
}

// JobWake makes the named waiting jobs due now; see driver.Executor.
func (d *Driver) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	return d.root.JobWake(ctx, params)
}

// RunEventAppendMany makes appends to several runs in one statement; see
// driver.Executor.
func (d *Driver) RunEventAppendMany(ctx context.Context, params []*driver.RunEventAppendParams) ([]error, error) {
	return d.root.RunEventAppendMany(ctx, params)
}

// RunLoad reads a run and its history in one statement; see
// driver.Executor.
func (d *Driver) RunLoad(ctx context.Context, id string) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	return d.root.RunLoad(ctx, id)
}

// RunStart stores a run and its job in one statement; see driver.Executor.
func (d *Driver) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return d.root.RunStart(ctx, params)
}

// RunInsert stores a new run; see driver.Executor.
func (d *Driver) RunInsert(ctx context.Context, row *hoppertype.RunRow) error {
	return d.root.RunInsert(ctx, row)
}

// RunGet returns a run or hoppertype.ErrNotFound.
func (d *Driver) RunGet(ctx context.Context, id string) (*hoppertype.RunRow, error) {
	return d.root.RunGet(ctx, id)
}

// RunList lists runs newest first; see driver.Executor.
func (d *Driver) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	return d.root.RunList(ctx, params)
}

// RunUpdate sets a run's status; see driver.Executor.
func (d *Driver) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	return d.root.RunUpdate(ctx, params)
}

// RunEventAppend appends to a run's history under its lease; see
// driver.Executor.
func (d *Driver) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
	return d.root.RunEventAppend(ctx, params)
}

// RunEventList returns a run's history.
func (d *Driver) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	return d.root.RunEventList(ctx, params)
}

// HookInsert stores a new hook.
func (d *Driver) HookInsert(ctx context.Context, row *hoppertype.HookRow) error {
	return d.root.HookInsert(ctx, row)
}

// HookGet returns a hook or hoppertype.ErrNotFound.
func (d *Driver) HookGet(ctx context.Context, token string) (*hoppertype.HookRow, error) {
	return d.root.HookGet(ctx, token)
}

// HookResume delivers a payload to a waiting hook; see driver.Executor.
func (d *Driver) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	return d.root.HookResume(ctx, params)
}

// HookListByRun returns a run's hooks.
func (d *Driver) HookListByRun(ctx context.Context, runID string) ([]*hoppertype.HookRow, error) {
	return d.root.HookListByRun(ctx, runID)
}

// StreamAppend appends chunks to a run's stream; see driver.Executor.
func (d *Driver) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	return d.root.StreamAppend(ctx, params)
}

// StreamRead reads a run's stream.
func (d *Driver) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	return d.root.StreamRead(ctx, params)
}

// GateInsert stores gates; see driver.Executor.
func (d *Driver) GateInsert(ctx context.Context, params *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	return d.root.GateInsert(ctx, params)
}

// GateGet returns a gate; see driver.Executor.
func (d *Driver) GateGet(ctx context.Context, id string) (*hoppertype.GateRow, error) {
	return d.root.GateGet(ctx, id)
}

// GateWaitList returns a gate's waits; see driver.Executor.
func (d *Driver) GateWaitList(ctx context.Context, gateID string) ([]*hoppertype.GateWait, error) {
	return d.root.GateWaitList(ctx, gateID)
}

// GateEdges returns gate graph edges; see driver.Executor.
func (d *Driver) GateEdges(ctx context.Context, ids []string) (map[string][]string, error) {
	return d.root.GateEdges(ctx, ids)
}

// KeyDeleteExpired deletes expired keys; see driver.Executor.
func (d *Driver) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	return d.root.KeyDeleteExpired(ctx, params)
}

// GateObserve records jobs' states in their gates; see driver.Executor.
func (d *Driver) GateObserve(ctx context.Context, params *driver.GateObserveParams) error {
	return d.root.GateObserve(ctx, params)
}
