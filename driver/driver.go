// Package driver is hopper's storage port: the one interface every store
// implements (memory, SQLite, PostgreSQL), in the way database/sql/driver
// serves database/sql.
//
// A driver implements semantic, atomic operations — insert jobs, claim due
// jobs under a lease, heartbeat leases, finish attempts with a compare-and-set
// on the lease token, update groups, set-if-absent keys, elect a leader — and
// a transaction (InTx) in which the engine composes them, so a transition and
// all of its effects commit together or not at all.
//
// Every driver passes the conformance suite in package drivertest.
//
// Conventions:
//   - Methods are Noun+Verb. Every operation on the store takes ctx (and,
//     for the methods that work through a caller's transaction, that
//     transaction) and then one *Params struct, even when the struct has
//     no fields yet, so an argument can be added later without changing
//     the interface. Only InTx (which runs a function, not an operation),
//     Driver.Listen (a subscription, not an operation on rows) and
//     Pinger.Ping (a health check) take their arguments as they are.
//   - A row that does not exist is hoppertype.ErrNotFound.
//   - Times are passed in by the caller (the engine's clock) and stored with
//     microsecond precision; a driver never reads the wall clock for job
//     timing.
//   - A capability a driver lacks returns ErrNotImplemented.
//
// # Gates
//
// A gate is a job (its firing runs as an attempt, under a lease) plus a gate
// row that counts the jobs it watches: how many it saw terminal and how
// many succeed. The counts are kept by the transitions themselves: whenever
// JobFinishMany, JobCancel or JobRetry moves a job into or out of a
// terminal state, every gate watching that job records the state it now
// observes (GateObserved), adjusts its counts (GateDelta) and, when
// GateWakes says so, wakes its job (GateWake, notified on
// TopicJobAvailable) — all in the transition's transaction, so the gate that
// a transition completes is woken exactly by it, under any concurrency. A
// store with concurrent writers makes GateInsert read the watched jobs'
// states under a lock that those transitions respect, so a gate inserted
// beside a finishing job never misses it. Observed states outlive the jobs
// (retention deletes jobs, not what gates saw of them).
//
// # Change feed
//
// Every state transition of a job or gate (a change of its State, including
// its insert) and of a workflow run (a change of its Status, including its
// insert) writes a hoppertype.Change in the transition's own transaction:
// the store's outbox. Changes of a job are deleted with the job (and a
// run's with it, by retention). A change is final when no transaction that
// could still commit an earlier one in delivery order is running; only
// final changes are listed in feed order, so a reader that moves a cursor
// through them never skips one. Feed cursors (CursorLease, CursorAdvance)
// record, per observer name, how far delivery got, under a lease so that
// one process at a time delivers a name's changes.
package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// ErrNotImplemented is returned by a driver for an operation it does not
// support. The conformance suite reports such operations; it does not pass
// them silently.
var ErrNotImplemented = errors.New("hopper driver: not implemented")

// ErrTxType is returned by TxInserter when the transaction passed in is not
// one the driver can write through.
var ErrTxType = errors.New("hopper driver: unsupported transaction type")

// ErrClosed is returned by a driver after Close.
var ErrClosed = errors.New("hopper driver: closed")

// ErrNoDatabase is returned when a driver told to open only an existing
// store (the MustExist option of sqlitedriver and pgdriver) finds no file,
// or a file or schema without hopper's tables.
var ErrNoDatabase = errors.New("no hopper database")

// Notification topics the engine uses. An empty payload on any topic means
// "something may have changed, look again": a driver that learns of changes
// made by another process without knowing which (SQLite's data_version, say)
// sends it.
const (
	// TopicJobAvailable announces new due jobs; the payload is the queue name
	// (empty: any queue), or the queue name, a comma and an id of the client
	// that sent it, so that client can skip the echo of its own enqueue.
	TopicJobAvailable = "hopper_job_available"
	// TopicJobDone announces jobs that reached a terminal state; the payload is
	// a comma-separated list of job ids.
	TopicJobDone = "hopper_job_done"
	// TopicGroupDone announces settled groups; the payload is a comma-separated
	// list of group ids.
	TopicGroupDone = "hopper_group_done"
	// TopicJobCancel asks the worker running a job to cancel it; the payload is
	// the job id.
	TopicJobCancel = "hopper_job_cancel"
)

