package hopper_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// hangingDriver is a store that stops answering when told to: from then
// on every call blocks until its context ends, then fails with the
// context's error, as a call on a hung connection does. Subscriptions
// (Listen) are lifetimes, not calls: they are left alone.
type hangingDriver struct {
	driver.Driver
	baseExec
	on atomic.Bool

	mu   sync.Mutex
	hung map[string]chan struct{}
}

// Executor is the hanging store itself.
func (d *hangingDriver) Executor() driver.Executor { return d }

// hang makes every call from now on block until its context ends.
func (d *hangingDriver) hang() { d.on.Store(true) }

// answer makes the store answer again.
func (d *hangingDriver) answer() { d.on.Store(false) }

// hungOn returns a channel closed once a call of method has hung.
func (d *hangingDriver) hungOn(method string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hungLocked(method)
}

func (d *hangingDriver) hungLocked(method string) chan struct{} {
	if d.hung == nil {
		d.hung = map[string]chan struct{}{}
	}
	ch := d.hung[method]
	if ch == nil {
		ch = make(chan struct{})
		d.hung[method] = ch
	}
	return ch
}

// do runs f, or blocks until ctx ends while the store hangs.
func (d *hangingDriver) do(ctx context.Context, method string, f func() error) error {
	if !d.on.Load() {
		return f()
	}
	d.mu.Lock()
	ch := d.hungLocked(method)
	select {
	case <-ch:
	default:
		close(ch)
	}
	d.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func hang[T any](d *hangingDriver, ctx context.Context, method string, f func() (T, error)) (T, error) {
	var out T
	err := d.do(ctx, method, func() error {
		var err error
		out, err = f()
		return err
	})
	return out, err
}

// The driver's calls, each of which hangs.

func (d *hangingDriver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.do(ctx, "InTx", func() error { return d.baseExec.InTx(ctx, fn) })
}

func (d *hangingDriver) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	var run *hoppertype.RunRow
	var events []*hoppertype.RunEvent
	err := d.do(ctx, "RunLoad", func() error {
		var err error
		run, events, err = d.baseExec.RunLoad(ctx, params)
		return err
	})
	return run, events, err
}

func (d *hangingDriver) ChangeList(ctx context.Context, params *driver.ChangeListParams) ([]*hoppertype.Change, error) {
	return hang(d, ctx, "ChangeList", func() ([]*hoppertype.Change, error) { return d.baseExec.ChangeList(ctx, params) })
}

func (d *hangingDriver) ChangeMark(ctx context.Context, params *driver.ChangeMarkParams) (int64, error) {
	return hang(d, ctx, "ChangeMark", func() (int64, error) { return d.baseExec.ChangeMark(ctx, params) })
}

func (d *hangingDriver) ChangeScan(ctx context.Context, params *driver.ChangeScanParams) (*driver.ChangeScanResult, error) {
	return hang(d, ctx, "ChangeScan", func() (*driver.ChangeScanResult, error) { return d.baseExec.ChangeScan(ctx, params) })
}

func (d *hangingDriver) ChangeListBefore(ctx context.Context, params *driver.ChangeListBeforeParams) ([]*hoppertype.Change, error) {
	return hang(d, ctx, "ChangeListBefore", func() ([]*hoppertype.Change, error) { return d.baseExec.ChangeListBefore(ctx, params) })
}

func (d *hangingDriver) ChangeTail(ctx context.Context, params *driver.ChangeTailParams) (hoppertype.ChangeCursor, error) {
	return hang(d, ctx, "ChangeTail", func() (hoppertype.ChangeCursor, error) { return d.baseExec.ChangeTail(ctx, params) })
}

func (d *hangingDriver) CursorAdvance(ctx context.Context, params *driver.CursorAdvanceParams) error {
	return d.do(ctx, "CursorAdvance", func() error { return d.baseExec.CursorAdvance(ctx, params) })
}

