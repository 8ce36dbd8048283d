package hopper_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// The retried-saga crash test kills a process with SIGKILL in the middle
// of a retried run — inside or after a step of its second attempt, after
// its second attempt scheduled its activity or started its child, inside
// or after a compensation undoing an attempt, after an attempt's failure
// was recorded — one run per kill point, then a fresh client recovers every
// run. Each effect of the saga (a charge, a reservation, their undoing, the
// activity's notice, the child's label) appends "<run> <attempt> <effect>"
// to an effects file (fsync'd) before it returns, so the file is a ledger
// of what each attempt did and undid.
//
// The guarantee checked: the run ends as it would have without the crash
// (completed by its third attempt, or compensated after three); every
// effect happens once per attempt — every charge of a failed attempt has
// exactly one refund, a compensation recorded before the kill never runs
// again, each attempt has one activity job and one child run, its own —
// except the one the kill cut off between its effect and its record, which
// happens twice (at least once).

// wfSagaCrashPoint is a place to kill a run of the crash-saga workflow:
// inside an effect, after it happened ("2 charge": attempt 2's charge), or
// once an event of an attempt committed (its kind, name and attempt).
type wfSagaCrashPoint struct {
	label string
	// okFrom is the run's input: the attempt that succeeds (99: none).
	okFrom     int
	effect     string
	kind, name string
	attempt    int
	// twice is the effect that happens twice: the one the kill cut off.
	twice string
}

func wfSagaCrashPoints() []wfSagaCrashPoint {
	return []wfSagaCrashPoint{
		// In the middle of a retry: the second attempt's charge.
		{label: "in-a2-charge", okFrom: 3, effect: "2 charge", twice: "2 charge"},
		{label: "after-a2-charge", okFrom: 3, kind: "step", name: "charge", attempt: 2},
		// The second attempt's activity and child: started (their job and
		// run inserted with the event), not yet run.
		{label: "after-a2-notify-scheduled", okFrom: 3, kind: "activity_scheduled", name: "crash-saga-notify", attempt: 2},
		{label: "after-a2-label-started", okFrom: 3, kind: "child_started", name: "crash-saga-label", attempt: 2},
		// Between an attempt's failure and the next attempt.
		{label: "after-a1-failed", okFrom: 3, kind: "workflow_failed", attempt: 1},
		// In the middle of the compensations undoing a retried attempt.
		{label: "after-a1-release", okFrom: 3, kind: "compensation_executed", name: "release#1", attempt: 1},
		{label: "in-a1-refund", okFrom: 3, effect: "1 refund", twice: "1 refund"},
		// In the middle of the final compensations.
		{label: "after-a3-release", okFrom: 99, kind: "compensation_executed", name: "release#1", attempt: 3},
		{label: "in-a3-refund", okFrom: 99, effect: "3 refund", twice: "3 refund"},
	}
}

// wfSagaKillRun and wfSagaKillEffect (in the child only) say which run to
// kill inside which effect.
var wfSagaKillRun, wfSagaKillEffect string

// wfSagaEffect records one effect of an attempt, then kills the process if
// this is the kill point.
func wfSagaEffect(wf hopper.WorkflowContext, effect string) error {
	e := fmt.Sprintf("%d %s", wf.Attempt(), effect)
	if err := wfCrashEffect(wf.RunID(), e); err != nil {
		return err
	}
	if wf.RunID() == wfSagaKillRun && e == wfSagaKillEffect {
		wfCrashDie("in-" + strings.ReplaceAll("a"+e, " ", "-"))
	}
	return nil
}

// wfSagaSide is the input of the saga's activity and child: the run and
// attempt whose effect they do.
type wfSagaSide struct {
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
}

// wfSagaNotify is the saga's activity; wfSagaLabel its child.
var (
	wfSagaNotify = hopper.Define("crash-saga-notify", func(ctx context.Context, in wfSagaSide) (string, error) {
		return "noticed", wfCrashEffect(in.Run, fmt.Sprintf("%d notify", in.Attempt))
	}, nil)
	wfSagaLabel = hopper.Workflow("crash-saga-label", func(wf hopper.WorkflowContext, in wfSagaSide) (string, error) {
		return hopper.Step(wf, "print", func(ctx context.Context) (string, error) {
			return "label", wfCrashEffect(in.Run, fmt.Sprintf("%d label", in.Attempt))
		}, nil)
	}, nil)
)

