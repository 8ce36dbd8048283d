package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// benchOpts are the flags of hopper bench.
type benchOpts struct {
	driver   string
	jobs     int
	workers  int
	mode     string
	rate     float64
	duration time.Duration
	backlog  int
	batch    int
	cpuprof  string
	memprof  string
	keep     bool
	// autoMin, when positive, turns the autoscaler on: slots from autoMin
	// to workers, evaluated every autoEvery.
	autoMin   int
	autoEvery time.Duration
	// launch is how --mode workflow starts its concurrent runs: "queue"
	// (Start from 16 goroutines, run by the workers) or "direct" (Start +
	// Result of a SkipQueue workflow from --workers goroutines).
	launch string
	// queue is the run's own queue: every job and run it makes goes there,
	// and only those are counted and cleaned up.
	queue string
}

// Leftovers says what a run leaves in the store, as --json prints it
// beside the figures.
type Leftovers struct {
	// Queue is the run's own queue, where every job it made went.
	Queue string `json:"queue"`
	// LeftJobs counts the jobs it left (--keep), RemovedJobs those it
	// deleted.
	LeftJobs    int `json:"left_jobs"`
	RemovedJobs int `json:"removed_jobs"`
	// RemovedStore is set when it deleted the SQLite file it had created.
	RemovedStore bool `json:"removed_store,omitempty"`
	// Note says what else is left, if anything.
	Note string `json:"note,omitempty"`
}

// ThroughputResult is one throughput run, as --json prints it.
type ThroughputResult struct {
	Mode           string  `json:"mode"`
	Driver         string  `json:"driver"`
	Jobs           int     `json:"jobs"`
	Workers        int     `json:"workers"`
	Autoscale      string  `json:"autoscale,omitempty"`
	Backlog        int     `json:"backlog,omitempty"`
	InsertJobsPerS float64 `json:"insert_jobs_per_s"`
	WorkJobsPerS   float64 `json:"work_jobs_per_s"`
	// WorkCPUPerJobUs is this process's CPU time (user and system) during
	// the work phase, per job, in microseconds: the whole client (and, on
	// SQLite and memory, the store it embeds); zero where the platform
	// does not say.
	WorkCPUPerJobUs float64 `json:"work_cpu_us_per_job,omitempty"`
	Completed       int     `json:"completed"`
	Leftovers
}

// WorkflowResult is one workflow run, as --json prints it.
type WorkflowResult struct {
	Mode      string `json:"mode"`
	Driver    string `json:"driver"`
	Workflows int    `json:"workflows"`
	Workers   int    `json:"workers"`
	// Launch is how the concurrent runs were started: queue or direct.
	Launch        string  `json:"launch"`
	WorkflowsPerS float64 `json:"workflows_per_s"`
	StepsPerS     float64 `json:"steps_per_s"`
	// CPUPerRunUs is this process's CPU time during the concurrent phase,
	// per run, in microseconds (zero where the platform does not say).
	CPUPerRunUs float64 `json:"cpu_us_per_run,omitempty"`
	SeqP50Ms    float64 `json:"seq_p50_ms"`
	SeqP99Ms    float64 `json:"seq_p99_ms"`
	Config      string  `json:"config"`
	Leftovers
}

