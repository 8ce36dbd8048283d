package hopper_test

import (
	"context"
	"errors"
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

func TestConditionMet(t *testing.T) {
	t.Parallel()
	const (
		ok   = hopper.StateSucceeded
		dead = hopper.StateDead
		exp  = hopper.StateExpired
		canc = hopper.StateCancelled
		run  = hopper.StateRunning
		stk  = hopper.StateStuck
		none = hopper.JobState("")
	)
	cases := []struct {
		name   string
		cond   hopper.Condition
		states []hopper.JobState
		want   bool
	}{
		{"all-done: every terminal state is done", hopper.AllDone(), []hopper.JobState{ok, dead, exp, canc}, true},
		{"all-success: a dead job fails it", hopper.AllSuccess(), []hopper.JobState{ok, dead}, false},
		{"all-success: all succeeded", hopper.AllSuccess(), []hopper.JobState{ok, ok}, true},
		{"zero condition is all-success", hopper.Condition{}, []hopper.JobState{ok, dead}, false},
		{"count 2 of done counts failures", hopper.CountDone(2), []hopper.JobState{ok, dead, none}, true},
		{"count 2 of success", hopper.CountSuccess(2), []hopper.JobState{ok, dead}, false},
		{"a missing job is not done", hopper.AllDone(), []hopper.JobState{ok, none}, false},
		{"a stuck job is not done", hopper.AllDone(), []hopper.JobState{ok, stk}, false},
		{"a running job is not done", hopper.CountDone(1), []hopper.JobState{run}, false},
		{"all-success of nothing holds", hopper.AllSuccess(), nil, true},
		{"count 0 holds at once", hopper.CountDone(0), []hopper.JobState{run}, true},
	}
	for _, c := range cases {
		require.Equal(t, c.want, hopper.ConditionMet(c.cond, c.states), c.name)
	}
	require.Equal(t, "count:2:success", hopper.CountSuccess(2).String())
	require.Equal(t, "all-success", hopper.Condition{}.String())
}

// gateFixture is a step type that counts its runs and fails while fail > 0
// (aborting, so it dead-letters at once).
type gateFixture struct {
	runs  sync.Map // name → *atomic.Int32
	fails sync.Map // name → *atomic.Int32
	step  *hopper.Type[string, string]
}

func newGateFixture() *gateFixture {
	f := &gateFixture{}
	f.step = hopper.Define("gate-step", func(ctx context.Context, name string) (string, error) {
		n, _ := f.runs.LoadOrStore(name, &atomic.Int32{})
		n.(*atomic.Int32).Add(1)
		if v, ok := f.fails.Load(name); ok && v.(*atomic.Int32).Add(-1) >= 0 {
			return "", hopper.Abort(errors.New(name + " fails"))
		}
		return name + "!", nil
	}, nil)
	return f
}

func (f *gateFixture) failOnce(name string) {
	n := &atomic.Int32{}
	n.Store(1)
	f.fails.Store(name, n)
}

func (f *gateFixture) count(name string) int {
	n, ok := f.runs.Load(name)
	if !ok {
		return 0
	}
	return int(n.(*atomic.Int32).Load())
}

func TestGateStandalone(t *testing.T) { forEachDriver(t, testGateStandalone) }

func testGateStandalone(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)

	a, b := f.step.Job("a", nil), f.step.Job("b", nil)
	final := f.step.Job("final", nil)
	gate := hopper.Gate([]string{a.ID(), b.ID()}, []*hopper.JobSpec{final}, hopper.AllSuccess(), 0)
	hs, err := c.EnqueueMany(ctx, gate, a, b)
	require.NoError(t, err)
	g, err := hs[0].Group(ctx)
	require.NoError(t, err, "the gate's group settles once the jobs it queued did")
	require.True(t, g.Settled)
	var v string
	require.NoError(t, g.Decode(&v))
	require.Equal(t, "final!", v)

	row, err := c.JobGet(ctx, final.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.ElementsMatch(t, []string{a.ID(), b.ID()}, row.Dependents, "a job queued by a gate sees the ids it waited on")
	require.Equal(t, gate.ID(), row.ParentID)
	require.Equal(t, gate.ID(), row.GroupID)
	gateRow, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, gateRow.State)
	require.Equal(t, 1, f.count("final"), "the gate fired once")
	for _, n := range []string{"a", "b"} {
		j, err := c.JobGet(ctx, map[string]string{"a": a.ID(), "b": b.ID()}[n])
		require.NoError(t, err)
		require.True(t, j.EndedAt.Before(row.StartedAt) || j.EndedAt.Equal(row.StartedAt), "%s ended before final started", n)
	}
}

