package hopper_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// The workflow crash test kills a process running a 5-step workflow with
// SIGKILL at every point between and inside its steps, one run per point, on
// one SQLite file; then a fresh client recovers every run. Each step appends
// "<run> <step>" to an effects file (fsync'd) before it returns, so the file
// shows how often each step's effect happened.
//
// The guarantee checked: every run completes with the right output; a step
// whose checkpoint committed before the kill never runs again (exactly
// once); the step that was running at the kill (effect done, checkpoint not
// yet written) runs again on recovery: at least once, here exactly twice.

// wfCrashSteps are the five steps of the crash-5 workflow; step i returns
// 10*(i+1), so a run with input n ends with n+150.
var wfCrashSteps = []string{"s1", "s2", "s3", "s4", "s5"}

// wfCrashPoint is a place to kill a run's process: inside a step, before
// its effect ("before") or after it but before its checkpoint ("in"), or
// right after a history event committed ("after": the event's kind and
// name).
type wfCrashPoint struct {
	label      string
	beforeStep string // kill as this step's function starts, before its effect
	inStep     string // kill inside this step's function, after its effect
	kind       string // kill once an event of this kind and name committed
	name       string
	// twice is the step whose effect happens twice: the one the kill
	// interrupted before its checkpoint.
	twice string
}

// wfCrashPoints are all the kill points, in the order of a run: after the
// run's start was stored (it is stored with the first checkpoint), then for
// each step as it starts, after its effect and after its checkpoint.
func wfCrashPoints() []wfCrashPoint {
	pts := []wfCrashPoint{{label: "after-start", kind: "workflow_started"}}
	for i, s := range wfCrashSteps {
		pts = append(pts,
			wfCrashPoint{label: "before-" + s, beforeStep: s},
			wfCrashPoint{label: "in-" + s, inStep: s, twice: s})
		if i < len(wfCrashSteps)-1 {
			pts = append(pts, wfCrashPoint{label: "after-" + s, kind: "step", name: s})
		}
	}
	// (A step's checkpoint is stored as the next step goes live; the last
	// step's, and the run's completion, in the transaction that completes
	// its job: there is no point between the last step's and the run's
	// end, and a kill after the last step's effect is "in-" it.)
	return pts
}

// Process-wide settings of the crash workflow: where effects go, and (in the
// child only) which run to kill where. Set before any client starts.
var (
	wfCrashEffects    string
	wfCrashKillRun    string
	wfCrashKillBefore string
	wfCrashKillIn     string
)

const wfCrashMarker = "wfcrash-killpoint "

// wfCrashDie kills this process with SIGKILL (a true kill -9: no deferred
// code, no flush, no clean close of the store), first telling the parent
// where.
func wfCrashDie(label string) {
	fmt.Println(wfCrashMarker + label)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// wfCrashEffect records one execution of a step's effect, durably.
func wfCrashEffect(runID, step string) error {
	f, err := os.OpenFile(wfCrashEffects, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(runID + " " + step + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var wfCrash5 = hopper.Workflow("crash-5", func(wf hopper.WorkflowContext, in int) (int, error) {
	sum := in
	for i, name := range wfCrashSteps {
		v, err := hopper.Step(wf, name, func(ctx context.Context) (int, error) {
			if wfCrashKillBefore == name && wf.RunID() == wfCrashKillRun {
				wfCrashDie("before-" + name)
			}
			if err := wfCrashEffect(wf.RunID(), name); err != nil {
				return 0, err
			}
			if wfCrashKillIn == name && wf.RunID() == wfCrashKillRun {
				wfCrashDie("in-" + name)
			}
			return 10 * (i + 1), nil
		}, nil)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}, &hopper.WorkflowOpts{Retry: hopper.RetryPolicy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}})

// wfKillDriver kills the process right after a chosen history event of a
// chosen run committed: the checkpoint is durable, nothing after it ran.
// Step checkpoints and the run's start are appended through the driver
// itself, not inside a transaction, so they pass through here;
// should that change, the child never reaches its kill point and says so.
// With attempt set, only an event of that attempt of the run counts.
// Executor is the spy itself.
func (d *wfKillDriver) Executor() driver.Executor { return d }

type wfKillDriver struct {
	driver.Driver
	baseExec
	run, kind, name, label string
	attempt                int
	dying                  atomic.Bool
}

func (d *wfKillDriver) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	err := d.baseExec.RunEventAppend(ctx, p)
	if err == nil && d.chosen(p) {
		wfCrashDie(d.label)
	}
	return err
}

// chosen says whether p appends the chosen event.
func (d *wfKillDriver) chosen(p *driver.RunEventAppendParams) bool {
	if p.RunID != d.run {
		return false
	}
	for _, ev := range p.Events {
		if ev.Kind == d.kind && ev.Name == d.name && (d.attempt == 0 || ev.Attempt == d.attempt) {
			return true
		}
	}
	return false
}

// InTx kills the process once a transaction that appended the chosen event
// committed: an activity's schedule or a child's start, recorded in the
// transaction that inserts the activity's job or the child's run.
func (d *wfKillDriver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	var hit bool
	err := d.baseExec.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		hit = false
		return fn(ctx, &wfKillTx{Executor: tx, d: d, hit: &hit})
	})
	if err == nil && hit {
		wfCrashDie(d.label)
	}
	return err
}

// JobClaim claims nothing once the chosen event is on its way to the
// store: the job or run inserted with it is not started by the process
// about to die (which would do its effect once more than the test counts).
func (d *wfKillDriver) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if d.dying.Load() {
		return nil, nil
	}
	return d.baseExec.JobClaim(ctx, p)
}

