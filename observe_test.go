package hopper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// changeLog records the changes an observer receives.
type changeLog struct {
	mu      sync.Mutex
	chs     []hopper.Change
	changed changes
}

func (l *changeLog) add(ch hopper.Change) {
	l.mu.Lock()
	l.chs = append(l.chs, ch)
	l.mu.Unlock()
	l.changed.notify()
}

func (l *changeLog) of(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ch := range l.chs {
		if ch.EntityID == id {
			out = append(out, ch.Prev+">"+ch.State)
		}
	}
	return out
}

func (l *changeLog) positions() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, len(l.chs))
	for i, ch := range l.chs {
		out[i] = ch.Position
	}
	return out
}

func TestObserveBadInput(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	noop := func(context.Context, hopper.Change) error { return nil }
	require.ErrorIs(t, c.Observe("", hopper.AfterCommit, hopper.ChangeFilter{}, noop), hopper.ErrInvalidInput)
	require.ErrorIs(t, c.Observe("x", hopper.AfterCommit, hopper.ChangeFilter{}, nil), hopper.ErrInvalidInput)
	require.ErrorIs(t, c.Observe("x", hopper.ObserverPhase(7), hopper.ChangeFilter{}, noop), hopper.ErrInvalidInput)
	require.NoError(t, c.Observe("x", hopper.InCommit, hopper.ChangeFilter{}, noop))
	require.ErrorIs(t, c.Observe("x", hopper.AfterCommit, hopper.ChangeFilter{}, noop), hopper.ErrInvalidInput, "names are unique")
	require.ErrorIs(t, c.Observe(hopper.RetryObserverName, hopper.AfterCommit, hopper.ChangeFilter{}, noop), hopper.ErrInvalidInput)
	require.NoError(t, c.Start(context.Background()))
	require.ErrorIs(t, c.Observe("late", hopper.AfterCommit, hopper.ChangeFilter{}, noop), hopper.ErrInvalidInput, "observers come before Start")
	require.NoError(t, c.Stop(context.Background()))
}

// TestInCommitObserver: a phase-1 observer sees transitions inside their
// transactions, its veto rolls a transition back as a whole, and what it
// writes commits with the transition without being shown to it again.
func TestInCommitObserver(t *testing.T) { forEachDriver(t, testInCommitObserver) }

func testInCommitObserver(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	step := hopper.Define("step", func(context.Context, string) (string, error) { return "ok", nil }, nil)
	seen := &changeLog{}
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(step))
	require.NoError(t, c.Observe("guard", hopper.InCommit, hopper.ChangeFilter{Kinds: []hopper.ChangeKind{hopper.ChangeJob}}, func(ctx context.Context, ch hopper.Change) error {
		if hopper.CommitFromContext(ctx) == nil {
			return errors.New("an in-commit observer has no transaction")
		}
		seen.add(ch)
		if ch.Prev == "" && strings.HasPrefix(ch.EntityID, "forbidden") {
			return errors.New("no forbidden jobs")
		}
		if ch.Prev == "pending" && ch.State == "cancelled" {
			return errors.New("pending jobs stay")
		}
		if ch.State == "succeeded" && strings.HasPrefix(ch.EntityID, "first") {
			// Follow-up work, stored with the success or not at all.
			return hopper.CommitFromContext(ctx).Enqueue(ctx, step.Job("second", &hopper.InsertOpts{ID: "second-" + ch.EntityID}))
		}
		return nil
	}))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })

	// A vetoed insert stores nothing.
	_, err = step.Enqueue(ctx, c, "x", &hopper.InsertOpts{ID: "forbidden-1"})
	require.ErrorIs(t, err, hopper.ErrVetoed)
	_, err = c.JobGet(ctx, "forbidden-1")
	require.ErrorIs(t, err, hopper.ErrNotFound, "the vetoed insert rolled back")
	chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: "forbidden-1", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, chs, "and its change with it")

	// A vetoed cancel leaves the job as it was.
	paused := "paused-" + t.Name()
	require.NoError(t, c.QueuePause(ctx, paused, &hopper.PauseOpts{Create: true}))
	h, err := step.Enqueue(ctx, c, "y", &hopper.InsertOpts{Queue: paused})
	require.NoError(t, err)
	_, err = c.JobCancel(ctx, h.ID())
	require.ErrorIs(t, err, hopper.ErrVetoed)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StatePending, row.State)

	// Writes made in the commit land with it; the observer does not see
	// the change its own write made, only the later ones.
	first, err := step.Enqueue(ctx, c, "z", &hopper.InsertOpts{ID: "first-1"})
	require.NoError(t, err)
	_, err = first.Result(ctx)
	require.NoError(t, err)
	awaitJobState(t, c, "second-first-1", hopper.StateSucceeded)
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, seen.of("first-1"))
	require.Equal(t, []string{"pending>running", "running>succeeded"}, seen.of("second-first-1"),
		"the insert the observer made is not shown to it (no re-entry)")
}

