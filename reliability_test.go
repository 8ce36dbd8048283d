package hopper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/stretchr/testify/require"
)

// rescueInterval is Config.RescueInterval's default.
const rescueInterval = 5 * time.Second

func jobState(t *testing.T, d driver.Driver, id string) *hoppertype.JobRow {
	t.Helper()
	row, err := d.Executor().JobGet(context.Background(), &driver.JobGetParams{ID: id})
	require.NoError(t, err)
	return row
}

// TestDeadWorkerJobRunsAgain: a worker claims a job and dies (never
// heartbeats, never finishes). After its lease lapses the rescuer retries the
// job, which runs again with attempt+1 and succeeds. Nothing is lost.
func TestDeadWorkerJobRunsAgain(t *testing.T) { forEachDriver(t, testDeadWorkerJobRunsAgain) }

func testDeadWorkerJobRunsAgain(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	ctx := testCtx(t)
	job := hopper.Define("work", func(ctx context.Context, _ int) (int, error) {
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Second, Jitter: hopper.NoJitter}})

	producer, err := hopper.New(hopper.Config{Driver: d, Clock: clk})
	require.NoError(t, err)
	h, err := job.Enqueue(ctx, producer, 0, nil)
	require.NoError(t, err)

	// The doomed worker: claims through the store, then vanishes.
	now := clk.Now()
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now, LeaseExpiresAt: now.Add(30 * time.Second), Worker: "doomed"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	events := newEventLog()
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, OnEvent: events.hook})
	require.NoError(t, c.Register(job))
	leads(t, c)

	// Before the lease lapses nothing happens to the job.
	clk.Advance(29 * time.Second)
	require.Equal(t, hopper.StateRunning, jobState(t, d, h.ID()).State)

	// After it lapses the rescuer moves it to retrying; then it runs again.
	// The jump passes the lease by a rescue interval: the rescuer's timer
	// fires, and its pass sees the time after the jump. The clock then
	// stands still while the second attempt runs, so it never outruns that
	// attempt's lease.
	clk.Jump(now.Add(30*time.Second + rescueInterval))
	rescued := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventFailed })
	require.True(t, rescued.WillRetry)
	retryAt(t, clk, rescued.RunAt)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v, "the rescued job runs again with attempt 2")
	row := jobState(t, d, h.ID())
	require.Equal(t, hoppertype.ErrorKindLeaseLost, row.Error.Kind, "the lost attempt is recorded")
	require.Contains(t, events.kinds(h.ID()), hopper.EventFailed)
}

// TestHeartbeatKeepsLongJob: a job running for ten visibility timeouts,
// heartbeating, is never rescued.
func TestHeartbeatKeepsLongJob(t *testing.T) { forEachDriver(t, testHeartbeatKeepsLongJob) }

func testHeartbeatKeepsLongJob(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	events := newEventLog()
	spy := spyOn(newDriver(t))
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: spy, OnEvent: events.hook, Visibility: 30 * time.Second})
	release := make(chan struct{})
	started := make(chan struct{})
	job := hopper.Define("long", func(ctx context.Context, _ int) (int, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, nil)
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	leads(t, c)
	h, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	<-started
	for i := 0; i < 30; i++ { // 300s = 10 × visibility
		// Each step fires the heartbeat timer once (armed a beat ahead
		// before each renewal); the next step waits for the renewal.
		clk.Advance(10 * time.Second)
		now := clk.Now()
		await(t, "a heartbeat", func() bool {
			r := jobState(t, spy, h.ID())
			return r.State == hopper.StateRunning && !r.LeaseExpiresAt.Before(now.Add(30*time.Second))
		}, spy.answered.next)
	}
	close(release)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v, "never rescued: still the first attempt")
	require.NotContains(t, events.kinds(h.ID()), hopper.EventFailed)
}

// TestRescueThenLateCompletion: a worker stalls past its lease; the job is
// rescued and finished by another worker; when the stalled worker finally
// returns, its completion changes nothing.
func TestRescueThenLateCompletion(t *testing.T) { forEachDriver(t, testRescueThenLateCompletion) }

