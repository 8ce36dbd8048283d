package hoppertype

// The vocabulary the engine and the public API share: the errors a job or
// an attempt ends with, the markers a handler returns to ask for an
// outcome, the decisions of a classifier, lifecycle events and the phases
// of engine errors. The root package aliases each of them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of jobs and attempts. A waiter's error matches the reason
// a job failed with errors.Is, in any process.
var (
	// ErrAborted matches a job dead-lettered by Abort or by a classifier.
	ErrAborted = errors.New("hopper: aborted")
	// ErrExpired matches a job that did not start and finish by its deadline.
	ErrExpired = errors.New("hopper: deadline exceeded")
	// ErrCancelled matches a cancelled job.
	ErrCancelled = errors.New("hopper: cancelled")
	// ErrAttemptTimeout matches an attempt that ran past its attempt timeout.
	ErrAttemptTimeout = errors.New("hopper: attempt timed out")
	// ErrHeartbeatTimeout matches an attempt that went past its type's
	// HeartbeatTimeout without a heartbeat. It also matches
	// ErrAttemptTimeout, which is what a waiter in another process sees.
	ErrHeartbeatTimeout = fmt.Errorf("%w: no heartbeat within the type's HeartbeatTimeout", ErrAttemptTimeout)
	// ErrUnknownType is returned when enqueueing by name a type the client
	// does not know.
	ErrUnknownType = errors.New("hopper: unknown job type")
	// ErrInvalidInput is returned for input that does not decode into the
	// type's input, options that make no sense (a negative delay, a retry
	// policy with fewer than one attempt, an oversized payload, a priority
	// outside 32 bits, a time outside years 1 to 9999), an id that breaks
	// ValidateID's rule, and any string bound for the store (an id, a name,
	// a key, a label, metadata, a filter) that holds a NUL byte or is not
	// valid UTF-8. Nothing is stored then.
	ErrInvalidInput = errors.New("hopper: invalid input")
	// ErrEncode matches a handler result that could not be encoded.
	ErrEncode = errors.New("hopper: result does not encode")
	// ErrPanic matches a handler that panicked.
	ErrPanic = errors.New("hopper: handler panicked")
	// ErrStuck matches a job that is stuck and needs help (Handle.Result keeps
	// waiting on a stuck job; this is for JobList and events).
	ErrStuck = errors.New("hopper: stuck")
	// ErrNonDeterminism matches a workflow whose replay diverged from its history.
	ErrNonDeterminism = errors.New("hopper: non-determinism")
)

// JobError is the error a waiter receives for a job that ended without
// success. Kind says why; errors.Is(err, ErrAborted), ErrExpired,
// ErrCancelled, … match it by kind, in any process.
type JobError struct {
	JobID   string
	Type    string
	Kind    ErrorKind
	Message string
	Attempt int
	State   JobState
}

// Error implements error.
func (e *JobError) Error() string {
	return fmt.Sprintf("hopper: job %s (%s) %s after attempt %d: %s", e.JobID, e.Type, e.State, e.Attempt, e.Message)
}

// Unwrap maps the kind back to hopper's sentinel errors.
func (e *JobError) Unwrap() error {
	switch e.Kind {
	case ErrorKindAborted:
		return ErrAborted
	case ErrorKindExpired:
		return ErrExpired
	case ErrorKindCancelled:
		return ErrCancelled
	case ErrorKindTimeout:
		return ErrAttemptTimeout
	case ErrorKindLeaseLost:
		return ErrLeaseLost
	case ErrorKindEncode:
		return ErrEncode
	case ErrorKindDecode:
		return ErrInvalidInput
	case ErrorKindPanic:
		return ErrPanic
	case ErrorKindUnknownType:
		return ErrUnknownType
	case ErrorKindNonDeterminism:
		return ErrNonDeterminism
	}
	return nil
}

// NewJobError builds the waiter's error for a job in a terminal state
// other than succeeded.
func NewJobError(row *JobRow) error {
	e := &JobError{JobID: row.ID, Type: row.Type, Attempt: row.Attempt, State: row.State}
	if row.Error != nil {
		e.Kind, e.Message = row.Error.Kind, row.Error.Message
	}
	switch row.State {
	case JobStateExpired:
		e.Kind = ErrorKindExpired
		if e.Message == "" {
			e.Message = "deadline exceeded"
		}
	case JobStateCancelled:
		e.Kind = ErrorKindCancelled
		if e.Message == "" {
			e.Message = "cancelled"
		}
	}
	return e
}

// AbortError is returned by Abort: it matches ErrAborted and the error it
// wraps.
type AbortError struct{ Err error }

// Error is the wrapped error's message.
func (e *AbortError) Error() string {
	if e.Err == nil {
		return "aborted"
	}
	return e.Err.Error()
}