// wfKillTx is a transaction of a wfKillDriver: it notes the chosen event's
// append, for InTx to kill the process after the commit.
type wfKillTx struct {
	driver.Executor
	d   *wfKillDriver
	hit *bool
}

func (t *wfKillTx) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	if t.d.chosen(p) {
		t.d.dying.Store(true)
	}
	err := t.Executor.RunEventAppend(ctx, p)
	if err == nil && t.d.chosen(p) {
		*t.hit = true
	}
	return err
}

// wfCrashConfig is the configuration of the parent and its children. The
// lease is short, so the killed children's runs are rescued soon, but not
// so short that a worker starved of CPU (the race detector on a loaded
// machine) loses a live lease: a step whose lease is lost may run again
// (at least once), and the test counts every effect exactly once.
func wfCrashConfig(d driver.Driver, queues []string) hopper.Config {
	return hopper.Config{
		Driver: d, Queues: queues, Visibility: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
		RescueInterval: 50 * time.Millisecond, LeaderTTL: 500 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		WaitPollInterval: 50 * time.Millisecond, MaxWorkers: 16,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// TestWorkflowCrashChild is the child process of TestWorkflowCrash: it
// starts one run of crash-5 on the run's own queue, works it, and kills
// itself at the kill point it was given.
func TestWorkflowCrashChild(t *testing.T) {
	dbPath := os.Getenv("HOPPER_WFCRASH_DB")
	if dbPath == "" {
		t.Skip("the child of TestWorkflowCrash; runs only when it starts it")
	}
	fail := func(what string, err error) {
		fmt.Println("child:", what+":", err)
		os.Exit(2)
	}
	wfCrashEffects = os.Getenv("HOPPER_WFCRASH_EFFECTS")
	runID, queue := os.Getenv("HOPPER_WFCRASH_RUN"), os.Getenv("HOPPER_WFCRASH_QUEUE")
	input, err := strconv.Atoi(os.Getenv("HOPPER_WFCRASH_INPUT"))
	if err != nil {
		fail("input", err)
	}
	var pt wfCrashPoint
	for _, p := range wfCrashPoints() {
		if p.label == os.Getenv("HOPPER_WFCRASH_KILLAT") {
			pt = p
		}
	}
	if pt.label == "" {
		fail("kill point", fmt.Errorf("unknown %q", os.Getenv("HOPPER_WFCRASH_KILLAT")))
	}
	var d driver.Driver
	if strings.HasPrefix(dbPath, "postgres") {
		d, err = pgdriver.Open(context.Background(), dbPath, &pgdriver.Options{Schema: os.Getenv("HOPPER_WFCRASH_SCHEMA")})
	} else {
		d, err = sqlitedriver.Open(dbPath, nil)
	}
	if err != nil {
		fail("open", err)
	}
	if pt.kind != "" {
		d = &wfKillDriver{Driver: d, baseExec: d.Executor(), run: runID, kind: pt.kind, name: pt.name, label: pt.label}
	}
	wfCrashKillRun, wfCrashKillBefore, wfCrashKillIn = runID, pt.beforeStep, pt.inStep
	c, err := hopper.New(wfCrashConfig(d, []string{queue}))
	if err != nil {
		fail("new", err)
	}
	if err := c.Register(wfCrash5); err != nil {
		fail("register", err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		fail("start", err)
	}
	if _, err := wfCrash5.Start(ctx, c, input, &hopper.StartOpts{ID: runID, Queue: queue}); err != nil {
		fail("start run", err)
	}
	time.Sleep(20 * time.Second)
	fmt.Println("child: the kill point was never reached")
	os.Exit(3)
}

// TestWorkflowCrash: for each kill point in turn, a child process starts a
// run of the 5-step workflow and is killed (SIGKILL) at that point; then one
// fresh client recovers all the runs once their leases lapse. Every run must
// complete with the right output and its 5 steps recorded in order; a step
// whose checkpoint committed before the kill must have run exactly once,
// and only the step interrupted between its effect and its checkpoint may
// have run twice (at-least-once).
func TestWorkflowCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "wfcrash.db")
		testWorkflowCrash(t, path, "", func() driver.Driver {
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
		testWorkflowCrash(t, url, d.Schema(), func() driver.Driver { return d })
	})
}

// testWorkflowCrash runs the crash test on the store at db (a SQLite path
// or a PostgreSQL URL with schema); open gives the parent's driver on it.
func testWorkflowCrash(t *testing.T, db, schema string, open func() driver.Driver) {
	start := time.Now()
	dir := t.TempDir()
	wfCrashEffects = filepath.Join(dir, "effects.txt")
	pts := wfCrashPoints()
	runID := func(i int) string { return fmt.Sprintf("wfcrash-%02d-%s", i, pts[i].label) }
	queue := func(i int) string { return fmt.Sprintf("wfcrash-q%02d", i) }

	// Kill a child at each point in turn. Each run has its own queue, so a
	// child works only its own run: a later child never picks up an earlier
	// run, and each kill lands exactly where it should.
	var queues []string
	for i, pt := range pts {
		queues = append(queues, queue(i))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkflowCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HOPPER_WFCRASH_DB="+db, "HOPPER_WFCRASH_SCHEMA="+schema, "HOPPER_WFCRASH_EFFECTS="+wfCrashEffects,
			"HOPPER_WFCRASH_RUN="+runID(i), "HOPPER_WFCRASH_QUEUE="+queue(i), "HOPPER_WFCRASH_INPUT="+strconv.Itoa(i),
			"HOPPER_WFCRASH_KILLAT="+pt.label)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		require.False(t, timedOut, "kill point %s: the child did not die in time: %s", pt.label, out)
		require.Error(t, err, "kill point %s: the child must die by SIGKILL, not exit: %s", pt.label, out)
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "kill point %s: the child must die by SIGKILL (%v): %s", pt.label, err, out)
		require.Contains(t, string(out), wfCrashMarker+pt.label+"\n", "kill point %s: the child died elsewhere: %s", pt.label, out)
	}
	killed := time.Since(start)

	// A fresh client recovers every run: the leases lapse, the rescuer
	// retries the runs' jobs, and each run resumes from its history.
	d := open()
	c, err := hopper.New(wfCrashConfig(d, queues))
	require.NoError(t, err)
	require.NoError(t, c.Register(wfCrash5))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		require.NoError(t, c.Stop(sctx))
	}()

	changed := onEvents(t, c)
	for i, pt := range pts {
		// Wait until the run ends, or goes stuck (which RunWait would wait
		// out: a stuck run is not finished); either is a transition of
		// this client's, whose event follows it.
		var info *hopper.RunInfo
		await(t, "kill point "+pt.label+": the run to finish", func() bool {
			info, err = c.RunGet(ctx, runID(i))
			require.NoError(t, err, "kill point %s: the run did not finish", pt.label)
			return info.Status.Terminal() || info.Status == hopper.RunStuck
		}, changed)
		if info.Status != hopper.RunCompleted {
			t.Fatalf("kill point %s: run %s ended %s, not completed: %+v; history: %s", pt.label, runID(i), info.Status, info.Error, wfCrashAllHistory(ctx, d, runID(i)))
		}
		require.JSONEq(t, strconv.Itoa(i+150), string(info.Output), "kill point %s: output", pt.label)
		var names []string
		for j, s := range info.Steps {
			names = append(names, s.Name)
			require.Nil(t, s.Error, "kill point %s: step %s", pt.label, s.Name)
			require.JSONEq(t, strconv.Itoa(10*(j+1)), string(s.Output), "kill point %s: step %s output", pt.label, s.Name)
		}
		require.Equal(t, wfCrashSteps, names, "kill point %s: the run's steps, in order", pt.label)
	}
	recovered := time.Since(start) - killed

	// Each step's effect happened once per recorded step, except the step
	// the kill interrupted between its effect and its checkpoint.
	b, err := os.ReadFile(wfCrashEffects)
	require.NoError(t, err)
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		count[l]++
	}
	for i, pt := range pts {
		var bad []string
		for _, s := range wfCrashSteps {
			key := runID(i) + " " + s
			want := 1 // checkpointed before the kill, or run after it: exactly once
			if s == pt.twice {
				want = 2 // interrupted between its effect and its checkpoint: run again
			}
			if count[key] != want {
				bad = append(bad, fmt.Sprintf("%s ran %d times, want %d", s, count[key], want))
			}
			delete(count, key)
		}
		if len(bad) > 0 {
			t.Errorf("kill point %s: %s; history: %s", pt.label, strings.Join(bad, ", "), wfCrashAllHistory(ctx, d, runID(i)))
		}
	}
	require.Empty(t, count, "effects of unknown runs or steps")
	t.Logf("%d kill points: children killed in %v, all runs recovered in %v", len(pts), killed.Round(time.Millisecond), recovered.Round(time.Millisecond))
}

// wfCrashAllHistory shows a run's history over all its attempts.
func wfCrashAllHistory(ctx context.Context, d driver.Driver, id string) string {
	job, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for a := 1; a <= job.Attempt; a++ {
		evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: id, Attempt: a})
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, ev := range evs {
			names = append(names, strings.TrimSpace(ev.Kind+" "+ev.Name))
		}
		parts = append(parts, fmt.Sprintf("attempt %d [%s]", a, strings.Join(names, ", ")))
	}
	return strings.Join(parts, "; ")
}
