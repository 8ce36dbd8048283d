package hopper

import (
	"context"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// This file derives lifecycle events from the store's change feed: the
// events of every process sharing the store, in the feed's delivery order,
// each with the cursor to resume after it.

// Run event kinds (see hoppertype for each one's meaning).
const (
	EventRunQueued       = hoppertype.EventRunQueued
	EventRunStarted      = hoppertype.EventRunStarted
	EventRunWaiting      = hoppertype.EventRunWaiting
	EventRunResumed      = hoppertype.EventRunResumed
	EventRunRetrying     = hoppertype.EventRunRetrying
	EventRunCompleted    = hoppertype.EventRunCompleted
	EventRunFailed       = hoppertype.EventRunFailed
	EventRunCompensating = hoppertype.EventRunCompensating
	EventRunCompensated  = hoppertype.EventRunCompensated
	EventRunCancelled    = hoppertype.EventRunCancelled
	EventRunStuck        = hoppertype.EventRunStuck
	EventRunQuarantined  = hoppertype.EventRunQuarantined
	EventRunRestarted    = hoppertype.EventRunRestarted
)

// EventKinds returns every lifecycle event kind, jobs' then runs' (a fresh
// slice at each call).
func EventKinds() []EventKind {
	return []EventKind{
		EventQueued, EventStarted, EventDeferred, EventSucceeded, EventFailed, EventExpired, EventCancelled,
		EventStuck, EventRedriven, EventGroupDone, EventScaled,
		EventRunQueued, EventRunStarted, EventRunWaiting, EventRunResumed, EventRunRetrying, EventRunCompleted, EventRunFailed,
		EventRunCompensating, EventRunCompensated, EventRunCancelled, EventRunStuck, EventRunQuarantined, EventRunRestarted,
	}
}

// EventOf returns the lifecycle event a change of the feed records, and
// false for a change that records none (a heartbeat's message, a waiting
// job moved to another waiting state). Events from the store carry less
// than those raised in-process: no Result, Deadline, group or parent
// (read the job for them); they carry the Cursor, the Worker and RunAt
// (when the job was due: At − RunAt is the pickup lag) of a start, and the
// error or stuck cause of the change.
//
// A job's change maps by its states: created → queued; into running →
// started; running into retrying → failed, will retry; running into
// pending or scheduled → deferred; into succeeded → succeeded; into dead →
// failed, will not retry; into expired, cancelled or stuck → the same; an
// ended or stuck job made pending again → redriven. A run's change maps
// to the run-… kind of its new status (run-started when it leaves
// pending, run-resumed when it leaves waiting, run-retrying when a failed
// execution sends it back to pending, run-restarted when an ended run runs
// again).
func EventOf(ch *Change) (Event, bool) {
	if ch == nil || ch.IsHeartbeat() {
		return Event{}, false
	}
	e := Event{Type: ch.Type, Queue: ch.Queue, Cursor: hoppertype.CursorOf(ch), At: ch.At}
	if ch.Error != nil {
		e.Error = ch.Error.Message
	}
	if ch.Kind == ChangeRun {
		e.RunID, e.Status = ch.EntityID, RunStatus(ch.State)
		e.Kind = runEventKind(RunStatus(ch.Prev), e.Status)
		return e, e.Kind != ""
	}
	e.JobID, e.Attempt, e.Stuck = ch.EntityID, ch.Attempt, ch.Stuck
	if strings.HasPrefix(ch.Type, engine.WorkflowTypePrefix) {
		e.RunID = ch.EntityID // a run's own job has the run's id
	}
	prev, state := JobState(ch.Prev), JobState(ch.State)
	switch {
	case prev == "":
		e.Kind = EventQueued
		if state.Terminal() || state == StateStuck || state == StateRunning {
			e.Kind = jobEndKind(state) // created ended (an insert that is also its outcome)
		}
	case state == StateRunning:
		if prev == StateRunning {
			return Event{}, false
		}
		e.Kind, e.Worker, e.RunAt = EventStarted, ch.Worker, ch.DueAt
	case prev == StateRunning && state == StateRetrying:
		e.Kind, e.WillRetry = EventFailed, true
	case prev == StateRunning && (state == StatePending || state == StateScheduled):
		e.Kind = EventDeferred
	case state.Terminal() || state == StateStuck:
		e.Kind = jobEndKind(state)
	case prev.Terminal() || prev == StateStuck:
		e.Kind = EventRedriven
	}
	if e.Kind != EventFailed && e.Kind != EventExpired && e.Kind != EventCancelled && e.Kind != EventStuck {
		e.Error = ""
	}
	return e, e.Kind != ""
}

// jobEndKind is the event of a job's change into an ended or stuck state
// (started for running, the one way to be created running).
func jobEndKind(state JobState) EventKind {
	switch state {
	case StateSucceeded:
		return EventSucceeded
	case StateDead:
		return EventFailed
	case StateExpired:
		return EventExpired
	case StateCancelled:
		return EventCancelled
	case StateStuck:
		return EventStuck
	case StateRunning:
		return EventStarted
	}
	return ""
}

// runEventKind is the event of a run's change from prev ("" when the run
// was created) to status.
func runEventKind(prev, status RunStatus) EventKind {
	switch status {
	case RunPending:
		if prev.Terminal() {
			return EventRunRestarted
		}
		if prev == "" {
			return EventRunQueued
		}
		return EventRunRetrying // an execution failed; the run's job retries
	case RunRunning:
		switch {
		case prev == RunWaiting:
			return EventRunResumed
		case prev.Terminal():
			return EventRunRestarted
		}
		return EventRunStarted
	case RunWaiting:
		return EventRunWaiting
	case RunCompleted:
		return EventRunCompleted
	case RunFailed:
		return EventRunFailed
	case RunCompensating:
		return EventRunCompensating
	case RunCompensated:
		return EventRunCompensated
	case RunCancelled:
		return EventRunCancelled
	case RunStuck:
		return EventRunStuck
	case RunQuarantined:
		return EventRunQuarantined
	}
	return ""
}

// EventList returns the lifecycle events of up to limit (1 to 1000)
// changes of the store's feed after the cursor, in delivery order, and the
// cursor to read on from: that of the last change read, which may record
// no event (pass it back as is). The events are every process's: jobs
// enqueued, started and finished anywhere the store is shared, and every
// workflow run's status. See EventOf for what each carries.
func (c *Client) EventList(ctx context.Context, after ChangeCursor, limit int) ([]Event, ChangeCursor, error) {
	chs, err := c.ChangeList(ctx, after, limit)
	if err != nil {
		return nil, after, err
	}
	var out []Event
	for _, ch := range chs {
		after = hoppertype.CursorOf(ch)
		if e, ok := EventOf(ch); ok {
			out = append(out, e)
		}
	}
	return out, after, nil
}

// TailEvents calls fn with each lifecycle event the store records after
// the cursor, in the feed's delivery order, following the feed until ctx
// ends (it then returns nil) or fn returns an error (returned as is). An
// event is delivered at least once: to resume after a restart, keep the
// last event's Cursor and pass it back (ChangeTail gives the cursor of
// "from now on"; the zero cursor starts at the oldest change retention
// kept). It reads the feed when this client commits something and every
// PollInterval otherwise, on the client's clock.
func (c *Client) TailEvents(ctx context.Context, after ChangeCursor, fn func(Event) error) error {
	if fn == nil {
		return fmt.Errorf("%w: TailEvents needs a function", ErrInvalidInput)
	}
	nudge := make(chan struct{}, 1)
	unsub := c.Subscribe(func(Event) {
		select {
		case nudge <- struct{}{}:
		default:
		}
	})
	defer unsub()
	const page = 500
	for {
		chs, err := c.ChangeList(ctx, after, page)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, ch := range chs {
			after = hoppertype.CursorOf(ch)
			if e, ok := EventOf(ch); ok {
				if err := fn(e); err != nil {
					return err
				}
			}
		}
		if len(chs) == page {
			continue
		}
		t := c.clock.NewTimer(c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-nudge:
		case <-t.C():
		}
		t.Stop()
	}
}