// Unwrap returns ErrAborted and the wrapped error.
func (e *AbortError) Unwrap() []error { return []error{ErrAborted, e.Err} }

// Abort wraps err so the job is dead-lettered now, with no further attempts.
// It beats any classifier.
func Abort(err error) error { return &AbortError{Err: err} }

// SnoozeError is returned by Snooze and SnoozeUntil: the job is deferred to
// RunAt (or by Delay) without using an attempt.
type SnoozeError struct {
	Delay time.Duration
	RunAt time.Time
}

// Error implements error.
func (e *SnoozeError) Error() string {
	if !e.RunAt.IsZero() {
		return "snoozed until " + e.RunAt.Format(time.RFC3339Nano)
	}
	return "snoozed for " + e.Delay.String()
}

// Snooze defers the job by d without using an attempt. A handler may snooze
// indefinitely (poll-style "not ready yet").
func Snooze(d time.Duration) error { return &SnoozeError{Delay: d} }

// SnoozeUntil defers the job to t without using an attempt.
func SnoozeUntil(t time.Time) error { return &SnoozeError{RunAt: t} }

// RetryAfterError is returned by RetryAfter: a retry that waits at least
// Delay. It matches the error it wraps.
type RetryAfterError struct {
	Err   error
	Delay time.Duration
}

// Error is the wrapped error's message.
func (e *RetryAfterError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so the retry that follows uses an attempt and waits at
// least d (a floor under the policy's backoff). Within Retry it works the
// same way.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &RetryAfterError{Err: err, Delay: d}
}

// Decision is what a Classifier chooses for a failed attempt. The zero
// Decision is "retry under the policy".
type Decision struct {
	kind  DecisionKind
	delay time.Duration
	runAt time.Time
}

// DecisionKind says what a Decision chooses.
type DecisionKind int

// Decision kinds.
const (
	// DecisionRetry retries under the job's retry policy.
	DecisionRetry DecisionKind = iota
	// DecisionAbort dead-letters the job now.
	DecisionAbort
	// DecisionDelay defers the job by Delay without using an attempt.
	DecisionDelay
	// DecisionRunAt defers the job to RunAt without using an attempt.
	DecisionRunAt
)

// Kind says what the decision chooses.
func (d Decision) Kind() DecisionKind { return d.kind }

// Delay is how long a DecisionDelay defers the job.
func (d Decision) Delay() time.Duration { return d.delay }

// RunAt is when a DecisionRunAt defers the job to.
func (d Decision) RunAt() time.Time { return d.runAt }

// DecideRetry retries under the job's retry policy (the default).
func DecideRetry() Decision { return Decision{} }

// DecideAbort dead-letters the job now.
func DecideAbort() Decision { return Decision{kind: DecisionAbort} }

// DecideDelay defers the job by d without using an attempt (a rate limit, an
// upstream not ready).
func DecideDelay(d time.Duration) Decision { return Decision{kind: DecisionDelay, delay: d} }

// DecideRunAt defers the job to t without using an attempt.
func DecideRunAt(t time.Time) Decision { return Decision{kind: DecisionRunAt, runAt: t} }

// FailureInfo describes a failed attempt to a Classifier.
type FailureInfo struct {
	ID       string
	Type     string
	Attempt  int
	Attempts int
}

// Classifier chooses, centrally, what a failed attempt leads to. A per-type
// classifier overrides the client's. An explicit Abort, Snooze or RetryAfter
// from the handler beats the classifier; a panicking classifier is reported
// through Config.OnError and the attempt is retried.
type Classifier func(err error, info FailureInfo) Decision

// EventKind names a lifecycle event.
type EventKind string

// Lifecycle event kinds.
const (
	// EventScaled: the client's autoscaler changed its worker slots
	// (Event.Scaling says from what to what, and the workload).
	EventScaled EventKind = "scaled"
	// EventQueued: a job was stored (enqueued, fanned out or redriven).
	EventQueued EventKind = "queued"
	// EventStarted: an attempt started.
	EventStarted EventKind = "started"
	// EventDeferred: a job was snoozed or deferred by a classifier without
	// using an attempt; RunAt says until when.
	EventDeferred EventKind = "deferred"
	// EventSucceeded: a job succeeded; Result holds its encoded output.
	EventSucceeded EventKind = "succeeded"
	// EventFailed: an attempt failed; WillRetry says whether the job runs
	// again (false means it was dead-lettered).
	EventFailed EventKind = "failed"
	// EventExpired: a job passed its deadline; it will not run again.
	EventExpired EventKind = "expired"
	// EventCancelled: a job was cancelled.
	EventCancelled EventKind = "cancelled"
	// EventStuck: a job cannot make progress without help.
	EventStuck EventKind = "stuck"
	// EventRedriven: a finished or stuck job was moved back to pending.
	EventRedriven EventKind = "redriven"
	// EventGroupDone: a fan-out group settled; Result holds its value.
	EventGroupDone EventKind = "group-done"
)

