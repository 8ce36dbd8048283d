package hopper_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestEventOf: each change of the feed maps to the lifecycle event its
// states say, and changes that record none map to nothing.
func TestEventOf(t *testing.T) {
	t.Parallel()
	boom := &hoppertype.ErrorInfo{Message: "boom"}
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(prev, state hopper.JobState) *hopper.Change {
		return &hopper.Change{Tx: 7, Position: 9, Kind: hopper.ChangeJob, EntityID: "j", Type: "t", Queue: "q",
			Prev: string(prev), State: string(state), Attempt: 2, Worker: "w1", Error: boom, DueAt: due}
	}
	run := func(prev, status hopper.RunStatus) *hopper.Change {
		return &hopper.Change{Tx: 7, Position: 9, Kind: hopper.ChangeRun, EntityID: "r", Type: "wf", Queue: "q",
			Prev: string(prev), State: string(status), Error: boom}
	}
	cases := []struct {
		name      string
		ch        *hopper.Change
		kind      hopper.EventKind // "" for no event
		willRetry bool
		err       string
	}{
		{"insert", job("", hopper.StatePending), hopper.EventQueued, false, ""},
		{"insert delayed", job("", hopper.StateScheduled), hopper.EventQueued, false, ""},
		{"claim", job(hopper.StatePending, hopper.StateRunning), hopper.EventStarted, false, ""},
		{"claim of a retry", job(hopper.StateRetrying, hopper.StateRunning), hopper.EventStarted, false, ""},
		{"retry", job(hopper.StateRunning, hopper.StateRetrying), hopper.EventFailed, true, "boom"},
		{"dead", job(hopper.StateRunning, hopper.StateDead), hopper.EventFailed, false, "boom"},
		{"snooze", job(hopper.StateRunning, hopper.StateScheduled), hopper.EventDeferred, false, ""},
		{"success", job(hopper.StateRunning, hopper.StateSucceeded), hopper.EventSucceeded, false, ""},
		{"expiry", job(hopper.StatePending, hopper.StateExpired), hopper.EventExpired, false, "boom"},
		{"cancel", job(hopper.StatePending, hopper.StateCancelled), hopper.EventCancelled, false, "boom"},
		{"stuck", job(hopper.StateRunning, hopper.StateStuck), hopper.EventStuck, false, "boom"},
		{"redrive", job(hopper.StateDead, hopper.StatePending), hopper.EventRedriven, false, ""},
		{"redrive of a stuck job", job(hopper.StateStuck, hopper.StatePending), hopper.EventRedriven, false, ""},
		{"retry now", job(hopper.StateRetrying, hopper.StatePending), "", false, ""},
		{"heartbeat", &hopper.Change{Kind: hopper.ChangeJob, EntityID: "j", Prev: "running", State: "running",
			Fields: []string{hoppertype.ChangeFieldHeartbeat}, Detail: "half way"}, "", false, ""},
		{"run start", run("", hopper.RunPending), hopper.EventRunQueued, false, "boom"},
		{"run execution", run(hopper.RunPending, hopper.RunRunning), hopper.EventRunStarted, false, "boom"},
		{"run suspends", run(hopper.RunRunning, hopper.RunWaiting), hopper.EventRunWaiting, false, "boom"},
		{"run resumes", run(hopper.RunWaiting, hopper.RunRunning), hopper.EventRunResumed, false, "boom"},
		{"run retries", run(hopper.RunRunning, hopper.RunPending), hopper.EventRunRetrying, false, "boom"},
		{"run completes", run(hopper.RunRunning, hopper.RunCompleted), hopper.EventRunCompleted, false, "boom"},
		{"run fails", run(hopper.RunRunning, hopper.RunFailed), hopper.EventRunFailed, false, "boom"},
		{"run compensates", run(hopper.RunRunning, hopper.RunCompensating), hopper.EventRunCompensating, false, "boom"},
		{"run compensated", run(hopper.RunCompensating, hopper.RunCompensated), hopper.EventRunCompensated, false, "boom"},
		{"run cancelled", run(hopper.RunWaiting, hopper.RunCancelled), hopper.EventRunCancelled, false, "boom"},
		{"run stuck", run(hopper.RunRunning, hopper.RunStuck), hopper.EventRunStuck, false, "boom"},
		{"run quarantined", run(hopper.RunRunning, hopper.RunQuarantined), hopper.EventRunQuarantined, false, "boom"},
		{"run retried by hand", run(hopper.RunFailed, hopper.RunPending), hopper.EventRunRestarted, false, "boom"},
	}
	joined, ok := hopper.EventOf(&hopper.Change{Kind: hopper.ChangeWorker, EntityID: "w9", State: hoppertype.ChangeStateJoined})
	require.True(t, ok)
	require.Equal(t, hopper.Event{Kind: hopper.EventWorkerJoined, Worker: "w9"}, joined)
	left, _ := hopper.EventOf(&hopper.Change{Kind: hopper.ChangeWorker, EntityID: "w9", Prev: hoppertype.ChangeStateJoined, State: hoppertype.ChangeStateLeft})
	require.Equal(t, hopper.EventWorkerLeft, left.Kind)
	fired, ok := hopper.EventOf(&hopper.Change{Kind: hopper.ChangeSchedule, EntityID: "nightly", State: hoppertype.ChangeStateFired, Attempt: 3, DueAt: due})
	require.True(t, ok)
	require.Equal(t, hopper.Event{Kind: hopper.EventScheduleFired, Schedule: "nightly", RunAt: due, Attempt: 3}, fired)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := hopper.EventOf(tc.ch)
			if tc.kind == "" {
				require.False(t, ok, "no event for %s → %s, got %+v", tc.ch.Prev, tc.ch.State, e)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.kind, e.Kind)
			require.Equal(t, tc.willRetry, e.WillRetry)
			require.Equal(t, tc.err, e.Error)
			require.Equal(t, hoppertype.CursorOf(tc.ch), e.Cursor)
			if tc.ch.Kind == hopper.ChangeRun {
				require.Equal(t, "r", e.RunID)
				require.Equal(t, hopper.RunStatus(tc.ch.State), e.Status)
				require.Empty(t, e.JobID)
				return
			}
			require.Equal(t, "j", e.JobID)
			require.Equal(t, 2, e.Attempt)
			if tc.kind == hopper.EventStarted {
				require.Equal(t, "w1", e.Worker)
				require.Equal(t, due, e.RunAt, "a start says when the job was due")
			}
		})
	}
	_, ok = hopper.EventOf(nil)
	require.False(t, ok)
}

