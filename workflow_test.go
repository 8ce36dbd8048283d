package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

type order struct {
	ID     string `json:"order_id"`
	Amount int    `json:"amount"`
	FailAt string `json:"fail_at"`
}

// counter counts step executions by name, for at-most-once-per-record checks.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) inc(k string) {
	c.mu.Lock()
	c.n[k]++
	c.mu.Unlock()
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func TestWorkflowSteps(t *testing.T) { forEachDriver(t, testWorkflowSteps) }

func testWorkflowSteps(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	runs := newCounter()
	wf := hopper.Workflow("three", func(wf hopper.WorkflowContext, in int) (int, error) {
		sum := in
		for _, name := range []string{"a", "b", "c"} {
			v, err := hopper.Step(wf, name, func(ctx context.Context) (int, error) {
				runs.inc(name)
				return len(name) * 10, nil
			}, nil)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, 1, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 31, out)
	for _, n := range []string{"a", "b", "c"} {
		require.Equal(t, 1, runs.get(n))
	}
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.JSONEq(t, `31`, string(info.Output))
	require.Len(t, info.Steps, 3)
	require.Equal(t, "a", info.Steps[0].Name)
	kinds := []string{}
	for _, ev := range info.History {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []string{"workflow_started", "step", "step", "step", "workflow_completed"}, kinds)

	// Starting the same id again returns the existing run.
	h2, err := wf.Start(ctx, c, 99, &hopper.StartOpts{ID: h.ID()})
	require.NoError(t, err)
	require.True(t, h2.Existing())
	out, err = h2.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 31, out)
}

func TestWorkflowDurableSleep(t *testing.T) { forEachDriver(t, testWorkflowDurableSleep) }

func testWorkflowDurableSleep(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	runs := newCounter()
	var clk *hoppertest.Clock
	var woke atomic.Pointer[time.Time]
	wf := hopper.Workflow("sleepy", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if _, err := hopper.Step(wf, "before", func(context.Context) (int, error) { runs.inc("before"); return 1, nil }, nil); err != nil {
			return "", err
		}
		if err := wf.Sleep(time.Hour); err != nil {
			return "", err
		}
		if _, err := hopper.Step(wf, "after", func(context.Context) (int, error) {
			runs.inc("after")
			now := clk.Now()
			woke.Store(&now)
			return 2, nil
		}, nil); err != nil {
			return "", err
		}
		return "woke", nil
	}, nil)
	var c *hopper.Client
	c, clk = hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	start := clk.Now()
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	awaitRunStatus(t, c, h.ID(), hopper.RunWaiting)
	require.Empty(t, c.Active(), "a sleeping run holds no worker")
	require.Equal(t, 1, runs.get("before"))
	require.Zero(t, runs.get("after"))
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, start.Add(time.Hour), row.RunAt, "due when the sleep ends")
	clk.Advance(59 * time.Minute)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunWaiting, info.Status, "not woken early")
	clk.Advance(time.Minute)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "woke", out)
	require.Equal(t, start.Add(time.Hour), *woke.Load(), "woken when the sleep ended, not before")
	require.Equal(t, 1, runs.get("before"), "a recorded step is replayed, not run again")
	require.Equal(t, 1, runs.get("after"))
}

func TestWorkflowHooks(t *testing.T) { forEachDriver(t, testWorkflowHooks) }

type approvalPayload struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

