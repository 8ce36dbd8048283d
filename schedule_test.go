package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// tickJob is the job the schedule tests enqueue: its input is the
// occurrence's Unix time.
var tickJob = hopper.Define("tick", func(context.Context, int64) (hopper.None, error) { return hopper.None{}, nil }, nil)

// jobCalls counts the calls of a schedule's Job by occurrence.
type jobCalls struct {
	mu      sync.Mutex
	n       map[time.Time]int
	changed changes
}

func (j *jobCalls) job(at time.Time) (*hopper.JobSpec, error) {
	j.mu.Lock()
	if j.n == nil {
		j.n = map[time.Time]int{}
	}
	j.n[at.UTC()]++
	j.mu.Unlock()
	j.changed.notify()
	return tickJob.Job(at.Unix(), nil), nil
}

// awaitOnce waits until Job was called once for the occurrence at.
func (j *jobCalls) awaitOnce(t *testing.T, what string, at time.Time) {
	t.Helper()
	await(t, what, func() bool { return j.count(at) == 1 }, j.changed.next)
}

func (j *jobCalls) count(at time.Time) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n[at.UTC()]
}

func (j *jobCalls) total() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, k := range j.n {
		n += k
	}
	return n
}

// startedClient is a started client on d with clk that runs tickJob,
// stopped when the test ends (Stop twice is harmless). Its lease outlasts
// the tests' jumps of the clock: a job still running at a jump (a busy
// machine) would otherwise lose its lease and wait for a retry on a clock
// that no longer moves.
func startedClient(t *testing.T, d driver.Driver, clk hopper.Clock) *hopper.Client {
	t.Helper()
	c := newClient(t, hopper.Config{Driver: d, Clock: clk, Visibility: 72 * time.Hour})
	require.NoError(t, c.Register(tickJob))
	return c
}

// stepMinutes moves clk a minute at a time through the occurrences at
// start and the n minutes after it, waiting at each until both processes
// made its job: a process does so only after it finished recording the
// occurrence before.
func stepMinutes(t *testing.T, clk *hoppertest.Clock, start time.Time, n int, calls *[2]jobCalls) {
	t.Helper()
	for m := range n + 1 {
		at := start.Add(time.Duration(m) * time.Minute)
		clk.AdvanceTo(at)
		await(t, "both processes make the job of "+at.Format(time.TimeOnly), func() bool {
			return calls[0].count(at) == 1 && calls[1].count(at) == 1
		}, calls[0].changed.next, calls[1].changed.next)
	}
}

// checkOncePerOccurrence runs an every-minute schedule in two processes,
// one on each of ds, and checks that each occurrence was stored once.
func checkOncePerOccurrence(t *testing.T, ds [2]driver.Driver, minutes int) {
	t.Helper()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	var calls [2]jobCalls
	var clients [2]*hopper.Client
	for i := range clients {
		clients[i] = startedClient(t, ds[i], clk)
		_, err := clients[i].Schedule(hopper.Schedule{Name: "every-minute", Cron: "* * * * *", Location: time.UTC, Job: calls[i].job})
		require.NoError(t, err)
	}
	stepMinutes(t, clk, start, minutes, &calls)
	for _, c := range clients {
		require.NoError(t, c.Stop(testCtx(t)))
	}
	got := storedTicks(t, clients[1])
	for m := range minutes {
		at := start.Add(time.Duration(m) * time.Minute)
		require.Equal(t, 1, got[at], "jobs stored for the occurrence at %s", at.Format(time.TimeOnly))
	}
	require.LessOrEqual(t, len(got), minutes+1, "jobs for occurrences that never came: %v", got)
}

// storedTicks returns how many tick jobs the store holds per occurrence.
func storedTicks(t *testing.T, c *hopper.Client) map[time.Time]int {
	t.Helper()
	page, err := c.JobList(testCtx(t), &hopper.ListParams{Types: []string{tickJob.Name()}, Limit: hopper.MaxListLimit})
	require.NoError(t, err)
	out := map[time.Time]int{}
	for _, j := range page.Jobs {
		var unix int64
		require.NoError(t, json.Unmarshal(j.Input, &unix))
		out[time.Unix(unix, 0).UTC()]++
	}
	return out
}