func TestGateThenChain(t *testing.T) { forEachDriver(t, testGateThenChain) }

func testGateThenChain(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	var mu sync.Mutex
	var order []string
	record := hopper.Define("then-record", func(ctx context.Context, name string) (string, error) {
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		return name, nil
	}, nil)
	root := hopper.Define("then-root", func(ctx context.Context, n int) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		for range n {
			if err := jc.Spawn(record.Job("child", nil)); err != nil {
				return hopper.None{}, err
			}
		}
		jc.Then(hopper.AllSuccess(), record.Job("second", nil)).
			Then(hopper.AllDone(), record.Job("third", nil), record.Job("third", nil))
		return hopper.None{}, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(f.step, record, root))
	ctx := testCtx(t)

	h, err := root.Enqueue(ctx, c, 4, nil)
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	require.True(t, g.Settled)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"child", "child", "child", "child", "second", "third", "third"}, order,
		"each link runs after the previous link's jobs")

	page, err := c.JobList(ctx, &hopper.ListParams{Types: []string{"then-record"}})
	require.NoError(t, err)
	for _, j := range page.Jobs {
		require.Equal(t, h.GroupID(), j.GroupID, "every link joins the root's group")
		switch string(j.Input) {
		case `"second"`:
			require.Len(t, j.Dependents, 4, "second waited on the four children")
		case `"third"`:
			require.Len(t, j.Dependents, 1, "third waited on second")
		}
	}
}

func TestGateFailedBlockerIsStuckUntilRedriven(t *testing.T) {
	forEachDriver(t, testGateFailedBlocker)
}

func testGateFailedBlocker(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	f.failOnce("a")
	events := newEventLog()
	c := newClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)

	a, b, final := f.step.Job("a", nil), f.step.Job("b", nil), f.step.Job("final", nil)
	gate := hopper.Gate([]string{a.ID(), b.ID()}, []*hopper.JobSpec{final}, hopper.AllSuccess(), 0)
	_, err := c.EnqueueMany(ctx, a, b, gate)
	require.NoError(t, err)

	ev := events.waitFor(t, func(e hopper.Event) bool { return e.Kind == hopper.EventStuck && e.JobID == gate.ID() })
	require.Contains(t, ev.Error, "failed-blocker")
	require.NotNil(t, ev.Stuck)
	require.Equal(t, hopper.StuckFailedBlocker, ev.Stuck.Cause)
	require.Equal(t, []string{a.ID()}, ev.Stuck.BlockerIDs)
	row, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateStuck, row.State)
	require.NotNil(t, row.Stuck)
	require.Equal(t, hoppertype.StuckFailedBlocker, row.Stuck.Cause)
	require.Equal(t, []string{a.ID()}, row.Stuck.BlockerIDs)
	require.Equal(t, 0, f.count("final"))

	// Redriving the failed blocker lets the gate wait again; it fires once
	// the blocker succeeds.
	_, err = c.JobRetry(ctx, a.ID())
	require.NoError(t, err)
	awaitJobState(t, c, final.ID(), hopper.StateSucceeded)
	require.Equal(t, 1, f.count("final"))
	row, err = c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Nil(t, row.Stuck)
}

func TestGateCycle(t *testing.T) { forEachDriver(t, testGateCycle) }

func testGateCycle(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)

	// x waits on y's job, which waits on x's job: neither can fire.
	xJob, yJob := f.step.Job("x", nil), f.step.Job("y", nil)
	x := hopper.Gate([]string{yJob.ID()}, []*hopper.JobSpec{xJob}, hopper.AllSuccess(), 0)
	y := hopper.Gate([]string{xJob.ID()}, []*hopper.JobSpec{yJob}, hopper.AllSuccess(), 0)
	_, err := c.EnqueueMany(ctx, x)
	require.NoError(t, err)
	_, err = c.EnqueueMany(ctx, y)
	require.NoError(t, err)
	for _, g := range []*hopper.JobSpec{x, y} {
		row := awaitJobState(t, c, g.ID(), hopper.StateStuck)
		require.Equal(t, hoppertype.StuckCycle, row.Stuck.Cause, "gate %s", g.ID())
		require.Contains(t, row.Stuck.Detail, "waits on itself")
	}
	// A gate on itself, directly.
	self := f.step.Job("self", nil)
	z := hopper.Gate([]string{self.ID()}, []*hopper.JobSpec{self}, hopper.AllDone(), 0)
	_, err = c.EnqueueMany(ctx, z)
	require.NoError(t, err)
	require.Equal(t, hoppertype.StuckCycle, awaitJobState(t, c, z.ID(), hopper.StateStuck).Stuck.Cause)
	require.Equal(t, 0, f.count("x")+f.count("y")+f.count("self"))
}