func testWorkflowHooks(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	approval := hopper.DefineHook[approvalPayload]("manager-approval")
	wf := hopper.Workflow("approval", func(wf hopper.WorkflowContext, req string) (approvalPayload, error) {
		h, err := approval.Create(wf)
		if err != nil {
			return approvalPayload{}, err
		}
		if err := wf.Stream().Write(map[string]string{"hook": h.Token()}); err != nil {
			return approvalPayload{}, err
		}
		return h.Wait(nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	changed := onEvents(t, c)
	h, err := wf.Start(ctx, c, "x", nil)
	require.NoError(t, err)
	var token string
	await(t, "the hook", func() bool {
		info, err := c.RunGet(ctx, h.ID())
		if err != nil || len(info.Hooks) == 0 || info.Status != hopper.RunWaiting {
			return false
		}
		token = info.Hooks[0].Token
		return true
	}, changed)
	require.Len(t, token, 32, "128 random bits, hex")
	chunks, err := c.StreamRead(ctx, h.ID(), 0, 10)
	require.NoError(t, err)
	require.Len(t, chunks, 1)
	require.JSONEq(t, `{"hook":"`+token+`"}`, string(chunks[0].Data))

	require.ErrorIs(t, c.HookResume(ctx, "no-such-token", json.RawMessage(`{}`)), hopper.ErrNotFound)
	require.ErrorIs(t, c.HookResume(ctx, token, json.RawMessage(`{not json`)), hopper.ErrInvalidInput)
	require.NoError(t, c.HookResume(ctx, token, json.RawMessage(`{"approved":true,"by":"ada"}`)))
	require.ErrorIs(t, c.HookResume(ctx, token, json.RawMessage(`{"approved":false}`)), hopper.ErrStateConflict, "a hook is resumed once")
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, approvalPayload{Approved: true, By: "ada"}, out, "the run's output is the payload it was resumed with")

	// A hook whose run was cancelled cannot be resumed.
	h2, err := wf.Start(ctx, c, "y", nil)
	require.NoError(t, err)
	var token2 string
	await(t, "the second hook", func() bool {
		info, err := c.RunGet(ctx, h2.ID())
		if err != nil || len(info.Hooks) == 0 || info.Status != hopper.RunWaiting {
			return false
		}
		token2 = info.Hooks[0].Token
		return true
	}, changed)
	require.NoError(t, c.RunCancel(ctx, h2.ID()))
	_, err = h2.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	require.ErrorIs(t, c.HookResume(ctx, token2, json.RawMessage(`{}`)), hopper.ErrStateConflict)
}

func TestWorkflowHookTimeout(t *testing.T) { forEachDriver(t, testWorkflowHookTimeout) }

func testWorkflowHookTimeout(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("timeout", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		_, err := hopper.WaitHook[string](wf, "reply", &hopper.HookWaitOpts{Timeout: time.Minute})
		if errors.Is(err, hopper.ErrHookTimeout) {
			return "timed out", nil
		}
		return "replied", err
	}, nil)
	events := newEventLog()
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	start := clk.Now()
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	// The run waits for the hook until its timeout: its job is deferred
	// to then.
	deferred := events.waitFor(t, func(e hopper.Event) bool {
		return e.JobID == h.ID() && e.Kind == hopper.EventDeferred && e.RunAt.After(start)
	})
	require.Equal(t, start.Add(time.Minute), deferred.RunAt)
	clk.AdvanceTo(deferred.RunAt)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "timed out", out)
}

func TestWorkflowChildAndActivity(t *testing.T) { forEachDriver(t, testWorkflowChildAndActivity) }