// wfCrashSaga charges and reserves, registering a refund and a release,
// runs an activity and a child, then fails in every attempt before okFrom;
// the workflow retries it twice (three attempts).
var wfCrashSaga = hopper.Workflow("crash-saga", func(wf hopper.WorkflowContext, okFrom int) (string, error) {
	for _, s := range []struct{ do, undo string }{{"charge", "refund"}, {"reserve", "release"}} {
		if _, err := hopper.Step(wf, s.do, func(ctx context.Context) (string, error) {
			return s.do + "-ok", wfSagaEffect(wf, s.do)
		}, nil); err != nil {
			return "", err
		}
		wf.Compensate(s.undo, func(ctx context.Context) error { return wfSagaEffect(wf, s.undo) })
	}
	side := wfSagaSide{Run: wf.RunID(), Attempt: wf.Attempt()}
	if _, err := hopper.Activity(wf, wfSagaNotify, side, nil); err != nil {
		return "", err
	}
	if _, err := hopper.Child(wf, wfSagaLabel, side, nil); err != nil {
		return "", err
	}
	if wf.Attempt() < okFrom {
		return "", fmt.Errorf("attempt %d: carrier unavailable", wf.Attempt())
	}
	return fmt.Sprintf("shipped by attempt %d", wf.Attempt()), nil
}, &hopper.WorkflowOpts{MaxRetries: 2, Retry: hopper.RetryPolicy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}})

// TestWorkflowSagaCrashChild is the child process of TestWorkflowSagaCrash:
// it starts one run of crash-saga on the run's own queue, works it, and
// kills itself at the kill point it was given.
func TestWorkflowSagaCrashChild(t *testing.T) {
	dbPath := os.Getenv("HOPPER_SAGACRASH_DB")
	if dbPath == "" {
		t.Skip("the child of TestWorkflowSagaCrash; runs only when it starts it")
	}
	fail := func(what string, err error) {
		fmt.Println("child:", what+":", err)
		os.Exit(2)
	}
	wfCrashEffects = os.Getenv("HOPPER_SAGACRASH_EFFECTS")
	runID, queue := os.Getenv("HOPPER_SAGACRASH_RUN"), os.Getenv("HOPPER_SAGACRASH_QUEUE")
	var pt wfSagaCrashPoint
	for _, p := range wfSagaCrashPoints() {
		if p.label == os.Getenv("HOPPER_SAGACRASH_KILLAT") {
			pt = p
		}
	}
	if pt.label == "" {
		fail("kill point", fmt.Errorf("unknown %q", os.Getenv("HOPPER_SAGACRASH_KILLAT")))
	}
	var d driver.Driver
	var err error
	if strings.HasPrefix(dbPath, "postgres") {
		d, err = pgdriver.Open(context.Background(), dbPath, &pgdriver.Options{Schema: os.Getenv("HOPPER_SAGACRASH_SCHEMA")})
	} else {
		d, err = sqlitedriver.Open(dbPath, nil)
	}
	if err != nil {
		fail("open", err)
	}
	if pt.kind != "" {
		d = &wfKillDriver{Driver: d, baseExec: d.Executor(), run: runID, kind: pt.kind, name: pt.name, attempt: pt.attempt, label: pt.label}
	}
	wfSagaKillRun, wfSagaKillEffect = runID, pt.effect
	cfg := wfCrashConfig(d, []string{queue})
	cfg.DefaultQueue = queue // the run's activities and children too: no other process's
	c, err := hopper.New(cfg)
	if err != nil {
		fail("new", err)
	}
	if err := c.Register(wfCrashSaga, wfSagaNotify, wfSagaLabel); err != nil {
		fail("register", err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		fail("start", err)
	}
	if _, err := wfCrashSaga.Start(ctx, c, pt.okFrom, &hopper.StartOpts{ID: runID, Queue: queue}); err != nil {
		fail("start run", err)
	}
	<-time.After(20 * time.Second) // the kill comes long before
	fmt.Println("child: the kill point was never reached")
	os.Exit(3)
}

// TestWorkflowSagaCrash: for each kill point in turn, a child process
// starts a run of the retried saga and is killed (SIGKILL) there; then one
// fresh client recovers all the runs. Each run must end as without the
// crash, and the ledger must show each effect once per attempt, but for the
// one cut off between its effect and its record.
func TestWorkflowSagaCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sagacrash.db")
		testWorkflowSagaCrash(t, path, "", func() driver.Driver {
			d, err := sqlitedriver.Open(path, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			return d
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
		if url == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
			}
			t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL crash test")
		}
		d := openPostgres(t, url).(*pgdriver.Driver) // a fresh schema, dropped at the end
		testWorkflowSagaCrash(t, url, d.Schema(), func() driver.Driver { return d })
	})
}

