package engine

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// History event kinds. A run's history holds what its own execution did, in
// order; replay answers each operation of the workflow function from it.
const (
	EvWorkflowStarted   = "workflow_started"
	EvWorkflowCompleted = "workflow_completed"
	EvWorkflowFailed    = "workflow_failed"
	EvWorkflowCancelled = "workflow_cancelled"
	EvStep              = "step"
	EvSideEffect        = "side_effect"
	EvSleep             = "sleep"
	EvPatch             = "patch"
	EvHookCreated       = "hook_created"
	EvHookWait          = "hook_wait"
	EvHookReceived      = "hook_received"
	EvHookTimeout       = "hook_timeout"
	EvChildStarted      = "child_started"
	EvChildCompleted    = "child_completed"
	EvActivityScheduled = "activity_scheduled"
	EvActivityCompleted = "activity_completed"
	// The activity's executions, derived from its job's changes for the
	// run's timeline (never stored in the history, never replayed).
	EvActivityStarted   = "activity_started"
	EvActivityHeartbeat = "activity_heartbeat"
	EvActivityFailed    = "activity_failed"
	EvActivityRetry     = "activity_retry"
	EvCompensationAdded = "compensation_added"
	EvCompensationDone  = "compensation_executed"
	EvCompensationFail  = "compensation_failed"
	EvStreamWrite       = "stream_write"
)

// FarFuture is when a run waiting for an event with no timeout is due: the
// event wakes it first.
var FarFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// EventData is the JSON payload of a history event.
type EventData struct {
	Output json.RawMessage       `json:"output,omitempty"`
	Error  *hoppertype.ErrorInfo `json:"error,omitempty"`
	Until  time.Time             `json:"until,omitzero"`
	Token  string                `json:"token,omitempty"`
	// Schema is a hook's payload type as payloadSchema (hookschema.go)
	// describes it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Request is the HookRequest that resumed a hook through its webhook.
	Request json.RawMessage      `json:"request,omitempty"`
	Child   string               `json:"child,omitempty"`
	Job     string               `json:"job,omitempty"`
	Status  hoppertype.RunStatus `json:"status,omitempty"`
	// Attempts is how many tries a step took.
	Attempts int `json:"attempts,omitempty"`
	// Attempt, Worker and Message describe one execution of an activity
	// in a run's timeline.
	Attempt int    `json:"attempt,omitempty"`
	Worker  string `json:"worker,omitempty"`
	Message string `json:"message,omitempty"`
	// Offset is the stream offset of the chunk a stream_write wrote.
	Offset *int64 `json:"offset,omitempty"`
}

// Generation is one attempt of a run in its history: the events recorded
// under one attempt key. A run's first attempt is 1; each attempt that the
// workflow retries (StrategyRetry) is followed by a new one, keyed by the
// next number. A crash does not start one: the attempt goes on.
type Generation struct {
	Attempt int
	Events  []*hoppertype.RunEvent
	// Retried says the attempt ended in a failure the workflow retried
	// (a workflow_failed event without a final status).
	Retried bool
	// Ended says the attempt ended the run: a final failure (a
	// workflow_failed event with its final status) or a cancellation.
	Ended bool
}

// Generations splits all of a run's events (in attempt, seq order) into
// its attempts.
func Generations(all []*hoppertype.RunEvent) []Generation {
	var gens []Generation
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].Attempt == all[i].Attempt {
			j++
		}
		g := Generation{Attempt: all[i].Attempt, Events: all[i:j]}
		g.Retried = slices.ContainsFunc(g.Events, retriedFailure)
		g.Ended = slices.ContainsFunc(g.Events, endingEvent)
		gens = append(gens, g)
		i = j
	}
	return gens
}