// TestAfterCommitObserverRetries: a failing phase-2 observer is retried
// until it succeeds, in order, and never undoes the change.
func TestAfterCommitObserverRetries(t *testing.T) { forEachDriver(t, testAfterCommitObserverRetries) }

func testAfterCommitObserverRetries(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	step := hopper.Define("step", func(context.Context, string) (string, error) { return "ok", nil }, nil)
	log := &changeLog{}
	var mu sync.Mutex
	failures := 0
	var errs []error
	c, err := hopper.New(hopper.Config{Driver: newDriver(t), OnError: func(err error, phase hopper.ErrorPhase) {
		if phase == hopper.PhaseObserver {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}})
	require.NoError(t, err)
	require.NoError(t, c.Register(step))
	require.NoError(t, c.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{Types: []string{"step"}}, func(ctx context.Context, ch hopper.Change) error {
		if ch.State == "running" {
			mu.Lock()
			defer mu.Unlock()
			if failures < 2 {
				failures++
				return fmt.Errorf("audit store down (%d)", failures)
			}
		}
		log.add(ch)
		return nil
	}))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })

	h, err := step.Enqueue(ctx, c, "x", nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	await(t, "every change delivered", func() bool { return len(log.of(h.ID())) == 3 }, log.changed.next)
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, log.of(h.ID()), "in order, the failed one again")
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State, "a failing observer never rolls a change back")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, errs, 2, "each failure is reported")
	require.ErrorContains(t, errs[0], "audit store down (1)")
}

// TestAfterCommitDeliveredOnceByTwoProcesses: two clients register the same
// observer name; each change reaches it exactly once (no crash here).
func TestAfterCommitDeliveredOnceByTwoProcesses(t *testing.T) {
	forEachDriver(t, testAfterCommitDeliveredOnce)
}