// Driver is a store for hopper.
type Driver interface {
	// Executor returns the executor that runs the store's operations, each
	// atomic on its own, or together in its InTx. It is the same value at
	// every call.
	Executor() Executor

	// Name is a short name for logs and metrics: "memory", "sqlite", "postgres".
	Name() string

	// Listen subscribes to notifications on topic (see Executor.Notify).
	// Notifications are hints: a driver may drop or coalesce them, so the
	// engine always keeps a poll fallback. The subscription ends when ctx is
	// done or Close is called on it. Listen takes no params struct: it opens
	// a subscription and reads or writes no rows.
	Listen(ctx context.Context, topic string) (Subscription, error)

	// Close releases the driver's resources. Operations after Close return
	// ErrClosed.
	Close() error
}

// Subscription delivers notifications for one topic.
type Subscription interface {
	// C delivers payloads. It is closed when the subscription ends.
	C() <-chan string
	// Close ends the subscription.
	Close()
}

// QueueDeleter is implemented by drivers that delete a queue's jobs at
// once: a tool that filled a queue of its own (hopper bench) removes what it
// made with it.
type QueueDeleter interface {
	// JobDeleteQueue deletes jobs of Queue in any state but running, at
	// most Limit (0: no limit), with what is kept beside them (a workflow
	// run's row, history, hooks and stream, a gate's rows, their changes),
	// and returns how many jobs it deleted.
	JobDeleteQueue(ctx context.Context, params *JobDeleteQueueParams) (int, error)
}

// TxInserter is implemented by drivers that can insert jobs inside a caller's
// own database transaction, so a job exists if and only if the caller's data
// committed (transactional enqueue).
type TxInserter interface {
	// JobInsertManyTx inserts jobs through tx. It returns an error wrapping
	// ErrTxType when tx is not a transaction the driver can use. A
	// duplicate id is hoppertype.ErrDuplicateID, found before anything is
	// written, so the caller's transaction stays usable (a concurrent
	// insert of the same id may still fail it on a store that aborts a
	// transaction on a failed statement).
	JobInsertManyTx(ctx context.Context, tx any, params *JobInsertManyParams) ([]JobInsertResult, error)

	// JobGetTx reads the job ID through tx, seeing what tx wrote; a
	// missing job is hoppertype.ErrNotFound, and tx as for JobInsertManyTx.
	JobGetTx(ctx context.Context, tx any, params *JobGetParams) (*hoppertype.JobRow, error)

	// RunStartInTx is RunStart through tx (as for JobInsertManyTx): the run
	// and its job exist if and only if tx commits. existing reports a run
	// already stored under the id, in which case nothing is written.
	RunStartInTx(ctx context.Context, tx any, params *RunStartParams) (existing bool, err error)
}

// TxJoiner is implemented by drivers whose operations can run through an
// application's own transaction on the store, so that the application's
// writes and hopper's commit together or not at all: a job finished in the
// transaction that wrote its effect, a workflow step's effect and its
// history record. memdriver does not implement it.
type TxJoiner interface {
	// TxJoin returns tx, an open transaction of the application on this
	// store (of a kind TxInserter takes), as an AppTx whose Executor runs
	// operations through it. tx of another kind is an error wrapping
	// ErrTxType. The application commits or rolls back tx itself (or
	// through the AppTx); the Executor must not be used after that.
	TxJoin(ctx context.Context, tx any, params *TxJoinParams) (*AppTx, error)

	// TxBegin begins a transaction on the store of the kind TxJoin takes,
	// for the application to write through (AppTx.Tx) beside hopper's
	// operations (AppTx.Executor), and to end with AppTx.Commit or
	// AppTx.Rollback. It must not wait for a transaction of the driver's
	// own that waits for it: on a store with a single writer, the writer
	// waits for the application's transaction instead.
	TxBegin(ctx context.Context, params *TxBeginParams) (*AppTx, error)
}