// LatencyResult is one latency run, as --json prints it.
type LatencyResult struct {
	Mode   string  `json:"mode"`
	Driver string  `json:"driver"`
	Rate   float64 `json:"rate"`
	Jobs   int     `json:"jobs"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	Leftovers
}

func benchCmd(g *globals) *cobra.Command {
	o := &benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure hopper on a driver: throughput, pickup latency",
		Long: `Measure hopper on a driver.

  throughput: insert --jobs no-op jobs in batches of 5,000 (insert jobs/s), then start
              the workers and time until every job is completed and persisted
              (work jobs/s); verify that exactly --jobs jobs succeeded.
  workflow:   start --jobs workflows of three no-op steps (from 16 goroutines) with
              --workers workers and time until every run completed (workflows/s,
              steps/s); with --launch direct, run them from --workers goroutines
              instead, each a Start + Result of a SkipQueue workflow (its first
              execution in the starting process, no claim); verify that exactly
              --jobs runs completed; then run 200 workflows one at a time
              (Start + Result of a SkipQueue workflow, whose first execution
              runs in-process at once) for p50/p99.
  latency:    enqueue at --rate jobs/s for --duration; report enqueue-to-start
              p50/p95/p99/max.

--backlog pre-fills jobs scheduled far in the future on the same queue, then
checkpoints the store, so the cost at a large backlog can be compared with a
small one. Without --db, sqlite
uses a fresh file in a temporary directory and postgres uses
$HOPPER_TEST_POSTGRES_URL.

Each run puts its jobs and runs on a queue of its own (bench-<random>) and
counts only those, so it can run again on the same database, beside other
work. On a database that outlives it (--db, or PostgreSQL) it then deletes
what it made (a SQLite file it created goes whole) and says so; --keep leaves
it there, and it says what it left. The database is created when missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, o, cmd.Flags().Changed("db"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.driver, "driver", "memory", "memory, sqlite or postgres")
	f.IntVar(&o.jobs, "jobs", 100_000, "jobs to insert and work (throughput)")
	f.IntVar(&o.workers, "workers", 100, "concurrent workers")
	f.StringVar(&o.mode, "mode", "throughput", "throughput, latency or workflow")
	f.StringVar(&o.launch, "launch", "queue", "workflow mode: queue (Start from 16 goroutines, run by the workers) or direct (Start + Result of a SkipQueue workflow from --workers goroutines)")
	f.Float64Var(&o.rate, "rate", 200, "enqueue rate in jobs/s (latency)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to enqueue (latency)")
	f.IntVar(&o.backlog, "backlog", 0, "jobs scheduled far in the future, stored before the run")
	f.IntVar(&o.batch, "batch", 5000, "insert batch size")
	f.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the work phase to this file")
	f.StringVar(&o.memprof, "memprofile", "", "write the allocations profile to this file at the end of the work phase, and to FILE.base at its start (compare with go tool pprof -diff_base)")
	f.BoolVar(&o.keep, "keep", false, "leave the run's jobs (its own queue) in the database")
	f.IntVar(&o.autoMin, "autoscale", 0, "autoscale the throughput run's slots from this many up to --workers (0: a fixed --workers)")
	f.DurationVar(&o.autoEvery, "autoscale-every", 10*time.Second, "how often the autoscaler evaluates (with --autoscale)")
	return cmd
}