func testAfterCommitDeliveredOnce(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	step := hopper.Define("step", func(context.Context, int) (int, error) { return 1, nil }, nil)
	var mu sync.Mutex
	got := map[int64][]string{}
	var delivered changes
	clients := make([]*hopper.Client, 2)
	for i := range clients {
		who := fmt.Sprintf("client-%d", i)
		c, err := hopper.New(hopper.Config{Driver: d, WorkerID: who})
		require.NoError(t, err)
		require.NoError(t, c.Register(step))
		require.NoError(t, c.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{}, func(_ context.Context, ch hopper.Change) error {
			mu.Lock()
			got[ch.Position] = append(got[ch.Position], who)
			mu.Unlock()
			delivered.notify()
			return nil
		}))
		require.NoError(t, c.Start(ctx))
		clients[i] = c
	}
	const n = 100
	ins := make([]int, n)
	hs, err := step.EnqueueMany(ctx, clients[0], ins, nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	// Hand the cursor over halfway: the stopping client gives it up.
	require.NoError(t, clients[0].Stop(ctx))
	hs, err = step.EnqueueMany(ctx, clients[1], ins[:10], nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	await(t, "every change delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 3*(n+10)
	}, delivered.next)
	require.NoError(t, clients[1].Stop(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 3*(n+10), "insert, start and success of each job")
	for pos, who := range got {
		require.Len(t, who, 1, "change %d delivered once (%v)", pos, who)
	}
}

// TestObserverChild is the process TestAfterCommitSurvivesKill starts and
// kills.
func TestObserverChild(t *testing.T) {
	ledger := os.Getenv("HOPPER_OBSERVER_LEDGER")
	if ledger == "" {
		t.Skip("the child of TestAfterCommitSurvivesKill; runs only when it starts it")
	}
	d, err := openChildDriver(os.Getenv("HOPPER_OBSERVER_DB"))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	out, err := os.OpenFile(ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(2)
	}
	c, err := hopper.New(observerKillConfig(d, "child"))
	if err != nil {
		os.Exit(2)
	}
	_ = c.Register(observedStep)
	_ = c.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{}, func(_ context.Context, ch hopper.Change) error {
		fmt.Fprintf(out, "%d\n", ch.Position)
		_ = out.Sync()
		if ch.EntityID == "crash-me" && ch.State == "succeeded" {
			// Delivered, not yet recorded as delivered: die here.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
		return nil
	})
	ctx := context.Background()
	specs := make([]*hopper.JobSpec, 20)
	for i := range specs {
		id := fmt.Sprintf("job-%02d", i)
		if i == 10 {
			id = "crash-me"
		}
		specs[i] = observedStep.Job(i, &hopper.InsertOpts{ID: id})
	}
	if _, err := c.EnqueueMany(ctx, specs...); err != nil {
		os.Exit(3)
	}
	if err := c.Start(ctx); err != nil {
		os.Exit(2)
	}
	time.Sleep(time.Minute) // killed long before
	os.Exit(4)
}

var observedStep = hopper.Define("observed", func(context.Context, int) (int, error) { return 1, nil }, nil)

// openChildDriver opens the store a child process shares with its parent:
// a SQLite file, or "postgres:SCHEMA" on the test database.
func openChildDriver(spec string) (driver.Driver, error) {
	if schema, ok := strings.CutPrefix(spec, "postgres:"); ok {
		return pgdriver.Open(context.Background(), os.Getenv("HOPPER_TEST_POSTGRES_URL"), &pgdriver.Options{Schema: schema})
	}
	return sqlitedriver.Open(spec, nil)
}

// TestAfterCommitSurvivesKill: a process is killed by SIGKILL after its
// observer received a change and before the delivery was recorded; the
// next process with the observer resumes from the cursor: the change is
// delivered again (at least once), and none is lost.
func TestAfterCommitSurvivesKill(t *testing.T) {
	t.Parallel()
	stores := []struct{ name, spec string }{{"sqlite", filepath.Join(t.TempDir(), "hopper.db")}}
	if os.Getenv("HOPPER_TEST_POSTGRES_URL") != "" {
		schema := "hopper_obs_" + strconv.FormatInt(time.Now().UnixNano(), 36)
		stores = append(stores, struct{ name, spec string }{"postgres", "postgres:" + schema})
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			// Open (and migrate) before the child does; the schema goes with
			// the test.
			var d driver.Driver
			if st.name == "postgres" {
				d = openPostgresSchema(t, os.Getenv("HOPPER_TEST_POSTGRES_URL"), strings.TrimPrefix(st.spec, "postgres:"))
			} else {
				var err error
				d, err = sqlitedriver.Open(st.spec, nil)
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Close() })
			}
			ledger := filepath.Join(t.TempDir(), "ledger")
			cmd := exec.Command(os.Args[0], "-test.run=^TestObserverChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "HOPPER_OBSERVER_LEDGER="+ledger, "HOPPER_OBSERVER_DB="+st.spec)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "child output: %s", out)
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child died by SIGKILL: %v\n%s", err, out)

			data, err := os.ReadFile(ledger)
			require.NoError(t, err)
			before := map[int64]bool{}
			for _, line := range strings.Fields(string(data)) {
				p, err := strconv.ParseInt(line, 10, 64)
				require.NoError(t, err)
				before[p] = true
			}
			crash, err := d.Executor().ChangeList(t.Context(), &driver.ChangeListParams{EntityID: "crash-me", Limit: 10})
			require.NoError(t, err)
			require.Len(t, crash, 3)
			crashPos := crash[2].Position
			require.True(t, before[crashPos], "the child received the change it died on")

			log := &changeLog{}
			c, err := hopper.New(observerKillConfig(d, "parent"))
			require.NoError(t, err)
			require.NoError(t, c.Register(observedStep))
			require.NoError(t, c.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{}, func(_ context.Context, ch hopper.Change) error {
				log.add(ch)
				return nil
			}))
			require.NoError(t, c.Start(t.Context()))
			defer func() { require.NoError(t, c.Stop(context.Background())) }()
			for i := range 20 {
				id := fmt.Sprintf("job-%02d", i)
				if i == 10 {
					id = "crash-me"
				}
				row, err := c.JobWait(t.Context(), id)
				require.NoError(t, err)
				require.Equal(t, hopper.StateSucceeded, row.State)
			}
			// Insert, start and success of 20 jobs, and the rescue of those
			// the child left running: each committed with its transition.
			feed, err := d.Executor().ChangeList(t.Context(), &driver.ChangeListParams{Limit: 1000})
			require.NoError(t, err)
			var all []*hopper.Change // what an observer without kinds receives: not the workers' changes
			for _, ch := range feed {
				if ch.Kind != hopper.ChangeWorker && ch.Kind != hopper.ChangeSchedule {
					all = append(all, ch)
				}
			}
			require.GreaterOrEqual(t, len(all), 60)
			await(t, "the rest delivered", func() bool {
				seen := map[int64]bool{}
				for _, p := range log.positions() {
					seen[p] = true
				}
				if !seen[crashPos] {
					// Checked below; without it the wait could end before
					// any delivery when the crash was the last change.
					return false
				}
				for _, ch := range all {
					if !seen[ch.Position] && !before[ch.Position] {
						return false
					}
				}
				return true
			}, log.changed.next)
			require.Contains(t, log.positions(), crashPos, "the change the child died on is delivered again")
			requireFeedOrder(t, log)
		})
	}
}