// AppTx is an application's transaction joined by a driver (TxJoiner).
type AppTx struct {
	// Tx is the transaction as the application holds it: a *sql.Tx for
	// SQLite; a pgx.Tx (TxBegin's kind) or a *sql.Tx opened through pgx's
	// database/sql driver for PostgreSQL.
	Tx any
	// Executor runs the store's operations through Tx. InTx on it is a
	// savepoint. Its writes commit with Tx; its notifications (Notify, and
	// those the operations send) are delivered only if Tx commits: with
	// it, where they travel in Tx, else by Commit (see Pending).
	Executor Executor
	// Bind, when set, returns ctx marked as the context of work done inside
	// Tx: a write the driver would make outside Tx under it, which would
	// wait for Tx to end (a store with a single writer), fails at once
	// instead of deadlocking.
	Bind func(ctx context.Context) context.Context
	// Pending, when set, returns the notifications made through Executor
	// that the driver holds for Commit to deliver: an application that
	// commits Tx itself sends them once it knows Tx committed. It is nil
	// where notifications travel in Tx (PostgreSQL's NOTIFY).
	Pending func() []NotifyParams
	// Commit commits Tx (and then delivers the notifications the driver
	// holds). An error may leave it unknown whether Tx committed.
	Commit func(ctx context.Context) error
	// Rollback rolls Tx back; on a transaction that has ended already it
	// is a no-op that may return an error.
	Rollback func(ctx context.Context) error
}