func (d *hangingDriver) CursorLease(ctx context.Context, params *driver.CursorLeaseParams) (*driver.CursorRow, error) {
	return hang(d, ctx, "CursorLease", func() (*driver.CursorRow, error) { return d.baseExec.CursorLease(ctx, params) })
}

func (d *hangingDriver) CursorList(ctx context.Context, params *driver.CursorListParams) ([]*driver.CursorRow, error) {
	return hang(d, ctx, "CursorList", func() ([]*driver.CursorRow, error) { return d.baseExec.CursorList(ctx, params) })
}

func (d *hangingDriver) GateEdges(ctx context.Context, params *driver.GateEdgesParams) (map[string][]string, error) {
	return hang(d, ctx, "GateEdges", func() (map[string][]string, error) { return d.baseExec.GateEdges(ctx, params) })
}

func (d *hangingDriver) GateWatcherList(ctx context.Context, params *driver.GateWatcherListParams) ([]string, error) {
	return hang(d, ctx, "GateWatcherList", func() ([]string, error) { return d.baseExec.GateWatcherList(ctx, params) })
}

func (d *hangingDriver) GateGet(ctx context.Context, params *driver.GateGetParams) (*hoppertype.GateRow, error) {
	return hang(d, ctx, "GateGet", func() (*hoppertype.GateRow, error) { return d.baseExec.GateGet(ctx, params) })
}

func (d *hangingDriver) GateInsert(ctx context.Context, params *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	return hang(d, ctx, "GateInsert", func() ([]*hoppertype.GateRow, error) { return d.baseExec.GateInsert(ctx, params) })
}

func (d *hangingDriver) GateObserve(ctx context.Context, params *driver.GateObserveParams) error {
	return d.do(ctx, "GateObserve", func() error { return d.baseExec.GateObserve(ctx, params) })
}

func (d *hangingDriver) GateWaitList(ctx context.Context, params *driver.GateWaitListParams) ([]*hoppertype.GateWait, error) {
	return hang(d, ctx, "GateWaitList", func() ([]*hoppertype.GateWait, error) { return d.baseExec.GateWaitList(ctx, params) })
}

func (d *hangingDriver) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	return hang(d, ctx, "GroupGet", func() (*hoppertype.GroupRow, error) { return d.baseExec.GroupGet(ctx, params) })
}

func (d *hangingDriver) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	return d.do(ctx, "GroupInsert", func() error { return d.baseExec.GroupInsert(ctx, params) })
}

func (d *hangingDriver) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	return hang(d, ctx, "GroupUpdate", func() (*driver.GroupUpdateResult, error) { return d.baseExec.GroupUpdate(ctx, params) })
}

func (d *hangingDriver) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	return hang(d, ctx, "HookGet", func() (*hoppertype.HookRow, error) { return d.baseExec.HookGet(ctx, params) })
}

func (d *hangingDriver) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	return d.do(ctx, "HookInsert", func() error { return d.baseExec.HookInsert(ctx, params) })
}

func (d *hangingDriver) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	return hang(d, ctx, "HookListByRun", func() ([]*hoppertype.HookRow, error) { return d.baseExec.HookListByRun(ctx, params) })
}

func (d *hangingDriver) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	return hang(d, ctx, "HookResume", func() (*hoppertype.HookRow, error) { return d.baseExec.HookResume(ctx, params) })
}

func (d *hangingDriver) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobCancel", func() (*hoppertype.JobRow, error) { return d.baseExec.JobCancel(ctx, params) })
}

func (d *hangingDriver) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobClaim", func() ([]*hoppertype.JobRow, error) { return d.baseExec.JobClaim(ctx, params) })
}

func (d *hangingDriver) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	return hang(d, ctx, "JobCountByState", func() ([]driver.JobCount, error) { return d.baseExec.JobCountByState(ctx, params) })
}

func (d *hangingDriver) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
	return hang(d, ctx, "JobDeleteFinished", func() (int, error) { return d.baseExec.JobDeleteFinished(ctx, params) })
}