// TestScheduleOncePerOccurrence: two processes run the same schedule on
// one store; every occurrence is enqueued exactly once, though both make
// its job (a client calls Job for an occurrence only after it finished
// recording the one before, so the test waits for both to reach the next).
func TestScheduleOncePerOccurrence(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := newDriver(t)
		checkOncePerOccurrence(t, [2]driver.Driver{d, d}, 6)
	})
}

// nightlyWorkflow is the workflow the schedule tests start: it returns its
// input, the occurrence's Unix time.
var nightlyWorkflow = hopper.Workflow("nightly-wf", func(_ hopper.WorkflowContext, unix int64) (int64, error) { return unix, nil }, nil)

// TestScheduleStartsRuns: a schedule's Run starts one workflow run per
// occurrence across two processes, and the runs complete.
func TestScheduleStartsRuns(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := newDriver(t)
		clk := hoppertest.NewClock(time.Time{})
		start := clk.Now()
		var calls [2]jobCalls
		var clients [2]*hopper.Client
		var ran [2]wake
		for i := range clients {
			clients[i] = startedClient(t, d, clk)
			ran[i] = onEvents(t, clients[i])
			require.NoError(t, clients[i].Register(nightlyWorkflow))
			calls := &calls[i]
			_, err := clients[i].Schedule(hopper.Schedule{Name: "runs", Cron: "* * * * *", Location: time.UTC,
				Run: func(at time.Time) (*hopper.RunSpec, error) {
					_, _ = calls.job(at) // counts the call
					return nightlyWorkflow.RunSpec(at.Unix(), nil), nil
				}})
			require.NoError(t, err)
		}
		const minutes = 3
		stepMinutes(t, clk, start, minutes, &calls)
		ctx := testCtx(t)
		await(t, "the runs to complete", func() bool {
			runs, err := runsOf(clients[0].RunList(ctx, &hopper.RunQuery{Workflow: nightlyWorkflow.Name(), Statuses: []hopper.RunStatus{hopper.RunCompleted}}))
			require.NoError(t, err)
			return len(runs) >= minutes
		}, ran[0], ran[1])
		for _, c := range clients {
			require.NoError(t, c.Stop(ctx))
		}
		runs, err := runsOf(clients[0].RunList(ctx, &hopper.RunQuery{Workflow: nightlyWorkflow.Name()}))
		require.NoError(t, err)
		got := map[time.Time]int{}
		for _, r := range runs {
			var unix int64
			require.NoError(t, json.Unmarshal(r.Input, &unix))
			got[time.Unix(unix, 0).UTC()]++
		}
		for m := range minutes {
			at := start.Add(time.Duration(m) * time.Minute)
			require.Equal(t, 1, got[at], "runs started for the occurrence at %s", at.Format(time.TimeOnly))
		}
	})
}

// TestScheduleOncePerOccurrenceTwoFiles: two processes on one SQLite file,
// each with its own driver (connections, writer, file locks), as an app and
// `hopper serve` share one: every occurrence is enqueued once.
func TestScheduleOncePerOccurrenceTwoFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	var ds [2]driver.Driver
	for i := range ds {
		d, err := sqlitedriver.Open(path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		ds[i] = d
	}
	checkOncePerOccurrence(t, ds, 5)
}