func testWorkflowChildAndActivity(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	double := hopper.Define("double", func(_ context.Context, n int) (int, error) { return 2 * n, nil }, nil)
	failing := hopper.Define("failing", func(context.Context, int) (int, error) { return 0, hopper.Abort(errors.New("no")) }, nil)
	child := hopper.Workflow("child", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Activity(wf, double, n, nil)
	}, nil)
	parent := hopper.Workflow("parent", func(wf hopper.WorkflowContext, n int) (string, error) {
		a, err := hopper.Child(wf, child, n, nil)
		if err != nil {
			return "", err
		}
		b, err := hopper.Child(wf, child, a, nil)
		if err != nil {
			return "", err
		}
		_, ferr := hopper.Activity(wf, failing, 1, nil)
		var se *hopper.StepError
		if !errors.As(ferr, &se) || !errors.Is(ferr, hopper.ErrAborted) {
			return "", fmt.Errorf("activity failure not reported: %v", ferr)
		}
		return fmt.Sprint(a, b), nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(double, failing, child, parent))
	ctx := testCtx(t)
	h, err := parent.Start(ctx, c, 5, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "10 20", out)
	kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: h.ID()}))
	require.NoError(t, err)
	require.Len(t, kids, 2)
	for _, k := range kids {
		require.Equal(t, hopper.RunCompleted, k.Status)
		require.Equal(t, "child", k.Workflow)
	}
	done, err := runsOf(c.RunList(ctx, &hopper.RunQuery{Statuses: []hopper.RunStatus{hopper.RunCompleted}, Workflow: "parent"}))
	require.NoError(t, err)
	require.Len(t, done, 1)
	_, err = runsOf(c.RunList(ctx, &hopper.RunQuery{Statuses: []hopper.RunStatus{"bogus"}}))
	require.ErrorIs(t, err, hopper.ErrInvalidInput)

	// RunGet shows the parent's activity as its job stands: dead, aborted.
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, info.Activities, 1)
	act := info.Activities[0]
	require.Equal(t, "failing", act.Name)
	require.Equal(t, hopper.StateDead, act.State)
	require.Equal(t, 1, act.Attempt)
	require.NotNil(t, act.Error)
	require.Len(t, act.Attempts, 1, "the activity's executions, from the feed")
	require.Equal(t, hopper.StateDead, act.Attempts[0].Outcome)
	require.Equal(t, hoppertype.ErrorKindAborted, act.Attempts[0].Error.Kind)
	require.Equal(t, c.WorkerID(), act.Attempts[0].Worker)
	kid, err := c.RunGet(ctx, kids[0].ID)
	require.NoError(t, err)
	require.Len(t, kid.Activities, 1)
	require.Equal(t, hopper.StateSucceeded, kid.Activities[0].State)
	require.Len(t, kid.Steps, 1)
	require.Equal(t, "activity", kid.Steps[0].Kind)
	require.Equal(t, 1, kid.Steps[0].Attempts, "an activity's tries are its job's")
}

// sagaSteps is the order example: charge → reserve → ship, each with a
// compensation.
func sagaWorkflow(name string, trace *[]string, mu *sync.Mutex, strategy hopper.FailureStrategy) *hopper.WorkflowType[order, string] {
	note := func(s string) {
		mu.Lock()
		*trace = append(*trace, s)
		mu.Unlock()
	}
	return hopper.Workflow(name, func(wf hopper.WorkflowContext, o order) (string, error) {
		for _, step := range []string{"charge", "reserve", "ship"} {
			_, err := hopper.Step(wf, step, func(context.Context) (string, error) {
				if o.FailAt == step {
					return "", hopper.Fatal(fmt.Errorf("%s failed", step))
				}
				note(step)
				return step + "-ok", nil
			}, nil)
			if err != nil {
				return "", err
			}
			undo := "undo-" + step
			wf.Compensate(undo, func(context.Context) error { note(undo); return nil })
		}
		return "shipped " + o.ID, nil
	}, &hopper.WorkflowOpts{Strategy: strategy})
}

func TestWorkflowSaga(t *testing.T) { forEachDriver(t, testWorkflowSaga) }

func testWorkflowSaga(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	var trace []string
	wf := sagaWorkflow("order", &trace, &mu, hopper.StrategyCompensate)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)

	h, err := wf.Start(ctx, c, order{ID: "o1", Amount: 42}, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "shipped o1", out)

	mu.Lock()
	trace = nil
	mu.Unlock()
	h, err = wf.Start(ctx, c, order{ID: "o2", FailAt: "ship"}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	var re *hopper.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, hopper.RunCompensated, re.Status)
	mu.Lock()
	require.Equal(t, []string{"charge", "reserve", "undo-reserve", "undo-charge"}, trace, "compensations run last-in first-out")
	mu.Unlock()
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompensated, info.Status)
	require.Equal(t, []hopper.CompensationInfo{{Name: "undo-reserve", Attempt: 1, Executed: true}, {Name: "undo-charge", Attempt: 1, Executed: true}}, info.Compensations)
}

func TestWorkflowStrategies(t *testing.T) { forEachDriver(t, testWorkflowStrategies) }