// Workflow run event kinds: a run's status changed (Event.RunID names the
// run, Event.Status its new status). They come from the store's change
// feed (Client.EventList, Client.TailEvents), which records every
// process's runs.
const (
	// EventRunQueued: a run was started and waits for a worker.
	EventRunQueued EventKind = "run-queued"
	// EventRunStarted: a run began executing.
	EventRunStarted EventKind = "run-started"
	// EventRunWaiting: a run suspended on a durable sleep, a hook, a child
	// or an activity.
	EventRunWaiting EventKind = "run-waiting"
	// EventRunResumed: a suspended run executes again.
	EventRunResumed EventKind = "run-resumed"
	// EventRunRetrying: an execution of a run failed and the run will be
	// tried again (Error says why).
	EventRunRetrying EventKind = "run-retrying"
	// EventRunCompleted: a run returned its result.
	EventRunCompleted EventKind = "run-completed"
	// EventRunFailed: a run failed for good (Error says why).
	EventRunFailed EventKind = "run-failed"
	// EventRunCompensating: a failed run runs its compensations.
	EventRunCompensating EventKind = "run-compensating"
	// EventRunCompensated: a failed run's compensations ran.
	EventRunCompensated EventKind = "run-compensated"
	// EventRunCancelled: a run was cancelled.
	EventRunCancelled EventKind = "run-cancelled"
	// EventRunStuck: a run cannot go on without help.
	EventRunStuck EventKind = "run-stuck"
	// EventRunQuarantined: a run was set aside (its code no longer
	// replays its history).
	EventRunQuarantined EventKind = "run-quarantined"
	// EventRunRestarted: a run that had ended was started again.
	EventRunRestarted EventKind = "run-restarted"
	// EventRunStep: an execution of a run completed a step (Step names
	// it; Error is set when the step failed for good). Reported, when
	// asked for, before the run event that ends the execution.
	EventRunStep EventKind = "run-step"
)

// Fleet event kinds, from the store's change feed.
const (
	// EventWorkerJoined: a worker process started (Worker names it).
	EventWorkerJoined EventKind = "worker-joined"
	// EventWorkerLeft: a worker process stopped, or retention removed one
	// that died (Worker names it).
	EventWorkerLeft EventKind = "worker-left"
	// EventScheduleFired: a schedule fired an occurrence (Schedule names
	// it, RunAt is the occurrence, Attempt how many it fired in all).
	EventScheduleFired EventKind = "schedule-fired"
)

// Event is a lifecycle event, delivered to Config.OnEvent and to the job
// type's TypeOpts.OnEvent after the transition it reports has committed.
// Hooks run on the engine's goroutines: keep them quick. A panicking hook is
// reported through Config.OnError and never disturbs the engine. The events
// of one job are raised by different goroutines (the enqueuer, the worker,
// the completer), so a hook may see them out of order — a retry's "started"
// before the previous attempt's "failed", say; Attempt and At order them.
type Event struct {
	Kind    EventKind
	JobID   string
	Type    string
	Queue   string
	GroupID string
	// ParentID is the job that fanned this one out; Dependents the ids a gate
	// waited on before it queued this job.
	ParentID   string
	Dependents []string
	Attempt    int
	// Error is the failure's message (failed, expired, cancelled, stuck).
	Error     string
	WillRetry bool
	// RunAt is when a deferred or retried job runs next; for a started
	// event, when the job was due (At − RunAt is the pickup lag).
	RunAt time.Time
	// Deadline is the deadline an expired job passed.
	Deadline time.Time
	// QueuedAt is when the job was queued, on the events that end an
	// attempt raised in the process that ran it (Config.OnEvent,
	// Client.Subscribe); zero on events read from the store's feed.
	QueuedAt time.Time
	// Stuck is a stuck job's cause and blockers.
	Stuck  *StuckInfo
	Result json.RawMessage
	// Scaling is what an autoscaling decision saw and did (EventScaled).
	Scaling *ScalingInfo
	// RunID is the workflow run of a run event, or of a run's own job.
	RunID string
	// Step is the step of a run-step event.
	Step string
	// Schedule is the schedule of a schedule-fired event.
	Schedule string
	// Status is a run event's new status.
	Status RunStatus
	// Worker is the worker that started the attempt (started events from
	// the store).
	Worker string
	// Cursor is the event's place in the store's change feed: resume a
	// tail after it. It is zero for an event raised in-process
	// (Config.OnEvent, Client.Subscribe).
	Cursor ChangeCursor
	At     time.Time
}