// observerKillConfig makes leases short, so that what a killed process
// held (its cursor, its leadership, its jobs) lapses within seconds.
func observerKillConfig(d driver.Driver, worker string) hopper.Config {
	return hopper.Config{Driver: d, WorkerID: worker, Visibility: 2 * time.Second, LeaderTTL: 2 * time.Second,
		RescueInterval: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond}
}

// requireFeedOrder requires the changes an observer received to be in the
// feed's delivery order.
func requireFeedOrder(t *testing.T, l *changeLog) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 1; i < len(l.chs); i++ {
		prev, ch := l.chs[i-1], l.chs[i]
		require.True(t, hoppertype.CursorOf(&prev).Before(&ch), "change %d delivered after %d", ch.Position, prev.Position)
	}
}

// TestShouldReopen is the seed's decision table for the retry observer.
func TestShouldReopen(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	into := func(prev string, st *hoppertype.StuckInfo) hopper.Change {
		return hopper.Change{Kind: hopper.ChangeJob, Prev: prev, State: "stuck", Stuck: st}
	}
	engine := func(r *bool) *hoppertype.StuckInfo {
		return &hoppertype.StuckInfo{Cause: hopper.StuckEngineFailure, Retryable: r, Detail: "leases lost"}
	}
	cases := []struct {
		name string
		ch   hopper.Change
		gens int
		want bool
	}{
		{"retryable, first generation", into("running", engine(&yes)), 1, true},
		{"retryable, at the cap", into("running", engine(&yes)), 2, false},
		{"retryable, past the cap", into("running", engine(&yes)), 3, false},
		{"not retryable", into("running", engine(&no)), 1, false},
		{"retryable missing: fail-safe", into("running", engine(nil)), 1, false},
		{"no stuck slot", into("running", nil), 1, false},
		{"failed blocker", into("running", &hoppertype.StuckInfo{Cause: hopper.StuckFailedBlocker, BlockerIDs: []string{"a"}}), 1, false},
		{"cycle", into("running", &hoppertype.StuckInfo{Cause: hopper.StuckCycle, BlockerIDs: []string{"a", "b"}}), 1, false},
		{"not entering stuck", into("stuck", engine(&yes)), 1, false},
		{"not a stuck change", hopper.Change{Prev: "running", State: "dead", Stuck: engine(&yes)}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, hopper.ShouldReopen(tc.ch, tc.gens, hopper.MaxRetryAttempts))
		})
	}
	require.Equal(t, 2, hopper.MaxRetryAttempts, "the seed's cap")
}