// TestScheduleCatchUp: an occurrence missed while no process ran the
// schedule (after the store first saw it) fires when one starts within
// CatchUp of it, once (a second process starting later finds it
// recorded); out of the window, or with a negative CatchUp, it is skipped.
// Only the latest missed occurrence fires.
func TestScheduleCatchUp(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := spyOn(newDriver(t))
		three := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
		clk := hoppertest.NewClock(three.Add(-10 * time.Minute))
		schedule := func(c *hopper.Client, name string, catchUp time.Duration, calls *jobCalls) {
			_, err := c.Schedule(hopper.Schedule{Name: name, Cron: "0 3 * * *", Location: time.UTC, CatchUp: catchUp, Job: calls.job})
			require.NoError(t, err)
		}
		var first, second, short, never, before jobCalls
		// A process runs the schedules at 02:50, then stops (a deploy, an
		// outage) until after 03:00.
		c0 := startedClient(t, d, clk)
		for _, name := range []string{"nightly", "nightly-short", "nightly-never"} {
			schedule(c0, name, 10*time.Minute, &before)
		}
		await(t, "the store to see the schedules", func() bool {
			infos, err := c0.ScheduleList(testCtx(t))
			require.NoError(t, err)
			n := 0
			for _, in := range infos {
				if !in.FirstSeen.IsZero() {
					n++
				}
			}
			return n == 3
		}, d.answered.next)
		require.NoError(t, c0.Stop(testCtx(t)))
		require.Zero(t, before.total())
		clk.AdvanceTo(three.Add(5 * time.Minute))

		c1 := startedClient(t, d, clk)
		schedule(c1, "nightly", 10*time.Minute, &first)
		schedule(c1, "nightly-short", 2*time.Minute, &short)
		schedule(c1, "nightly-never", -1, &never)
		await(t, "the missed 03:00 to fire", func() bool { return storedTicks(t, c1)[three] == 1 }, d.answered.next)
		require.NoError(t, c1.Stop(testCtx(t)))

		clk.AdvanceTo(three.Add(6 * time.Minute))
		c2 := startedClient(t, d, clk)
		schedule(c2, "nightly", 10*time.Minute, &second)
		second.awaitOnce(t, "the second process to try 03:00", three)
		// It makes the next night's job only once it finished trying 03:00.
		next := three.AddDate(0, 0, 1)
		clk.AdvanceTo(next)
		second.awaitOnce(t, "the second process to reach the next night", next)
		require.NoError(t, c2.Stop(testCtx(t)))

		got := storedTicks(t, c2)
		require.Equal(t, 1, got[three], "03:00 once")
		require.LessOrEqual(t, got[next], 1, "the next night at most once (the stop may cut its enqueue)")
		require.LessOrEqual(t, len(got), 2, "nothing else: %v", got)
		require.Equal(t, 1, first.total())
		require.Equal(t, 0, short.total(), "03:00 is past a 2 minute catch-up window")
		require.Equal(t, 0, never.total(), "a negative CatchUp never catches up")
	})
}

// TestScheduleSkipsWhenBehind: a process that wakes long after several
// occurrences (suspended, or a clock jumping ahead) fires only the latest,
// and then keeps time.
func TestScheduleSkipsWhenBehind(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
	require.NoError(t, c.Register(tickJob))
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "minutely", Cron: "* * * * *", Location: time.UTC, Job: calls.job})
	require.NoError(t, err)
	calls.awaitOnce(t, "the occurrence at the start", start)
	clk.Jump(start.Add(10*time.Minute + 30*time.Second)) // the process slept
	calls.awaitOnce(t, "the latest occurrence", start.Add(10*time.Minute))
	clk.AdvanceTo(start.Add(11 * time.Minute))
	calls.awaitOnce(t, "the next one, on time", start.Add(11*time.Minute))
	require.Equal(t, 3, calls.total(), "the nine occurrences slept through are skipped")
}

// TestScheduleBehindWithinTheWindow: woken after several occurrences all
// within the catch-up window, a process fires only the latest of them.
func TestScheduleBehindWithinTheWindow(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
	require.NoError(t, c.Register(tickJob))
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "ten-seconds", Job: calls.job,
		Next: func(after time.Time) time.Time { return after.Truncate(10 * time.Second).Add(10 * time.Second) }})
	require.NoError(t, err)
	calls.awaitOnce(t, "the occurrence at the start", start)
	clk.Jump(start.Add(35 * time.Second)) // 10 s, 20 s and 30 s are due, all within a minute
	calls.awaitOnce(t, "the latest", start.Add(30*time.Second))
	clk.AdvanceTo(start.Add(40 * time.Second))
	calls.awaitOnce(t, "the next one", start.Add(40*time.Second))
	require.Equal(t, 3, calls.total(), "10 s and 20 s are skipped")
}