// ScalingInfo is one decision of a client's autoscaler: the workload it
// measured (busy ÷ slots) and the slots before and after.
type ScalingInfo struct {
	Workload float64   `json:"workload"`
	Busy     int       `json:"busy"`
	Before   int       `json:"before"`
	After    int       `json:"after"`
	At       time.Time `json:"at"`
}

// ErrorPhase says where a non-critical engine error happened.
type ErrorPhase string

// Error phases reported to Config.OnError.
const (
	// PhaseCommit: recording a result the handler already produced failed.
	// The attempt is not retried by the engine (that could duplicate the
	// work); its lease lapses and the rescuer takes it from there.
	PhaseCommit ErrorPhase = "commit"
	// PhaseQueue: claiming, polling or routing jobs failed; the loop backs
	// off and continues.
	PhaseQueue ErrorPhase = "queue"
	// PhaseHook: an event hook, a classifier, Config.Backpressure or
	// Config.Accept panicked.
	PhaseHook ErrorPhase = "hook"
	// PhaseMaintenance: a maintenance service (rescuer, retention, leader
	// election, redrive) failed; it retries on its next round.
	PhaseMaintenance ErrorPhase = "maintenance"
	// PhaseSchedule: a schedule's occurrence could not be enqueued (its
	// Job failed, or the store did after retries within the catch-up
	// window); the schedule goes on with the next occurrence.
	PhaseSchedule ErrorPhase = "schedule"
	// PhaseObserver: an AfterCommit observer failed on a change (it is
	// retried), or its delivery loop could not read the feed.
	PhaseObserver ErrorPhase = "observer"
)

// LimitOrder says which waiting job a capped Limit starts next.
type LimitOrder string

// Limit orders.
const (
	// OrderPriority starts the highest priority first, then the oldest.
	OrderPriority LimitOrder = "priority"
	// OrderFair shares the cap across fairness groups (InsertOpts.Group)
	// round-robin, then by priority, then by age, so one tenant's flood
	// cannot take every slot.
	OrderFair LimitOrder = "fair"
	// OrderAge starts the oldest (first enqueued) first.
	OrderAge LimitOrder = "age"
)

// Limit bounds how many attempts of the jobs it governs run at once in a
// client, in which order waiting ones start, and how fast attempts start
// (the seeds' doers). Set one for the whole client (Config.Limit) or per
// type (TypeOpts.Limit); a type's own limit governs its jobs instead of the
// client's. The zero Limit limits nothing.
//
// A limit works in each process on the jobs it has claimed: jobs waiting
// for their turn are claimed (leased, heartbeated) and hold worker slots,
// and a process stops claiming a limit's jobs while Max of them wait (for
// OrderFair, 4×Max and at least 16, the window fairness chooses from).
// Stopping the client hands waiting jobs back, their attempts unused.
type Limit struct {
	// Max caps the attempts running at once; 0 means no cap.
	Max int
	// Order picks the next job to start when Max is reached. Defaults to
	// OrderPriority.
	Order LimitOrder
	// Rate caps how many attempts start per second (a token bucket, on the
	// client's clock); 0 means no rate limit.
	Rate float64
	// Burst is how many attempts may start at once under Rate. Defaults
	// to 1.
	Burst int
}

// Validate reports a limit that makes no sense.
func (l *Limit) Validate() error {
	if l == nil {
		return nil
	}
	switch {
	case l.Max < 0:
		return fmt.Errorf("limit Max %d", l.Max)
	case l.Rate < 0:
		return fmt.Errorf("limit Rate %v", l.Rate)
	case l.Burst < 0:
		return fmt.Errorf("limit Burst %d", l.Burst)
	}
	switch l.Order {
	case "", OrderPriority, OrderFair, OrderAge:
		return nil
	}
	return fmt.Errorf("limit order %q", l.Order)
}

// NonDeterminismError says a run's replay diverged from its history: the
// workflow code changed, or does not run the same way twice. The run goes
// stuck (engine failure, not retryable) until the code is fixed and it is
// retried.
type NonDeterminismError struct {
	RunID        string
	Workflow     string
	Attempt      int
	Position     int
	RecordedKind string
	RecordedName string
	Attempted    string
}

// Error implements error.
func (e *NonDeterminismError) Error() string {
	return fmt.Sprintf("hopper: non-determinism in workflow %q run %s (attempt %d): history event %d is %s %q, but the code now reaches %s; the workflow code changed or is not deterministic",
		e.Workflow, e.RunID, e.Attempt, e.Position, e.RecordedKind, e.RecordedName, e.Attempted)
}

// Unwrap matches ErrNonDeterminism.
func (e *NonDeterminismError) Unwrap() error { return ErrNonDeterminism }
