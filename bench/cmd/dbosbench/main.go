// Command dbosbench runs the workflow and throughput modes of the hopper
// benchmarks with DBOS Transact Go (github.com/dbos-inc/dbos-transact-golang)
// on PostgreSQL or SQLite, and prints the same JSON objects as
// `hopper bench --json`, plus "config".
//
// workflow: --workflows workflows of 3 no-op steps (dbos.RunAsStep), run W at
// a time, timed from the first enqueue until all are SUCCESS; then 200
// sequential single workflows (RunWorkflow + GetResult, no queue) for
// p50/p99. --launch queue (the default, DBOS's documented way to bound
// concurrency) enqueues every workflow on a DBOS queue with
// WithWorkerConcurrency(W); completions are counted from the store (SUCCESS
// rows of workflow_status, polled every --count-poll), which DBOS writes in
// the workflow's final commit. --launch direct starts them from W goroutines
// with RunWorkflow and waits on each handle, whose result DBOS delivers only
// after that commit.
//
// throughput: --jobs one-step no-op workflows are enqueued on the queue
// through a dbos.Client before the executor is launched (DBOS has no batch
// enqueue, so each batch of 5,000 is enqueued by 16 goroutines), then the
// executor is launched and timed until the store holds --jobs SUCCESS rows.
//
// Every run uses a fresh schema (PostgreSQL) or a fresh file (SQLite).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/hopper-go/hopper/bench/internal/common"
)

const dbosVersion = "v1.8.0" // the version bench/go.mod requires

type opts struct {
	driver      string
	db          string
	mode        string
	workflows   int
	jobs        int
	workers     int
	seq         int
	launch      string
	pollEvery   time.Duration
	countPoll   time.Duration
	enqueuers   int
	synchronous string
	backlog     int
	asJSON      bool
}

func main() {
	o := &opts{}
	flag.StringVar(&o.driver, "driver", "postgres", "postgres or sqlite (DBOS's system database)")
	flag.StringVar(&o.db, "db", "", "postgres: URL (default $HOPPER_TEST_POSTGRES_URL); a fresh schema is made in it and dropped after. sqlite: file path (default: a fresh file in a temp dir)")
	flag.StringVar(&o.mode, "mode", "workflow", "workflow or throughput")
	flag.IntVar(&o.workflows, "workflows", 10_000, "3-step workflows (workflow mode)")
	flag.IntVar(&o.jobs, "jobs", 100_000, "one-step workflows (throughput mode)")
	flag.IntVar(&o.workers, "workers", 100, "workflows run at once: the queue's WithWorkerConcurrency, or goroutines with --launch direct")
	flag.IntVar(&o.seq, "seq", 200, "sequential single workflows for p50/p99 (workflow mode)")
	flag.StringVar(&o.launch, "launch", "queue", "workflow mode: queue (a DBOS queue) or direct (RunWorkflow from goroutines)")
	flag.DurationVar(&o.pollEvery, "poll-interval", time.Second, "the queue's WithQueueBasePollingInterval (DBOS's default is 1s)")
	flag.DurationVar(&o.countPoll, "count-poll", 50*time.Millisecond, "how often the store is counted for completions (queue runs)")
	flag.IntVar(&o.enqueuers, "enqueuers", 16, "goroutines that enqueue")
	flag.StringVar(&o.synchronous, "synchronous", "FULL", "sqlite: PRAGMA synchronous (FULL, as hopper's default, or NORMAL, DBOS's own default)")
	flag.IntVar(&o.backlog, "backlog", 0, "not supported by this program (must be 0)")
	flag.BoolVar(&o.asJSON, "json", false, "print JSON")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		common.Fail("dbosbench", err)
	}
	if err := common.Print(os.Stdout, o.asJSON, res); err != nil {
		common.Fail("dbosbench", err)
	}
}

func noopStep(context.Context) (int, error) { return 0, nil }

// threeSteps is the workflow of workflow mode: three no-op steps.
func threeSteps(ctx dbos.Context, in int) (int, error) {
	for range 3 {
		if _, err := dbos.RunAsStep(ctx, noopStep); err != nil {
			return 0, err
		}
	}
	return in, nil
}

// oneStep is the "job" of throughput mode.
func oneStep(ctx dbos.Context, in int) (int, error) {
	if _, err := dbos.RunAsStep(ctx, noopStep); err != nil {
		return 0, err
	}
	return in, nil
}

const (
	queueName    = "bench"
	wfThreeSteps = "bench-three-steps"
	wfOneStep    = "bench-one-step"
)

// env is one fresh DBOS system database.
type env struct {
	name     string
	config   string
	dbosCfg  dbos.Config
	clientFn func() dbos.ClientConfig
	count    func(ctx context.Context) (int, error)
	close    func()
}