func testWorkflowStrategies(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var attempts atomic.Int32
	flaky := hopper.Workflow("flaky-wf", func(wf hopper.WorkflowContext, failTimes int) (int, error) {
		n := int(attempts.Add(1))
		if n <= failTimes {
			return 0, fmt.Errorf("attempt %d fails", n)
		}
		return wf.Attempt(), nil
	}, &hopper.WorkflowOpts{MaxRetries: 3, Retry: hopper.RetryPolicy{Base: time.Millisecond}})
	quarantine := hopper.Workflow("q", func(wf hopper.WorkflowContext, _ int) (int, error) {
		return 0, errors.New("keep me for inspection")
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyQuarantine})
	ignore := hopper.Workflow("i", func(wf hopper.WorkflowContext, _ int) (int, error) {
		return 0, errors.New("just fail")
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(flaky, quarantine, ignore))
	ctx := testCtx(t)

	h, err := flaky.Start(ctx, c, 2, nil)
	require.NoError(t, err)
	got, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, got, "retried from the beginning as attempt 3")

	hq, err := quarantine.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = hq.Result(ctx)
	var re *hopper.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, hopper.RunQuarantined, re.Status)
	info, err := c.RunGet(ctx, hq.ID())
	require.NoError(t, err)
	require.Equal(t, 1, info.Attempt, "quarantine does not retry")

	hi, err := ignore.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = hi.Result(ctx)
	require.ErrorAs(t, err, &re)
	require.Equal(t, hopper.RunFailed, re.Status)
	require.Contains(t, re.Message, "just fail")
}

func TestWorkflowNonDeterminism(t *testing.T) { forEachDriver(t, testWorkflowNonDeterminism) }

func testWorkflowNonDeterminism(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var changed atomic.Bool
	wf := hopper.Workflow("drifty", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		name := "first"
		if changed.Load() {
			name = "renamed"
		}
		if _, err := hopper.Step(wf, name, func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
			return 0, err
		}
		if err := wf.Sleep(time.Hour); err != nil {
			return 0, err
		}
		return 2, nil
	}, nil)
	spy := spyOn(newDriver(t))
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: spy})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	awaitRunStatus(t, c, h.ID(), hopper.RunWaiting)
	changed.Store(true) // a deploy renames the step while the run sleeps
	clk.Advance(time.Hour)
	awaitRunStatus(t, c, h.ID(), hopper.RunStuck)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.NotNil(t, info.Error)
	require.Contains(t, info.Error.Message, `step "first"`)
	require.Contains(t, info.Error.Message, `step "renamed"`)
	job, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateStuck, job.State)
	require.False(t, *job.Stuck.Retryable, "a divergence is not retryable")
	require.NotNil(t, info.Stuck, "the run carries the stuck slot")
	require.Equal(t, hopper.StuckEngineFailure, info.Stuck.Cause)
	// The retry observer passes it over: the same code would diverge again.
	awaitRetryObserverPassed(t, spy, h.ID())
	info, err = c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunStuck, info.Status)

	// Cancelling the stuck run ends it at once, and its waiter learns it.
	require.NoError(t, c.RunCancel(ctx, h.ID()))
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	info, err = c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCancelled, info.Status)
}

func TestWorkflowCancel(t *testing.T) { forEachDriver(t, testWorkflowCancel) }

func testWorkflowCancel(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	var undone []string
	child := hopper.Workflow("sleeper", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		return 0, wf.Sleep(24 * time.Hour)
	}, nil)
	wf := hopper.Workflow("cancellable", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		if _, err := hopper.Step(wf, "reserve", func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
			return 0, err
		}
		wf.Compensate("release", func(context.Context) error {
			mu.Lock()
			undone = append(undone, "release")
			mu.Unlock()
			return nil
		})
		return hopper.Child(wf, child, hopper.None{}, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf, child))
	ctx := testCtx(t)
	changed := onEvents(t, c)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	await(t, "parent and child to wait", func() bool {
		kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: h.ID(), Statuses: []hopper.RunStatus{hopper.RunWaiting}}))
		info, err2 := c.RunGet(ctx, h.ID())
		return err == nil && err2 == nil && len(kids) == 1 && info.Status == hopper.RunWaiting
	}, changed)
	require.NoError(t, c.RunCancel(ctx, h.ID()))
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	mu.Lock()
	require.Equal(t, []string{"release"}, undone, "cancelling runs the compensations")
	mu.Unlock()
	kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: h.ID()}))
	require.NoError(t, err)
	require.Len(t, kids, 1)
	_, err = child.Handle(c, kids[0].ID).Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled, "cancel cascades to children")
	require.ErrorIs(t, c.RunCancel(ctx, h.ID()), hopper.ErrStateConflict)
}