func runBench(ctx context.Context, g *globals, o *benchOpts, dbSet bool) error {
	if o.jobs < 1 || o.workers < 1 || o.batch < 1 {
		return errors.New("--jobs, --workers and --batch must be positive")
	}
	if o.autoMin < 0 || o.autoMin > o.workers || (o.autoMin > 0 && o.autoEvery <= 0) {
		return errors.New("--autoscale must be between 1 and --workers, with a positive --autoscale-every")
	}
	url := g.db
	lasting := true // the store outlives the run
	if !dbSet {
		switch o.driver {
		case "memory":
			url, lasting = "memory://", false
		case "sqlite":
			dir, err := os.MkdirTemp("", "hopper-bench-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			url, lasting = "sqlite://"+filepath.Join(dir, "bench.db"), false
		case "postgres":
			url = os.Getenv("HOPPER_TEST_POSTGRES_URL")
			if url == "" {
				return errors.New("--driver postgres needs --db or $HOPPER_TEST_POSTGRES_URL")
			}
		default:
			return fmt.Errorf("unknown --driver %q: use memory, sqlite or postgres", o.driver)
		}
	}
	if url == "memory://" || url == "memory" {
		lasting = false
	}
	switch o.mode {
	case "throughput", "latency", "workflow":
	default:
		return fmt.Errorf("unknown --mode %q: use throughput, latency or workflow", o.mode)
	}
	switch {
	case o.launch != "queue" && o.launch != "direct":
		return fmt.Errorf("unknown --launch %q: use queue or direct", o.launch)
	case o.launch == "direct" && o.mode != "workflow":
		return errors.New("--launch direct is for --mode workflow")
	}
	drv, created, err := openBenchStore(ctx, url)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			drv.Close()
		}
	}()
	var id [4]byte
	_, _ = rand.Read(id[:])
	o.queue = "bench-" + hex.EncodeToString(id[:])
	var res any
	switch o.mode {
	case "throughput":
		res, err = benchThroughput(ctx, drv, o)
	case "latency":
		res, err = benchLatency(ctx, drv, o)
	case "workflow":
		res, err = benchWorkflow(ctx, drv, o)
	}
	// What it made goes, unless kept, whether or not the run went well.
	left, cerr := cleanUp(context.WithoutCancel(ctx), drv, o, lasting, created)
	closed = true
	if err != nil {
		if cerr != nil {
			fmt.Fprintf(g.errw, "hopper bench: clean up queue %s: %v\n", o.queue, cerr)
		}
		return err
	}
	if cerr != nil {
		return fmt.Errorf("clean up queue %s: %w", o.queue, cerr)
	}
	switch r := res.(type) {
	case *ThroughputResult:
		r.Leftovers = left
	case *WorkflowResult:
		r.Leftovers = left
	case *LatencyResult:
		r.Leftovers = left
	}
	if g.asJSON {
		return writeJSON(g.out, res)
	}
	switch r := res.(type) {
	case *ThroughputResult:
		fmt.Fprintf(g.out, "%s throughput: %d jobs, %d workers, backlog %d\n  insert: %.0f jobs/s\n  work:   %.0f jobs/s (%d completed)\n",
			r.Driver, r.Jobs, r.Workers, r.Backlog, r.InsertJobsPerS, r.WorkJobsPerS, r.Completed)
		if r.WorkCPUPerJobUs > 0 {
			fmt.Fprintf(g.out, "  cpu:    %.1f µs per job (this process, work phase)\n", r.WorkCPUPerJobUs)
		}
	case *WorkflowResult:
		fmt.Fprintf(g.out, "%s workflow: %d 3-step workflows, %d workers, launch %s\n  %.0f workflows/s, %.0f steps/s\n  sequential p50 %.2f ms  p99 %.2f ms\n",
			r.Driver, r.Workflows, o.workers, r.Launch, r.WorkflowsPerS, r.StepsPerS, r.SeqP50Ms, r.SeqP99Ms)
		if r.CPUPerRunUs > 0 {
			fmt.Fprintf(g.out, "  cpu:    %.0f µs per run (this process, concurrent phase)\n", r.CPUPerRunUs)
		}
	case *LatencyResult:
		fmt.Fprintf(g.out, "%s latency at %.0f jobs/s: %d jobs\n  p50 %.2f ms  p95 %.2f ms  p99 %.2f ms  max %.2f ms\n",
			r.Driver, r.Rate, r.Jobs, r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs)
	}
	switch {
	case !lasting:
	case left.RemovedStore:
		fmt.Fprintf(g.out, "  removed %s, which this run created\n", redactURL(url))
	case left.LeftJobs > 0:
		fmt.Fprintf(g.out, "  left %d jobs on queue %s (--keep): hopper jobs list --queue %s --db %s\n", left.LeftJobs, left.Queue, left.Queue, redactURL(url))
	default:
		fmt.Fprintf(g.out, "  removed its %d jobs (queue %s)\n", left.RemovedJobs, left.Queue)
	}
	if left.Note != "" {
		fmt.Fprintf(g.out, "  %s\n", left.Note)
	}
	return nil
}

// openBenchStore opens the store at url, creating it when missing, and
// reports whether it did.
func openBenchStore(ctx context.Context, url string) (driver.Driver, bool, error) {
	drv, err := openDriver(ctx, url, existingStore)
	if errors.Is(err, driver.ErrNoDatabase) {
		drv, err = openDriver(ctx, url, createStore)
		return drv, err == nil, err
	}
	return drv, false, err
}