// TestScheduleNoOverlapWithAUniqueKey: a schedule whose jobs share a
// UniqueKey enqueues nothing while the previous occurrence's job is still
// queued or running, and again once it ended.
func TestScheduleNoOverlapWithAUniqueKey(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	// The occurrences whose insert has returned (a conflict included): the
	// schedule's Job is called before its insert, so its call alone does
	// not say that the occurrence's unique key was already tried.
	var inserted sync.Map
	var insertedCh changes
	tried := hopper.InsertMiddlewareFunc(func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
		err := doInner(ctx)
		for _, r := range rows {
			inserted.Store(string(r.Input), true)
		}
		insertedCh.notify()
		return err
	})
	// A lease longer than the test's jumps: the running report keeps it.
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, Visibility: time.Hour,
		InsertMiddleware: []hopper.InsertMiddleware{tried}})
	release := make(chan struct{})
	var ran sync.Map
	var running changes
	slow := hopper.Define("slow-report", func(ctx context.Context, unix int64) (hopper.None, error) {
		ran.Store(unix, true)
		running.notify()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return hopper.None{}, nil
	}, nil)
	require.NoError(t, c.Register(slow))
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "slow", Cron: "* * * * *", Location: time.UTC, CatchUp: -1,
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			_, _ = calls.job(at)
			return slow.Job(at.Unix(), &hopper.InsertOpts{UniqueKey: "slow-report"}), nil
		}})
	require.NoError(t, err)
	await(t, "the first report to run", func() bool { _, ok := ran.Load(start.Unix()); return ok }, running.next)
	for m := 1; m <= 2; m++ {
		at := start.Add(time.Duration(m) * time.Minute)
		clk.AdvanceTo(at)
		// It makes the next occurrence's job only after this one's try.
		calls.awaitOnce(t, "the occurrence "+at.Format(time.TimeOnly), at)
		args := fmt.Sprint(at.Unix())
		await(t, "the occurrence's insert "+at.Format(time.TimeOnly), func() bool {
			_, ok := inserted.Load(args)
			return ok
		}, insertedCh.next)
	}
	page, err := c.JobList(testCtx(t), &hopper.ListParams{Types: []string{slow.Name()}})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	close(release)
	_, err = c.JobWait(testCtx(t), page.Jobs[0].ID) // the first report ends
	require.NoError(t, err)
	at := start.Add(3 * time.Minute)
	clk.AdvanceTo(at)
	await(t, "the report after it", func() bool { _, ok := ran.Load(at.Unix()); return ok }, running.next)
	page, err = c.JobList(testCtx(t), &hopper.ListParams{Types: []string{slow.Name()}})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 2, "minutes 1 and 2 were skipped while the first report ran")
}

// TestScheduleNoCatchUpWhenLate: with a negative CatchUp an occurrence
// fires only on time (within ten seconds); one slept through is skipped.
func TestScheduleNoCatchUpWhenLate(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
	require.NoError(t, c.Register(tickJob))
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "minutely", Cron: "* * * * *", Location: time.UTC, CatchUp: -1, Job: calls.job})
	require.NoError(t, err)
	calls.awaitOnce(t, "the occurrence at the start instant, on time", start)
	clk.Jump(start.Add(time.Minute + 2*time.Second))
	calls.awaitOnce(t, "a slightly late occurrence", start.Add(time.Minute))
	clk.Jump(start.Add(4*time.Minute + 30*time.Second))
	clk.AdvanceTo(start.Add(5 * time.Minute))
	calls.awaitOnce(t, "the next one, on time", start.Add(5*time.Minute))
	require.Equal(t, 3, calls.total(), "the occurrences 30 s late and more are skipped")
}

// TestScheduleCancel: a removed schedule fires no more, and its name may be
// registered again.
func TestScheduleCancel(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
	require.NoError(t, c.Register(tickJob))
	var calls, again jobCalls
	cancel, err := c.Schedule(hopper.Schedule{Name: "tick", Next: func(after time.Time) time.Time {
		return after.Truncate(time.Minute).Add(time.Minute)
	}, Job: calls.job})
	require.NoError(t, err)
	calls.awaitOnce(t, "the occurrence at the start", start)
	clk.AdvanceTo(start.Add(time.Minute))
	calls.awaitOnce(t, "the first occurrence", start.Add(time.Minute))
	cancel()
	cancel() // a second call does nothing
	clk.AdvanceTo(start.Add(5 * time.Minute))
	_, err = c.Schedule(hopper.Schedule{Name: "tick", Cron: "* * * * *", Location: time.UTC, CatchUp: -1, Job: again.job})
	require.NoError(t, err, "the name is free again")
	clk.AdvanceTo(start.Add(6 * time.Minute))
	again.awaitOnce(t, "the new schedule", start.Add(6*time.Minute))
	require.NoError(t, c.Stop(testCtx(t)))
	require.Equal(t, 2, calls.total(), "the occurrences at the start and at minute 1, none after the cancel")
}