// Executor runs operations, either on their own (each one atomic) or inside a
// transaction begun with InTx.
type Executor interface {
	// InTx runs fn in a transaction: every write made through tx commits
	// together when fn returns nil, or none of them does when it returns an
	// error (which InTx returns). Called on a transaction's executor, InTx
	// opens a nested scope (a savepoint): an error rolls back only the writes
	// made inside it. fn must use tx, never the outer executor, and must not
	// block on other work of the same driver. InTx takes no params struct:
	// it is not an operation on the store but the scope operations run in.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Executor) error) error

	// Notify publishes Payload on Topic. Inside a transaction it is
	// delivered only if and after the transaction commits.
	Notify(ctx context.Context, params *NotifyParams) error

	// JobInsertMany inserts jobs in the order given. A job with a UniqueKey
	// whose (Type, UniqueKey) matches a non-terminal job already stored (or
	// one earlier in the same call) is not inserted: its result holds the
	// existing job and Existing is set. An id that already exists fails the
	// call with hoppertype.ErrDuplicateID and inserts nothing.
	JobInsertMany(ctx context.Context, params *JobInsertManyParams) ([]JobInsertResult, error)

	// JobGet returns the job ID or hoppertype.ErrNotFound.
	JobGet(ctx context.Context, params *JobGetParams) (*hoppertype.JobRow, error)

	// JobGetMany returns the jobs that exist among IDs, in the order of
	// IDs; missing ids are skipped.
	JobGetMany(ctx context.Context, params *JobGetManyParams) ([]*hoppertype.JobRow, error)

	// JobList returns jobs matching the filter, ordered by id (descending
	// unless Ascending), at most Limit, starting after Cursor.
	JobList(ctx context.Context, params *JobListParams) ([]*hoppertype.JobRow, error)

	// JobScan is JobList with its work bounded. When a filter no index
	// serves is set (Metadata, UniqueKey, ErrorContains), it reads at most
	// ScanLimit (> 0) of the jobs that the other filters select, after
	// Cursor in the listing's order — the window — and returns those of
	// them that pass those three filters too, at most Limit. When fewer
	// than Limit match and the window held ScanLimit jobs, Next is the id
	// of the window's last job: a search goes on with it as Cursor. Next
	// is empty otherwise (the page is full, and goes on from its last job,
	// or no job follows the window). Without those three filters JobScan
	// is JobList, Next empty.
	JobScan(ctx context.Context, params *JobScanParams) (*JobScanResult, error)

	// JobCountByState counts jobs per queue and state, ordered as
	// SortJobCounts orders them.
	JobCountByState(ctx context.Context, params *JobCountParams) ([]JobCount, error)

	// JobClaim first makes due jobs of the queue pending (scheduled or
	// retrying jobs whose RunAt <= Now), then claims up to Limit pending jobs
	// of the queue whose type is in Types (any type when Types is empty),
	// highest priority first, then earliest RunAt, then id. A job with a
	// ConcurrencyKey is claimed only while fewer than its ConcurrencyLimit
	// jobs with that key are running, counted across every claimer of the
	// store (a job it passes over stays pending, and the claim goes on to
	// the jobs after it). Each claimed job
	// becomes running with Attempt+1, a new LeaseToken, Worker, StartedAt =
	// the later of Now and its RunAt, and a lease that runs from that
	// start: LeaseExpiresAt, or, for a job due after Now (made pending by
	// another process after this claimer read its clock), RunAt +
	// (LeaseExpiresAt − Now). A paused queue yields no jobs. The returned
	// jobs are in claim order.
	JobClaim(ctx context.Context, params *JobClaimParams) ([]*hoppertype.JobRow, error)

	// JobPromote makes due scheduled and retrying jobs pending in every queue
	// (at most Limit) and returns how many it moved.
	JobPromote(ctx context.Context, params *JobPromoteParams) (int, error)

	// JobNextRunAt returns the earliest RunAt among the scheduled and retrying
	// jobs of Queue, or the zero time when there are none.
	JobNextRunAt(ctx context.Context, params *JobNextRunAtParams) (time.Time, error)

	// JobHeartbeat extends the leases still held (running, same token) to
	// ExpiresAt and reports for each lease, in the order given, whether it is
	// held and whether a cancel was requested.
	JobHeartbeat(ctx context.Context, params *JobHeartbeatParams) ([]JobHeartbeatResult, error)

	// JobFinishMany applies workers' transitions (and, like JobCancel and
	// JobRetry, updates the gates watching the jobs it moves into or out of
	// a terminal state; see "Gates"). Each item is a
	// compare-and-set: it applies only if the job is running with the item's
	// LeaseToken (and, when RequireLeaseExpiredBefore is set, its lease
	// expires before that time); otherwise the item's result carries
	// hoppertype.ErrLeaseLost and nothing changes for it. Items are
	// independent: one lost item does not fail the others.
	JobFinishMany(ctx context.Context, params *JobFinishManyParams) ([]JobFinishResult, error)

	// JobListExpiredLeases returns running jobs whose lease expired before Now,
	// and those Workers hold whatever their leases (at most Limit, each
	// once), oldest expiry first.
	JobListExpiredLeases(ctx context.Context, params *JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error)

	// JobCancel cancels a job. A waiting or stuck job becomes cancelled (its
	// EndedAt = Now and Error set to ErrorInfo); a running job keeps running
	// with CancelRequested set. A terminal job is left as it is and the call
	// returns it with hoppertype.ErrStateConflict.
	JobCancel(ctx context.Context, params *JobCancelParams) (*hoppertype.JobRow, error)

	// JobRetry moves jobs back to pending as fresh jobs (Attempt 0, RunAt =
	// Now, no lease, no result, EndedAt cleared, CancelRequested and Stuck
	// cleared, a Deadline at or before Now cleared; the last error is kept). It
	// takes the jobs named by IDs, or of Type, or all when All is set, whose
	// state is in States, at most Limit (0 = no limit). A job whose unique key
	// is held by another non-terminal job is skipped. When IDs is set, Type
	// and All are ignored. CancelRequested survives claims and transitions
	// until JobRetry clears it.
	JobRetry(ctx context.Context, params *JobRetryParams) ([]JobRetryResult, error)

	// JobDeleteFinished deletes terminal jobs of the given States whose EndedAt
	// is before Before, at most Limit, and returns how many it deleted. With
	// IDs set it deletes only those of the ids that match (a zero Before then
	// bounds nothing): non-terminal jobs among them stay. A deleted job that is a workflow run takes its run row, history, hooks
	// and stream chunks with it; a settled group whose last jobs it deleted
	// (no job with that GroupID remains) takes its group row.
	JobDeleteFinished(ctx context.Context, params *JobDeleteFinishedParams) (int, error)

	// GroupInsert stores Row, a new group; an existing id is
	// hoppertype.ErrDuplicateID.
	GroupInsert(ctx context.Context, params *GroupInsertParams) error

	// GroupGet returns the group ID or hoppertype.ErrNotFound.
	GroupGet(ctx context.Context, params *GroupGetParams) (*hoppertype.GroupRow, error)

	// GroupUpdate changes a group atomically (exact under concurrency): it
	// applies a contribution (see GroupUpdateParams), adds OpenDelta to Open,
	// settles the group when Open drops to 0 and reopens a settled group when
	// Open rises above 0.
	GroupUpdate(ctx context.Context, params *GroupUpdateParams) (*GroupUpdateResult, error)

	// KeySetIfAbsent stores Key unless it exists and has not expired; it
	// reports whether it stored it. It is the fleet-wide "once" primitive.
	KeySetIfAbsent(ctx context.Context, params *KeySetIfAbsentParams) (bool, error)

	// KeyDeleteExpired deletes keys whose expiry is before Before (keys
	// without an expiry are kept), at most Limit (0 = no limit), and
	// returns how many it deleted.
	KeyDeleteExpired(ctx context.Context, params *KeyDeleteExpiredParams) (int, error)

	// LeaderAttempt takes or renews the named leadership for Owner until
	// Now+TTL when it is free, expired or already Owner's, and returns the
	// current holder either way. The term increases each time the holder
	// changes (a fencing token).
	LeaderAttempt(ctx context.Context, params *LeaderAttemptParams) (*LeaderRow, error)

	// LeaderResign gives up the named leadership if Owner holds it. Terms stay
	// monotonic across resignations: the next holder's term is higher.
	LeaderResign(ctx context.Context, params *LeaderResignParams) error

	// WorkerUpsert stores or refreshes Row, a worker process's row (its id,
	// the time it started, the time it was last seen, and what it reports).
	WorkerUpsert(ctx context.Context, params *WorkerUpsertParams) error

	// WorkerList returns the workers seen at or after SeenAfter, by id.
	WorkerList(ctx context.Context, params *WorkerListParams) ([]*WorkerRow, error)

	// WorkerDelete removes the named worker, or, with an empty ID, every
	// worker last seen before Before; it returns how many it removed.
	WorkerDelete(ctx context.Context, params *WorkerDeleteParams) (int, error)

	// QueueSetPaused stores whether a queue is paused.
	QueueSetPaused(ctx context.Context, params *QueueSetPausedParams) error

	// QueueList returns the queues that have a stored state, by name.
	QueueList(ctx context.Context, params *QueueListParams) ([]*QueueRow, error)

	// QueueDepthList reads the backlog of queues at a cost bounded by Cap
	// (and by the running jobs), not by the jobs stored: the store walks
	// the indexes the claim reads, never the whole table. For each queue
	// it returns the due jobs (pending, and scheduled or retrying whose
	// RunAt <= Now) and the delayed ones (scheduled or retrying, RunAt
	// after Now), each counted up to Cap+1, so Cap+1 means more than Cap;
	// the running jobs, all counted (their number is bounded by the
	// workers' slots, not by the backlog); and OldestDueAt, the earliest
	// RunAt among the due jobs (zero when none is due; a store may read
	// the pending jobs of the Cap+1 highest priorities only). Stuck and
	// terminal jobs are not read. With Queue it returns that queue alone
	// (a row of zeros when it holds nothing); without, every queue that
	// holds a due, delayed or running job or has a stored state
	// (QueueSetPaused), by name.
	QueueDepthList(ctx context.Context, params *QueueDepthListParams) ([]*QueueDepthRow, error)

	// ScheduleUpsert stores a schedule's registration: it creates the
	// schedule's row (not paused, no occurrences, FirstSeenAt = Now) or sets
	// its Spec, NextAt and UpdatedAt (and FirstSeenAt when it has none),
	// leaving Paused, Occurrences, LastAt and FirstSeenAt as they are. It
	// returns the row's FirstSeenAt (zero when it wrote nothing).
	// A stored NextAt later than the new one is kept when Spec is
	// unchanged: another process recorded an occurrence already (the
	// registration's NextAt may be an occurrence it fired). The Spec of a
	// row with a definition (ScheduleDefine) is left as it is. With Stored,
	// only a row with the definition of Version is updated, and none is
	// created.
	ScheduleUpsert(ctx context.Context, params *ScheduleUpsertParams) (firstSeen time.Time, err error)

	// ScheduleRecord records that an occurrence of the named schedule, at
	// At, fired: unless the schedule is paused it counts one occurrence and
	// sets LastAt; either way it sets Spec (not on a row with a
	// definition), NextAt and UpdatedAt. It creates the row if missing, and
	// reports whether the schedule is paused (then the occurrence was not
	// counted); a row it creates, or that has no FirstSeenAt, gets Now.
	// With Stored, a row without the definition of Version (it was deleted
	// or defined again) is hoppertype.ErrNotFound, and nothing is written.
	ScheduleRecord(ctx context.Context, params *ScheduleRecordParams) (paused bool, err error)

	// ScheduleDefine stores a schedule defined in the store (not in a
	// program's code): it creates the row or sets its Def, Spec (Def.Spec),
	// NextAt and UpdatedAt (and FirstSeenAt = Now when it has none),
	// leaving Paused, Occurrences and LastAt as they are. A row that
	// belongs to a schedule
	// in code (no definition, and a Spec, a NextAt, a LastAt or
	// occurrences) is left alone: hoppertype.ErrStateConflict.
	ScheduleDefine(ctx context.Context, params *ScheduleDefineParams) error

	// ScheduleSetPaused stores whether a schedule is paused, creating its
	// row if missing (without a FirstSeenAt: pausing a name is not seeing
	// the schedule).
	ScheduleSetPaused(ctx context.Context, params *ScheduleSetPausedParams) error

	// ScheduleList returns the stored schedules, by name.
	ScheduleList(ctx context.Context, params *ScheduleListParams) ([]*ScheduleRow, error)

	// ScheduleDelete removes the stored row of the schedule Name, reporting
	// whether there was one.
	ScheduleDelete(ctx context.Context, params *ScheduleDeleteParams) (bool, error)

	// JobWake makes the named jobs that wait (scheduled or retrying) due
	// now: pending with RunAt = Now. Jobs in any other state are left as
	// they are. It returns the jobs it woke. It is how a waiting workflow
	// run is resumed by a hook, a child or an activity.
	JobWake(ctx context.Context, params *JobWakeParams) ([]*hoppertype.JobRow, error)

	// RunInsert stores Row, a new workflow run; an existing id is
	// hoppertype.ErrDuplicateID. (The run's job is inserted beside it with
	// JobInsertMany, in the same transaction.)
	RunInsert(ctx context.Context, params *RunInsertParams) error

	// RunStart stores a new run and its job (Job.ID = Run.ID) atomically,
	// as RunInsert then JobInsertMany would, and notifies TopicJobAvailable
	// with the job's queue when the job is pending, delivered with the
	// commit. When the run's id exists, nothing is written and existing is
	// true. RunStartTx implements it from the other operations.
	RunStart(ctx context.Context, params *RunStartParams) (existing bool, err error)

	// RunGet returns the run ID or hoppertype.ErrNotFound.
	RunGet(ctx context.Context, params *RunGetParams) (*hoppertype.RunRow, error)

	// RunLoad returns the run ID and its whole history, as RunGet and
	// RunEventList would (in one round trip where the store can), or
	// hoppertype.ErrNotFound. RunLoadSeq implements it from those two.
	RunLoad(ctx context.Context, params *RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error)

	// RunList returns runs matching the filter, newest CreatedAt first (ties
	// by id, descending), skipping Offset and returning at most Limit.
	RunList(ctx context.Context, params *RunListParams) ([]*hoppertype.RunRow, error)

	// RunUpdate sets a run's status (and, when given, its error and end
	// time; UpdatedAt = Now). With ExpectStatuses set it applies only when
	// the run's status is one of them, else it returns the run with
	// hoppertype.ErrStateConflict. A missing run is hoppertype.ErrNotFound.
	RunUpdate(ctx context.Context, params *RunUpdateParams) (*hoppertype.RunRow, error)

	// RunEventAppend appends events to a run's history, fenced by the run's
	// lease: it applies only if the job with the run's id is running under
	// LeaseToken, else it returns hoppertype.ErrLeaseLost and writes nothing.
	// An event whose (RunID, Attempt, Seq) exists fails the call with
	// hoppertype.ErrDuplicateID and writes nothing.
	RunEventAppend(ctx context.Context, params *RunEventAppendParams) error

	// RunEventAppendMany makes appends to distinct runs, each with
	// RunEventAppend's fence and outcome: errs[i] is Events[i]'s (nil,
	// ErrLeaseLost or ErrDuplicateID), in one statement where the store can.
	// err fails the whole call, and then none of the appends applied.
	// RunEventAppendManyTx implements it from RunEventAppend.
	RunEventAppendMany(ctx context.Context, params *RunEventAppendManyParams) (errs []error, err error)

	// RunEventList returns a run's history in (Attempt, Seq) order; with
	// Attempt > 0 only that attempt's events.
	RunEventList(ctx context.Context, params *RunEventListParams) ([]*hoppertype.RunEvent, error)

	// HookInsert stores Row, a waiting hook; an existing token is
	// hoppertype.ErrDuplicateID.
	HookInsert(ctx context.Context, params *HookInsertParams) error

	// HookGet returns the hook Token or hoppertype.ErrNotFound.
	HookGet(ctx context.Context, params *HookGetParams) (*hoppertype.HookRow, error)

	// HookResume delivers a payload to a waiting hook: it becomes resumed
	// with Payload and ResumedAt = Now and is returned. A hook already
	// resumed is returned unchanged with hoppertype.ErrStateConflict; a
	// missing one is hoppertype.ErrNotFound.
	HookResume(ctx context.Context, params *HookResumeParams) (*hoppertype.HookRow, error)

	// HookListByRun returns the hooks of the run RunID by creation time,
	// then token.
	HookListByRun(ctx context.Context, params *HookListByRunParams) ([]*hoppertype.HookRow, error)

	// StreamAppend appends chunks to a run's stream and returns them with
	// their offsets (consecutive, from 0 for a run's first chunk).
	StreamAppend(ctx context.Context, params *StreamAppendParams) ([]*hoppertype.StreamChunk, error)

	// StreamRead returns a run's chunks with Offset >= From, in order, at
	// most Limit.
	StreamRead(ctx context.Context, params *StreamReadParams) ([]*hoppertype.StreamChunk, error)

	// GateInsert stores gates (see "Gates" in the package doc). Each gate
	// watches the distinct ids of its On and will queue the ids of its
	// Queues when it fires; its counts start from the states the watched
	// jobs have now (a job not stored yet is not done). The gate's job (a
	// job with the gate's id) is stored first, in the same transaction. A
	// gate whose condition is already met or impossible has its job woken as
	// a transition would. An existing gate id, or a queued id another gate
	// already queues, fails the call with hoppertype.ErrDuplicateID and
	// stores nothing. It returns the gates stored, in order.
	GateInsert(ctx context.Context, params *GateInsertParams) ([]*hoppertype.GateRow, error)

	// GateGet returns the gate ID or hoppertype.ErrNotFound.
	GateGet(ctx context.Context, params *GateGetParams) (*hoppertype.GateRow, error)

	// GateWaitList returns the jobs the gate GateID watches with the
	// states it observed, by job id.
	GateWaitList(ctx context.Context, params *GateWaitListParams) ([]*hoppertype.GateWait, error)

	// GateObserve records the states of the given jobs in the gates watching
	// them, as their transitions would have (and wakes the gates that this
	// decides, at Now). A recheck uses it to repair an observation a
	// transition could not make: a job inserted and finished while a gate
	// watching it was being inserted, in a store with concurrent writers.
	GateObserve(ctx context.Context, params *GateObserveParams) error

	// ChangeList reads the change feed (see "Change feed"). With EntityID
	// it returns that entity's changes by Position (after After.Position);
	// with Own, the changes the current transaction wrote with Position
	// after After.Position (on a driver outside a transaction, none);
	// otherwise the final changes after After in delivery order, (Tx,
	// Position). At most Limit (> 0) in each mode.
	ChangeList(ctx context.Context, params *ChangeListParams) ([]*hoppertype.Change, error)

	// ChangeListBefore reads the feed backwards: the final changes before
	// Before in delivery order, newest first, at most Limit (> 0). A
	// reader walks back through the history the store kept from a cursor
	// it holds (ChangeTail's, say) by passing the last change's cursor
	// back; the changes' At follow that order only roughly (a change's
	// place is its transaction's, its At the time of its statement).
	ChangeListBefore(ctx context.Context, params *ChangeListBeforeParams) ([]*hoppertype.Change, error)

	// ChangeScan reads the next Limit (> 0) final changes of the feed after
	// After, in delivery order, and returns those that pass the filter
	// (empty fields do not filter) with Next: the cursor of the last change
	// it read, matching or not (After when there was none). A reader that
	// wants few changes so skips the others without fetching them. A driver
	// that can skip the changes the filter refuses without reading them (an
	// index of stuck changes, say) may return a Next further on: the cursor
	// of a final change, with every change up to it that passes the filter
	// returned (at most Limit).
	ChangeScan(ctx context.Context, params *ChangeScanParams) (*ChangeScanResult, error)

	// ChangeTail returns the cursor of the last final change of the feed
	// (the zero cursor when there is none): reading after it gives only
	// changes made from now on.
	ChangeTail(ctx context.Context, params *ChangeTailParams) (hoppertype.ChangeCursor, error)

	// ChangeMark returns a Position to list a transaction's own changes
	// after (ChangeListParams.Own): taken at the start of a transaction,
	// every change the transaction writes next comes after it.
	ChangeMark(ctx context.Context, params *ChangeMarkParams) (int64, error)

	// CursorLease takes or renews the named feed cursor for Owner until
	// Now+TTL when it is free, expired or already Owner's, creating it at
	// the start of the feed if it does not exist, and returns it either
	// way (held by Owner or not).
	CursorLease(ctx context.Context, params *CursorLeaseParams) (*CursorRow, error)

	// CursorAdvance moves the named cursor forward to At and extends its
	// lease to Now+TTL, if Owner holds it unexpired; otherwise it returns
	// hoppertype.ErrLeaseLost and changes nothing. A cursor never moves
	// back: an At before the stored one leaves it where it is.
	CursorAdvance(ctx context.Context, params *CursorAdvanceParams) error

	// CursorList returns the feed cursors by name.
	CursorList(ctx context.Context, params *CursorListParams) ([]*CursorRow, error)

	// GateEdges returns, for each of IDs that has any, the ids it waits on
	// in the graph of gates: for a gate, the jobs it watches; for a job that
	// a gate will queue, that gate. It is what cycle detection walks.
	GateEdges(ctx context.Context, params *GateEdgesParams) (map[string][]string, error)

	// GateWatcherList returns the ids of the gates that watch the job
	// JobID, in id order, at most Limit (> 0). It reads the same waits
	// GateWaitList does, from the job's side: a gate watching a job not
	// stored yet, or one retention deleted, is listed too.
	GateWatcherList(ctx context.Context, params *GateWatcherListParams) ([]string, error)
}

