package hopper_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// The exactly-once tests run transfers — jobs that finish in the
// transaction moving their money (CompleteTx), and workflows whose step
// moves it (TxStep) — in worker processes killed with SIGKILL, at chosen
// points around the commit and at random. Each transfer's ledger row has
// the job's (or run's) id as its key, and a transfer that finds its row
// there already fails for good (a dead job, a failed run): every transfer
// succeeding with its row there once is the proof that no effect committed
// twice and none was lost.

// eoInput is a transfer and the point at which its first attempt kills its
// process ("" for none).
type eoInput struct {
	Amount int    `json:"amount"`
	Crash  string `json:"crash"`
}

// Crash points of a job: after its writes, before CompleteTx; after
// CompleteTx, before the commit; after the commit, before the handler
// returns; after the handler returned, before the engine saw it.
var eoJobCrashes = []string{"before-complete", "before-commit", "after-commit", "after-return"}

// Crash points of a workflow: inside the step's function, after its
// writes; as the step's transaction is about to commit (after its record
// was written in it); just after it committed; after the step returned.
var eoFlowCrashes = []string{"in-step", "step-before-commit", "step-after-commit", "after-step"}

// eoPlans holds the crash point of each run this process executes, for
// eoStore, which sees only the run's id.
var eoPlans sync.Map // run id -> crash point

// eoStore is the worker process's store with crash points around the
// commit of the transactions it begins for steps (TxStep).
type eoStore struct {
	driver.Driver
	j driver.TxJoiner
}

func (s *eoStore) TxJoin(ctx context.Context, tx any, p *driver.TxJoinParams) (*driver.AppTx, error) {
	return s.j.TxJoin(ctx, tx, p)
}

func (s *eoStore) TxBegin(ctx context.Context, p *driver.TxBeginParams) (*driver.AppTx, error) {
	atx, err := s.j.TxBegin(ctx, p)
	if err != nil {
		return nil, err
	}
	commit := atx.Commit
	atx.Commit = func(ctx context.Context) error {
		step, _ := hopper.StepFromContext(ctx)
		plan, _ := eoPlans.Load(step.RunID)
		in := eoInput{Crash: fmt.Sprint(plan)}
		eoCrash(ctx, in, "step-before-commit")
		err := commit(ctx)
		if err == nil {
			eoCrash(ctx, in, "step-after-commit")
		}
		return err
	}
	return atx, nil
}

// eoDB is the worker process's store, for the handlers.
var eoDB *appDB

// eoCrash kills this process when point is the one the transfer was told
// to crash at, the first time it gets there: a marker file, made before
// the kill, says it did (a transfer whose process was killed elsewhere
// first still crashes at its point later).
func eoCrash(ctx context.Context, in eoInput, point string) {
	if in.Crash != point {
		return
	}
	id := hopper.JobFromContext(ctx).ID()
	f, err := os.OpenFile(filepath.Join(os.Getenv("HOPPER_EO_MARKS"), id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // crashed here already
	}
	_ = f.Close()
	fmt.Println("crash", point) // the parent counts the points reached
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill() // SIGKILL: nothing of this process runs on
	select {}
}

// eoRefused marks a transfer that found its ledger row: the effect would
// have committed twice.
func eoRefused(err error) error {
	return hopper.Abort(fmt.Errorf("the ledger refused a second transfer: %w", err))
}

var eoMove = hopper.Define("eo-move", func(ctx context.Context, in eoInput) (int, error) {
	id := hopper.JobFromContext(ctx).ID()
	tx, err := eoDB.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.rollback(ctx) //nolint:errcheck // a no-op after the commit
	if err := tx.exec(ctx, `INSERT INTO %[1]sledger (job_id, amount) VALUES ($1, $2)`, id, in.Amount); err != nil {
		return 0, eoRefused(err)
	}
	if err := tx.exec(ctx, `UPDATE %[1]saccounts SET balance = balance - $1 WHERE id = 'alice'`, in.Amount); err != nil {
		return 0, err
	}
	if err := tx.exec(ctx, `UPDATE %[1]saccounts SET balance = balance + $1 WHERE id = 'bob'`, in.Amount); err != nil {
		return 0, err
	}
	eoCrash(ctx, in, "before-complete")
	if err := hopper.CompleteTx(ctx, tx.tx, in.Amount); err != nil {
		return 0, err
	}
	eoCrash(ctx, in, "before-commit")
	if err := tx.commit(ctx); err != nil {
		return 0, err
	}
	eoCrash(ctx, in, "after-commit")
	return in.Amount, nil
}, &hopper.TypeOpts[eoInput]{
	Retry: hopper.RetryPolicy{Attempts: 20, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	WorkMiddleware: []hopper.WorkMiddleware{hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, next func(context.Context) error) error {
		err := next(ctx)
		var in eoInput
		if json.Unmarshal(job.Input, &in) == nil {
			eoCrash(ctx, in, "after-return")
		}
		return err
	})},
})