// TestRetryObserverLeavesDependencyStucks: a gate stuck on a failed blocker
// is passed over by the retry observer (it stays stuck), and un-sticks when
// the blocker is redriven and succeeds.
func TestRetryObserverLeavesDependencyStucks(t *testing.T) {
	forEachDriver(t, testRetryObserverLeavesDependencyStucks)
}

func testRetryObserverLeavesDependencyStucks(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	var mu sync.Mutex
	fail := true
	step := hopper.Define("dep-step", func(_ context.Context, name string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if name == "a" && fail {
			fail = false
			return "", hopper.Abort(errors.New("a fails once"))
		}
		return name, nil
	}, nil)
	spy := spyOn(d)
	c := newClient(t, hopper.Config{Driver: spy})
	require.NoError(t, c.Register(step))
	a, next := step.Job("a", nil), step.Job("next", nil)
	gate := hopper.Gate([]string{a.ID()}, []*hopper.JobSpec{next}, hopper.AllSuccess(), 0)
	_, err := c.EnqueueMany(ctx, a, gate)
	require.NoError(t, err)
	awaitJobState(t, c, gate.ID(), hopper.StateStuck)
	stuck := awaitRetryObserverPassed(t, spy, gate.ID())
	require.Equal(t, hopper.ChangeGate, stuck.Kind)
	require.Equal(t, hopper.StuckFailedBlocker, stuck.Stuck.Cause)
	require.Nil(t, stuck.Stuck.Retryable, "dependency stucks never say retryable")
	row, err := c.JobGet(ctx, gate.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateStuck, row.State, "not reopened by the retry observer")

	// Auto-unstick: the blocker, redriven, succeeds; the gate proceeds.
	_, err = c.JobRetry(ctx, a.ID())
	require.NoError(t, err)
	awaitJobState(t, c, next.ID(), hopper.StateSucceeded)
	awaitJobState(t, c, gate.ID(), hopper.StateSucceeded)
}

// TestInCommitVetoOfAFinish: a vetoed success is undone alone (the other
// outcomes of its batch commit); the attempt's lease then lapses, the job is
// rescued and runs again.
func TestInCommitVetoOfAFinish(t *testing.T) { forEachDriver(t, testInCommitVetoOfAFinish) }

func testInCommitVetoOfAFinish(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	step := hopper.Define("step", func(ctx context.Context, n int) (int, error) {
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: 10 * time.Millisecond, Jitter: hopper.NoJitter}})
	var mu sync.Mutex
	vetoed := 0
	cfg := hopper.Config{Driver: newDriver(t), Visibility: time.Second, RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second}
	c, err := hopper.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Register(step))
	require.NoError(t, c.Observe("once", hopper.InCommit, hopper.ChangeFilter{States: []string{"succeeded"}}, func(_ context.Context, ch hopper.Change) error {
		mu.Lock()
		defer mu.Unlock()
		if ch.EntityID == "veto-me" && vetoed == 0 {
			vetoed++
			return errors.New("not yet")
		}
		return nil
	}))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })

	specs := []*hopper.JobSpec{step.Job(0, &hopper.InsertOpts{ID: "veto-me"})}
	for i := 1; i < 20; i++ {
		specs = append(specs, step.Job(i, nil))
	}
	hs, err := c.EnqueueMany(ctx, specs...)
	require.NoError(t, err)
	for _, h := range hs[1:] {
		row := awaitJobState(t, c, h.ID(), hopper.StateSucceeded)
		require.Equal(t, 1, row.Attempt, "the veto undid its own item, not its batch")
	}
	row := awaitJobState(t, c, "veto-me", hopper.StateSucceeded)
	require.Equal(t, 2, row.Attempt, "the vetoed success never happened: the job ran again")
	attempts, err := c.JobAttempts(ctx, "veto-me")
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	require.Equal(t, hopper.StateRetrying, attempts[0].Outcome, "the first attempt's lease lapsed")
	require.Equal(t, hoppertype.ErrorKindLeaseLost, attempts[0].Error.Kind)
	require.Equal(t, hopper.StateSucceeded, attempts[1].Outcome)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, vetoed)
}

