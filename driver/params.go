package driver

import (
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// The arguments of the Executor's operations, one struct per operation
// (see Executor), so an argument can be added without changing the
// interface.

// JobDeleteQueueParams are the arguments of JobDeleteQueue.
type JobDeleteQueueParams struct {
	Queue string
	Limit int
}

// TxJoinParams are the arguments of TxJoin (none yet).
type TxJoinParams struct{}

// TxBeginParams are the arguments of TxBegin (none yet).
type TxBeginParams struct{}

// JobWakeParams are the arguments of JobWake.
type JobWakeParams struct {
	IDs []string
	Now time.Time
}

// NotifyParams are the arguments of Notify.
type NotifyParams struct {
	Topic   string
	Payload string
}

// JobGetParams are the arguments of JobGet and JobGetTx.
type JobGetParams struct {
	ID string
}

// JobGetManyParams are the arguments of JobGetMany.
type JobGetManyParams struct {
	IDs []string
}

// JobNextRunAtParams are the arguments of JobNextRunAt.
type JobNextRunAtParams struct {
	Queue string
}

// GroupInsertParams are the arguments of GroupInsert.
type GroupInsertParams struct {
	Row *hoppertype.GroupRow
}

// GroupGetParams are the arguments of GroupGet.
type GroupGetParams struct {
	ID string
}

// WorkerUpsertParams are the arguments of WorkerUpsert.
type WorkerUpsertParams struct {
	Row *WorkerRow
}

// WorkerListParams are the arguments of WorkerList.
type WorkerListParams struct {
	// SeenAfter is the earliest last-seen time of the workers listed.
	SeenAfter time.Time
}

// QueueListParams are the arguments of QueueList (none yet).
type QueueListParams struct{}

// QueueDepthListParams are the arguments of QueueDepthList.
type QueueDepthListParams struct {
	// Queue, when set, is the one queue to read.
	Queue string
	// Cap bounds each count (see QueueDepthList); it must be > 0.
	Cap int
	// Now tells due jobs from delayed ones.
	Now time.Time
}

// JobInsertManyParams are the jobs to insert, fully formed by the engine.
type JobInsertManyParams struct {
	Jobs []*hoppertype.JobRow
}

// JobListParams filter JobList. Empty fields do not filter.
type JobListParams struct {
	IDs      []string
	States   []hoppertype.JobState
	Types    []string
	Queues   []string
	GroupID  string
	ParentID string
	// QueuedAfter and QueuedBefore bound QueuedAt (inclusive, exclusive).
	QueuedAfter  time.Time
	QueuedBefore time.Time
	// EndedAfter and EndedBefore bound EndedAt (inclusive, exclusive); a
	// job that has not ended is left out by either.
	EndedAfter  time.Time
	EndedBefore time.Time
	// Metadata keeps the jobs whose metadata holds every key with exactly
	// its value. UniqueKey keeps the jobs with that unique key (of any
	// type). ErrorContains keeps the jobs whose last error's message
	// contains it (case-sensitive). No index serves these three: JobList
	// reads the jobs the other filters select, in id order, until the page
	// is full; JobScan reads a bounded window of them.
	Metadata      map[string]string
	UniqueKey     string
	ErrorContains string
	// SkipRunStatuses leaves out the jobs of workflow runs whose status is
	// one of these (a compensated saga's job in a dead-letter listing).
	SkipRunStatuses []hoppertype.RunStatus
	// Cursor is the id to continue after.
	Cursor    string
	Ascending bool
	// Limit caps the rows returned; it must be > 0.
	Limit int
}

// JobScanParams are the arguments of JobScan: a listing and the size of
// the window its unindexed filters search.
type JobScanParams struct {
	JobListParams
	// ScanLimit caps the jobs read when Metadata, UniqueKey or
	// ErrorContains is set; it must be > 0.
	ScanLimit int
}

// JobScanResult is what JobScan found.
type JobScanResult struct {
	Jobs []*hoppertype.JobRow
	// Next, when set, is the id of the last job of a window that ended
	// before Limit jobs matched: the Cursor to search on from.
	Next string
}

// Unindexed reports whether p filters on what no index serves (Metadata,
// UniqueKey, ErrorContains): what JobScan bounds.
func (p *JobListParams) Unindexed() bool {
	return len(p.Metadata) > 0 || p.UniqueKey != "" || p.ErrorContains != ""
}

// Indexed returns p without its unindexed filters: the jobs a JobScan's
// window is taken from.
func (p *JobListParams) Indexed() JobListParams {
	q := *p
	q.Metadata, q.UniqueKey, q.ErrorContains = nil, "", ""
	return q
}

// JobCountParams filter JobCountByState; an empty Queue counts every queue.
// GroupID counts the jobs of one fan-out group (its root among them) and
// Limit, with GroupID, counts at most that many of them, the first in id
// order (0: all).
type JobCountParams struct {
	Queue   string
	GroupID string
	Limit   int
}

// JobClaimParams are the arguments of JobClaim.
type JobClaimParams struct {
	Queue          string
	Types          []string
	Limit          int
	Now            time.Time
	LeaseExpiresAt time.Time
	Worker         string
}

// JobPromoteParams are the arguments of JobPromote.
type JobPromoteParams struct {
	Now   time.Time
	Limit int
}

// JobHeartbeatParams are the arguments of JobHeartbeat.
type JobHeartbeatParams struct {
	Leases    []Lease
	ExpiresAt time.Time
	// Message, when set, is recorded for each lease still held as a
	// heartbeat change in the change feed (hoppertype.Change.Detail), in
	// the heartbeat's transaction. Heartbeats without a message write no
	// change.
	Message string
}

// JobFinishManyParams are the transitions of JobFinishMany.
type JobFinishManyParams struct {
	Items []JobFinishParams
}

// JobFinishParams is one worker transition: the new values of the job's
// mutable fields. The lease is always released (token kept, expiry and worker
// cleared).
type JobFinishParams struct {
	ID         string
	LeaseToken int64
	// RequireLeaseExpiredBefore, when set, makes the write apply only if the
	// lease expires before this time (used by the rescuer, so a heartbeat that
	// landed in between wins).
	RequireLeaseExpiredBefore time.Time

	State   hoppertype.JobState
	Attempt int
	RunAt   time.Time
	// Result replaces the stored result (nil clears it).
	Result []byte
	// Error replaces the stored error (nil clears it).
	Error   *hoppertype.ErrorInfo
	EndedAt time.Time
	Stuck   *hoppertype.StuckInfo

	// Claimed, when set, is the job's row as the caller read it while
	// holding LeaseToken (its claim). A driver may build the finished row
	// from it instead of reading the row back: every column keeps its
	// claimed value except those the transition sets (above, and the
	// lease's expiry and worker, cleared) and those another caller may
	// change under a held lease (CancelRequested), which it must read. A
	// Claimed whose ID or LeaseToken differ from the item's is ignored, as
	// is Claimed by a driver that reads the row back anyway. The driver
	// does not keep or change it.
	Claimed *hoppertype.JobRow
}

// JobListExpiredLeasesParams are the arguments of JobListExpiredLeases.
type JobListExpiredLeasesParams struct {
	Now   time.Time
	Limit int
	// Workers, when set, adds the running jobs these workers hold,
	// whatever their lease's expiry: workers known to be dead, whose jobs
	// need not wait for their leases to lapse.
	Workers []string
}

// JobCancelParams are the arguments of JobCancel.
type JobCancelParams struct {
	ID    string
	Now   time.Time
	Error *hoppertype.ErrorInfo
}

// JobRetryParams select the jobs JobRetry moves back to pending.
type JobRetryParams struct {
	IDs    []string
	Type   string
	All    bool
	States []hoppertype.JobState
	// SkipRunStatuses leaves out the jobs of workflow runs whose status is
	// one of these (a compensated saga's job in a redrive of dead letters).
	SkipRunStatuses []hoppertype.RunStatus
	Now             time.Time
	Limit           int
}

// JobDeleteFinishedParams are the arguments of JobDeleteFinished.
type JobDeleteFinishedParams struct {
	States []hoppertype.JobState
	Before time.Time
	Limit  int
	// IDs, when set, narrows the deletion to these jobs; Before then
	// bounds EndedAt only when it is not zero.
	IDs []string
}

// GroupUpdateParams change a group. When Contribute is set and the group is
// not final, the value becomes Fold(existing, set) if Fold is non-nil, else
// Value; Final then locks it. The driver calls Fold while it holds the group
// row, so folds are exact under concurrency; an error from Fold fails the
// update.
type GroupUpdateParams struct {
	ID         string
	OpenDelta  int
	Contribute bool
	Value      []byte
	Final      bool
	Fold       func(existing []byte, set bool) ([]byte, error)
	Now        time.Time
}

// KeyDeleteExpiredParams are the arguments of KeyDeleteExpired.
type KeyDeleteExpiredParams struct {
	Before time.Time
	Limit  int
}

// KeySetIfAbsentParams are the arguments of KeySetIfAbsent.
type KeySetIfAbsentParams struct {
	Key   string
	Value []byte
	Now   time.Time
	// ExpiresAt, when set, lets the key be taken again after that time.
	ExpiresAt time.Time
}

// LeaderAttemptParams are the arguments of LeaderAttempt.
type LeaderAttemptParams struct {
	Name  string
	Owner string
	Now   time.Time
	TTL   time.Duration
}

// WorkerDeleteParams are the arguments of WorkerDelete.
type WorkerDeleteParams struct {
	ID     string
	Before time.Time
	// ChangesBefore, when set, also deletes the feed's worker and schedule
	// changes written before it (retention of changes that have no job).
	ChangesBefore time.Time
	// TransitionsOlderThan, when set, also deletes the jobs' changes that
	// the store keeps apart from their jobs and wrote longer ago than it,
	// by the store's own clock, which stamped them (PostgreSQL's change
	// sets, one row for a statement's transitions: they go by age, not
	// with each job). A store that deletes a job's changes with the job
	// ignores it.
	TransitionsOlderThan *time.Duration
}

// LeaderResignParams are the arguments of LeaderResign.
type LeaderResignParams struct {
	Name  string
	Owner string
}

// QueueSetPausedParams are the arguments of QueueSetPaused.
type QueueSetPausedParams struct {
	Name   string
	Paused bool
	Now    time.Time
}