var eoFlow = hopper.Workflow("eo-flow", func(wf hopper.WorkflowContext, in eoInput) (int, error) {
	eoPlans.Store(wf.RunID(), in.Crash)
	v, err := hopper.TxStep(wf, "move", func(ctx context.Context, tx any) (int, error) {
		t := eoDB.wrap(tx)
		if err := t.exec(ctx, `INSERT INTO %[1]sledger (job_id, amount) VALUES ($1, $2)`, wf.RunID(), in.Amount); err != nil {
			return 0, hopper.Fatal(fmt.Errorf("the ledger refused a second transfer: %w", err))
		}
		if err := t.exec(ctx, `UPDATE %[1]saccounts SET balance = balance - $1 WHERE id = 'alice'`, in.Amount); err != nil {
			return 0, err
		}
		if err := t.exec(ctx, `UPDATE %[1]saccounts SET balance = balance + $1 WHERE id = 'bob'`, in.Amount); err != nil {
			return 0, err
		}
		eoCrash(wf.Context(), in, "in-step")
		return in.Amount, nil
	}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 20, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}})
	if err != nil {
		return 0, err
	}
	eoCrash(wf.Context(), in, "after-step")
	return v, nil
}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})

// eoConfig keeps leases short and finds dead workers fast, so a killed
// process's work moves on within a second or two.
func eoConfig(d driver.Driver, worker string) hopper.Config {
	return hopper.Config{Driver: d, WorkerID: worker, MaxWorkers: 8, Visibility: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
		RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second, PollInterval: 100 * time.Millisecond}
}

// TestExactlyOnceChild is a worker process of TestExactlyOnceKilled: it
// works transfers until it is killed or its stdin closes.
func TestExactlyOnceChild(t *testing.T) {
	db := os.Getenv("HOPPER_EO_DB")
	if db == "" {
		t.Skip("a child of TestExactlyOnceKilled; runs only when it starts it")
	}
	ctx := context.Background()
	d, err := dwOpen(ctx, db, os.Getenv("HOPPER_EO_SCHEMA"))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	eoDB = newAppDB(d)
	c, err := hopper.New(eoConfig(&eoStore{Driver: d, j: d.(driver.TxJoiner)}, os.Getenv("HOPPER_EO_NAME")))
	if err != nil {
		fmt.Println("new:", err)
		os.Exit(2)
	}
	_ = c.Register(eoMove, eoFlow)
	if err := c.Start(ctx); err != nil {
		fmt.Println("start:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // the parent closes stdin to stop us
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = c.Stop(stopCtx)
	_ = d.Close()
	os.Exit(0)
}

// eoWorker is a running worker process; exited is closed when it ends.
type eoWorker struct {
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	exited chan struct{}
}

// eoReached counts the crash points the workers reached.
type eoReached struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *eoReached) add(line string) {
	if p, ok := strings.CutPrefix(strings.TrimSpace(line), "crash "); ok {
		r.mu.Lock()
		r.n[p]++
		r.mu.Unlock()
	}
}

func (r *eoReached) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

func startEOWorker(t *testing.T, reached *eoReached, marks, db, schema, name string) *eoWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExactlyOnceChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOPPER_EO_DB="+db, "HOPPER_EO_SCHEMA="+schema, "HOPPER_EO_NAME="+name, "HOPPER_EO_MARKS="+marks)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	w := &eoWorker{cmd: cmd, stdin: in, exited: make(chan struct{})}
	r := bufio.NewReader(out)
	line, err := childLine(r)
	if err != nil || line != "ready\n" {
		// It may have been killed by a job it claimed at once, before it
		// said so; that is fine. Anything else is not.
		reached.add(line)
		_ = cmd.Wait()
		killed := cmd.ProcessState != nil && !cmd.ProcessState.Success()
		require.True(t, killed && (line == "" || strings.HasPrefix(line, "crash ")), "worker %s did not start: %q %v", name, line, err)
		close(w.exited)
		return w
	}
	go func() {
		for {
			line, err := r.ReadString('\n')
			reached.add(line)
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
		close(w.exited)
	}()
	return w
}

func (w *eoWorker) done() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

func (w *eoWorker) kill() {
	if !w.done() {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-w.exited
}

func (w *eoWorker) stop() {
	_ = w.stdin.Close()
	<-w.exited
}

// TestExactlyOnceKilled: transfers finished in their own transaction
// (CompleteTx) and transactional workflow steps (TxStep), run by worker
// processes that die at every point around the commit, many times, and are
// killed at random besides: every transfer succeeds, and its ledger row
// and its money move exactly once. On SQLite (processes sharing one file)
// and on PostgreSQL.
func TestExactlyOnceKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "eo.db")
		d, err := sqlitedriver.Open(db, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		testExactlyOnceKilled(t, d, db, "")
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
		if url == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
			}
			t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL exactly-once test")
		}
		t.Parallel()
		d := openPostgres(t, url).(*pgdriver.Driver)
		testExactlyOnceKilled(t, d, url, d.Schema())
	})
}