// TestScheduleNextMustMoveForward: a Next that returns its own time (or an
// earlier one) ends the schedule, reported, instead of firing forever.
func TestScheduleNextMustMoveForward(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 16)
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, OnError: func(err error, phase hopper.ErrorPhase) {
		if phase == hopper.PhaseSchedule {
			errs <- err
		}
	}})
	require.NoError(t, c.Register(tickJob))
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "stuck", Job: calls.job, Next: func(after time.Time) time.Time {
		if after.Before(start.Add(time.Minute)) {
			return start.Add(time.Minute)
		}
		return start.Add(time.Minute) // never later
	}})
	require.NoError(t, err)
	clk.AdvanceTo(start.Add(time.Minute))
	select {
	case err := <-errs:
		require.ErrorContains(t, err, "not a later time")
	case <-testCtx(t).Done():
		t.Fatal("the stuck Next was not reported")
	}
	clk.AdvanceTo(start.Add(time.Hour))
	calls.awaitOnce(t, "the one occurrence", start.Add(time.Minute))
	require.Equal(t, 1, calls.total())
}

// registered projects infos on what a client's registration fixes.
func registered(infos []hopper.ScheduleInfo) []hopper.ScheduleInfo {
	out := make([]hopper.ScheduleInfo, len(infos))
	for i, in := range infos {
		out[i] = hopper.ScheduleInfo{Name: in.Name, Cron: in.Cron, Next: in.Next, CatchUp: in.CatchUp, Registered: in.Registered}
	}
	return out
}

// TestSchedulesList: Client.ScheduleList lists the registered schedules by
// name with their next occurrence, and forgets a removed one. It runs in a
// synctest bubble: synctest.Wait returns once the store heard of both.
func TestSchedulesList(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Time{})
		start := clk.Now()
		c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
		var calls jobCalls
		stop, err := c.Schedule(hopper.Schedule{Name: "nightly", Cron: "0 3 * * *", Location: time.UTC, Job: calls.job})
		require.NoError(t, err)
		_, err = c.Schedule(hopper.Schedule{Name: "every-hour", CatchUp: -1, Job: calls.job,
			Next: func(after time.Time) time.Time { return after.Truncate(time.Hour).Add(time.Hour) }})
		require.NoError(t, err)
		list := func() []hopper.ScheduleInfo {
			t.Helper()
			infos, err := c.ScheduleList(testCtx(t))
			require.NoError(t, err)
			return infos
		}
		require.Equal(t, []hopper.ScheduleInfo{
			{Name: "every-hour", Next: start.Add(time.Hour), Registered: true},
			{Name: "nightly", Cron: "0 3 * * *", Next: start.Add(3 * time.Hour), CatchUp: time.Minute, Registered: true},
		}, registered(list()))
		synctest.Wait()
		n := 0
		for _, in := range list() {
			if !in.UpdatedAt.IsZero() {
				n++
			}
		}
		require.Equal(t, 2, n, "the store heard of both schedules")
		stop()
		// The store still keeps the removed one, which no longer runs here.
		require.Equal(t, []hopper.ScheduleInfo{
			{Name: "every-hour", Next: start.Add(time.Hour), Registered: true},
			{Name: "nightly", Cron: "0 3 * * *", Next: start.Add(3 * time.Hour)},
		}, registered(list()))
		require.NoError(t, c.ScheduleDelete(testCtx(t), "nightly"))
		require.Len(t, list(), 1)
		require.ErrorIs(t, c.ScheduleDelete(testCtx(t), "nightly"), hopper.ErrNotFound)
	})
}

// TestSchedulePauseByName: a schedule no process runs yet may be paused
// ahead of its deploy, but an unknown one is not resumed; an empty name is
// refused.
func TestSchedulePauseByName(t *testing.T) {
	t.Parallel()
	c, _ := hoppertest.NewClient(t, hopper.Config{})
	ctx := testCtx(t)
	require.ErrorIs(t, c.SchedulePause(ctx, "", nil), hopper.ErrInvalidInput)
	require.ErrorIs(t, c.ScheduleResume(ctx, ""), hopper.ErrInvalidInput)
	require.NoError(t, c.SchedulePause(ctx, "later", &hopper.PauseOpts{Create: true}))
	infos, err := c.ScheduleList(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "later", infos[0].Name)
	require.True(t, infos[0].Paused)
	require.False(t, infos[0].Registered)
	require.NoError(t, c.ScheduleResume(ctx, "later"))
	infos, err = c.ScheduleList(ctx)
	require.NoError(t, err)
	require.False(t, infos[0].Paused)
	require.ErrorIs(t, c.ScheduleResume(ctx, "typo"), hopper.ErrNotFound, "resuming a name nobody knows")
	require.ErrorIs(t, c.ScheduleDelete(ctx, ""), hopper.ErrInvalidInput)
	infos, err = c.ScheduleList(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1, "no row for the typo")
}

