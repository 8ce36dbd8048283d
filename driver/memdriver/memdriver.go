// Package memdriver is hopper's in-memory reference driver. It keeps every
// row in process memory behind one mutex, so it is safe for concurrent use
// but shares nothing across processes and keeps nothing across restarts. It
// serves tests, examples and hoppertest, and it is the reference the other
// drivers are checked against by the conformance suite in drivertest.
//
// Transactions (InTx) hold the driver's mutex for the whole function and
// record an undo log; a returned error undoes every write in reverse order.
// Operations of its Executor outside InTx run as one-operation transactions,
// so each of them is atomic.
package memdriver

import (
	"context"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Driver is an in-memory hopper store. The zero value is not usable; call New.
type Driver struct {
	mu     sync.Mutex
	closed bool   // guarded by mu
	st     *store // guarded by mu; nil after Close
	broker *broker
	pool   *pool // the Executor
}

// pool is the driver's Executor outside a transaction: each operation runs
// as a one-operation transaction, so each is atomic.
type pool struct{ *Driver }

var _ driver.Executor = (*pool)(nil)

// Executor returns the executor that runs the store's operations; see
// driver.Executor for their contracts.
func (d *Driver) Executor() driver.Executor { return d.pool }

var _ driver.Driver = (*Driver)(nil)

// New returns an empty in-memory store.
func New(opts ...Option) *Driver {
	d := &Driver{st: newStore(), broker: newBroker()}
	d.pool = &pool{d}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Option configures a Driver.
type Option func(*Driver)

// WithClock makes the store stamp its change feed (and so the attempts
// read from it) with now instead of the wall clock: give it the clock of
// the client's Config.Clock, as hoppertest does, so that attempt times and
// job times can be compared. It must be safe for concurrent use.
func WithClock(now func() time.Time) Option {
	return func(d *Driver) {
		if now != nil {
			d.st.now = now
		}
	}
}

// Name returns "memory".
func (d *Driver) Name() string { return "memory" }

// Close releases the store's memory and ends every subscription. Operations
// after Close return driver.ErrClosed; closing twice is a no-op.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.st = nil
	d.mu.Unlock()
	d.broker.close()
	return nil
}

// Listen subscribes to notifications published on topic with Notify. The
// subscription's channel buffers 64 payloads; when it is full further
// payloads are dropped (notifications are hints). It ends when ctx is done,
// when Close is called on it or when the driver is closed.
func (d *Driver) Listen(ctx context.Context, topic string) (driver.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.broker.subscribe(ctx, topic)
}

// InTx runs fn in a transaction. It holds the driver's lock while fn runs, so
// fn must use tx and never the Driver itself. When fn returns an error (or
// panics) every write made through tx is undone and notifications made
// through tx are dropped; otherwise they are delivered after the lock is
// released.
func (d *pool) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.run(ctx, func(tx *tx) error { return fn(ctx, tx) })
}

// run is InTx with the concrete transaction type: it holds the lock for fn,
// undoes its writes on error or panic, and publishes its notifications after
// a commit.
func (d *Driver) run(ctx context.Context, fn func(tx *tx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return driver.ErrClosed
	}
	t := &tx{st: d.st}
	committed := false
	defer func() {
		if !committed {
			t.undoTo(0)
			t.notes = nil
		}
		t.done.Store(true)
		notes := t.notes
		d.mu.Unlock()
		d.broker.publish(notes)
	}()
	if err := fn(t); err != nil {
		return err
	}
	committed = true
	t.st.feed.compact()
	return nil
}

// call runs fn as a one-operation transaction and returns its value.
func call[T any](ctx context.Context, d *Driver, fn func(tx *tx) (T, error)) (T, error) {
	var out T
	err := d.run(ctx, func(tx *tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// Notify publishes Payload on Topic to the current subscribers.
func (d *pool) Notify(ctx context.Context, params *driver.NotifyParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.Notify(ctx, params) })
}

// JobInsertMany inserts jobs atomically; see driver.Executor.
func (d *pool) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]driver.JobInsertResult, error) { return tx.JobInsertMany(ctx, params) })
}

// JobGet returns one job; see driver.Executor.
func (d *pool) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.JobRow, error) { return tx.JobGet(ctx, params) })
}

// JobGetMany returns the jobs that exist among IDs; see driver.Executor.
func (d *pool) JobGetMany(ctx context.Context, params *driver.JobGetManyParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.JobRow, error) { return tx.JobGetMany(ctx, params) })
}

// JobList lists jobs; see driver.Executor.
func (d *pool) JobList(ctx context.Context, params *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.JobRow, error) { return tx.JobList(ctx, params) })
}

// JobCountByState counts jobs per queue and state; see driver.Executor.
func (d *pool) JobCountByState(ctx context.Context, params *driver.JobCountParams) ([]driver.JobCount, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]driver.JobCount, error) { return tx.JobCountByState(ctx, params) })
}

