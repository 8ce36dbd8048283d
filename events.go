package hopper

import "github.com/hopper-go/hopper/hoppertype"

// EventKind names a lifecycle event.
type EventKind = hoppertype.EventKind

// Lifecycle event kinds.
const (
	// EventQueued: a job was stored (enqueued, fanned out or redriven).
	EventQueued = hoppertype.EventQueued
	// EventStarted: an attempt started.
	EventStarted = hoppertype.EventStarted
	// EventDeferred: a job was snoozed or deferred by a classifier without
	// using an attempt; RunAt says until when.
	EventDeferred = hoppertype.EventDeferred
	// EventSucceeded: a job succeeded; Result holds its encoded output.
	EventSucceeded = hoppertype.EventSucceeded
	// EventFailed: an attempt failed; WillRetry says whether the job runs
	// again (false means it was dead-lettered).
	EventFailed = hoppertype.EventFailed
	// EventExpired: a job passed its deadline; it will not run again.
	EventExpired = hoppertype.EventExpired
	// EventCancelled: a job was cancelled.
	EventCancelled = hoppertype.EventCancelled
	// EventStuck: a job cannot make progress without help.
	EventStuck = hoppertype.EventStuck
	// EventRedriven: a finished or stuck job was moved back to pending.
	EventRedriven = hoppertype.EventRedriven
	// EventGroupDone: a fan-out group settled; Result holds its value.
	EventGroupDone = hoppertype.EventGroupDone
	// EventScaled: the client's autoscaler changed its worker slots;
	// Scaling says from what to what, and the workload it measured.
	EventScaled = hoppertype.EventScaled
)

// Event is a lifecycle event, delivered to Config.OnEvent and to the job
// type's TypeOpts.OnEvent after the transition it reports has committed.
// Hooks run on the engine's goroutines: keep them quick. A panicking hook is
// reported through Config.OnError and never disturbs the engine. The events
// of one job are raised by different goroutines (the enqueuer, the worker,
// the completer), so a hook may see them out of order — a retry's "started"
// before the previous attempt's "failed", say; Attempt and At order them.
type Event = hoppertype.Event