// TestSchedulePauseResume: while a schedule is paused its occurrences
// enqueue nothing on any process and are not counted; once resumed, the
// next occurrence fires and is counted, on every driver.
func TestSchedulePauseResume(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := spyOn(newDriver(t))
		clk := hoppertest.NewClock(time.Time{})
		start := clk.Now()
		var calls [2]jobCalls
		var clients [2]*hopper.Client
		for i := range clients {
			clients[i] = startedClient(t, d, clk)
			_, err := clients[i].Schedule(hopper.Schedule{Name: "every-minute", Cron: "* * * * *", Location: time.UTC, Job: calls[i].job})
			require.NoError(t, err)
		}
		ctx := testCtx(t)
		minute := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
		// recorded waits until the store recorded the occurrence of
		// minute m (its record, written in a transaction, moves the next
		// occurrence past it).
		recorded := func(m int) {
			t.Helper()
			await(t, "the occurrence of minute "+minute(m).Format(time.TimeOnly)+" recorded", func() bool {
				rows, err := d.ScheduleList(ctx, &driver.ScheduleListParams{})
				require.NoError(t, err)
				return len(rows) == 1 && !rows[0].NextAt.Before(minute(m+1))
			}, d.answered.next)
		}
		step := func(m int) {
			t.Helper()
			clk.AdvanceTo(minute(m))
			await(t, "both processes make the job", func() bool {
				return calls[0].count(minute(m)) == 1 && calls[1].count(minute(m)) == 1
			}, calls[0].changed.next, calls[1].changed.next)
			recorded(m)
		}
		step(0)
		require.NoError(t, clients[1].SchedulePause(ctx, "every-minute", nil))
		step(1)
		step(2)
		require.NoError(t, clients[0].ScheduleResume(ctx, "every-minute"))
		step(3)
		for _, c := range clients {
			require.NoError(t, c.Stop(testCtx(t)))
		}
		require.Equal(t, map[time.Time]int{minute(0): 1, minute(3): 1}, storedTicks(t, clients[0]),
			"no job for the occurrences while paused")
		infos, err := clients[0].ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		in := infos[0]
		require.False(t, in.Paused)
		require.Equal(t, int64(2), in.Occurrences, "paused occurrences are not counted")
		require.True(t, in.Last.Equal(minute(3)), "last occurrence %s", in.Last)
	})
}

// TestScheduleBadInput: malformed schedules are refused with
// ErrInvalidInput, and nothing is registered.
func TestScheduleBadInput(t *testing.T) {
	t.Parallel()
	c := newClient(t, hopper.Config{})
	job := func(time.Time) (*hopper.JobSpec, error) { return nil, nil }
	next := func(t time.Time) time.Time { return t.Add(time.Minute) }
	for name, s := range map[string]hopper.Schedule{
		"no name":         {Cron: "* * * * *", Job: job},
		"no job":          {Name: "a", Cron: "* * * * *"},
		"job and run":     {Name: "a", Cron: "* * * * *", Job: job, Run: func(time.Time) (*hopper.RunSpec, error) { return nil, nil }},
		"neither":         {Name: "a", Job: job},
		"both":            {Name: "a", Cron: "* * * * *", Next: next, Job: job},
		"four fields":     {Name: "a", Cron: "* * * *", Job: job},
		"minute 60":       {Name: "a", Cron: "60 * * * *", Job: job},
		"month 13":        {Name: "a", Cron: "0 0 1 13 *", Job: job},
		"words":           {Name: "a", Cron: "every day", Job: job},
		"unknown zone":    {Name: "a", Cron: "CRON_TZ=Nowhere/City 0 3 * * *", Job: job},
		"bad descriptor":  {Name: "a", Cron: "@fortnightly", Job: job},
		"six fields":      {Name: "a", Cron: "0 0 3 * * *", Job: job},
		"step of nothing": {Name: "a", Cron: "*/ * * * *", Job: job},
	} {
		_, err := c.Schedule(s)
		require.ErrorIs(t, err, hopper.ErrInvalidInput, name)
	}
	_, err := c.Schedule(hopper.Schedule{Name: "a", Cron: "* * * * *", Job: job})
	require.NoError(t, err, "none of the refused schedules took the name")
	_, err = c.Schedule(hopper.Schedule{Name: "a", Cron: "0 * * * *", Job: job})
	require.ErrorIs(t, err, hopper.ErrInvalidInput, "a name registered already")
}