// JobClaim claims due jobs under a lease; see driver.Executor.
func (d *pool) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.JobRow, error) { return tx.JobClaim(ctx, params) })
}

// JobPromote makes due scheduled and retrying jobs pending; see driver.Executor.
func (d *pool) JobPromote(ctx context.Context, params *driver.JobPromoteParams) (int, error) {
	return call(ctx, d.Driver, func(tx *tx) (int, error) { return tx.JobPromote(ctx, params) })
}

// JobNextRunAt returns the earliest RunAt of a queue's waiting jobs; see
// driver.Executor.
func (d *pool) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	return call(ctx, d.Driver, func(tx *tx) (time.Time, error) { return tx.JobNextRunAt(ctx, params) })
}

// JobHeartbeat extends held leases; see driver.Executor.
func (d *pool) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]driver.JobHeartbeatResult, error) { return tx.JobHeartbeat(ctx, params) })
}

// JobFinishMany applies workers' transitions; see driver.Executor.
func (d *pool) JobFinishMany(ctx context.Context, params *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]driver.JobFinishResult, error) { return tx.JobFinishMany(ctx, params) })
}

// JobScan lists jobs over a bounded window; see driver.Executor.
func (d *pool) JobScan(ctx context.Context, params *driver.JobScanParams) (*driver.JobScanResult, error) {
	return call(ctx, d.Driver, func(tx *tx) (*driver.JobScanResult, error) { return tx.JobScan(ctx, params) })
}

// JobListExpiredLeases lists running jobs whose lease expired; see
// driver.Executor.
func (d *pool) JobListExpiredLeases(ctx context.Context, params *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.JobRow, error) { return tx.JobListExpiredLeases(ctx, params) })
}

// JobCancel cancels a job; see driver.Executor.
func (d *pool) JobCancel(ctx context.Context, params *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.JobRow, error) { return tx.JobCancel(ctx, params) })
}

// JobRetry moves jobs back to pending; see driver.Executor.
func (d *pool) JobRetry(ctx context.Context, params *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]driver.JobRetryResult, error) { return tx.JobRetry(ctx, params) })
}

// JobDeleteFinished deletes old terminal jobs; see driver.Executor.
func (d *pool) JobDeleteFinished(ctx context.Context, params *driver.JobDeleteFinishedParams) (int, error) {
	return call(ctx, d.Driver, func(tx *tx) (int, error) { return tx.JobDeleteFinished(ctx, params) })
}

// GroupInsert stores a new group; see driver.Executor.
func (d *pool) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.GroupInsert(ctx, params) })
}

// GroupGet returns a group; see driver.Executor.
func (d *pool) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.GroupRow, error) { return tx.GroupGet(ctx, params) })
}

// GroupUpdate changes a group atomically; see driver.Executor.
func (d *pool) GroupUpdate(ctx context.Context, params *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	return call(ctx, d.Driver, func(tx *tx) (*driver.GroupUpdateResult, error) { return tx.GroupUpdate(ctx, params) })
}

// KeySetIfAbsent stores a key unless it is held; see driver.Executor.
func (d *pool) KeySetIfAbsent(ctx context.Context, params *driver.KeySetIfAbsentParams) (bool, error) {
	return call(ctx, d.Driver, func(tx *tx) (bool, error) { return tx.KeySetIfAbsent(ctx, params) })
}

// LeaderAttempt takes or renews a leadership; see driver.Executor.
func (d *pool) LeaderAttempt(ctx context.Context, params *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*driver.LeaderRow, error) { return tx.LeaderAttempt(ctx, params) })
}

// LeaderResign gives up a leadership; see driver.Executor.
func (d *pool) LeaderResign(ctx context.Context, params *driver.LeaderResignParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.LeaderResign(ctx, params) })
}

// QueueSetPaused stores whether a queue is paused; see driver.Executor.
func (d *pool) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.QueueSetPaused(ctx, params) })
}

// QueueList returns the stored queue states; see driver.Executor.
func (d *pool) QueueList(ctx context.Context, params *driver.QueueListParams) ([]*driver.QueueRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*driver.QueueRow, error) { return tx.QueueList(ctx, params) })
}

// QueueDepthList reads the queues' backlog; see driver.Executor.
func (d *pool) QueueDepthList(ctx context.Context, params *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*driver.QueueDepthRow, error) { return tx.QueueDepthList(ctx, params) })
}

// JobWake makes waiting jobs due now; see driver.Executor.
func (d *pool) JobWake(ctx context.Context, params *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.JobRow, error) { return tx.JobWake(ctx, params) })
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
	return d.run(ctx, func(tx *tx) error { return tx.RunInsert(ctx, params) })
}

// RunGet returns a workflow run; see driver.Executor.
func (d *pool) RunGet(ctx context.Context, params *driver.RunGetParams) (*hoppertype.RunRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.RunRow, error) { return tx.RunGet(ctx, params) })
}