func testWorkflowSagaCrash(t *testing.T, db, schema string, open func() driver.Driver) {
	dir := t.TempDir()
	wfCrashEffects = filepath.Join(dir, "effects.txt")
	pts := wfSagaCrashPoints()
	runID := func(i int) string { return fmt.Sprintf("sagacrash-%02d-%s", i, pts[i].label) }
	queue := func(i int) string { return fmt.Sprintf("sagacrash-q%02d", i) }

	var queues []string
	for i, pt := range pts {
		queues = append(queues, queue(i))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkflowSagaCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HOPPER_SAGACRASH_DB="+db, "HOPPER_SAGACRASH_SCHEMA="+schema, "HOPPER_SAGACRASH_EFFECTS="+wfCrashEffects,
			"HOPPER_SAGACRASH_RUN="+runID(i), "HOPPER_SAGACRASH_QUEUE="+queue(i), "HOPPER_SAGACRASH_KILLAT="+pt.label)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		require.False(t, timedOut, "kill point %s: the child did not die in time: %s", pt.label, out)
		require.Error(t, err, "kill point %s: the child must die by SIGKILL, not exit: %s", pt.label, out)
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "kill point %s: the child must die by SIGKILL (%v): %s", pt.label, err, out)
		require.Contains(t, string(out), wfCrashMarker+pt.label+"\n", "kill point %s: the child died elsewhere: %s", pt.label, out)
	}

	d := open()
	c, err := hopper.New(wfCrashConfig(d, queues))
	require.NoError(t, err)
	require.NoError(t, c.Register(wfCrashSaga, wfSagaNotify, wfSagaLabel))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		require.NoError(t, c.Stop(sctx))
	}()

	for i, pt := range pts {
		info, err := c.RunWait(ctx, runID(i))
		require.NoError(t, err, "kill point %s: the run did not finish: %s", pt.label, wfCrashAllHistory(context.Background(), d, runID(i)))
		if pt.okFrom == 3 {
			require.Equal(t, hopper.RunCompleted, info.Status, "kill point %s: %+v; %s", pt.label, info.Error, wfCrashAllHistory(ctx, d, runID(i)))
			require.JSONEq(t, `"shipped by attempt 3"`, string(info.Output), "kill point %s", pt.label)
		} else {
			require.Equal(t, hopper.RunCompensated, info.Status, "kill point %s: %+v; %s", pt.label, info.Error, wfCrashAllHistory(ctx, d, runID(i)))
		}
		// One activity job and one child run per attempt, each its own.
		for a, scope := range []string{runID(i), runID(i) + "@2", runID(i) + "@3"} {
			job, err := c.JobGet(ctx, scope+".a6")
			require.NoError(t, err, "kill point %s: attempt %d's activity", pt.label, a+1)
			require.Equal(t, hopper.StateSucceeded, job.State, "kill point %s: attempt %d's activity", pt.label, a+1)
		}
		kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: runID(i)}))
		require.NoError(t, err)
		var kidIDs []string
		for _, k := range kids {
			require.Equal(t, hopper.RunCompleted, k.Status, "kill point %s: child %s", pt.label, k.ID)
			kidIDs = append(kidIDs, k.ID)
		}
		require.ElementsMatch(t, []string{runID(i) + ".8", runID(i) + "@2.8", runID(i) + "@3.8"}, kidIDs, "kill point %s", pt.label)
		full, err := c.RunGet(ctx, runID(i))
		require.NoError(t, err)
		for _, ci := range full.Compensations {
			// Attempts 1 and 2 failed and were undone; attempt 3 too when
			// it failed.
			require.Equal(t, ci.Attempt < 3 || pt.okFrom == 99, ci.Executed, "kill point %s: %+v", pt.label, ci)
			require.Empty(t, ci.Error, "kill point %s", pt.label)
		}
	}

	// The ledger: each effect once per attempt, but the one cut off.
	b, err := os.ReadFile(wfCrashEffects)
	require.NoError(t, err)
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		count[l]++
	}
	for i, pt := range pts {
		want := map[string]int{}
		for a := 1; a <= 3; a++ {
			for _, e := range []string{"charge", "reserve", "notify", "label"} {
				want[strconv.Itoa(a)+" "+e] = 1
			}
			if a < 3 || pt.okFrom == 99 {
				for _, e := range []string{"release", "refund"} {
					want[strconv.Itoa(a)+" "+e] = 1 // one undo per effect
				}
			}
		}
		if pt.twice != "" {
			want[pt.twice] = 2
		}
		var bad []string
		for e, n := range want {
			key := runID(i) + " " + e
			if count[key] != n {
				bad = append(bad, fmt.Sprintf("%q happened %d times, want %d", e, count[key], n))
			}
			delete(count, key)
		}
		if len(bad) > 0 {
			t.Errorf("kill point %s: %s; history: %s", pt.label, strings.Join(bad, ", "), wfCrashAllHistory(ctx, d, runID(i)))
		}
	}
	require.Empty(t, count, "effects of unknown runs, attempts or effects")
}
