// Package hoppertype holds the leaf types shared by hopper's public API, its
// storage drivers and its internal engine: job rows, job states, and the
// sentinel errors that cross those boundaries.
//
// It imports nothing of hopper's, so drivers can depend on it without
// depending on the engine.
package hoppertype

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// JobState is the state of a job. The same words are used by the Go API, the
// stores, the HTTP API, the CLI and the dashboard.
type JobState string

// Job states.
const (
	// JobStatePending means the job is due now and waits for a worker.
	JobStatePending JobState = "pending"
	// JobStateScheduled means the job is due later (a delay, a run-at or a snooze).
	JobStateScheduled JobState = "scheduled"
	// JobStateRunning means a worker holds the job's lease and runs it.
	JobStateRunning JobState = "running"
	// JobStateRetrying means an attempt failed and the job waits for its backoff
	// before it runs again.
	JobStateRetrying JobState = "retrying"
	// JobStateSucceeded is terminal: the handler returned without error.
	JobStateSucceeded JobState = "succeeded"
	// JobStateDead is terminal: the job failed for good (aborted or out of
	// attempts) and sits in the dead-letter set until redriven.
	JobStateDead JobState = "dead"
	// JobStateExpired is terminal: the job did not start and finish by its deadline.
	JobStateExpired JobState = "expired"
	// JobStateCancelled is terminal: the job was cancelled.
	JobStateCancelled JobState = "cancelled"
	// JobStateStuck means the job cannot make progress without help; it is not
	// terminal and carries a cause (see StuckInfo).
	JobStateStuck JobState = "stuck"
)

// JobStates returns every job state in lifecycle order (a fresh slice
// at each call).
func JobStates() []JobState { return slices.Clone(allJobStates) }

var allJobStates = []JobState{
	JobStatePending, JobStateScheduled, JobStateRunning, JobStateRetrying,
	JobStateSucceeded, JobStateDead, JobStateExpired, JobStateCancelled, JobStateStuck,
}