func TestGateTimeout(t *testing.T) { forEachDriver(t, testGateTimeout) }

func testGateTimeout(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	events := newEventLog()
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)

	after := f.step.Job("after", nil)
	gate := hopper.Gate([]string{"never-enqueued"}, []*hopper.JobSpec{after}, hopper.AllSuccess(), 30*time.Second)
	hs, err := c.EnqueueMany(ctx, gate)
	require.NoError(t, err)
	row, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, clk.Now().Add(30*time.Second), row.Deadline)
	require.Equal(t, row.Deadline, row.RunAt, "a gate with a timeout shorter than the recheck waits for its deadline")

	clk.Advance(29 * time.Second)
	require.Equal(t, hopper.StateScheduled, awaitJobState(t, c, gate.ID(), hopper.StateScheduled).State)
	clk.Advance(time.Second)
	_, err = hs[0].Result(ctx)
	require.ErrorIs(t, err, hopper.ErrExpired)
	require.Equal(t, 0, f.count("after"))
	_, err = c.JobGet(ctx, after.ID())
	require.ErrorIs(t, err, hopper.ErrNotFound, "the gate's jobs never exist")
}

func TestGateRecheckIsASafetyNet(t *testing.T) { forEachDriver(t, testGateRecheckIsASafetyNet) }

func testGateRecheckIsASafetyNet(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	// A lease longer than the minute the clock jumps: a recheck still in
	// flight at a jump would otherwise lose its lease to the jump and be
	// rescued, using an attempt (seen under load on PostgreSQL).
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), GateRecheck: time.Minute, Visibility: time.Hour})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)
	a := f.step.Job("a", nil)
	gate := hopper.Gate([]string{a.ID()}, []*hopper.JobSpec{f.step.Job("final", nil)}, hopper.AllSuccess(), 0)
	_, err := c.EnqueueMany(ctx, gate)
	require.NoError(t, err)
	// The gate rechecks on its own each minute, and waits again: its job
	// is deferred, an event raised once that committed.
	changed := onEvents(t, c)
	for range 3 {
		clk.Advance(time.Minute)
		await(t, "the gate to wait again", func() bool {
			row, err := c.JobGet(ctx, gate.ID())
			return err == nil && row.State == hopper.StateScheduled && row.RunAt.After(clk.Now())
		}, changed)
	}
	row, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, 0, row.Attempt, "waiting uses no attempts")
	// The blocker arrives later and succeeds: the gate fires without a clock move.
	_, err = c.EnqueueMany(ctx, a)
	require.NoError(t, err)
	awaitJobState(t, c, gate.ID(), hopper.StateSucceeded)
}

func TestGateBadInput(t *testing.T) {
	t.Parallel()
	f := newGateFixture()
	c := newClient(t, hopper.Config{})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)
	a := f.step.Job("a", nil)
	for name, g := range map[string]*hopper.JobSpec{
		"unknown condition": hopper.Gate([]string{"x"}, []*hopper.JobSpec{a}, hopper.Condition{Kind: "most"}, 0),
		"negative count":    hopper.Gate([]string{"x"}, []*hopper.JobSpec{a}, hopper.CountDone(-1), 0),
		"negative timeout":  hopper.Gate([]string{"x"}, []*hopper.JobSpec{a}, hopper.AllDone(), -time.Second),
		"nothing to queue":  hopper.Gate([]string{"x"}, nil, hopper.AllDone(), 0),
		"empty id":          hopper.Gate([]string{""}, []*hopper.JobSpec{a}, hopper.AllDone(), 0),
		"bad queued job":    hopper.Gate([]string{"x"}, []*hopper.JobSpec{f.step.Job("b", &hopper.InsertOpts{Delay: -1})}, hopper.AllDone(), 0),
	} {
		_, err := c.EnqueueMany(ctx, a, g)
		require.ErrorIs(t, err, hopper.ErrInvalidInput, name)
		_, err = c.JobGet(ctx, a.ID())
		require.ErrorIs(t, err, hopper.ErrNotFound, "%s: nothing is written", name)
	}
	_, err := c.EnqueueMany(ctx, hopper.Gate([]string{"x"}, []*hopper.JobSpec{a}, hopper.AllDone(), 0), hopper.Gate([]string{"y"}, []*hopper.JobSpec{a}, hopper.AllDone(), 0))
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID, "two gates cannot queue one job")
}

