package hopper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

func TestWorkers(t *testing.T) { forEachDriver(t, testWorkers) }

func testWorkers(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	a := newClient(t, hopper.Config{Driver: d, WorkerID: "worker-a", MaxWorkers: 7})
	require.NoError(t, a.Register(hopper.Define("wk-add", addHandler, nil)))
	b, err := hopper.New(hopper.Config{Driver: d, WorkerID: "worker-b", Queues: []string{"bulk"}, Autoscale: &hopper.Autoscale{Min: 2, Max: 6}})
	require.NoError(t, err)
	ctx := testCtx(t)
	require.NoError(t, b.Start(ctx))

	ws, err := a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.Equal(t, "worker-a", ws[0].ID)
	require.Equal(t, 7, ws[0].MaxWorkers)
	require.Equal(t, 7, ws[0].Slots)
	require.Zero(t, ws[0].MinWorkers, "fixed slots have no minimum")
	require.Equal(t, "worker-b", ws[1].ID)
	require.Contains(t, ws[1].Queues, "bulk")
	require.Equal(t, [3]int{2, 6, 2}, [3]int{ws[1].MinWorkers, ws[1].MaxWorkers, ws[1].Slots}, "autoscaled 2-6, starting at 2")
	require.False(t, ws[1].StartedAt.IsZero())
	require.Positive(t, ws[0].PID)

	require.NoError(t, b.Stop(context.Background()))
	ws, err = a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1, "a stopped client removes itself")
	require.Equal(t, "worker-a", ws[0].ID)
}

// TestWorkerReport: a worker reports its status (idle, busy with the jobs
// and workflow runs it runs), its slots, and the attempts it completed and
// failed, at each heartbeat, and that it is stopping when Stop waits for
// a run in flight; one that stopped reporting without stopping is listed
// as dead.
func TestWorkerReport(t *testing.T) { forEachDriver(t, testWorkerReport) }

// reportSpy announces each worker report the store took: on reported
// (dropped while one waits there), and to those waiting on changed.
type reportSpy struct {
	driver.Driver
	baseExec
	reported chan struct{}
	changed  changes
}

func (s *reportSpy) Executor() driver.Executor { return s }

func (s *reportSpy) WorkerUpsert(ctx context.Context, p *driver.WorkerUpsertParams) error {
	err := s.baseExec.WorkerUpsert(ctx, p)
	select {
	case s.reported <- struct{}{}:
	default:
	}
	s.changed.notify()
	return err
}