func testRescueThenLateCompletion(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)

	// Worker A's clock never moves, so it never heartbeats: it is stalled.
	clkA := hoppertest.NewClock(time.Time{})
	stalled := make(chan struct{})
	released := make(chan struct{})
	jobA := hopper.Define("work", func(ctx context.Context, _ int) (string, error) {
		close(stalled)
		select {
		case <-released:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "late", nil
	}, nil)
	// A has one worker, which the stall keeps busy: A cannot claim the job
	// again once it is rescued (its clock says nothing else is due).
	a, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkA, WorkerID: "A", MaxWorkers: 1})
	require.NoError(t, a.Register(jobA))
	h, err := jobA.Enqueue(ctx, a, 0, nil)
	require.NoError(t, err)
	<-stalled

	// Worker B lives a minute later: A's lease and leadership have lapsed.
	clkB := hoppertest.NewClock(clkA.Now().Add(time.Minute))
	jobB := hopper.Define("work", func(ctx context.Context, _ int) (string, error) { return "rescued", nil },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Second, Jitter: hopper.NoJitter}})
	events := newEventLog()
	b, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkB, WorkerID: "B", OnEvent: events.hook})
	require.NoError(t, b.Register(jobB))
	rescueBy(t, b, events, clkB, h.ID())
	row := jobState(t, d, h.ID())
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Equal(t, 2, row.Attempt)
	require.JSONEq(t, `"rescued"`, string(row.Result))

	// A returns at last: its compare-and-set loses, the job is untouched.
	// Stop waits for the attempt to return and its outcome to be tried.
	close(released)
	require.NoError(t, a.Stop(ctx))
	require.Empty(t, a.Active())
	row2 := jobState(t, d, h.ID())
	require.Equal(t, row.Attempt, row2.Attempt)
	require.Equal(t, row.Result, row2.Result, "a terminal job is never overwritten by a late worker")
	require.Equal(t, hopper.StateSucceeded, row2.State)
}

// rescueBy waits for leader c, whose events go to events, to rescue job id
// (its clock past the job's lease: the rescuer's first pass as leader
// does), moves its clock to the retry, and waits for the job to end. The
// clock stands still meanwhile, so it never outruns the retry's lease.
func rescueBy(t *testing.T, c *hopper.Client, events *eventLog, clk *hoppertest.Clock, id string) {
	t.Helper()
	rescued := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == id && e.Kind == hopper.EventFailed })
	require.True(t, rescued.WillRetry, "rescued for a retry")
	retryAt(t, clk, rescued.RunAt)
	_, err := c.JobWait(testCtx(t), id)
	require.NoError(t, err)
}

// retryAt moves clk to at, the time a job is retried, once a timer is
// armed for it: the producer told of the retry sleeps until then.
func retryAt(t *testing.T, clk *hoppertest.Clock, at time.Time) {
	t.Helper()
	require.NoError(t, clk.WaitArmedAt(testCtx(t), at))
	clk.AdvanceTo(at)
}

// TestLeaseLostCancelsHandler: when a heartbeat finds the lease gone, the
// handler's context is cancelled with ErrLeaseLost.
func TestLeaseLostCancelsHandler(t *testing.T) { forEachDriver(t, testLeaseLostCancelsHandler) }

func testLeaseLostCancelsHandler(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	cause := make(chan error, 4)
	started := make(chan string, 4)
	job := hopper.Define("w", func(ctx context.Context, _ int) (int, error) {
		started <- hopper.JobFromContext(ctx).ID()
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return 0, ctx.Err()
	}, nil)
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	_, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	id := <-started
	row := jobState(t, c.Driver(), id)
	// Someone else takes the job over (simulating a rescue + re-claim).
	res, err := c.Driver().Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: id, LeaseToken: row.LeaseToken, State: hopper.StateScheduled, RunAt: clk.Now().Add(time.Hour), Attempt: row.Attempt,
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	clk.Advance(10 * time.Second) // the next heartbeat
	select {
	case err := <-cause:
		require.True(t, errors.Is(err, hopper.ErrLeaseLost), "cause = %v", err)
	case <-ctx.Done():
		t.Fatal("handler not cancelled")
	}
}

// TestStuckAfterRepeatedLeaseLoss: a job whose every attempt loses its lease
// ends stuck (engine failure, retryable), not silently dead; the retry
// observer reopens it once (a second generation of attempts), then leaves
// it stuck; the attempts are the job's changes.
func TestStuckAfterRepeatedLeaseLoss(t *testing.T) { forEachDriver(t, testStuckAfterRepeatedLeaseLoss) }