// TestRetryObserverIgnoresStaleStuck: a job went stuck (retryable) and was
// cancelled before any retry observer saw the change; when one does, the
// job stays cancelled.
func TestRetryObserverIgnoresStaleStuck(t *testing.T) {
	forEachDriver(t, testRetryObserverIgnoresStaleStuck)
}

func testRetryObserverIgnoresStaleStuck(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	// No retry observer here: the stuck change waits in the feed.
	quiet, err := hopper.New(hopper.Config{Driver: d, RetryObserverCap: -1})
	require.NoError(t, err)
	require.Nil(t, quiet.RetryObserver())
	step := hopper.Define("stale-step", func(context.Context, int) (int, error) { return 0, nil }, nil)
	h, err := step.Enqueue(ctx, quiet, 0, nil)
	require.NoError(t, err)
	now := time.Now()
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now, LeaseExpiresAt: now.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	yes := true
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: h.ID(), LeaseToken: claimed[0].LeaseToken,
		State: hopper.StateStuck, Attempt: 1, RunAt: claimed[0].RunAt,
		Stuck: &hoppertype.StuckInfo{Cause: hopper.StuckEngineFailure, Retryable: &yes, ObservedAt: now}}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	_, err = quiet.JobCancel(ctx, h.ID())
	require.NoError(t, err)

	// Now a client with the retry observer comes up and reads the feed.
	spy := spyOn(d)
	newClient(t, hopper.Config{Driver: spy})
	chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: h.ID(), Limit: 10})
	require.NoError(t, err)
	last := chs[len(chs)-1]
	require.Equal(t, "stuck>cancelled", last.Prev+">"+last.State)
	awaitCursorPassed(t, spy, hopper.RetryObserverName, last)
	row, err := quiet.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateCancelled, row.State, "a late stuck change does not bring a cancelled job back")
}

// TestAfterCommitBackoffKeepsTheLease: an observer that fails again and
// again waits longer each time, but never so long that its cursor's lease
// lapses (another process would take the cursor and the count would start
// over).
func TestAfterCommitBackoffKeepsTheLease(t *testing.T) {
	forEachDriver(t, testAfterCommitBackoffKeepsTheLease)
}

// cursorFault fails the first cursor save made after fail is set, as a
// connection cut mid-call would.
type cursorFault struct {
	driver.Driver
	baseExec
	mu     sync.Mutex
	fail   bool
	failed changes
}

// Executor is the spy itself.
func (f *cursorFault) Executor() driver.Executor { return f }

func (f *cursorFault) CursorAdvance(ctx context.Context, p *driver.CursorAdvanceParams) error {
	f.mu.Lock()
	fail := f.fail && p.TTL > 0
	f.fail = f.fail && !fail
	f.mu.Unlock()
	if fail {
		defer f.failed.notify()
		return errors.New("connection reset by peer")
	}
	return f.baseExec.CursorAdvance(ctx, p)
}

// TestAfterCommitSurvivesAFailedCursorCall: a store call of the deliverer
// that fails (not a lost lease: the connection) is tried again soon, on the
// wall clock, not after a poll interval: with a poll of an hour and a clock
// that never moves, the changes after the failure are still delivered, and
// the one whose save failed is delivered again (at least once).
func TestAfterCommitSurvivesAFailedCursorCall(t *testing.T) {
	forEachDriver(t, testAfterCommitSurvivesAFailedCursorCall)
}