func testExactlyOnceKilled(t *testing.T, d driver.Driver, db, schema string) {
	// Longer than testCtx: the processes die dozens of times (each death
	// costs a rescue), on a machine that may be busy.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	app := newAppDB(d)
	const start = 1_000_000
	require.NoError(t, app.createBank(ctx, map[string]int{"alice": start, "bob": 0}))

	// Every crash point several times (each transfer told to crash kills
	// its process once), among transfers that crash nowhere.
	perPoint, plainJobs, plainFlows := 4, 120, 30
	if raceEnabled {
		perPoint, plainJobs, plainFlows = 2, 40, 10
	}
	var jobs, flows []eoInput
	amount := 0
	next := func(crash string) eoInput {
		amount++
		return eoInput{Amount: amount, Crash: crash}
	}
	for range perPoint {
		for _, p := range eoJobCrashes {
			jobs = append(jobs, next(p))
		}
		for _, p := range eoFlowCrashes {
			flows = append(flows, next(p))
		}
	}
	for range plainJobs {
		jobs = append(jobs, next(""))
	}
	for range plainFlows {
		flows = append(flows, next(""))
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	rand.Shuffle(len(flows), func(i, j int) { flows[i], flows[j] = flows[j], flows[i] })
	producer, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	_, err = eoMove.EnqueueMany(ctx, producer, jobs, nil)
	require.NoError(t, err)
	var runs []string
	for _, in := range flows {
		h, err := eoFlow.Start(ctx, producer, in, nil)
		require.NoError(t, err)
		runs = append(runs, h.ID())
	}
	total := len(jobs) + len(flows)

	// Two workers at a time: a dead one is replaced, and now and then one
	// is killed from outside, wherever it is.
	workers := make([]*eoWorker, 2)
	started := 0
	reached := &eoReached{n: map[string]int{}}
	marks := t.TempDir()
	spawn := func(i int) {
		started++
		workers[i] = startEOWorker(t, reached, marks, db, schema, fmt.Sprintf("w%d", started))
	}
	for i := range workers {
		spawn(i)
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	kills, lastKill := 0, time.Now()
	killEvery := func() time.Duration { return time.Duration(300+rand.IntN(700)) * time.Millisecond }
	nextKill := killEvery()
	// The workers are other processes: their progress reaches this one
	// through the store alone, so this looks five times a second.
	pollEvery(t, ctx, 200*time.Millisecond, fmt.Sprintf("%d transfers to succeed", total), func() bool {
		for i, w := range workers {
			if w.done() {
				spawn(i)
			}
		}
		if time.Since(lastKill) > nextKill {
			i := rand.IntN(len(workers))
			workers[i].kill()
			kills++
			spawn(i)
			lastKill, nextKill = time.Now(), killEvery()
		}
		counts, err := d.Executor().JobCountByState(ctx, &driver.JobCountParams{})
		require.NoError(t, err)
		succeeded, other := 0, 0
		for _, c := range counts {
			switch c.State {
			case hopper.StateSucceeded:
				succeeded += c.Count
			case hopper.StateDead, hopper.StateExpired, hopper.StateCancelled, hopper.StateStuck:
				rows, _ := d.Executor().JobList(ctx, &driver.JobListParams{States: []hopper.JobState{c.State}, Limit: 1})
				require.FailNow(t, "a transfer did not succeed", "%d %s; first: %+v", c.Count, c.State, rows[0].Error)
			default:
				other += c.Count
			}
		}
		return succeeded == total && other == 0
	})
	for _, w := range workers {
		w.stop()
	}
	points := reached.counts()
	t.Logf("%d transfers; workers killed at the crash points %v, and %d at random", total, points, kills)
	for _, p := range slices.Concat(eoJobCrashes, eoFlowCrashes) {
		// Each transfer told to crash at a point does, once; but a random
		// kill between a commit and a point after it leaves that point to
		// no one (the work is done), so those may fall short.
		require.Positive(t, points[p], "crash point %s reached", p)
		require.LessOrEqual(t, points[p], perPoint, "crash point %s reached once per transfer told to crash there", p)
	}

	n, err := app.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Equal(t, total, n, "one ledger row per transfer")
	sum, err := app.int(ctx, `SELECT sum(amount) FROM %[1]sledger`)
	require.NoError(t, err)
	bob, err := app.int(ctx, `SELECT balance FROM %[1]saccounts WHERE id = 'bob'`)
	require.NoError(t, err)
	alice, err := app.int(ctx, `SELECT balance FROM %[1]saccounts WHERE id = 'alice'`)
	require.NoError(t, err)
	require.Equal(t, sum, bob, "every transfer's money moved once")
	require.Equal(t, start-sum, alice)
	for _, id := range runs {
		info, err := producer.RunGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, hopper.RunCompleted, info.Status, "run %s", id)
	}
}