func testWorkerReport(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	spy := &reportSpy{Driver: d, baseExec: d.Executor(), reported: make(chan struct{}, 1)}
	ctx := testCtx(t)
	clk := hoppertest.NewClock(time.Time{})
	release := make(chan struct{})
	running := make(chan string, 1)
	hold := hopper.Define("wr-hold", func(ctx context.Context, n int) (int, error) {
		if n < 0 {
			return 0, hopper.Abort(errors.New("negative"))
		}
		running <- hopper.JobFromContext(ctx).ID()
		select {
		case <-release:
			return n, nil
		case <-ctx.Done(): // a failed test's Stop
			return 0, ctx.Err()
		}
	}, nil)
	stepping := make(chan struct{})
	finish := make(chan struct{})
	wf := hopper.Workflow("wr-flow", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		return hopper.Step(wf, "wait", func(ctx context.Context) (int, error) {
			close(stepping)
			select {
			case <-finish:
				return 1, nil
			case <-ctx.Done(): // a failed test's Stop
				return 0, ctx.Err()
			}
		}, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: spy, Clock: clk, WorkerID: "wr-a", MaxWorkers: 5})
	require.NoError(t, c.Register(hold))
	require.NoError(t, c.Register(wf))
	endStep := sync.OnceFunc(func() { close(finish) })
	t.Cleanup(endStep) // before the client's Stop, which would wait for the step

	// report moves the clock a heartbeat on, waits for the client's report,
	// and again until its row shows what ok wants (an outcome is counted
	// just after its job ends, so one report may miss it).
	report := func(what string, ok func(*hopper.WorkerInfo) bool) *hopper.WorkerInfo {
		t.Helper()
		for range 10 {
			select {
			case <-spy.reported:
			default:
			}
			clk.Advance(10 * time.Second)
			select {
			case <-spy.reported:
			case <-ctx.Done():
				t.Fatalf("no worker report (%s)", what)
			}
			ws, err := c.WorkerList(ctx)
			require.NoError(t, err)
			for _, w := range ws {
				if w.ID == "wr-a" && ok(w) {
					return w
				}
			}
		}
		t.Fatalf("the worker never reported %s", what)
		return nil
	}
	status := func(s string) func(*hopper.WorkerInfo) bool {
		return func(w *hopper.WorkerInfo) bool { return w.Status == s }
	}
	w := report("idle", status(hopper.WorkerIdle))
	require.Equal(t, 5, w.Slots)

	h, err := hold.Enqueue(ctx, c, 1, nil)
	require.NoError(t, err)
	require.Equal(t, h.ID(), <-running)
	w = report("busy", status(hopper.WorkerBusy))
	require.Equal(t, []string{h.ID()}, w.Jobs)
	require.Equal(t, 1, w.Active)

	close(release)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	bad, err := hold.Enqueue(ctx, c, -1, nil)
	require.NoError(t, err)
	_, err = bad.Wait(ctx)
	require.NoError(t, err)
	w = report("the attempts counted", func(w *hopper.WorkerInfo) bool { return w.Completed+w.Failed == 2 })
	require.Equal(t, hopper.WorkerIdle, w.Status)
	require.Equal(t, int64(1), w.Completed)
	require.Equal(t, int64(1), w.Failed)
	require.Empty(t, w.Jobs)

	// A process that stopped reporting a minute ago, its row left behind.
	gone := clk.Now().Add(-time.Minute)
	require.NoError(t, d.Executor().WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{
		ID: "wr-killed", StartedAt: gone.Add(-time.Hour), SeenAt: gone, Info: []byte(`{"status":"busy","active":3}`)}}))
	ws, err := c.WorkerList(ctx)
	require.NoError(t, err)
	var killed *hopper.WorkerInfo
	for _, x := range ws {
		if x.ID == "wr-killed" {
			killed = x
		}
	}
	require.NotNil(t, killed, "a dead worker is listed")
	require.Equal(t, hopper.WorkerDead, killed.Status)

	// A workflow run in flight is listed among the runs, not the jobs.
	run, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	select {
	case <-stepping:
	case <-ctx.Done():
		t.Fatal("the run's step never started")
	}
	w = report("the run", func(w *hopper.WorkerInfo) bool { return len(w.Runs) > 0 })
	require.Equal(t, hopper.WorkerBusy, w.Status)
	require.Equal(t, []string{run.ID()}, w.Runs)
	require.Empty(t, w.Jobs)
	require.Equal(t, 1, w.Active)

	// Stop waits for the run, and the worker says it is stopping meanwhile,
	// the run still listed; once the run is done its row goes.
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	await(t, "the stopping report", func() bool {
		ws, err := c.WorkerList(ctx)
		require.NoError(t, err)
		for _, x := range ws {
			if x.ID == "wr-a" && x.Status == hopper.WorkerStopping {
				w = x
				return true
			}
		}
		return false
	}, spy.changed.next)
	require.Equal(t, []string{run.ID()}, w.Runs)
	require.Equal(t, 1, w.Active)
	endStep()
	require.NoError(t, <-stopped)
	ws, err = c.WorkerList(ctx)
	require.NoError(t, err)
	for _, x := range ws {
		require.NotEqual(t, "wr-a", x.ID, "a stopped worker removes its row")
	}
}

// TestDeadWorkerJobsRescuedEarly: the jobs of a worker that stopped
// reporting are rescued once it is dead (three heartbeat intervals), long
// before their leases (ten minutes here) would lapse, and run again.
func TestDeadWorkerJobsRescuedEarly(t *testing.T) { forEachDriver(t, testDeadWorkerJobsRescuedEarly) }

func testDeadWorkerJobsRescuedEarly(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	clk := hoppertest.NewClock(time.Time{})
	job := hopper.Define("dw-work", func(ctx context.Context, _ int) (int, error) {
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Second, Jitter: hopper.NoJitter}})
	producer, err := hopper.New(hopper.Config{Driver: d, Clock: clk})
	require.NoError(t, err)
	h, err := job.Enqueue(ctx, producer, 0, nil)
	require.NoError(t, err)

	// The doomed worker reports once, claims the job with a ten-minute
	// lease, and is never heard from again.
	now := clk.Now()
	require.NoError(t, d.Executor().WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: "ghost", StartedAt: now, SeenAt: now}}))
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now,
		LeaseExpiresAt: now.Add(10 * time.Minute), Worker: "ghost"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	// A long leader lease: the clock jumps past the ghost's death at once,
	// and the leader must not lose its lease to the jump meanwhile.
	c := newClient(t, hopper.Config{Driver: d, Clock: clk, Visibility: 10 * time.Minute, HeartbeatInterval: 10 * time.Second, LeaderTTL: time.Hour})
	require.NoError(t, c.Register(job))
	leads(t, c)
	// Three heartbeat intervals and a rescue round on, the ghost is dead
	// and its job rescued: retried (its backoff passed or not yet).
	clk.Advance(3*10*time.Second + 10*time.Second)
	await(t, "the ghost's job rescued", func() bool {
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		return row.State == hopper.StateRetrying || row.State == hopper.StateSucceeded
	}, onEvents(t, c))
	clk.Advance(2 * time.Second) // past the retry's backoff
	row := awaitJobState(t, c, h.ID(), hopper.StateSucceeded)
	require.Equal(t, 2, row.Attempt)
	attempts, err := c.JobAttempts(ctx, h.ID())
	require.NoError(t, err)
	require.NotNil(t, attempts[0].Error)
	require.Contains(t, attempts[0].Error.Message, "ghost is dead")
	require.True(t, clk.Now().Before(now.Add(10*time.Minute)), "rescued before the lease lapsed")
}