// TestScheduleJobErrorsAreReported: a Job that fails skips its occurrence
// and reaches OnError; the schedule goes on.
func TestScheduleJobErrorsAreReported(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 16)
	clk := hoppertest.NewClock(time.Time{})
	start := clk.Now()
	c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, OnError: func(err error, phase hopper.ErrorPhase) {
		if phase == hopper.PhaseSchedule {
			errs <- err
		}
	}})
	require.NoError(t, c.Register(tickJob))
	boom := errors.New("boom")
	var calls jobCalls
	_, err := c.Schedule(hopper.Schedule{Name: "flaky", Cron: "* * * * *", Location: time.UTC, CatchUp: -1,
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			if at.Minute()%2 == 1 {
				return nil, boom
			}
			return calls.job(at)
		}})
	require.NoError(t, err)
	clk.AdvanceTo(start.Add(time.Minute))
	select {
	case err := <-errs:
		require.ErrorIs(t, err, boom)
	case <-testCtx(t).Done():
		t.Fatal("the failing Job was not reported")
	}
	enqueued := onEvents(t, c)
	clk.AdvanceTo(start.Add(2 * time.Minute))
	await(t, "the next occurrence", func() bool { return storedTicks(t, c)[start.Add(2*time.Minute)] == 1 }, enqueued)
}

// TestParseCron pins the occurrences of a few expressions.
func TestParseCron(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, c := range []struct {
		expr  string
		loc   *time.Location
		after string
		want  string // "" for none
	}{
		{"*/15 0 * * 1-5", time.UTC, "2030-01-07T00:07:00Z", "2030-01-07T00:15:00Z"}, // a Monday
		{"*/15 0 * * 1-5", time.UTC, "2030-01-05T00:07:00Z", "2030-01-07T00:00:00Z"}, // Saturday → Monday
		{"0 3 * * *", ny, "2030-01-07T00:00:00Z", "2030-01-07T08:00:00Z"},            // 03:00 in New York, winter
		{"0 3 * * *", ny, "2030-07-07T00:00:00Z", "2030-07-07T07:00:00Z"},            // and in summer
		{"CRON_TZ=UTC 0 3 * * *", ny, "2030-01-07T00:00:00Z", "2030-01-07T03:00:00Z"},
		{"0 0 13 * 5", time.UTC, "2030-01-01T00:00:00Z", "2030-01-04T00:00:00Z"}, // day 13 or a Friday
		{"@every 10m", time.UTC, "2030-01-07T00:07:30Z", "2030-01-07T00:10:00Z"},
		{"@hourly", time.UTC, "2030-01-07T00:07:30Z", "2030-01-07T01:00:00Z"},
		{"0 0 30 2 *", time.UTC, "2030-01-01T00:00:00Z", ""},
	} {
		next, err := hopper.ParseCron(c.expr, c.loc)
		require.NoError(t, err, c.expr)
		got := next(utc(c.after))
		if c.want == "" {
			require.True(t, got.IsZero(), "%s after %s: %s, want none", c.expr, c.after, got)
			continue
		}
		require.True(t, got.Equal(utc(c.want)), "%s after %s: %s, want %s", c.expr, c.after, got.UTC(), c.want)
	}
}

// scheduleSpy passes a client's calls to the store and reports each
// schedule registration the store answered.
// Executor is the spy itself.
func (s *scheduleSpy) Executor() driver.Executor { return s }

type scheduleSpy struct {
	driver.Driver
	baseExec
	registered chan string
}

func (s *scheduleSpy) ScheduleUpsert(ctx context.Context, p *driver.ScheduleUpsertParams) (time.Time, error) {
	seen, err := s.baseExec.ScheduleUpsert(ctx, p)
	if err == nil {
		s.registered <- p.Name
	}
	return seen, err
}