func testAfterCommitSurvivesAFailedCursorCall(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	spy := &cursorFault{Driver: d, baseExec: d.Executor()}
	var log changeLog
	var mu sync.Mutex
	var errs []error
	clk := hoppertest.NewClock(time.Time{})
	c, err := hopper.New(hopper.Config{Driver: spy, Clock: clk, PollInterval: time.Hour, HeartbeatInterval: time.Hour,
		RetryObserverCap: -1, OnError: func(err error, phase hopper.ErrorPhase) {
			if phase == hopper.PhaseObserver {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}})
	require.NoError(t, err)
	require.NoError(t, c.Observe("saver", hopper.AfterCommit, hopper.ChangeFilter{States: []string{"pending"}}, func(_ context.Context, ch hopper.Change) error {
		log.add(ch)
		return nil
	}))
	require.NoError(t, c.Start(testCtx(t)))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	ctx := testCtx(t)
	step := hopper.Define("later", func(context.Context, int) (int, error) { return 0, nil }, nil)

	spy.mu.Lock()
	spy.fail = true
	spy.mu.Unlock()
	failed := spy.failed.next()
	a, err := step.Enqueue(ctx, c, 1, &hopper.InsertOpts{Queue: "nobody-works-this"})
	require.NoError(t, err)
	select {
	case <-failed:
	case <-ctx.Done():
		t.Fatal("the cursor's save never failed")
	}
	next := log.changed.next()
	b, err := step.Enqueue(ctx, c, 2, &hopper.InsertOpts{Queue: "nobody-works-this"})
	require.NoError(t, err)
	for len(log.of(b.ID())) == 0 {
		select {
		case <-next:
			next = log.changed.next()
		case <-ctx.Done():
			t.Fatal("the change after the failed save was not delivered without a poll")
		}
	}
	require.NotEmpty(t, log.of(a.ID()), "the change whose save failed is delivered")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, errs, "the failed call is reported")
	require.Contains(t, fmt.Sprint(errs), "connection reset by peer")
}

// nextTimer is when clk's next timer is due, for a failure's message.
func nextTimer(clk *hoppertest.Clock) string {
	if due, ok := clk.NextTimer(); ok {
		return due.String()
	}
	return "none"
}

// backoffArmed reports whether the earliest foreground timer is due at t:
// the deliverer's backoff. The engine's own loops (maintenance, producers,
// heartbeats) run on background timers, and one of them may be armed at
// the same instant: taking it for the backoff moved the clock before the
// deliverer, slow under load, had armed its own, which then waited a
// second past the clock for good (seen as "no try after try 11").
func backoffArmed(clk *hoppertest.Clock, t time.Time) bool {
	at, ok := clk.NextForegroundTimer()
	return ok && at.Equal(t)
}