func testStuckAfterRepeatedLeaseLoss(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	ctx := testCtx(t)
	job := hopper.Define("w", func(ctx context.Context, _ int) (int, error) { return 0, nil },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Second, Jitter: hopper.NoJitter}})
	// A leader-only client: it registers nothing, so it never claims.
	spy := spyOn(d)
	events := newEventLog()
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: spy, Clock: clk, OnEvent: events.hook})
	require.Equal(t, hopper.MaxRetryAttempts, c.RetryObserver().MaxAttempts())
	leads(t, c)
	h, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	// Each attempt is claimed by a worker that dies; a jump past its lease
	// by a rescue interval has the rescuer take it back (its pass sees the
	// time after the jump). The first attempt's rescue retries the job,
	// due once the clock reaches the retry; the second's leaves it stuck,
	// for the caller to wait on.
	loseEveryAttempt := func() {
		for attempt := 1; attempt <= 2; attempt++ {
			// A claim may skip a row that the leader's promoter holds at that
			// moment (SKIP LOCKED), and nothing announces the row's release,
			// so claim until it is taken.
			var claimed []*hopper.JobRow
			now := clk.Now()
			poll(t, "the doomed worker's claim", func() bool {
				var err error
				claimed, err = d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now, LeaseExpiresAt: now.Add(30 * time.Second), Worker: "doomed"})
				require.NoError(t, err)
				return len(claimed) == 1
			})
			require.Equal(t, attempt, claimed[0].Attempt)
			clk.Jump(now.Add(30*time.Second + rescueInterval))
			if attempt == 1 {
				rescued := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventFailed })
				require.True(t, rescued.WillRetry)
				clk.AdvanceTo(rescued.RunAt)
			}
		}
	}

	// Generation 1: stuck, retryable; the retry observer reopens it.
	loseEveryAttempt()
	// The rescuer emits stuck and the retry observer redriven, each after
	// its own commit: either may arrive first.
	seen := map[hopper.EventKind]bool{}
	events.waitFor(t, func(e hopper.Event) bool {
		if e.JobID == h.ID() {
			seen[e.Kind] = true
		}
		return seen[hopper.EventStuck] && seen[hopper.EventRedriven]
	})
	row := jobState(t, d, h.ID())
	require.NotEqual(t, hopper.StateStuck, row.State, "reopened by the retry observer")
	require.Equal(t, 0, row.Attempt)

	// Generation 2: stuck again, and now it stays stuck.
	loseEveryAttempt()
	events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventStuck })
	awaitRetryObserverPassed(t, spy, h.ID())
	row = jobState(t, d, h.ID())
	require.Equal(t, hopper.StateStuck, row.State, "at the cap: left for a person")
	require.NotNil(t, row.Stuck)
	require.Equal(t, hoppertype.StuckEngineFailure, row.Stuck.Cause)
	require.True(t, *row.Stuck.Retryable)

	attempts, err := c.JobAttempts(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, attempts, 4)
	for i, a := range attempts {
		require.Equal(t, i/2+1, a.Generation, "attempt %d", i)
		require.Equal(t, i%2+1, a.Number, "attempt %d", i)
		require.Equal(t, "doomed", a.Worker)
		require.False(t, a.EndedAt.Before(a.StartedAt))
		require.NotNil(t, a.Error)
		require.Equal(t, hoppertype.ErrorKindLeaseLost, a.Error.Kind)
	}
	require.Equal(t, []hopper.JobState{hopper.StateRetrying, hopper.StateStuck, hopper.StateRetrying, hopper.StateStuck},
		[]hopper.JobState{attempts[0].Outcome, attempts[1].Outcome, attempts[2].Outcome, attempts[3].Outcome})
	gens, err := c.JobGenerations(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 2, gens)

	// Help arrives: JobRetry reopens it as a fresh job.
	row, err = c.JobRetry(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StatePending, row.State)
	require.Nil(t, row.Stuck)
}

// TestLeaderElection: one leader at a time; when it stops, another takes over.
func TestLeaderElection(t *testing.T) { forEachDriver(t, testLeaderElection) }

func testLeaderElection(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	a, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, WorkerID: "A"})
	leads(t, a)
	b, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, WorkerID: "B"})
	clk.Advance(5 * time.Second)
	require.True(t, a.IsLeader())
	require.False(t, b.IsLeader(), "never two leaders")
	// A stops (resigning); B takes over at its next attempt, a third of
	// the leadership's TTL (15 s) after its last.
	require.NoError(t, a.Stop(testCtx(t)))
	clk.Advance(5 * time.Second)
	leads(t, b)
}