// QueueDepthRow is one queue's backlog (see QueueDepthList).
type QueueDepthRow struct {
	Queue string
	// Due and Delayed are counted up to Cap+1; Running is exact.
	Due, Delayed, Running int
	// OldestDueAt is the earliest RunAt of a due job; zero when none is.
	OldestDueAt time.Time
}

// MergeLeases merges two listings of running jobs (expired leases, and the
// jobs of dead workers) into one, each job once, by lease expiry then id,
// at most limit (no limit when limit <= 0): JobListExpiredLeases's order.
func MergeLeases(a, b []*hoppertype.JobRow, limit int) []*hoppertype.JobRow {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.ContainsFunc(out, func(x *hoppertype.JobRow) bool { return x.ID == r.ID }) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y *hoppertype.JobRow) int {
		if c := x.LeaseExpiresAt.Compare(y.LeaseExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// SortJobCounts puts counts in the order JobCountByState returns them: by
// queue, then by state in hoppertype.JobStates() order.
func SortJobCounts(counts []JobCount) {
	rank := func(s hoppertype.JobState) int {
		if i := slices.Index(hoppertype.JobStates(), s); i >= 0 {
			return i
		}
		return len(hoppertype.JobStates())
	}
	slices.SortFunc(counts, func(a, b JobCount) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		if c := rank(a.State) - rank(b.State); c != 0 {
			return c
		}
		return strings.Compare(string(a.State), string(b.State))
	})
}

// JobInsertResult is the outcome of inserting one job.
type JobInsertResult struct {
	Job *hoppertype.JobRow
	// Existing is set when Job is a non-terminal job that already held the
	// unique key, returned instead of inserting a new one.
	Existing bool
}

// JobCount is the number of jobs of one queue in one state.
type JobCount struct {
	Queue string
	State hoppertype.JobState
	Count int
}

// Lease names one claimed attempt.
type Lease struct {
	ID    string
	Token int64
}

// JobHeartbeatResult reports one lease.
type JobHeartbeatResult struct {
	ID              string
	Held            bool
	CancelRequested bool
}

// JobFinishResult is the outcome of one transition: the updated job, or Err
// (hoppertype.ErrLeaseLost, or hoppertype.ErrNotFound) with Job nil.
type JobFinishResult struct {
	Job *hoppertype.JobRow
	Err error
}

// JobRetryResult is one job moved back to pending, with the state it left.
type JobRetryResult struct {
	Job       *hoppertype.JobRow
	PrevState hoppertype.JobState
}

// GroupUpdateResult is a group after GroupUpdate.
type GroupUpdateResult struct {
	Group *hoppertype.GroupRow
	// Settled is set when this update settled the group.
	Settled bool
}

// LeaderRow is the current holder of a leadership.
type LeaderRow struct {
	Name      string
	Owner     string
	Term      int64
	ExpiresAt time.Time
}

// WorkerRow is a worker process as the store knows it.
type WorkerRow struct {
	ID        string
	StartedAt time.Time
	SeenAt    time.Time
	// Info is what the worker reports of itself, as JSON.
	Info []byte
}

// QueueRow is a queue's stored state.
type QueueRow struct {
	Name      string
	Paused    bool
	UpdatedAt time.Time
}