func testAfterCommitBackoffKeepsTheLease(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	var errs []error
	calls, delivered := 0, false
	var tried changes
	clk := hoppertest.NewClock(time.Time{})
	// Poll and heartbeat intervals of an hour: no other timer of the
	// engine's comes due at the end of a backoff, so the timer armed then
	// is the deliverer's. The retry observer, which would renew its own
	// cursor only once a poll interval, is off.
	cfg := hopper.Config{Driver: newDriver(t), Clock: clk, Visibility: 3 * time.Second, PollInterval: time.Hour, HeartbeatInterval: time.Hour,
		RetryObserverCap: -1, OnError: func(err error, phase hopper.ErrorPhase) {
			if phase == hopper.PhaseObserver {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}}
	c, err := hopper.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Observe("flaky", hopper.AfterCommit, hopper.ChangeFilter{States: []string{"pending"}}, func(context.Context, hopper.Change) error {
		mu.Lock()
		defer mu.Unlock()
		defer tried.notify()
		calls++
		if calls <= 12 {
			return fmt.Errorf("down (%d)", calls)
		}
		delivered = true
		return nil
	}))
	require.NoError(t, c.Start(testCtx(t)))
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	step := hopper.Define("later", func(context.Context, int) (int, error) { return 0, nil }, nil)
	next := tried.next()
	_, err = step.Enqueue(testCtx(t), c, 0, &hopper.InsertOpts{Queue: "nobody-works-this"})
	require.NoError(t, err)
	isDelivered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return delivered
	}
	tries := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	// After each failed try the deliverer records how far it got (which
	// renews its lease) and sleeps, on the clock, 100 ms doubling but never
	// more than a third of the 3 s lease. The test waits for each try, then
	// for that sleep's timer, and moves the clock to it and no further: other
	// timers of the engine's (maintenance every few seconds) may fire on the
	// way, but the clock never runs ahead of a deliverer that has not yet
	// woken. A backoff past a third of the lease never gets its timer found.
	ctx := testCtx(t)
	came := false // the next try came already, while waiting for a timer
	for {
		if !came {
			select {
			case <-next:
			case <-ctx.Done():
				mu.Lock()
				seen := errs
				mu.Unlock()
				t.Fatalf("no try after try %d (next timer %v; observer errors %v)", tries(), nextTimer(clk), seen)
			}
		}
		if isDelivered() {
			break
		}
		n := tries()
		next = tried.next()
		due := clk.Now().Add(min(100*time.Millisecond<<(n-1), time.Second))
		// Wait for the backoff's timer, unless the next try comes first: a
		// store call that failed (slow under load) makes the deliverer try
		// again at once, on the wall clock, without a backoff.
		came = false
		for !came && !backoffArmed(clk, due) {
			timer := clk.TimerArmed()
			if backoffArmed(clk, due) {
				break
			}
			select {
			case <-timer:
			case <-next:
				came = true
			case <-ctx.Done():
				t.Fatalf("after try %d no backoff timer at %v (the next timer is at %v)", n, due, nextTimer(clk))
			}
		}
		if !came {
			clk.AdvanceTo(due)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Each failure is reported; a store call cut by its budget under load
	// may be too, but never a lost lease.
	var failures []error
	for _, err := range errs {
		require.NotErrorIs(t, err, hopper.ErrLeaseLost)
		require.NotContains(t, err.Error(), "lease lost")
		if strings.Contains(err.Error(), ": down (") {
			failures = append(failures, err)
		}
	}
	require.Len(t, failures, 12, "each failure reported: %v", errs)
	require.Contains(t, failures[11].Error(), "try 12", "the count goes on across rounds")
}

// leaseCounter counts the cursor leases a client asks for.
// Executor is the spy itself.
func (l *leaseCounter) Executor() driver.Executor { return l }

type leaseCounter struct {
	driver.Driver
	baseExec
	mu sync.Mutex
	n  int
}

func (l *leaseCounter) CursorLease(ctx context.Context, p *driver.CursorLeaseParams) (*driver.CursorRow, error) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return l.baseExec.CursorLease(ctx, p)
}

// TestObserverNonHolderAsksOncePerPoll: while another process delivers an
// observer, a client asks for its cursor once per poll interval, not on
// every commit it makes. It runs in a synctest bubble: synctest.Wait
// returns once the commits' nudges were handled.
func TestObserverNonHolderAsksOncePerPoll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		t.Cleanup(func() { _ = d.Close() })
		ctx := testCtx(t)
		step := hopper.Define("counted", func(context.Context, int) (int, error) { return 1, nil }, nil)
		noop := func(context.Context, hopper.Change) error { return nil }
		a, err := hopper.New(hopper.Config{Driver: d, WorkerID: "a", RetryObserverCap: -1})
		require.NoError(t, err)
		require.NoError(t, a.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{}, noop))
		require.NoError(t, a.Start(ctx))
		t.Cleanup(func() { require.NoError(t, a.Stop(context.Background())) })
		synctest.Wait()
		cs, err := d.Executor().CursorList(ctx, &driver.CursorListParams{})
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.Equal(t, "a", cs[0].Owner, "a holds the cursor")

		counter := &leaseCounter{Driver: d, baseExec: d.Executor()}
		b, err := hopper.New(hopper.Config{Driver: counter, WorkerID: "b", RetryObserverCap: -1, PollInterval: time.Hour})
		require.NoError(t, err)
		require.NoError(t, b.Register(step))
		require.NoError(t, b.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{}, noop))
		require.NoError(t, b.Start(ctx))
		t.Cleanup(func() { require.NoError(t, b.Stop(context.Background())) })
		for range 5 {
			hs, err := step.EnqueueMany(ctx, b, make([]int, 20), nil)
			require.NoError(t, err)
			for _, h := range hs {
				_, err := h.Result(ctx)
				require.NoError(t, err)
			}
			synctest.Wait() // the commits' nudges reached b's deliverer
		}
		counter.mu.Lock()
		defer counter.mu.Unlock()
		require.Equal(t, 1, counter.n, "asked once, not once per commit")
	})
}