// TestTailEventsSeesTheFleet: a client that works nothing sees, from the
// store, every transition another client's worker made — a job's failed
// attempt, its retry and success; a workflow run from start to end — in
// order, and a tail resumed from an event's cursor goes on from the next
// event.
func TestTailEventsSeesTheFleet(t *testing.T) { forEachDriver(t, testTailEventsSeesTheFleet) }

func testTailEventsSeesTheFleet(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var tries atomic.Int32
	flaky := hopper.Define("flaky", func(ctx context.Context, n int) (int, error) {
		if tries.Add(1) == 1 {
			return 0, errors.New("first try fails")
		}
		return n, nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}})
	wf := hopper.Workflow("double", func(wf hopper.WorkflowContext, in int) (int, error) {
		return hopper.Step(wf, "double", func(context.Context) (int, error) { return 2 * in, nil }, nil)
	}, nil)
	d := newDriver(t)
	ctx := testCtx(t)
	// The watcher only reads: it is never started, runs nothing.
	watcher, err := hopper.New(hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, watcher.Register(flaky, wf))
	from, err := watcher.ChangeTail(ctx)
	require.NoError(t, err)

	worker := newClient(t, hopper.Config{Driver: d, WorkerID: "worker-1"})
	require.NoError(t, worker.Register(flaky, wf))
	jh, err := flaky.Enqueue(ctx, watcher, 5, nil)
	require.NoError(t, err)
	rh, err := wf.Start(ctx, watcher, 4, nil)
	require.NoError(t, err)

	var seen []hopper.Event
	jobDone, runDone := false, false
	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	err = watcher.TailEvents(tailCtx, from, nil, func(e hopper.Event) error {
		seen = append(seen, e)
		jobDone = jobDone || (e.JobID == jh.ID() && e.Kind == hopper.EventSucceeded)
		runDone = runDone || (e.RunID == rh.ID() && e.Kind == hopper.EventRunCompleted)
		if jobDone && runDone {
			stop()
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the tail saw the job succeed and the run complete")

	var jobKinds, runKinds []string
	for i, e := range seen {
		if i > 0 {
			require.True(t, seen[i-1].Cursor.Before(&hopper.Change{Tx: e.Cursor.Tx, Position: e.Cursor.Position}),
				"events come in the feed's order")
		}
		switch {
		case e.JobID == jh.ID():
			jobKinds = append(jobKinds, fmt.Sprintf("%s/%d", e.Kind, e.Attempt))
			if e.Kind == hopper.EventStarted {
				require.Equal(t, "worker-1", e.Worker, "the start names the worker of another client")
				require.False(t, e.RunAt.IsZero(), "the start says when the job was due")
			}
		case e.RunID == rh.ID() && e.JobID == "":
			runKinds = append(runKinds, string(e.Kind))
		}
	}
	require.Equal(t, []string{"queued/0", "started/1", "failed/1", "started/2", "succeeded/2"}, jobKinds)
	require.Equal(t, []string{"run-queued", "run-started", "run-completed"}, runKinds)

	// Resume after the second event: the tail goes on from the third.
	var again []hopper.Event
	err = watcher.TailEvents(ctx, seen[1].Cursor, nil, func(e hopper.Event) error {
		again = append(again, e)
		if len(again) == len(seen)-2 {
			return errStopTail
		}
		return nil
	})
	require.ErrorIs(t, err, errStopTail)
	require.Equal(t, seen[2:], again)

	// A page of EventList says the same, and where to read on.
	page, next, err := watcher.EventList(ctx, from, &hopper.EventOpts{Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, seen, page[:len(seen)])
	require.Equal(t, page[len(page)-1].Cursor, next)
}

var errStopTail = errors.New("stop the tail")

// TestTailEventsRefusesBadInput: a nil function and a bad page size are
// refused.
func TestTailEventsRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := newClient(t, hopper.Config{})
	ctx := testCtx(t)
	require.ErrorIs(t, c.TailEvents(ctx, hopper.ChangeCursor{}, nil, nil), hopper.ErrInvalidInput)
	_, _, err := c.EventList(ctx, hopper.ChangeCursor{}, &hopper.EventOpts{Limit: -1})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	_, _, err = c.EventList(ctx, hopper.ChangeCursor{Tx: -1}, nil)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}

// TestTailEventsSteps: asked for, a run's steps come as run-step events,
// each once, before the run event that ends the execution that completed
// them — across a wait on a hook, after which the second execution
// reports only its own steps.
func TestTailEventsSteps(t *testing.T) { forEachDriver(t, testTailEventsSteps) }

func testTailEventsSteps(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("two-parts", func(wf hopper.WorkflowContext, in int) (int, error) {
		a, err := hopper.Step(wf, "first", func(context.Context) (int, error) { return in + 1, nil }, nil)
		if err != nil {
			return 0, err
		}
		if _, err := hopper.Step(wf, "second", func(context.Context) (int, error) { return a + 1, nil }, nil); err != nil {
			return 0, err
		}
		h, err := hopper.NewHook[int](wf, "go-on")
		if err != nil {
			return 0, err
		}
		if _, err := h.Wait(nil); err != nil {
			return 0, err
		}
		return hopper.Step(wf, "third", func(context.Context) (int, error) { return a * 10, nil }, nil)
	}, nil)
	d := newDriver(t)
	ctx := testCtx(t)
	c := newClient(t, hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	require.NoError(t, c.Register(wf))
	from, err := c.ChangeTail(ctx)
	require.NoError(t, err)
	rh, err := wf.Start(ctx, c, 1, nil)
	require.NoError(t, err)

	var got []string
	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	require.NoError(t, c.TailEvents(tailCtx, from, &hopper.EventOpts{Steps: true}, func(e hopper.Event) error {
		if e.RunID != rh.ID() || e.JobID != "" {
			return nil
		}
		if e.Kind == hopper.EventRunStep {
			got = append(got, "step "+e.Step)
			require.Empty(t, e.Error)
		} else {
			got = append(got, string(e.Kind))
		}
		switch e.Kind {
		case hopper.EventRunWaiting: // on the hook: resume it, the run goes on
			info, err := c.RunGet(ctx, rh.ID())
			require.NoError(t, err)
			require.Len(t, info.Hooks, 1)
			require.NoError(t, c.HookResume(ctx, info.Hooks[0].Token, []byte("1")))
		case hopper.EventRunCompleted:
			stop()
		}
		return nil
	}))
	require.Equal(t, []string{"run-queued", "run-started", "step first", "step second", "run-waiting",
		"run-resumed", "step third", "run-completed"}, got)

	// Without Steps, no step events.
	evs, _, err := c.EventList(ctx, from, &hopper.EventOpts{Limit: 1000})
	require.NoError(t, err)
	for _, e := range evs {
		require.NotEqual(t, hopper.EventRunStep, e.Kind)
	}
}

// TestFleetEvents: from the store, a watcher sees a worker join, its
// schedule fire, and the worker leave.
func TestFleetEvents(t *testing.T) { forEachDriver(t, testFleetEvents) }

func testFleetEvents(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	watcher, err := hopper.New(hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	from, err := watcher.ChangeTail(ctx)
	require.NoError(t, err)

	tick := hopper.Define("fleet-tick", func(context.Context, int) (int, error) { return 0, nil }, nil)
	clk := hoppertest.NewClock(hoppertest.Epoch().Add(30 * time.Second)) // between two occurrences
	w, err := hopper.New(hopper.Config{Driver: d, Clock: clk, WorkerID: "fleet-w1", LeaderTTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, w.Register(tick))
	_, err = w.Schedule(hopper.Schedule{Name: "fleet-every-minute", Cron: "* * * * *", Location: time.UTC,
		Job: func(at time.Time) (*hopper.JobSpec, error) { return tick.Job(0, nil), nil }})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	leads(t, w)
	next := clk.Now().Truncate(time.Minute).Add(time.Minute)
	clk.AdvanceTo(next)
	waitUntil(w, func() bool {
		page, err := w.JobList(ctx, &hopper.ListParams{Types: []string{"fleet-tick"}, Limit: 1})
		return err == nil && len(page.Jobs) == 1
	})
	require.NoError(t, w.Stop(ctx))

	var kinds []string
	var fired hopper.Event
	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	// A tail, not a page: on PostgreSQL a change is listed once final,
	// which a transaction of another test may hold back a moment.
	require.NoError(t, watcher.TailEvents(tailCtx, from, nil, func(e hopper.Event) error {
		switch e.Kind {
		case hopper.EventWorkerJoined, hopper.EventWorkerLeft:
			require.Equal(t, "fleet-w1", e.Worker)
			kinds = append(kinds, string(e.Kind))
			if e.Kind == hopper.EventWorkerLeft {
				stop()
			}
		case hopper.EventScheduleFired:
			fired = e
			kinds = append(kinds, string(e.Kind))
		}
		return nil
	}))
	require.NoError(t, ctx.Err(), "the tail saw the worker leave")
	require.Equal(t, []string{"worker-joined", "schedule-fired", "worker-left"}, kinds)
	require.Equal(t, "fleet-every-minute", fired.Schedule)
	require.True(t, fired.RunAt.Equal(next), "the occurrence: %v, want %v", fired.RunAt, next)
	require.Equal(t, 1, fired.Attempt)
}

// TestChangeListBefore: the feed read backwards from an event's cursor
// gives the changes before it, newest first, page by page.
func TestChangeListBefore(t *testing.T) { forEachDriver(t, testChangeListBefore) }

func testChangeListBefore(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	noop := hopper.Define("back-noop", func(context.Context, int) (int, error) { return 0, nil }, nil)
	d := newDriver(t)
	ctx := testCtx(t)
	// Never started: it runs nothing, so the feed holds only the inserts.
	c, err := hopper.New(hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.Register(noop))
	var ids []string
	for i := range 3 {
		h, err := noop.Enqueue(ctx, c, i, nil)
		require.NoError(t, err)
		ids = append(ids, h.ID())
	}
	// The third job's queued event: every change before it is final.
	var last hopper.ChangeCursor
	err = c.TailEvents(ctx, hopper.ChangeCursor{}, nil, func(e hopper.Event) error {
		if e.JobID == ids[2] {
			last = e.Cursor
			return errStopTail
		}
		return nil
	})
	require.ErrorIs(t, err, errStopTail)

	var got []string
	cur := last
	for range 4 {
		chs, err := c.ChangeListBefore(ctx, cur, 1)
		require.NoError(t, err)
		if len(chs) == 0 {
			break
		}
		require.Len(t, chs, 1)
		got = append(got, chs[0].EntityID)
		cur = hoppertype.CursorOf(chs[0])
	}
	require.Equal(t, []string{ids[1], ids[0]}, got, "newest first, down to the oldest")

	_, err = c.ChangeListBefore(ctx, last, 0)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	_, err = c.ChangeListBefore(ctx, hopper.ChangeCursor{Tx: -1}, 10)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}