// TestSleepingWorkflowsHoldNoGoroutines: 10,000 runs sleeping at once (on
// the memory driver; 500 on the SQL drivers, which pay a round trip per
// history write) hold no goroutines, and all wake.
func TestSleepingWorkflowsHoldNoGoroutines(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := newDriver(t)
		n := 500
		if d.Name() == "memory" {
			n = 10_000
		}
		if raceEnabled {
			n = 200
		}
		wf := hopper.Workflow("nap", func(wf hopper.WorkflowContext, _ int) (int, error) {
			return 1, wf.Sleep(time.Hour)
		}, nil)
		// A lease longer than the hour the clock jumps (see
		// TestResumeReadsHistoryOnce).
		var mu sync.Mutex
		asleep := map[string]bool{}
		var slept changes
		c, clk := hoppertest.NewClient(t, hopper.Config{Driver: d, MaxWorkers: 200, Visibility: 2 * time.Hour, OnEvent: func(e hopper.Event) {
			if e.Kind == hopper.EventDeferred && e.RunAt.After(hoppertest.Epoch()) {
				mu.Lock()
				asleep[e.JobID] = true
				mu.Unlock()
				slept.notify()
			}
		}})
		require.NoError(t, c.Register(wf))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before := runtime.NumGoroutine()
		var hs []*hopper.RunHandle[int]
		for i := range n {
			h, err := wf.Start(ctx, c, i, nil)
			require.NoError(t, err)
			hs = append(hs, h)
		}
		countWaiting := func() int {
			waiting := 0
			for off := 0; off < n; off += 1000 {
				rs, err := runsOf(c.RunList(ctx, &hopper.RunQuery{Statuses: []hopper.RunStatus{hopper.RunWaiting}, Limit: 1000, Offset: off}))
				require.NoError(t, err)
				waiting += len(rs)
			}
			return waiting
		}
		// Each run's job is deferred to the sleep's end once, an event
		// raised after its attempt left Active and its suspension committed.
		await(t, "every run to sleep", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(asleep) == n
		}, slept.next)
		require.Equal(t, n, countWaiting())
		require.Empty(t, c.Active())
		// Goroutines that wind down after the last suspension (idle pooled
		// workers, store connections) may linger a moment, and their end
		// announces nothing; runs that held goroutines would keep n of them
		// for the hour.
		poll(t, fmt.Sprintf("%d sleeping runs to hold no goroutines (pooled workers aside)", n), func() bool {
			return runtime.NumGoroutine()-before < 300
		})
		clk.Advance(time.Hour)
		for _, h := range hs {
			v, err := h.Result(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, v)
		}
	})
}

// historyCounter counts a driver's history reads.
// Executor is the spy itself.
func (d *historyCounter) Executor() driver.Executor { return d }

type historyCounter struct {
	driver.Driver
	baseExec
	reads atomic.Int64
}

func (d *historyCounter) RunEventList(ctx context.Context, p *driver.RunEventListParams) ([]*hoppertype.RunEvent, error) {
	d.reads.Add(1)
	return d.baseExec.RunEventList(ctx, p)
}

func (d *historyCounter) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	d.reads.Add(1)
	return d.baseExec.RunLoad(ctx, params)
}

// TestResumeReadsHistoryOnce: resuming a run after N recorded steps reads
// its history once and runs none of the N again.
func TestResumeReadsHistoryOnce(t *testing.T) { forEachDriver(t, testResumeReadsHistoryOnce) }