func (d *hangingDriver) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	return hang(d, ctx, "JobFinishMany", func() ([]driver.JobFinishResult, error) { return d.baseExec.JobFinishMany(ctx, params) })
}

func (d *hangingDriver) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobGet", func() (*hoppertype.JobRow, error) { return d.baseExec.JobGet(ctx, params) })
}

func (d *hangingDriver) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobGetMany", func() ([]*hoppertype.JobRow, error) { return d.baseExec.JobGetMany(ctx, params) })
}

func (d *hangingDriver) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	return hang(d, ctx, "JobHeartbeat", func() ([]driver.JobHeartbeatResult, error) { return d.baseExec.JobHeartbeat(ctx, params) })
}

func (d *hangingDriver) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	return hang(d, ctx, "JobInsertMany", func() ([]driver.JobInsertResult, error) { return d.baseExec.JobInsertMany(ctx, params) })
}

func (d *hangingDriver) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobList", func() ([]*hoppertype.JobRow, error) { return d.baseExec.JobList(ctx, params) })
}

func (d *hangingDriver) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	return hang(d, ctx, "JobScan", func() (*driver.JobScanResult, error) { return d.baseExec.JobScan(ctx, params) })
}

func (d *hangingDriver) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobListExpiredLeases", func() ([]*hoppertype.JobRow, error) { return d.baseExec.JobListExpiredLeases(ctx, params) })
}

func (d *hangingDriver) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	return hang(d, ctx, "JobNextRunAt", func() (time.Time, error) { return d.baseExec.JobNextRunAt(ctx, params) })
}

func (d *hangingDriver) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	return hang(d, ctx, "JobPromote", func() (int, error) { return d.baseExec.JobPromote(ctx, params) })
}

func (d *hangingDriver) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	return hang(d, ctx, "JobRetry", func() ([]driver.JobRetryResult, error) { return d.baseExec.JobRetry(ctx, params) })
}

func (d *hangingDriver) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	return hang(d, ctx, "JobWake", func() ([]*hoppertype.JobRow, error) { return d.baseExec.JobWake(ctx, params) })
}

func (d *hangingDriver) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	return hang(d, ctx, "KeyDeleteExpired", func() (int, error) { return d.baseExec.KeyDeleteExpired(ctx, params) })
}

func (d *hangingDriver) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	return hang(d, ctx, "KeySetIfAbsent", func() (bool, error) { return d.baseExec.KeySetIfAbsent(ctx, params) })
}

func (d *hangingDriver) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	return hang(d, ctx, "LeaderAttempt", func() (*driver.LeaderRow, error) { return d.baseExec.LeaderAttempt(ctx, params) })
}

func (d *hangingDriver) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	return d.do(ctx, "LeaderResign", func() error { return d.baseExec.LeaderResign(ctx, params) })
}

func (d *hangingDriver) Notify(ctx context.Context, params *driver.NotifyParams) error {
	return d.do(ctx, "Notify", func() error { return d.baseExec.Notify(ctx, params) })
}

func (d *hangingDriver) QueueList(ctx context.Context, params *driver.QueueListParams) ([]*driver.QueueRow, error) {
	return hang(d, ctx, "QueueList", func() ([]*driver.QueueRow, error) { return d.baseExec.QueueList(ctx, params) })
}

func (d *hangingDriver) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	return hang(d, ctx, "QueueDepthList", func() ([]*driver.QueueDepthRow, error) { return d.baseExec.QueueDepthList(ctx, params) })
}

func (d *hangingDriver) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	return d.do(ctx, "QueueSetPaused", func() error { return d.baseExec.QueueSetPaused(ctx, params) })
}

func (d *hangingDriver) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
	return d.do(ctx, "RunEventAppend", func() error { return d.baseExec.RunEventAppend(ctx, params) })
}

func (d *hangingDriver) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	return hang(d, ctx, "RunEventAppendMany", func() ([]error, error) { return d.baseExec.RunEventAppendMany(ctx, params) })
}