// CurrentHistory picks, from a run's attempts, the one an execution
// continues: the last, unless the workflow retried it, in which case a
// fresh attempt begins, keyed by the next number (1 for a new run). A crash
// (the job rescued, its job attempt counted) continues the last attempt,
// so recorded steps never run again. It returns the attempt, its events,
// and how many attempts failed and were retried.
//
// Runs recorded before attempts were numbered this way keyed an attempt by
// the job attempt that began it (a crash could skip numbers): their keys
// are read as they are, and a new attempt still takes the next number.
//
// restarted says the run was retried after it ended (its status is
// pending again): an attempt that ended the run is then over too, and the
// retries are counted anew from there.
func CurrentHistory(gens []Generation, restarted bool) (attempt int, events []*hoppertype.RunEvent, retries int) {
	if len(gens) == 0 {
		return 1, nil, 0
	}
	last := gens[len(gens)-1]
	fresh := last.Retried || (restarted && last.Ended)
	past := gens
	if !fresh {
		past = gens[:len(gens)-1] // the last attempt goes on
	}
	for _, g := range past {
		switch {
		case g.Ended:
			retries = 0 // a run retried after it ended has its whole budget again
		case g.Retried:
			retries++
		}
	}
	if fresh {
		return last.Attempt + 1, nil, retries
	}
	return last.Attempt, last.Events, retries
}

// endingEvent says whether ev ends the run: a workflow_failed event with a
// final status, or workflow_cancelled.
func endingEvent(ev *hoppertype.RunEvent) bool {
	if ev.Kind == EvWorkflowCancelled {
		return true
	}
	return ev.Kind == EvWorkflowFailed && !retriedFailure(ev)
}

// LastGeneration returns the events of the run's latest history
// generation (the last attempt that recorded any) and its attempt.
func LastGeneration(all []*hoppertype.RunEvent) (int, []*hoppertype.RunEvent) {
	if len(all) == 0 {
		return 0, nil
	}
	first := len(all) - 1
	for first > 0 && all[first-1].Attempt == all[first].Attempt {
		first--
	}
	return all[first].Attempt, all[first:]
}

// retriedFailure says whether ev ends an attempt the workflow retries: a
// workflow_failed event without a final status.
func retriedFailure(ev *hoppertype.RunEvent) bool {
	if ev.Kind != EvWorkflowFailed {
		return false
	}
	var data EventData
	_ = json.Unmarshal(ev.Data, &data)
	return data.Status == ""
}

// ReplayTail says whether an event kind is one the engine writes after the
// workflow function returned (the end of the run, the compensations it
// ran): not an answer to workflow code, so a replay stops before it.
func ReplayTail(kind string) bool {
	switch kind {
	case EvWorkflowCompleted, EvWorkflowFailed, EvWorkflowCancelled, EvCompensationDone, EvCompensationFail:
		return true
	}
	return false
}

// ErrorInfo describes err as a run's history records it.
func ErrorInfo(err error, attempt int, now time.Time) *hoppertype.ErrorInfo {
	return &hoppertype.ErrorInfo{Kind: ErrorKind(err), Message: err.Error(), Attempt: attempt, At: now}
}

// kindsBySentinel are the error kinds a cause may carry, each with the
// sentinel it matches, in the order ErrorKind tries them.
var kindsBySentinel = []hoppertype.ErrorKind{
	hoppertype.ErrorKindAborted, hoppertype.ErrorKindCancelled, hoppertype.ErrorKindNonDeterminism,
	hoppertype.ErrorKindTimeout, hoppertype.ErrorKindExpired, hoppertype.ErrorKindPanic,
	hoppertype.ErrorKindEncode, hoppertype.ErrorKindDecode, hoppertype.ErrorKindLeaseLost, hoppertype.ErrorKindUnknownType,
}

// ErrorKind is the kind recorded for err: hopper's own error's kind, else
// the kind of the sentinel it matches (a step's, run's or job's error
// matches its kind's, so a child's or an activity's error passed on keeps
// its kind), else handler. An abort wins.
func ErrorKind(err error) hoppertype.ErrorKind {
	var ke *KindError
	if errors.As(err, &ke) {
		return ke.Kind
	}
	for _, k := range kindsBySentinel {
		if errors.Is(err, (&hoppertype.JobError{Kind: k}).Unwrap()) {
			return k
		}
	}
	return hoppertype.ErrorKindHandler
}