// RunList lists workflow runs; see driver.Executor.
func (d *pool) RunList(ctx context.Context, params *driver.RunListParams) ([]*hoppertype.RunRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.RunRow, error) { return tx.RunList(ctx, params) })
}

// RunUpdate sets a workflow run's status; see driver.Executor.
func (d *pool) RunUpdate(ctx context.Context, params *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.RunRow, error) { return tx.RunUpdate(ctx, params) })
}

// RunEventAppend appends to a run's history under its lease; see
// driver.Executor.
func (d *pool) RunEventAppend(ctx context.Context, params *driver.RunEventAppendParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.RunEventAppend(ctx, params) })
}

// RunEventList returns a run's history; see driver.Executor.
func (d *pool) RunEventList(ctx context.Context, params *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.RunEvent, error) { return tx.RunEventList(ctx, params) })
}

// HookInsert stores a waiting hook; see driver.Executor.
func (d *pool) HookInsert(ctx context.Context, params *driver.HookInsertParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.HookInsert(ctx, params) })
}

// HookGet returns a hook; see driver.Executor.
func (d *pool) HookGet(ctx context.Context, params *driver.HookGetParams) (*hoppertype.HookRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.HookRow, error) { return tx.HookGet(ctx, params) })
}

// HookResume delivers a payload to a waiting hook; see driver.Executor.
func (d *pool) HookResume(ctx context.Context, params *driver.HookResumeParams) (*hoppertype.HookRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.HookRow, error) { return tx.HookResume(ctx, params) })
}

// HookListByRun returns a run's hooks; see driver.Executor.
func (d *pool) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) ([]*hoppertype.HookRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.HookRow, error) { return tx.HookListByRun(ctx, params) })
}

// StreamAppend appends chunks to a run's stream; see driver.Executor.
func (d *pool) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) ([]*hoppertype.StreamChunk, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.StreamChunk, error) { return tx.StreamAppend(ctx, params) })
}

// StreamRead reads a run's stream; see driver.Executor.
func (d *pool) StreamRead(ctx context.Context, params *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.StreamChunk, error) { return tx.StreamRead(ctx, params) })
}

// GateInsert implements driver.Executor.
func (d *pool) GateInsert(ctx context.Context, params *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.GateRow, error) { return tx.GateInsert(ctx, params) })
}

// GateGet implements driver.Executor.
func (d *pool) GateGet(ctx context.Context, params *driver.GateGetParams) (*hoppertype.GateRow, error) {
	return call(ctx, d.Driver, func(tx *tx) (*hoppertype.GateRow, error) { return tx.GateGet(ctx, params) })
}

// GateWaitList implements driver.Executor.
func (d *pool) GateWaitList(ctx context.Context, params *driver.GateWaitListParams) ([]*hoppertype.GateWait, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*hoppertype.GateWait, error) { return tx.GateWaitList(ctx, params) })
}

// GateEdges implements driver.Executor.
func (d *pool) GateEdges(ctx context.Context, params *driver.GateEdgesParams) (map[string][]string, error) {
	return call(ctx, d.Driver, func(tx *tx) (map[string][]string, error) { return tx.GateEdges(ctx, params) })
}

// GateWatcherList implements driver.Executor.
func (d *pool) GateWatcherList(ctx context.Context, params *driver.GateWatcherListParams) ([]string, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]string, error) { return tx.GateWatcherList(ctx, params) })
}

// KeyDeleteExpired deletes expired keys; see driver.Executor.
func (d *pool) KeyDeleteExpired(ctx context.Context, params *driver.KeyDeleteExpiredParams) (int, error) {
	return call(ctx, d.Driver, func(tx *tx) (int, error) { return tx.KeyDeleteExpired(ctx, params) })
}

// GateObserve implements driver.Executor.
func (d *pool) GateObserve(ctx context.Context, params *driver.GateObserveParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.GateObserve(ctx, params) })
}

// WorkerUpsert implements driver.Executor.
func (d *pool) WorkerUpsert(ctx context.Context, params *driver.WorkerUpsertParams) error {
	return d.run(ctx, func(tx *tx) error { return tx.WorkerUpsert(ctx, params) })
}

// WorkerList implements driver.Executor.
func (d *pool) WorkerList(ctx context.Context, params *driver.WorkerListParams) ([]*driver.WorkerRow, error) {
	return call(ctx, d.Driver, func(tx *tx) ([]*driver.WorkerRow, error) { return tx.WorkerList(ctx, params) })
}

// WorkerDelete implements driver.Executor.
func (d *pool) WorkerDelete(ctx context.Context, params *driver.WorkerDeleteParams) (int, error) {
	return call(ctx, d.Driver, func(tx *tx) (int, error) { return tx.WorkerDelete(ctx, params) })
}