func (d *hangingDriver) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	return hang(d, ctx, "RunEventList", func() ([]*hoppertype.RunEvent, error) { return d.baseExec.RunEventList(ctx, params) })
}

func (d *hangingDriver) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	return hang(d, ctx, "RunGet", func() (*hoppertype.RunRow, error) { return d.baseExec.RunGet(ctx, params) })
}

func (d *hangingDriver) RunInsert(ctx context.Context, params *driver.RunInsertParams) error {
	return d.do(ctx, "RunInsert", func() error { return d.baseExec.RunInsert(ctx, params) })
}

func (d *hangingDriver) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	return hang(d, ctx, "RunList", func() ([]*hoppertype.RunRow, error) { return d.baseExec.RunList(ctx, params) })
}

func (d *hangingDriver) RunStart(ctx context.Context, params *driver.RunStartParams) (bool, error) {
	return hang(d, ctx, "RunStart", func() (bool, error) { return d.baseExec.RunStart(ctx, params) })
}

func (d *hangingDriver) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	return hang(d, ctx, "RunUpdate", func() (*hoppertype.RunRow, error) { return d.baseExec.RunUpdate(ctx, params) })
}

func (d *hangingDriver) ScheduleDefine(ctx context.Context, params *driver.ScheduleDefineParams) error {
	return d.do(ctx, "ScheduleDefine", func() error { return d.baseExec.ScheduleDefine(ctx, params) })
}

func (d *hangingDriver) ScheduleDelete(ctx context.Context, params *driver.ScheduleDeleteParams) (bool, error) {
	return hang(d, ctx, "ScheduleDelete", func() (bool, error) { return d.baseExec.ScheduleDelete(ctx, params) })
}

func (d *hangingDriver) ScheduleList(ctx context.Context, params *driver.ScheduleListParams) ([]*driver.ScheduleRow, error) {
	return hang(d, ctx, "ScheduleList", func() ([]*driver.ScheduleRow, error) { return d.baseExec.ScheduleList(ctx, params) })
}

func (d *hangingDriver) ScheduleRecord(ctx context.Context, params *driver.ScheduleRecordParams) (bool, error) {
	return hang(d, ctx, "ScheduleRecord", func() (bool, error) { return d.baseExec.ScheduleRecord(ctx, params) })
}

func (d *hangingDriver) ScheduleSetPaused(ctx context.Context, params *driver.ScheduleSetPausedParams) error {
	return d.do(ctx, "ScheduleSetPaused", func() error { return d.baseExec.ScheduleSetPaused(ctx, params) })
}

func (d *hangingDriver) ScheduleUpsert(ctx context.Context, params *driver.ScheduleUpsertParams) (time.Time, error) {
	return hang(d, ctx, "ScheduleUpsert", func() (time.Time, error) { return d.baseExec.ScheduleUpsert(ctx, params) })
}

func (d *hangingDriver) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	return hang(d, ctx, "StreamAppend", func() ([]*hoppertype.StreamChunk, error) { return d.baseExec.StreamAppend(ctx, params) })
}

func (d *hangingDriver) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	return hang(d, ctx, "StreamRead", func() ([]*hoppertype.StreamChunk, error) { return d.baseExec.StreamRead(ctx, params) })
}

func (d *hangingDriver) WorkerDelete(ctx context.Context, params *driver.WorkerDeleteParams) (int, error) {
	return hang(d, ctx, "WorkerDelete", func() (int, error) { return d.baseExec.WorkerDelete(ctx, params) })
}

func (d *hangingDriver) WorkerList(ctx context.Context, params *driver.WorkerListParams) ([]*driver.WorkerRow, error) {
	return hang(d, ctx, "WorkerList", func() ([]*driver.WorkerRow, error) { return d.baseExec.WorkerList(ctx, params) })
}

func (d *hangingDriver) WorkerUpsert(ctx context.Context, params *driver.WorkerUpsertParams) error {
	return d.do(ctx, "WorkerUpsert", func() error { return d.baseExec.WorkerUpsert(ctx, params) })
}