// cleanUp deletes what a run made in a store that outlives it, unless
// --keep, closes the store, and says what is left. A SQLite file the run
// created is removed whole.
func cleanUp(ctx context.Context, drv driver.Driver, o *benchOpts, lasting, created bool) (Leftovers, error) {
	left := Leftovers{Queue: o.queue}
	if !lasting {
		return left, drv.Close()
	}
	counts, err := drv.Executor().JobCountByState(ctx, &driver.JobCountParams{Queue: o.queue})
	if err != nil {
		drv.Close()
		return left, err
	}
	n := 0
	for _, c := range counts {
		n += c.Count
	}
	if o.keep {
		left.LeftJobs = n
		return left, drv.Close()
	}
	if sq, ok := drv.(*sqlitedriver.Driver); ok && created {
		path := sq.Path()
		if err := drv.Close(); err != nil {
			return left, err
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return left, err
			}
		}
		left.RemovedJobs, left.RemovedStore = n, true
		return left, nil
	}
	qd, ok := drv.(driver.QueueDeleter)
	if !ok {
		left.LeftJobs = n
		left.Note = fmt.Sprintf("%s cannot delete a queue's jobs: they stay", drv.Name())
		return left, drv.Close()
	}
	for {
		k, err := qd.JobDeleteQueue(ctx, &driver.JobDeleteQueueParams{Queue: o.queue, Limit: 10_000})
		left.RemovedJobs += k
		if err != nil {
			drv.Close()
			return left, err
		}
		if k == 0 {
			break
		}
	}
	if pg, ok := drv.(*pgdriver.Driver); ok && created {
		left.Note = fmt.Sprintf("schema %s was created for this run and stays (empty of jobs)", pg.Schema())
	}
	return left, drv.Close()
}

var benchNoop = hopper.Define("bench-noop", func(context.Context, int64) (hopper.None, error) { return hopper.None{}, nil }, nil)

// insertBacklog stores n jobs due in a hundred years on the run's queue,
// then checkpoints the store: the measured run then pays for what a backlog
// costs the queries, not for the checkpoint its bulk load set off (on
// PostgreSQL, a million inserted jobs fill several WAL segments and the
// checkpoint would write them out, with a full page image of every page
// first touched after it begins, during the run).
func insertBacklog(ctx context.Context, c *hopper.Client, n int, drv driver.Driver, batch int) error {
	far := time.Now().AddDate(100, 0, 0)
	ins := make([]int64, batch)
	for left := n; left > 0; left -= batch {
		if left < batch {
			ins = ins[:left]
		}
		if _, err := benchNoop.EnqueueMany(ctx, c, ins, &hopper.InsertOpts{RunAt: far}); err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
	}
	return checkpoint(ctx, drv)
}

// checkpoint asks the store to write its log out: CHECKPOINT on PostgreSQL
// (it needs a superuser or pg_checkpoint; without the right, the run goes
// on without it), a truncating WAL checkpoint on SQLite.
func checkpoint(ctx context.Context, drv driver.Driver) error {
	switch d := drv.(type) {
	case *pgdriver.Driver:
		if _, err := d.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
			fmt.Fprintf(os.Stderr, "hopper bench: no checkpoint after the backlog: %v\n", err)
		}
	case *sqlitedriver.Driver:
		if _, err := d.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return fmt.Errorf("backlog: checkpoint: %w", err)
		}
	}
	return nil
}

// autoscaleText describes the autoscaler of a run ("" when off).
func (o *benchOpts) autoscaleText() string {
	if o.autoMin <= 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d every %s", o.autoMin, o.workers, o.autoEvery)
}

// benchClient makes an unstarted client with o.workers workers and the
// types; all is closed once n jobs have succeeded.
func benchClient(drv driver.Driver, o *benchOpts, n int64, types ...hopper.AnyType) (c *hopper.Client, all chan struct{}, err error) {
	var done atomic.Int64
	all = make(chan struct{})
	var auto *hopper.Autoscale
	if o.autoMin > 0 {
		auto = &hopper.Autoscale{Min: o.autoMin, Max: o.workers, Interval: o.autoEvery}
	}
	c, err = hopper.New(hopper.Config{Driver: drv, MaxWorkers: o.workers, Autoscale: auto, DefaultQueue: o.queue, OnEvent: func(e hopper.Event) {
		if e.Kind == hopper.EventSucceeded && e.Queue == o.queue && done.Add(1) == n {
			close(all)
		}
	}})
	if err != nil {
		return nil, nil, err
	}
	if err := c.Register(types...); err != nil {
		return nil, nil, err
	}
	return c, all, nil
}