func testResumeReadsHistoryOnce(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	const n = 100
	var ran atomic.Int64
	wf := hopper.Workflow("long", func(wf hopper.WorkflowContext, _ hopper.None) (int64, error) {
		step := func(name string) error {
			_, err := hopper.Step(wf, name, func(context.Context) (int, error) { ran.Add(1); return 1, nil }, nil)
			return err
		}
		for i := range n {
			if err := step(fmt.Sprint("s", i)); err != nil {
				return 0, err
			}
		}
		if err := wf.Sleep(time.Hour); err != nil {
			return 0, err
		}
		return ran.Load(), step("last")
	}, nil)
	base := newDriver(t)
	d := &historyCounter{Driver: base, baseExec: base.Executor()}
	// A lease longer than the hour the clock jumps: an execution still in
	// flight when it jumps (the suspension's recheck may run one) must not
	// be rescued, which would retry on a clock that no longer moves.
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: d, Visibility: 2 * time.Hour})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	changed := onEvents(t, c)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	await(t, "the run to sleep", func() bool {
		rs, err := runsOf(c.RunList(ctx, &hopper.RunQuery{Statuses: []hopper.RunStatus{hopper.RunWaiting}}))
		require.NoError(t, err)
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		return len(rs) == 1 && len(c.Active()) == 0 && row.State == hopper.StateScheduled
	}, changed)
	require.EqualValues(t, n, ran.Load())
	d.reads.Store(0)
	clk.Advance(time.Hour)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, out, "no recorded step ran again")
	require.EqualValues(t, n+1, ran.Load())
	require.EqualValues(t, 1, d.reads.Load(), "one history read to resume after %d steps", n)
}

// TestWorkflowSkipQueue: a SkipQueue workflow's first execution runs in the
// starting process at once, even on a queue no producer of this client
// polls; a plain one started there waits for a worker of that queue.
func TestWorkflowSkipQueue(t *testing.T) { forEachDriver(t, testWorkflowSkipQueue) }

func testWorkflowSkipQueue(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	body := func(wf hopper.WorkflowContext, in int) (int, error) {
		return hopper.Step(wf, "double", func(context.Context) (int, error) { return 2 * in, nil }, nil)
	}
	fast := hopper.Workflow("fast", body, &hopper.WorkflowOpts{SkipQueue: true})
	slow := hopper.Workflow("slow", body, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	nowhere := &hopper.StartOpts{Queue: "nowhere"} // no producer of c polls it
	require.NoError(t, c.Register(fast))
	require.NoError(t, c.Register(slow))
	ctx := testCtx(t)

	h, err := fast.Start(ctx, c, 21, nowhere)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, out)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.Len(t, info.Steps, 1)

	// Starting the same id again returns the run, without running it again.
	h2, err := fast.Start(ctx, c, 5, &hopper.StartOpts{ID: h.ID()})
	require.NoError(t, err)
	require.True(t, h2.Existing())

	s, err := slow.Start(ctx, c, 1, nowhere)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.Result(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no worker polls the queue")
	info, err = c.RunGet(ctx, s.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunPending, info.Status)
}

// TestWorkflowRescueThenLateCompletion: a run's worker stalls past its
// lease inside a step; another worker rescues the run and completes it;
// when the stalled worker returns, nothing it does reaches the run's
// history or status (every write is fenced by the lease).
func TestWorkflowRescueThenLateCompletion(t *testing.T) {
	forEachDriver(t, testWorkflowRescueThenLateCompletion)
}

func testWorkflowRescueThenLateCompletion(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	clkA := hoppertest.NewClock(time.Time{}) // never moves: A never heartbeats
	stalled, released := make(chan struct{}), make(chan struct{})
	slow := hopper.Workflow("late-run", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		return hopper.Step(wf, "work", func(context.Context) (string, error) {
			close(stalled)
			<-released
			return "late", nil
		}, nil)
	}, nil)
	a, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkA, WorkerID: "A", MaxWorkers: 1})
	require.NoError(t, a.Register(slow))
	h, err := slow.Start(ctx, a, hopper.None{}, nil)
	require.NoError(t, err)
	<-stalled

	clkB := hoppertest.NewClock(clkA.Now().Add(time.Minute))
	fast := hopper.Workflow("late-run", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		return hopper.Step(wf, "work", func(context.Context) (string, error) { return "rescued", nil }, nil)
	}, nil)
	events := newEventLog()
	b, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkB, WorkerID: "B", OnEvent: events.hook})
	require.NoError(t, b.Register(fast))
	rescueBy(t, b, events, clkB, h.ID())
	info, err := b.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.JSONEq(t, `"rescued"`, string(info.Output))
	before := len(info.History)

	// A's step returns at last: its record is fenced off, and so is its end.
	// Stop waits for the attempt to return and its outcome to be tried.
	close(released)
	require.NoError(t, a.Stop(ctx))
	require.Empty(t, a.Active())
	info, err = b.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.JSONEq(t, `"rescued"`, string(info.Output))
	require.Len(t, info.History, before, "a late worker adds nothing to the history")
	require.Len(t, info.Steps, 1)
	require.JSONEq(t, `"rescued"`, string(info.Steps[0].Output))
	all, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: h.ID()})
	require.NoError(t, err)
	for _, ev := range all {
		require.NotContains(t, string(ev.Data), "late", "no event of A's survives")
	}
}

