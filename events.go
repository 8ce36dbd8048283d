package hopper

import (
	"encoding/json"
	"time"
)

// EventKind names a lifecycle event.
type EventKind string

// Lifecycle event kinds.
const (
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
	// Stuck is a stuck job's cause and blockers.
	Stuck  *StuckInfo
	Result json.RawMessage
	At     time.Time
}