// TestScheduleNeverFiresBeforeFirstSeen: a schedule registered in code at
// 03:00:30 does not fire its 03:00 occurrence, though it is within the
// catch-up window (as a stored schedule defined then would not); its first
// is 03:01. Restarted after an outage, the process catches up the latest
// occurrence missed since the store first saw the schedule, while a
// schedule first registered at that restart does not. On every driver,
// with the virtual clock.
func TestScheduleNeverFiresBeforeFirstSeen(t *testing.T) {
	forEachDriver(t, testScheduleNeverFiresBeforeFirstSeen)
}

func testScheduleNeverFiresBeforeFirstSeen(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	three := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	clk := hoppertest.NewClock(three.Add(30 * time.Second))
	type firing struct {
		name string
		at   time.Time
	}
	fired := make(chan firing, 16)
	schedule := func(c *hopper.Client, name string) {
		t.Helper()
		_, err := c.Schedule(hopper.Schedule{Name: name, Cron: "* * * * *", Location: time.UTC, // CatchUp: a minute
			Job: func(at time.Time) (*hopper.JobSpec, error) {
				fired <- firing{name, at.UTC()}
				return tickJob.Job(at.Unix(), nil), nil
			}})
		require.NoError(t, err)
	}
	registered := func(spy *scheduleSpy, name string) {
		t.Helper()
		select {
		case got := <-spy.registered:
			require.Equal(t, name, got)
		case <-ctx.Done():
			t.Fatalf("%s was never registered", name)
		}
	}
	next := func() firing {
		t.Helper()
		select {
		case f := <-fired:
			return f
		case <-ctx.Done():
			t.Fatal("no occurrence fired")
			return firing{}
		}
	}

	spy1 := &scheduleSpy{Driver: d, baseExec: d.Executor(), registered: make(chan string, 4)}
	c1 := startedClient(t, spy1, clk)
	schedule(c1, "minutely")
	registered(spy1, "minutely")
	// The registration named 03:00, left out once the store answered
	// that it first saw the schedule now: the store hears of 03:01, and
	// a listing from a process that does not run it says so.
	registered(spy1, "minutely")
	storedNext := func(name string) time.Time {
		t.Helper()
		rows, err := d.Executor().ScheduleList(ctx, &driver.ScheduleListParams{})
		require.NoError(t, err)
		for _, r := range rows {
			if r.Name == name {
				return r.NextAt.UTC()
			}
		}
		t.Fatalf("the store has no schedule %s", name)
		return time.Time{}
	}
	require.Equal(t, three.Add(time.Minute), storedNext("minutely"))
	clk.AdvanceTo(three.Add(time.Minute))
	require.Equal(t, firing{"minutely", three.Add(time.Minute)}, next(), "03:00 is before the schedule was first seen")
	infos, err := c1.ScheduleList(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.True(t, infos[0].FirstSeen.Equal(three.Add(30*time.Second)), "first seen %s", infos[0].FirstSeen)
	require.NoError(t, c1.Stop(ctx))

	// Down from 03:01 to 03:05:30: 03:05 is missed, within the window.
	clk.AdvanceTo(three.Add(5*time.Minute + 30*time.Second))
	spy2 := &scheduleSpy{Driver: d, baseExec: d.Executor(), registered: make(chan string, 4)}
	c2 := startedClient(t, spy2, clk)
	schedule(c2, "minutely")
	registered(spy2, "minutely")
	require.Equal(t, firing{"minutely", three.Add(5 * time.Minute)}, next(), "the restart catches up 03:05")
	schedule(c2, "late")
	registered(spy2, "late")
	registered(spy2, "late")
	require.Equal(t, three.Add(6*time.Minute), storedNext("late"))
	clk.AdvanceTo(three.Add(6 * time.Minute))
	got := map[firing]bool{next(): true, next(): true}
	require.Equal(t, map[firing]bool{{"minutely", three.Add(6 * time.Minute)}: true, {"late", three.Add(6 * time.Minute)}: true}, got,
		"the schedule first seen at 03:05:30 does not fire 03:05")
	select {
	case f := <-fired:
		t.Fatalf("unexpected occurrence %v", f)
	default:
	}
}
