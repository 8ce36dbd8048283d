package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
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
	EventRunStep         = hoppertype.EventRunStep
	EventWorkerJoined    = hoppertype.EventWorkerJoined
	EventWorkerLeft      = hoppertype.EventWorkerLeft
	EventScheduleFired   = hoppertype.EventScheduleFired
)

// EventKinds returns every lifecycle event kind, jobs' then runs' (a fresh
// slice at each call).
func EventKinds() []EventKind {
	return []EventKind{
		EventQueued, EventStarted, EventDeferred, EventSucceeded, EventFailed, EventExpired, EventCancelled,
		EventStuck, EventRedriven, EventGroupDone, EventScaled,
		EventRunQueued, EventRunStarted, EventRunWaiting, EventRunResumed, EventRunRetrying, EventRunCompleted, EventRunFailed,
		EventRunCompensating, EventRunCompensated, EventRunCancelled, EventRunStuck, EventRunQuarantined, EventRunRestarted,
		EventRunStep, EventWorkerJoined, EventWorkerLeft, EventScheduleFired,
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
// again). A worker's change is worker-joined or worker-left (Worker); a
// schedule's is schedule-fired (Schedule, RunAt the occurrence).
func EventOf(ch *Change) (Event, bool) {
	if ch == nil || ch.IsHeartbeat() {
		return Event{}, false
	}
	e := Event{Type: ch.Type, Queue: ch.Queue, Cursor: hoppertype.CursorOf(ch), At: ch.At}
	if ch.Error != nil {
		e.Error = ch.Error.Message
	}
	switch ch.Kind {
	case ChangeWorker:
		e.Worker, e.Kind = ch.EntityID, EventWorkerJoined
		if ch.State == hoppertype.ChangeStateLeft {
			e.Kind = EventWorkerLeft
		}
		return e, true
	case ChangeSchedule:
		e.Kind, e.Schedule, e.RunAt, e.Attempt = EventScheduleFired, ch.EntityID, ch.DueAt, ch.Attempt
		return e, true
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

// EventOpts tune a read of the store's events.
type EventOpts struct {
	// Limit caps the changes of the feed one EventList reads: 1 to 1000,
	// 100 when 0. TailEvents reads pages of its own size.
	Limit int
	// Steps adds a run-step event (EventRunStep) before each run event
	// that ends an execution of a workflow run (run-waiting, -completed,
	// -failed, -retrying, …), for each step the execution completed,
	// read from the run's history: one read of the history per
	// execution. A reader reports each step once; separate EventList
	// calls may report a run's earlier steps again.
	Steps bool
}

// EventList returns the lifecycle events of up to opts.Limit changes of
// the store's feed after the cursor, in delivery order, and the cursor to
// read on from: that of the last change read, which may record no event
// (pass it back as is). The events are every process's: jobs enqueued,
// started and finished anywhere the store is shared, and every workflow
// run's status. See EventOf for what each carries.
func (c *Client) EventList(ctx context.Context, after ChangeCursor, opts *EventOpts) ([]Event, ChangeCursor, error) {
	o := EventOpts{}
	if opts != nil {
		o = *opts
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	r := c.NewEventReader(after, &o)
	evs, err := r.Next(ctx)
	if err != nil {
		return nil, after, err
	}
	return evs, r.at, nil
}

// TailEvents calls fn with each lifecycle event the store records after
// the cursor, in the feed's delivery order, following the feed until ctx
// ends (it then returns nil) or fn returns an error (returned as is). An
// event is delivered at least once: to resume after a restart, keep the
// last event's Cursor and pass it back (ChangeTail gives the cursor of
// "from now on"; the zero cursor starts at the oldest change retention
// kept). It reads the feed when this client commits something and every
// PollInterval otherwise, on the client's clock. opts may be nil.
func (c *Client) TailEvents(ctx context.Context, after ChangeCursor, opts *EventOpts, fn func(Event) error) error {
	if fn == nil {
		return fmt.Errorf("%w: TailEvents needs a function", ErrInvalidInput)
	}
	o := EventOpts{Limit: 500}
	if opts != nil {
		o.Steps = opts.Steps
	}
	nudge := make(chan struct{}, 1)
	unsub := c.Subscribe(func(Event) {
		select {
		case nudge <- struct{}{}:
		default:
		}
	})
	defer unsub()
	r := c.NewEventReader(after, &o)
	var read time.Time // when the last page was read, by the wall clock
	for {
		read = time.Now()
		evs, err := r.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		if r.Full() {
			continue
		}
		t := hclock.NewBackgroundTimer(c.clock, c.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-nudge:
			// A busy client commits thousands of times a second: read the
			// burst in one page, at most one read per tailBatch. The wall
			// clock, not the client's: it paces reads, decides nothing.
			if wait := tailBatch - time.Since(read); wait > 0 {
				pause := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-pause.C:
				}
				pause.Stop()
			}
		case <-t.C():
		}
		t.Stop()
	}
}

// tailBatch is the least time between two reads of the feed by a tail
// nudged by its client's commits.
const tailBatch = 20 * time.Millisecond

// EventReader reads the store's events page after page, as EventList
// does, remembering between pages what EventOpts.Steps needs (the last
// step it reported of each live run). Make one with Client.NewEventReader.
type EventReader struct {
	c     *Client
	at    ChangeCursor
	limit int
	steps map[string]stepMark // nil: no step events
	read  int                 // changes the last page read
}

// stepMark is the last step a reader reported of a run: its attempt and
// place in the history.
type stepMark struct{ attempt, seq int }

// stepMarks caps the runs a reader remembers; past it, a run's steps may
// be reported again.
const stepMarks = 1 << 16

// NewEventReader returns a reader of the store's events after the cursor;
// opts may be nil.
func (c *Client) NewEventReader(after ChangeCursor, opts *EventOpts) *EventReader {
	r := &EventReader{c: c, at: after, limit: 100}
	if opts != nil {
		if opts.Limit != 0 {
			r.limit = opts.Limit
		}
		if opts.Steps {
			r.steps = map[string]stepMark{}
		}
	}
	return r
}

// Cursor is where the reader stands: the cursor of the last change it
// read.
func (r *EventReader) Cursor() ChangeCursor { return r.at }

// Full reports whether the last page read as many changes as it could:
// more may be there at once.
func (r *EventReader) Full() bool { return r.read == r.limit }

// Next reads the next page of changes and returns their events (none
// when the page holds none; the reader still moves past its changes).
func (r *EventReader) Next(ctx context.Context) ([]Event, error) {
	r.read = 0
	chs, err := r.c.ChangeList(ctx, r.at, r.limit)
	if err != nil {
		return nil, err
	}
	r.read = len(chs)
	var out []Event
	for _, ch := range chs {
		e, ok := EventOf(ch)
		if ok && r.steps != nil && ch.Kind == ChangeRun {
			steps, err := r.runSteps(ctx, ch, e)
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		r.at = hoppertype.CursorOf(ch)
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// runSteps returns the run-step events of the execution that the run's
// change ch (its event e) ends, each with the cursor before ch: a reader
// resumed from one reads ch again, and reports its steps again.
func (r *EventReader) runSteps(ctx context.Context, ch *Change, e Event) ([]Event, error) {
	if e.Status.Terminal() {
		defer delete(r.steps, e.RunID)
	}
	if RunStatus(ch.Prev) != RunRunning && RunStatus(ch.Prev) != RunCompensating {
		return nil, nil // no execution ended
	}
	hist, err := r.c.store().RunEventList(ctx, &driver.RunEventListParams{RunID: e.RunID})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil // deleted since
		}
		return nil, fmt.Errorf("hopper: read the history of run %s: %w", e.RunID, err)
	}
	// The change says where the history stood when it was written: the
	// execution it ends completed the steps up to there (a store without
	// the mark, 0, gives the whole latest attempt).
	attempt, upTo := ch.Attempt, ch.Seq
	if upTo == 0 {
		for _, ev := range hist {
			attempt, upTo = max(attempt, ev.Attempt), max(upTo, ev.Seq)
		}
	}
	mark, seen := r.steps[e.RunID]
	if !seen || mark.attempt != attempt {
		mark = stepMark{attempt: attempt}
	}
	var out []Event
	for _, ev := range hist {
		if ev.Attempt != attempt || ev.Seq <= mark.seq || ev.Seq > upTo {
			continue
		}
		mark.seq = ev.Seq
		if ev.Kind != engine.EvStep {
			continue
		}
		se := Event{Kind: EventRunStep, RunID: e.RunID, Type: e.Type, Queue: e.Queue, Step: ev.Name, Attempt: attempt,
			Status: e.Status, Cursor: r.at, At: ev.At}
		var data engine.EventData
		if json.Unmarshal(ev.Data, &data) == nil && data.Error != nil {
			se.Error = data.Error.Message
		}
		out = append(out, se)
	}
	if !e.Status.Terminal() && (seen || len(r.steps) < stepMarks) {
		r.steps[e.RunID] = mark
	}
	return out, nil
}