// An activity's executions appear in the run's timeline, in place: its
// start, heartbeat messages, failure and retry, from its job's changes.
func TestActivityTimeline(t *testing.T) { forEachDriver(t, testActivityTimeline) }

func testActivityTimeline(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	flaky := hopper.Define("flaky", func(ctx context.Context, n int) (int, error) {
		jc := hopper.JobFromContext(ctx)
		if jc.Attempt() == 1 {
			return 0, errors.New("first try fails")
		}
		if err := jc.HeartbeatMessage(ctx, "half way"); err != nil {
			return 0, err
		}
		if err := jc.HeartbeatMessage(ctx, ""); err != nil { // renews only
			return 0, err
		}
		return n + 1, nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 3, Backoff: hopper.BackoffConstant, Base: 10 * time.Millisecond, Jitter: hopper.NoJitter}})
	wf := hopper.Workflow("timeline", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Activity(wf, flaky, n, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(flaky, wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, 1, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, out)

	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	var kinds []string
	for _, ev := range info.Timeline {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []string{"workflow_started", "activity_scheduled", "activity_started", "activity_failed", "activity_retry",
		"activity_started", "activity_heartbeat", "activity_completed", "workflow_completed"}, kinds)
	data := func(i int) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(info.Timeline[i].Data, &m))
		return m
	}
	job := info.Activities[0].JobID
	for i := 2; i <= 6; i++ {
		require.Equal(t, job, data(i)["job"], "derived events name the activity's job")
		require.Equal(t, "flaky", info.Timeline[i].Name)
		require.Zero(t, info.Timeline[i].Seq, "derived events are not history")
	}
	require.EqualValues(t, 1, data(2)["attempt"])
	require.Equal(t, c.WorkerID(), data(2)["worker"])
	require.Equal(t, "first try fails", data(3)["error"].(map[string]any)["message"])
	require.EqualValues(t, 2, data(4)["attempt"], "the retry names the next attempt")
	require.NotEmpty(t, data(4)["until"])
	require.Equal(t, "half way", data(6)["message"])
	require.Len(t, info.History, 4, "the history holds only what replay reads")

	// The job's attempts carry the message too.
	atts, err := c.JobAttempts(ctx, job)
	require.NoError(t, err)
	require.Len(t, atts, 2)
	require.Empty(t, atts[0].Heartbeats)
	require.Len(t, atts[1].Heartbeats, 1)
	require.Equal(t, "half way", atts[1].Heartbeats[0].Message)
	require.Equal(t, hopper.StateSucceeded, atts[1].Outcome, "a heartbeat does not end the attempt")
}