// TestGateFiresOnceAcrossClients fans in many jobs finished by two clients
// sharing a store: the gate fires exactly once.
func TestGateFiresOnceAcrossClients(t *testing.T) { forEachDriver(t, testGateFiresOnce) }

func testGateFiresOnce(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	d := newDriver(t)
	events := newEventLog()
	c1 := newClient(t, hopper.Config{Driver: d, MaxWorkers: 8, OnEvent: events.hook})
	c2 := newClient(t, hopper.Config{Driver: d, MaxWorkers: 8, OnEvent: events.hook})
	require.NoError(t, c1.Register(f.step))
	require.NoError(t, c2.Register(f.step))
	ctx := testCtx(t)
	const n = 60
	specs := make([]*hopper.JobSpec, 0, n+1)
	on := make([]string, 0, n)
	for range n {
		s := f.step.Job("leaf", nil)
		specs = append(specs, s)
		on = append(on, s.ID())
	}
	final := f.step.Job("final", nil)
	gate := hopper.Gate(on, []*hopper.JobSpec{final}, hopper.AllDone(), 0)
	hs, err := c1.EnqueueMany(ctx, append([]*hopper.JobSpec{gate}, specs...)...)
	require.NoError(t, err)
	_, err = hopper.HandleFor(c2, f.step, hs[0].ID()).Group(ctx)
	require.NoError(t, err)
	require.Equal(t, n, f.count("leaf"))
	require.Equal(t, 1, f.count("final"))
	// The group's waiter is told before the events of the transitions that
	// settled it are raised: stopping both clients waits for those, and for
	// a second firing, which must not come.
	require.NoError(t, c1.Stop(ctx))
	require.NoError(t, c2.Stop(ctx))
	fired := 0
	events.mu.Lock()
	for _, e := range events.events {
		if e.JobID == gate.ID() && e.Kind == hopper.EventSucceeded {
			fired++
		}
	}
	events.mu.Unlock()
	require.Equal(t, 1, fired, "the gate's job succeeded (fired) once across both clients")
}

// TestGateRecheckRepairsAMissedJob: a watched job that became terminal
// without a transition the gate could see (inserted finished, as a job
// committed beside the gate's own insert can look) is found by the
// recheck, and the gate fires.
func TestGateRecheckRepairsAMissedJob(t *testing.T) { forEachDriver(t, testGateRecheckRepairs) }

func testGateRecheckRepairs(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	f := newGateFixture()
	d := newDriver(t)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: d, GateRecheck: time.Minute, Visibility: time.Hour})
	require.NoError(t, c.Register(f.step))
	ctx := testCtx(t)
	final := f.step.Job("final", nil)
	gate := hopper.Gate([]string{"done-elsewhere"}, []*hopper.JobSpec{final}, hopper.AllSuccess(), 0)
	_, err := c.EnqueueMany(ctx, gate)
	require.NoError(t, err)
	now := clk.Now()
	_, err = d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{{
		ID: "done-elsewhere", Type: "gate-step", Queue: "elsewhere", State: hoppertype.JobStateSucceeded, GroupID: "done-elsewhere",
		Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now, EndedAt: now,
	}}})
	require.NoError(t, err)
	row, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateScheduled, row.State, "no transition told the gate")
	// The recheck is due a minute after the insert; the producer,
	// which sleeps against the clock's time, claims it once it passed.
	clk.Advance(time.Minute)
	row, err = c.JobWait(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State, "the recheck fired the gate")
	awaitJobState(t, c, final.ID(), hopper.StateSucceeded)
}

// TestGateDescribe: a gate's condition reads as a sentence, whatever the
// number of jobs it watches.
func TestGateDescribe(t *testing.T) {
	for _, c := range []struct {
		cond hopper.Condition
		on   int
		want string
	}{
		{hopper.AllSuccess(), 1, "its job succeeds"},
		{hopper.AllSuccess(), 3, "all 3 jobs succeed"},
		{hopper.AllDone(), 1, "its job finishes, however it ends"},
		{hopper.AllDone(), 2, "all 2 jobs finish, however they end"},
		{hopper.CountDone(1), 1, "1 of 1 job finishes"},
		{hopper.CountDone(2), 4, "2 of 4 jobs finish"},
		{hopper.CountSuccess(1), 1, "1 of 1 job succeeds"},
		{hopper.CountSuccess(1), 3, "1 of 3 jobs succeed"},
	} {
		g := &hopper.GateInfo{Condition: c.cond, On: make([]string, c.on)}
		if got := g.Describe(); got != c.want {
			t.Errorf("%+v of %d: %q, want %q", c.cond, c.on, got, c.want)
		}
	}
}