func benchThroughput(ctx context.Context, drv driver.Driver, o *benchOpts) (*ThroughputResult, error) {
	c, all, err := benchClient(drv, o, int64(o.jobs), benchNoop)
	if err != nil {
		return nil, err
	}
	if o.backlog > 0 {
		if err := insertBacklog(ctx, c, o.backlog, drv, o.batch); err != nil {
			return nil, err
		}
	}
	ins := make([]int64, o.batch)
	start := time.Now()
	for left := o.jobs; left > 0; left -= o.batch {
		if left < o.batch {
			ins = ins[:left]
		}
		if _, err := benchNoop.EnqueueMany(ctx, c, ins, nil); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	insertElapsed := time.Since(start)

	stopProfile, err := startProfile(o.cpuprof, o.memprof)
	if err != nil {
		return nil, err
	}
	cpu0, cpuOK := processCPU()
	start = time.Now()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	select {
	case <-all:
	case <-ctx.Done():
		_ = c.Stop(context.Background())
		return nil, ctx.Err()
	}
	workElapsed := time.Since(start)
	cpu1, _ := processCPU()
	stopProfile()
	if err := c.Stop(ctx); err != nil {
		return nil, err
	}
	completed, err := countState(ctx, c, o.queue, hopper.StateSucceeded)
	if err != nil {
		return nil, err
	}
	if completed != o.jobs {
		return nil, fmt.Errorf("verification failed: %d jobs succeeded on queue %s, want %d", completed, o.queue, o.jobs)
	}
	return &ThroughputResult{
		Mode: "throughput", Driver: drv.Name(), Jobs: o.jobs, Workers: o.workers, Autoscale: o.autoscaleText(), Backlog: o.backlog,
		InsertJobsPerS:  float64(o.jobs) / insertElapsed.Seconds(),
		WorkJobsPerS:    float64(o.jobs) / workElapsed.Seconds(),
		WorkCPUPerJobUs: perUnitMicros(cpu1-cpu0, cpuOK, o.jobs),
		Completed:       completed,
	}, nil
}

// countState counts the jobs of queue in state st.
func countState(ctx context.Context, c *hopper.Client, queue string, st hopper.JobState) (int, error) {
	qs, err := c.QueueList(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		if q.Name == queue {
			return q.Counts[st], nil
		}
	}
	return 0, nil
}

func benchLatency(ctx context.Context, drv driver.Driver, o *benchOpts) (*LatencyResult, error) {
	if o.rate <= 0 || o.duration <= 0 {
		return nil, errors.New("--rate and --duration must be positive")
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		started   atomic.Int64
	)
	job := hopper.Define("bench-latency", func(_ context.Context, enqueuedAt int64) (hopper.None, error) {
		d := time.Since(time.Unix(0, enqueuedAt))
		mu.Lock()
		latencies = append(latencies, d)
		mu.Unlock()
		started.Add(1)
		return hopper.None{}, nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: drv, MaxWorkers: o.workers, DefaultQueue: o.queue})
	if err != nil {
		return nil, err
	}
	if err := c.Register(job); err != nil {
		return nil, err
	}
	if o.backlog > 0 {
		if err := insertBacklog(ctx, c, o.backlog, drv, o.batch); err != nil {
			return nil, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	defer c.Stop(context.Background())
	// Let the workers settle into their idle wait before measuring.
	time.Sleep(200 * time.Millisecond)

	interval := time.Duration(float64(time.Second) / o.rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	end := time.Now().Add(o.duration)
	sent := 0
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if _, err := job.Enqueue(ctx, c, time.Now().UnixNano(), nil); err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		sent++
	}
	wait := time.NewTimer(30 * time.Second)
	defer wait.Stop()
	for started.Load() < int64(sent) {
		select {
		case <-wait.C:
			return nil, fmt.Errorf("only %d of %d jobs started within 30s", started.Load(), sent)
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		i := int(math.Ceil(p*float64(len(latencies)))) - 1
		i = max(0, min(i, len(latencies)-1))
		return float64(latencies[i]) / float64(time.Millisecond)
	}
	return &LatencyResult{
		Mode: "latency", Driver: drv.Name(), Rate: o.rate, Jobs: len(latencies),
		P50Ms: pct(0.50), P95Ms: pct(0.95), P99Ms: pct(0.99), MaxMs: pct(1),
	}, nil
}

// startProfile starts a CPU profile into path and writes the allocations
// so far to mem.base (each skipped when empty), and returns the function
// that stops the CPU profile and writes the allocations to mem.
func startProfile(path, mem string) (func(), error) {
	stopCPU := func() {}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stopCPU = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	if mem == "" {
		return stopCPU, nil
	}
	if err := writeAllocs(mem + ".base"); err != nil {
		stopCPU()
		return nil, err
	}
	return func() {
		stopCPU()
		if err := writeAllocs(mem); err != nil {
			fmt.Fprintf(os.Stderr, "memprofile: %v\n", err)
		}
	}, nil
}

// writeAllocs writes the allocations profile so far to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchThreeSteps is the code of --mode workflow: three no-op steps.
func benchThreeSteps(wf hopper.WorkflowContext, n int) (int, error) {
	sum := n
	for _, name := range [...]string{"one", "two", "three"} {
		v, err := hopper.Step(wf, name, func(context.Context) (int, error) { return 1, nil }, nil)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// benchSteps runs through the queue; benchStepsDirect (SkipQueue) runs its
// first execution in the starting goroutine's process at once, as a
// sequential caller would.
var (
	benchSteps       = hopper.Workflow("bench-3step", benchThreeSteps, nil)
	benchStepsDirect = hopper.Workflow("bench-3step-direct", benchThreeSteps, &hopper.WorkflowOpts{SkipQueue: true})
)

// benchSeq is how many workflows --mode workflow runs one at a time.
const benchSeq = 200

func benchWorkflow(ctx context.Context, drv driver.Driver, o *benchOpts) (*WorkflowResult, error) {
	n := int64(o.jobs)
	c, all, err := benchClient(drv, o, n, benchSteps, benchStepsDirect)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	defer c.Stop(context.Background())
	// Through the queue, 16 goroutines start the runs and the workers run
	// them; direct, each of --workers goroutines starts a run that skips
	// the queue and waits for its result, as DBOS's RunWorkflow + GetResult.
	direct := o.launch == "direct"
	starters, wf := 16, benchSteps
	how := fmt.Sprintf("started from %d goroutines (Start, through the queue), %d workers", starters, o.workers)
	if direct {
		starters, wf = o.workers, benchStepsDirect
		how = fmt.Sprintf("run from %d goroutines (Start + Result of a SkipQueue workflow, no queue)", starters)
	}
	stopProfile, err := startProfile(o.cpuprof, o.memprof)
	if err != nil {
		return nil, err
	}
	cpu0, cpuOK := processCPU()
	start := time.Now()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		startErr atomic.Pointer[error]
	)
	for range starters {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n || startErr.Load() != nil {
					return
				}
				h, err := wf.Start(ctx, c, int(i), nil)
				if err == nil && direct {
					_, err = h.Result(ctx)
				}
				if err != nil {
					startErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := startErr.Load(); e != nil {
		return nil, fmt.Errorf("start: %w", *e)
	}
	select {
	case <-all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	stopProfile()
	// Each run is a job: count those that succeeded in the store.
	completed, err := countState(ctx, c, o.queue, hopper.StateSucceeded)
	if err != nil {
		return nil, err
	}
	if completed != o.jobs {
		return nil, fmt.Errorf("verification failed: %d runs completed on queue %s, want %d", completed, o.queue, o.jobs)
	}

	lat := make([]time.Duration, 0, benchSeq)
	for i := range benchSeq {
		t := time.Now()
		h, err := benchStepsDirect.Start(ctx, c, i, nil)
		if err != nil {
			return nil, err
		}
		if _, err := h.Result(ctx); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := max(0, min(int(math.Ceil(p*float64(len(lat))))-1, len(lat)-1))
		return float64(lat[i]) / float64(time.Millisecond)
	}
	return &WorkflowResult{
		Mode: "workflow", Driver: drv.Name(), Workflows: o.jobs, Workers: o.workers, Launch: o.launch,
		WorkflowsPerS: float64(o.jobs) / elapsed.Seconds(),
		StepsPerS:     3 * float64(o.jobs) / elapsed.Seconds(),
		CPUPerRunUs:   perUnitMicros(cpu1-cpu0, cpuOK, o.jobs),
		SeqP50Ms:      pct(0.50), SeqP99Ms: pct(0.99),
		Config: fmt.Sprintf("%d workflows of 3 no-op steps %s, timed from the first Start to the last run's completion; %d sequential workflows via Start + Result of a SkipQueue workflow (first execution in the starting process, no queue)",
			o.jobs, how, benchSeq),
	}, nil
}

// perUnitMicros is cpu spread over n units, in microseconds; zero when the
// platform did not say.
func perUnitMicros(cpu time.Duration, ok bool, n int) float64 {
	if !ok || n <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}