func open(ctx context.Context, o *opts) (*env, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	switch o.driver {
	case "postgres":
		url := o.db
		if url == "" {
			url = common.DefaultPostgresURL()
		}
		schema, drop, err := common.FreshSchema(ctx, url, "dbosbench")
		if err != nil {
			return nil, fmt.Errorf("fresh schema: %w", err)
		}
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			drop()
			return nil, err
		}
		table := pgx.Identifier{schema, "workflow_status"}.Sanitize()
		return &env{
			name:    "dbos",
			config:  fmt.Sprintf("dbos-transact-golang %s on PostgreSQL (its own pgx pool), fresh schema", dbosVersion),
			dbosCfg: dbos.Config{AppName: "hopper-bench", DatabaseURL: url, DatabaseSchema: schema, Logger: logger},
			clientFn: func() dbos.ClientConfig {
				return dbos.ClientConfig{AppName: "hopper-bench", DatabaseURL: url, DatabaseSchema: schema, Logger: logger}
			},
			count: func(ctx context.Context) (n int, err error) {
				err = pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE status = 'SUCCESS'`).Scan(&n)
				return n, err
			},
			close: func() { pool.Close(); drop() },
		}, nil
	case "sqlite":
		if o.synchronous != "FULL" && o.synchronous != "NORMAL" {
			return nil, errors.New("--synchronous must be FULL or NORMAL")
		}
		path := o.db
		var cleanup func()
		if path == "" {
			dir, err := os.MkdirTemp("", "dbosbench-*")
			if err != nil {
				return nil, err
			}
			cleanup = func() { os.RemoveAll(dir) }
			path = filepath.Join(dir, "dbos.db")
		}
		// DBOS's own SQLite pool (sysdb.OpenSQLitePool): BEGIN IMMEDIATE,
		// busy_timeout 5s, foreign keys, WAL, 8 connections — but with
		// synchronous from --synchronous (FULL, hopper's default) instead of
		// DBOS's NORMAL, so durability matches. DBOS uses a handle passed in
		// SQLiteSystemDB as it is.
		dsn := "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + o.synchronous + ")"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(4)
		return &env{
			name:    "dbos-sqlite",
			config:  fmt.Sprintf("dbos-transact-golang %s on SQLite (modernc.org/sqlite; DBOS's pool settings: 8 conns, BEGIN IMMEDIATE, WAL) with synchronous=%s, fresh file", dbosVersion, o.synchronous),
			dbosCfg: dbos.Config{AppName: "hopper-bench", SQLiteSystemDB: db, Logger: logger},
			clientFn: func() dbos.ClientConfig {
				// Its own handle: a client's Shutdown closes the one it was given.
				cdb, err := sql.Open("sqlite", dsn)
				if err != nil {
					panic(err) // sql.Open only fails on an unknown driver name
				}
				cdb.SetMaxOpenConns(8)
				return dbos.ClientConfig{AppName: "hopper-bench", SQLiteSystemDB: cdb, Logger: logger}
			},
			count: func(ctx context.Context) (n int, err error) {
				err = db.QueryRowContext(ctx, `SELECT count(*) FROM workflow_status WHERE status = 'SUCCESS'`).Scan(&n)
				return n, err
			},
			close: func() {
				db.Close()
				if cleanup != nil {
					cleanup()
				}
			},
		}, nil
	}
	return nil, fmt.Errorf("unknown --driver %q", o.driver)
}

func run(ctx context.Context, o *opts) (any, error) {
	if o.workers < 1 || o.enqueuers < 1 || o.pollEvery <= 0 || o.countPoll <= 0 {
		return nil, errors.New("--workers, --enqueuers, --poll-interval and --count-poll must be positive")
	}
	if o.backlog != 0 {
		return nil, errors.New("--backlog is not supported for DBOS")
	}
	e, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	dctx, err := dbos.NewContext(ctx, e.dbosCfg) // migrates the fresh schema
	if err != nil {
		return nil, err
	}
	dbos.RegisterWorkflow(dctx, threeSteps, dbos.WithWorkflowName(wfThreeSteps))
	dbos.RegisterWorkflow(dctx, oneStep, dbos.WithWorkflowName(wfOneStep))
	q, err := dbos.RegisterQueue(dctx, queueName,
		dbos.WithWorkerConcurrency(o.workers), dbos.WithQueueBasePollingInterval(o.pollEvery))
	if err != nil {
		return nil, err
	}
	defer dbos.Shutdown(dctx, 10*time.Second)
	switch o.mode {
	case "workflow":
		if o.workflows < 1 || o.seq < 1 {
			return nil, errors.New("--workflows and --seq must be positive")
		}
		return workflowMode(ctx, o, e, dctx, q)
	case "throughput":
		if o.jobs < 1 {
			return nil, errors.New("--jobs must be positive")
		}
		return throughputMode(ctx, o, e, dctx)
	}
	return nil, fmt.Errorf("unknown --mode %q", o.mode)
}

// parallel runs fn(i) for i in [0, n) from k goroutines, stopping at the first error.
func parallel(ctx context.Context, n, k int, fn func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range min(k, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					errOnce.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func waitStore(ctx context.Context, o *opts, e *env, n int) error {
	return common.WaitUntil(ctx, o.countPoll, 30*time.Minute, func() (bool, error) {
		c, err := e.count(ctx)
		return c >= n, err
	})
}

func workflowMode(ctx context.Context, o *opts, e *env, dctx dbos.Context, q dbos.Queue) (*common.WorkflowResult, error) {
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	var how string
	start := time.Now()
	switch o.launch {
	case "queue":
		how = fmt.Sprintf("DBOS queue with WithWorkerConcurrency(%d), WithQueueBasePollingInterval(%s), enqueued with RunWorkflow(WithQueue) from %d goroutines, completions counted from SUCCESS rows in the store every %s",
			o.workers, o.pollEvery, o.enqueuers, o.countPoll)
		err := parallel(ctx, o.workflows, o.enqueuers, func(i int) error {
			_, err := dbos.RunWorkflow(dctx, threeSteps, i, dbos.WithQueue(q))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		if err := waitStore(ctx, o, e, o.workflows); err != nil {
			return nil, fmt.Errorf("waiting for completions: %w", err)
		}
	case "direct":
		how = fmt.Sprintf("RunWorkflow + GetResult from %d goroutines (no queue), completions counted from handles (delivered after the final commit)", o.workers)
		err := parallel(ctx, o.workflows, o.workers, func(i int) error {
			h, err := dbos.RunWorkflow(dctx, threeSteps, i)
			if err != nil {
				return err
			}
			_, err = h.GetResult()
			return err
		})
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown --launch %q", o.launch)
	}
	elapsed := time.Since(start)
	done, err := e.count(ctx)
	if err != nil {
		return nil, err
	}
	if done != o.workflows {
		return nil, fmt.Errorf("verification failed: %d workflows succeeded in the store, want %d", done, o.workflows)
	}

	lat := make([]time.Duration, 0, o.seq)
	for i := range o.seq {
		t := time.Now()
		h, err := dbos.RunWorkflow(dctx, threeSteps, i)
		if err != nil {
			return nil, err
		}
		if _, err := h.GetResult(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	return &common.WorkflowResult{
		Mode: "workflow", Driver: e.name, Workflows: o.workflows,
		WorkflowsPerS: float64(o.workflows) / elapsed.Seconds(),
		StepsPerS:     3 * float64(o.workflows) / elapsed.Seconds(),
		SeqP50Ms:      common.Pct(lat, 0.50),
		SeqP99Ms:      common.Pct(lat, 0.99),
		Config: fmt.Sprintf("%s; launch=%s: %s; timed from the first enqueue to the last SUCCESS; %d sequential workflows via RunWorkflow + GetResult (no queue)",
			e.config, o.launch, how, o.seq),
	}, nil
}

func throughputMode(ctx context.Context, o *opts, e *env, dctx dbos.Context) (*common.ThroughputResult, error) {
	client, err := dbos.NewClient(ctx, e.clientFn())
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	start := time.Now()
	for base := 0; base < o.jobs; base += common.InsertBatch {
		n := min(common.InsertBatch, o.jobs-base)
		err := parallel(ctx, n, o.enqueuers, func(i int) error {
			_, err := dbos.Enqueue[int](client, queueName, wfOneStep, base+i)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	insertElapsed := time.Since(start)
	if err := dbos.Shutdown(client, 10*time.Second); err != nil {
		return nil, fmt.Errorf("client shutdown: %w", err)
	}

	start = time.Now()
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	if err := waitStore(ctx, o, e, o.jobs); err != nil {
		return nil, fmt.Errorf("waiting for completions: %w", err)
	}
	workElapsed := time.Since(start)
	done, err := e.count(ctx)
	if err != nil {
		return nil, err
	}
	if err := common.Verify(done, o.jobs); err != nil {
		return nil, err
	}
	return &common.ThroughputResult{
		Mode: "throughput", Driver: e.name, Jobs: o.jobs, Workers: o.workers,
		InsertJobsPerS: float64(o.jobs) / insertElapsed.Seconds(),
		WorkJobsPerS:   float64(o.jobs) / workElapsed.Seconds(),
		Completed:      done,
		Config: fmt.Sprintf("%s; jobs are one-step workflows on a DBOS queue with WithWorkerConcurrency(%d), WithQueueBasePollingInterval(%s); enqueued through dbos.Client (no batch API: %d goroutines per batch of 5000) before Launch; completions counted from SUCCESS rows in the store every %s",
			e.config, o.workers, o.pollEvery, o.enqueuers, o.countPoll),
	}, nil
}