// Terminal reports whether s is a terminal state: succeeded, dead, expired or
// cancelled. A job leaves the store only by retention after a terminal state.
func (s JobState) Terminal() bool {
	switch s {
	case JobStateSucceeded, JobStateDead, JobStateExpired, JobStateCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of the job states.
func (s JobState) Valid() bool {
	for _, v := range allJobStates {
		if s == v {
			return true
		}
	}
	return false
}

// Waiting reports whether s is a state in which the job waits to be claimed:
// pending, scheduled or retrying.
func (s JobState) Waiting() bool {
	return s == JobStatePending || s == JobStateScheduled || s == JobStateRetrying
}

// ErrorKind names the hopper-defined reasons a job can fail; they survive a
// round trip through the store so errors.Is works for a waiter in another
// process.
type ErrorKind string

// Error kinds.
const (
	// ErrorKindHandler is an ordinary error returned (or a panic raised) by a handler.
	ErrorKindHandler ErrorKind = "handler"
	// ErrorKindAborted marks a failure the handler or a classifier declared permanent.
	ErrorKindAborted ErrorKind = "aborted"
	// ErrorKindExpired marks a job that ran past its deadline.
	ErrorKindExpired ErrorKind = "expired"
	// ErrorKindCancelled marks a cancelled job.
	ErrorKindCancelled ErrorKind = "cancelled"
	// ErrorKindTimeout marks an attempt that ran past its attempt timeout.
	ErrorKindTimeout ErrorKind = "timeout"
	// ErrorKindLeaseLost marks an attempt whose worker lost its lease (it died,
	// stalled or was partitioned away) and was rescued.
	ErrorKindLeaseLost ErrorKind = "lease-lost"
	// ErrorKindDecode marks input that could not be decoded into the handler's type.
	ErrorKindDecode ErrorKind = "decode"
	// ErrorKindEncode marks a result that could not be encoded.
	ErrorKindEncode ErrorKind = "encode"
	// ErrorKindPanic marks a handler that panicked.
	ErrorKindPanic ErrorKind = "panic"
	// ErrorKindUnknownType marks a job whose type no worker knows.
	ErrorKindUnknownType ErrorKind = "unknown-type"
	// ErrorKindNonDeterminism marks a workflow whose replay diverged from its history.
	ErrorKindNonDeterminism ErrorKind = "non-determinism"
)

// MaxStackBytes caps the stack stored with an error.
const MaxStackBytes = 8 << 10

// ErrorInfo is the record of a failed attempt kept on the job.
type ErrorInfo struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
	Stack   string    `json:"stack,omitempty"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// StuckCause says why a job or run is stuck.
type StuckCause string

// Stuck causes.
const (
	// StuckEngineFailure is a failure around the handler that the engine
	// detected: leases lost again and again, commits failing, a workflow that
	// diverges from its history.
	StuckEngineFailure StuckCause = "engine-failure"
	// StuckFailedBlocker is a gate whose condition can no longer be met because
	// a job it waits on failed.
	StuckFailedBlocker StuckCause = "failed-blocker"
	// StuckCycle is a gate that waits, directly or not, on itself.
	StuckCycle StuckCause = "cycle"
)

// StuckInfo is the flat status slot of a stuck job or run.
type StuckInfo struct {
	Cause StuckCause `json:"cause"`
	// Retryable is set for engine failures only; nil means "not said", which
	// observers must treat as not retryable.
	Retryable  *bool     `json:"retryable,omitempty"`
	BlockerIDs []string  `json:"blocker_ids,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	ObservedAt time.Time `json:"observed_at"`
}

// RetryPolicy is the stored, fully resolved retry policy of a job: whichever
// worker runs the job applies the same policy.
type RetryPolicy struct {
	// Attempts is the total number of attempts, including the first.
	Attempts int `json:"attempts"`
	// Backoff is "exponential", "linear" or "constant".
	Backoff string        `json:"backoff"`
	Base    time.Duration `json:"base"`
	Factor  float64       `json:"factor"`
	Max     time.Duration `json:"max"`
	Jitter  float64       `json:"jitter"`
}

// Delay returns the backoff before retry n (1 = the first retry) of a
// stored policy (every field set; a Jitter of 0 is none), with jitter
// drawn from rnd in [0,1) (nil draws from math/rand):
//
//	min(Base·Factor^(n−1), Max) · (1 − Jitter·rand)   (exponential)
//	min(Base·n, Max) · (1 − Jitter·rand)              (linear)
//	Base · (1 − Jitter·rand)                           (constant)
func (p RetryPolicy) Delay(n int, rnd func() float64) time.Duration {
	if n < 1 {
		n = 1
	}
	var d float64
	switch p.Backoff {
	case "linear":
		d = float64(p.Base) * float64(n)
	case "constant":
		d = float64(p.Base)
	default:
		d = float64(p.Base) * math.Pow(p.Factor, float64(n-1))
	}
	if p.Backoff != "constant" && (d > float64(p.Max) || math.IsInf(d, 0) || math.IsNaN(d)) {
		d = float64(p.Max)
	}
	if p.Jitter > 0 {
		if rnd == nil {
			rnd = rand.Float64
		}
		d *= 1 - p.Jitter*rnd()
	}
	return time.Duration(d)
}

// JobRow is a job as the store holds it.
type JobRow struct {
	ID    string
	Type  string
	Queue string
	State JobState
	// Priority: higher runs first.
	Priority int
	// Attempt counts the attempts started so far; 0 before the first claim.
	// The most it can reach is Retry.Attempts.
	Attempt int
	// Input and Result are the codec-encoded payloads; Result is nil when the
	// job produced no value of its own.
	Input  []byte
	Result []byte
	// Error is the last failure, if any.
	Error *ErrorInfo
	// GroupID is the fan-out group the job belongs to (system assigned); for a
	// root job it is the job's own id.
	GroupID  string
	ParentID string
	// Dependents are the ids a gate waited on before it queued this job.
	Dependents []string
	// FairKey is the fairness label (the "group" option) read by fair limiters.
	FairKey string
	// ConcurrencyKey, with ConcurrencyLimit > 0, caps how many jobs with
	// that key run at once across every process sharing the store: a claim
	// takes such a job only while fewer than ConcurrencyLimit jobs with its
	// key are running.
	ConcurrencyKey   string
	ConcurrencyLimit int
	UniqueKey        string
	Metadata         map[string]string
	Retry            RetryPolicy
	// AttemptTimeout bounds one execution; 0 means none.
	AttemptTimeout time.Duration
	// Deadline bounds the whole life of the job; zero means none.
	Deadline time.Time

	QueuedAt  time.Time
	RunAt     time.Time
	StartedAt time.Time
	EndedAt   time.Time

	// LeaseToken changes on every claim; state writes by a worker compare it
	// so a worker that lost its lease changes nothing.
	LeaseToken      int64
	LeaseExpiresAt  time.Time
	Worker          string
	CancelRequested bool
	Stuck           *StuckInfo
}

// Clone returns a deep copy of r.
func (r *JobRow) Clone() *JobRow {
	if r == nil {
		return nil
	}
	c := *r
	c.Input = cloneBytes(r.Input)
	c.Result = cloneBytes(r.Result)
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	if r.Dependents != nil {
		c.Dependents = append([]string(nil), r.Dependents...)
	}
	if r.Metadata != nil {
		c.Metadata = make(map[string]string, len(r.Metadata))
		for k, v := range r.Metadata {
			c.Metadata[k] = v
		}
	}
	if r.Stuck != nil {
		s := *r.Stuck
		if s.Retryable != nil {
			b := *s.Retryable
			s.Retryable = &b
		}
		s.BlockerIDs = append([]string(nil), r.Stuck.BlockerIDs...)
		c.Stuck = &s
	}
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// GroupState is the state of a fan-out group.
type GroupState string

// Group states.
const (
	GroupOpen    GroupState = "open"
	GroupSettled GroupState = "settled"
)

// GroupRow is a fan-out group as the store holds it. Groups of a single job
// that never fanned out have no row: the job itself is the group.
type GroupRow struct {
	ID string
	// Open counts the group's jobs that are not terminal yet.
	Open  int
	State GroupState
	// Value is the group value; ValueSet says whether any job contributed.
	Value    []byte
	ValueSet bool
	// Final locks the value against later contributions.
	Final     bool
	CreatedAt time.Time
	SettledAt time.Time
}

// Sentinel errors shared by drivers and the engine.
var (
	// ErrNotFound is returned when a row does not exist.
	ErrNotFound = errors.New("hopper: not found")
	// ErrLeaseLost is returned when a worker's state write finds that the job
	// is no longer running under its lease (it was rescued, re-claimed or
	// cancelled): the write changed nothing.
	ErrLeaseLost = errors.New("hopper: lease lost")
	// ErrStateConflict is returned when a transition's expected state does not
	// hold (for example cancelling a job that already finished).
	ErrStateConflict = errors.New("hopper: state conflict")
	// ErrVetoed matches the error of a transition that an InCommit
	// observer refused.
	ErrVetoed = errors.New("hopper: vetoed by an observer")
	// ErrDuplicateID is returned when an inserted id already exists.
	ErrDuplicateID = errors.New("hopper: duplicate id")
	// ErrTxUnsupported is returned when hopper is asked to write through
	// an application's transaction on a store that cannot (the memory
	// store).
	ErrTxUnsupported = errors.New("hopper: the store cannot write through an application's transaction")
)

// MarshalErrorInfo encodes e for storage; nil encodes as nil.
func MarshalErrorInfo(e *ErrorInfo) []byte {
	if e == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	return b
}

// UnmarshalErrorInfo decodes a stored ErrorInfo; empty input decodes as nil.
func UnmarshalErrorInfo(b []byte) (*ErrorInfo, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var e ErrorInfo
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// RunStatus is the status of a workflow run.
type RunStatus string

// Run statuses.
const (
	RunPending      RunStatus = "pending"
	RunRunning      RunStatus = "running"
	RunWaiting      RunStatus = "waiting"
	RunCompleted    RunStatus = "completed"
	RunFailed       RunStatus = "failed"
	RunCompensating RunStatus = "compensating"
	RunCompensated  RunStatus = "compensated"
	RunCancelled    RunStatus = "cancelled"
	RunQuarantined  RunStatus = "quarantined"
	RunStuck        RunStatus = "stuck"
)

// RunStatuses returns every run status (a fresh slice at each call).
func RunStatuses() []RunStatus { return slices.Clone(allRunStatuses) }

var allRunStatuses = []RunStatus{RunPending, RunRunning, RunWaiting, RunCompleted, RunFailed,
	RunCompensating, RunCompensated, RunCancelled, RunQuarantined, RunStuck}

// Terminal reports whether a run in status s is finished for good.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunCompleted, RunFailed, RunCompensated, RunCancelled, RunQuarantined:
		return true
	}
	return false
}

// Valid reports whether s is a run status.
func (s RunStatus) Valid() bool {
	for _, v := range allRunStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// RunRow is a workflow run as the store holds it. The run executes as a job
// with the same id (its input, output, attempts and lease live there); the
// run row holds what is particular to workflows.
type RunRow struct {
	ID       string
	Workflow string
	Status   RunStatus
	ParentID string
	// CodeVersion is the workflow code's version tag when the run started.
	CodeVersion string
	Error       *ErrorInfo
	CreatedAt   time.Time
	UpdatedAt   time.Time
	EndedAt     time.Time
}

// RunEvent is one entry of a run's history, written by the run's own
// execution, in order: Seq counts from 1 within each Attempt (a run retried
// from the beginning starts a fresh history attempt).
type RunEvent struct {
	RunID   string
	Attempt int
	Seq     int
	Kind    string
	Name    string
	// Data is the event's JSON payload (a step's output or error, a wake
	// time, a child's id …).
	Data []byte
	At   time.Time
}

// HookState is the state of a hook.
type HookState string

// Hook states.
const (
	HookWaiting HookState = "waiting"
	HookResumed HookState = "resumed"
)

// HookRow is a durable wait for an external payload, found by its token.
type HookRow struct {
	Token   string
	RunID   string
	Name    string
	State   HookState
	Payload []byte
	// Request is the request that resumed the hook through its webhook
	// (JSON: method, headers without credentials, query); nil otherwise.
	Request   []byte
	CreatedAt time.Time
	ResumedAt time.Time
}

// StreamChunk is one chunk of a run's append-only stream.
type StreamChunk struct {
	RunID  string
	Offset int64
	Data   []byte
	At     time.Time
}

// GateConditionKind names a gate condition.
type GateConditionKind string

// Gate condition kinds.
const (
	// GateAllSuccess holds when every watched job succeeded.
	GateAllSuccess GateConditionKind = "all-success"
	// GateAllDone holds when every watched job is terminal.
	GateAllDone GateConditionKind = "all-done"
	// GateCount holds when at least Count watched jobs are done (Of "done",
	// any terminal state) or succeeded (Of "success").
	GateCount GateConditionKind = "count"
)

// Gate count targets: what a GateCount condition counts.
const (
	GateOfDone    = "done"
	GateOfSuccess = "success"
)

// GateCondition says when a gate fires. The zero value is all-success.
// Done means any terminal job state (succeeded, dead, expired, cancelled);
// success means succeeded. A job that is missing or not terminal (stuck
// included) is not done.
type GateCondition struct {
	Kind  GateConditionKind `json:"kind,omitempty"`
	Count int               `json:"count,omitempty"`
	Of    string            `json:"of,omitempty"`
}

// Normalize fills in defaults: Kind all-success, Of done.
func (c GateCondition) Normalize() GateCondition {
	if c.Kind == "" {
		c.Kind = GateAllSuccess
	}
	if c.Kind == GateCount && c.Of == "" {
		c.Of = GateOfDone
	}
	if c.Kind != GateCount {
		c.Count, c.Of = 0, ""
	}
	return c
}

// Validate reports a condition that cannot be evaluated.
func (c GateCondition) Validate() error {
	c = c.Normalize()
	switch c.Kind {
	case GateAllSuccess, GateAllDone:
		return nil
	case GateCount:
		if c.Count < 0 {
			return fmt.Errorf("gate condition: negative count %d", c.Count)
		}
		if c.Of != GateOfDone && c.Of != GateOfSuccess {
			return fmt.Errorf("gate condition: count of %q (want %q or %q)", c.Of, GateOfDone, GateOfSuccess)
		}
		return nil
	}
	return fmt.Errorf("gate condition: unknown kind %q", c.Kind)
}

// Met reports whether the condition holds for total watched jobs of which
// done are terminal and succeeded succeeded.
func (c GateCondition) Met(total, done, succeeded int) bool {
	c = c.Normalize()
	switch c.Kind {
	case GateAllSuccess:
		return succeeded == total
	case GateAllDone:
		return done == total
	case GateCount:
		if c.Of == GateOfSuccess {
			return succeeded >= c.Count
		}
		return done >= c.Count
	}
	return false
}

// Impossible reports whether the condition can no longer hold whatever the
// jobs not yet terminal do: all-success with a job terminal but not
// succeeded, or a count that the jobs left cannot reach.
func (c GateCondition) Impossible(total, done, succeeded int) bool {
	c = c.Normalize()
	switch c.Kind {
	case GateAllSuccess:
		return done > succeeded
	case GateCount:
		if c.Of == GateOfSuccess {
			return succeeded+(total-done) < c.Count
		}
		return total < c.Count
	}
	return false
}

// String renders the condition as the seeds spell it: "all-success",
// "all-done", "count:2" or "count:2:success".
func (c GateCondition) String() string {
	c = c.Normalize()
	if c.Kind != GateCount {
		return string(c.Kind)
	}
	if c.Of == GateOfSuccess {
		return fmt.Sprintf("count:%d:success", c.Count)
	}
	return fmt.Sprintf("count:%d", c.Count)
}

// GateRow is a gate as the store holds it: the condition and the counts of
// the jobs it watches, kept exact by the transitions of those jobs. A
// gate's id is the id of the job that fires it.
type GateRow struct {
	ID   string
	Cond GateCondition
	// Total is how many distinct jobs the gate watches; Done how many of
	// them it saw terminal; Succeeded how many it saw succeed.
	Total     int
	Done      int
	Succeeded int
	CreatedAt time.Time
}

// GateWait is one job a gate watches and the state the gate last observed
// for it: a terminal state, or "" while the job is missing or not terminal.
// The observed state outlives the job (retention never reads as failure).
type GateWait struct {
	GateID string
	JobID  string
	State  JobState
}
