// Command riverbench runs the modes of `hopper bench` (throughput, latency)
// with River (github.com/riverqueue/river) on PostgreSQL (riverpgxv5) or
// SQLite (riversqlite), and prints the same JSON object, plus "config".
//
// Completions are counted from River's completion subscription
// (client.SubscribeConfig with Kinds=[job_completed]), by distinct job ID.
// River sends those events only after its batch completer has committed the
// state change, so a counted job is completed and persisted. The
// subscription channel is sized for every job, so no event should be
// dropped; as a safety net the store (`state = 'completed'` rows) is also
// counted once a second, and whichever reaches --jobs first ends the timing.
// At the end the store is counted and must hold exactly --jobs completed jobs.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"

	"github.com/hopper-go/hopper/bench/internal/common"
)

type opts struct {
	driver        string
	db            string
	mode          string
	jobs          int
	workers       int
	rate          float64
	duration      time.Duration
	backlog       int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	synchronous   string
	asJSON        bool
}

func main() {
	o := &opts{}
	flag.StringVar(&o.driver, "driver", "pgx", "pgx (riverpgxv5 on PostgreSQL) or sqlite (riversqlite on modernc.org/sqlite)")
	flag.StringVar(&o.db, "db", "", "pgx: PostgreSQL URL (default $HOPPER_TEST_POSTGRES_URL); a fresh schema is made in it and dropped after. sqlite: file path (default: a fresh file in a temp dir)")
	flag.StringVar(&o.mode, "mode", "throughput", "throughput or latency")
	flag.IntVar(&o.jobs, "jobs", 100_000, "jobs to insert and work (throughput)")
	flag.IntVar(&o.workers, "workers", 100, "MaxWorkers of the default queue")
	flag.Float64Var(&o.rate, "rate", 200, "enqueue rate in jobs/s (latency)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to enqueue (latency)")
	flag.IntVar(&o.backlog, "backlog", 0, "jobs scheduled 100 years ahead, stored before the run")
	flag.DurationVar(&o.fetchCooldown, "fetch-cooldown", river.FetchCooldownDefault, "River Config.FetchCooldown")
	flag.DurationVar(&o.fetchPoll, "fetch-poll-interval", river.FetchPollIntervalDefault, "River Config.FetchPollInterval")
	flag.StringVar(&o.synchronous, "synchronous", "FULL", "sqlite: PRAGMA synchronous (FULL, as hopper's default, or NORMAL)")
	flag.BoolVar(&o.asJSON, "json", false, "print JSON")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		common.Fail("riverbench", err)
	}
	if err := common.Print(os.Stdout, o.asJSON, res); err != nil {
		common.Fail("riverbench", err)
	}
}

// NoopArgs is the job: no arguments' worth of work.
type NoopArgs struct {
	N int64 `json:"n"`
}

func (NoopArgs) Kind() string { return "bench_noop" }

// LatencyArgs carries the enqueue time in Unix nanoseconds.
type LatencyArgs struct {
	EnqueuedAt int64 `json:"enqueued_at"`
}

func (LatencyArgs) Kind() string { return "bench_latency" }

// bench is the generic part: River's client type depends on the driver's
// transaction type.
type bench[TTx any] struct {
	o       *opts
	name    string
	config  string
	newCli  func(*river.Config) (*river.Client[TTx], error)
	migrate func(context.Context) error
	count   func(context.Context, string) (int, error)
}

func run(ctx context.Context, o *opts) (any, error) {
	if o.jobs < 1 || o.workers < 1 {
		return nil, errors.New("--jobs and --workers must be positive")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	switch o.driver {
	case "pgx":
		url := o.db
		if url == "" {
			url = common.DefaultPostgresURL()
		}
		schema, drop, err := common.FreshSchema(ctx, url, "riverbench")
		if err != nil {
			return nil, fmt.Errorf("fresh schema: %w", err)
		}
		defer drop()
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		// Room for River's producer, completer, maintenance services and
		// notifier, and for our inserts: pgxpool's default is max(4, NumCPU).
		cfg.MaxConns = 20
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		drv := riverpgxv5.New(pool)
		b := &bench[pgx.Tx]{
			o: o, name: "river-pgx",
			config: fmt.Sprintf("river %s riverpgxv5, MaxWorkers=%d, FetchCooldown=%s, FetchPollInterval=%s, pool MaxConns=20, fresh schema",
				riverVersion, o.workers, o.fetchCooldown, o.fetchPoll),
			newCli: func(c *river.Config) (*river.Client[pgx.Tx], error) {
				c.Schema = schema
				c.Logger = logger
				return river.NewClient(drv, c)
			},
			migrate: func(ctx context.Context) error {
				m, err := rivermigrate.New(drv, &rivermigrate.Config{Schema: schema, Logger: logger})
				if err != nil {
					return err
				}
				_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
				return err
			},
			count: func(ctx context.Context, state string) (n int, err error) {
				err = pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = $1`, state).Scan(&n)
				return n, err
			},
		}
		return b.run(ctx)
	case "sqlite":
		path := o.db
		if path == "" {
			dir, err := os.MkdirTemp("", "riverbench-*")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "river.db")
		}
		if o.synchronous != "FULL" && o.synchronous != "NORMAL" {
			return nil, errors.New("--synchronous must be FULL or NORMAL")
		}
		// As River's own test pools do (rivershared/riversharedtest): WAL, and
		// one connection as the riversqlite package doc recommends against
		// SQLITE_BUSY. synchronous as hopper's default (FULL) unless told.
		dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + o.synchronous + ")&_pragma=busy_timeout(10000)"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		drv := riversqlite.New(db)
		b := &bench[*sql.Tx]{
			o: o, name: "river-sqlite",
			config: fmt.Sprintf("river %s riversqlite (modernc.org/sqlite), MaxWorkers=%d, FetchCooldown=%s, FetchPollInterval=%s, SetMaxOpenConns(1), WAL, synchronous=%s, fresh file",
				riverVersion, o.workers, o.fetchCooldown, o.fetchPoll, o.synchronous),
			newCli: func(c *river.Config) (*river.Client[*sql.Tx], error) {
				c.Logger = logger
				return river.NewClient(drv, c)
			},
			migrate: func(ctx context.Context) error {
				m, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: logger})
				if err != nil {
					return err
				}
				_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
				return err
			},
			count: func(ctx context.Context, state string) (n int, err error) {
				err = db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state = ?`, state).Scan(&n)
				return n, err
			},
		}
		return b.run(ctx)
	}
	return nil, fmt.Errorf("unknown --driver %q", o.driver)
}

// riverVersion is the River release this module requires (bench/go.mod).
const riverVersion = "v0.51.2"

func (b *bench[TTx]) clientConfig(workers *river.Workers) *river.Config {
	return &river.Config{
		FetchCooldown:     b.o.fetchCooldown,
		FetchPollInterval: b.o.fetchPoll,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: b.o.workers}},
		Workers:           workers,
	}
}

func (b *bench[TTx]) run(ctx context.Context) (any, error) {
	if err := b.migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	switch b.o.mode {
	case "throughput":
		return b.throughput(ctx)
	case "latency":
		return b.latency(ctx)
	}
	return nil, fmt.Errorf("unknown --mode %q", b.o.mode)
}

// insertBacklog stores n no-op jobs due in a hundred years, on the same queue.
func (b *bench[TTx]) insertBacklog(ctx context.Context, c *river.Client[TTx], n int) error {
	far := time.Now().AddDate(100, 0, 0)
	for left := n; left > 0; left -= common.InsertBatch {
		params := make([]river.InsertManyParams, min(left, common.InsertBatch))
		for i := range params {
			params[i] = river.InsertManyParams{Args: NoopArgs{}, InsertOpts: &river.InsertOpts{ScheduledAt: far}}
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
	}
	return nil
}

func (b *bench[TTx]) throughput(ctx context.Context) (*common.ThroughputResult, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[NoopArgs]) error { return nil }))
	c, err := b.newCli(b.clientConfig(workers))
	if err != nil {
		return nil, err
	}
	events, cancelSub := c.SubscribeConfig(&river.SubscribeConfig{
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
		ChanSize: b.o.jobs + 10_000,
	})
	defer cancelSub()
	if b.o.backlog > 0 {
		if err := b.insertBacklog(ctx, c, b.o.backlog); err != nil {
			return nil, err
		}
	}

	start := time.Now()
	for left := b.o.jobs; left > 0; left -= common.InsertBatch {
		params := make([]river.InsertManyParams, min(left, common.InsertBatch))
		for i := range params {
			params[i] = river.InsertManyParams{Args: NoopArgs{}}
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	insertElapsed := time.Since(start)

	start = time.Now()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	// Count distinct job IDs from completion events; once a second, also
	// count the store, in case River ever dropped an event.
	seen := make(map[int64]struct{}, b.o.jobs)
	fallback := time.NewTicker(time.Second)
	defer fallback.Stop()
	for len(seen) < b.o.jobs {
		select {
		case <-ctx.Done():
			_ = c.Stop(context.Background())
			return nil, ctx.Err()
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				seen[ev.Job.ID] = struct{}{}
			}
			continue
		case <-fallback.C:
		}
		n, err := b.count(ctx, "completed")
		if err != nil {
			return nil, err
		}
		if n >= b.o.jobs {
			break
		}
	}
	workElapsed := time.Since(start)
	if err := c.Stop(ctx); err != nil {
		return nil, err
	}
	completed, err := b.count(ctx, "completed")
	if err != nil {
		return nil, err
	}
	if err := common.Verify(completed, b.o.jobs); err != nil {
		for _, st := range []string{"available", "running", "retryable", "scheduled", "discarded", "cancelled"} {
			n, _ := b.count(ctx, st)
			fmt.Fprintf(os.Stderr, "state %s: %d\n", st, n)
		}
		return nil, err
	}
	return &common.ThroughputResult{
		Mode: "throughput", Driver: b.name, Jobs: b.o.jobs, Workers: b.o.workers, Backlog: b.o.backlog,
		InsertJobsPerS: float64(b.o.jobs) / insertElapsed.Seconds(),
		WorkJobsPerS:   float64(b.o.jobs) / workElapsed.Seconds(),
		Completed:      completed,
		Config:         b.config + ", insert with InsertManyFast in batches of 5000, completions counted from the job_completed subscription (post-commit)",
	}, nil
}

func (b *bench[TTx]) latency(ctx context.Context) (*common.LatencyResult, error) {
	if b.o.rate <= 0 || b.o.duration <= 0 {
		return nil, errors.New("--rate and --duration must be positive")
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		started   atomic.Int64
	)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, j *river.Job[LatencyArgs]) error {
		d := time.Since(time.Unix(0, j.Args.EnqueuedAt))
		mu.Lock()
		latencies = append(latencies, d)
		mu.Unlock()
		started.Add(1)
		return nil
	}))
	// The backlog uses the no-op kind, so it needs a worker too.
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[NoopArgs]) error { return nil }))
	c, err := b.newCli(b.clientConfig(workers))
	if err != nil {
		return nil, err
	}
	if b.o.backlog > 0 {
		if err := b.insertBacklog(ctx, c, b.o.backlog); err != nil {
			return nil, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	defer c.Stop(context.Background())
	// Let the workers settle into their idle wait before measuring, as
	// hopper bench does.
	time.Sleep(200 * time.Millisecond)

	tick := time.NewTicker(time.Duration(float64(time.Second) / b.o.rate))
	defer tick.Stop()
	end := time.Now().Add(b.o.duration)
	sent := 0
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if _, err := c.Insert(ctx, LatencyArgs{EnqueuedAt: time.Now().UnixNano()}, nil); err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		sent++
	}
	err = common.WaitUntil(ctx, 5*time.Millisecond, 30*time.Second, func() (bool, error) {
		return started.Load() >= int64(sent), nil
	})
	if err != nil {
		return nil, fmt.Errorf("only %d of %d jobs started within 30s: %w", started.Load(), sent, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return common.Latency(b.name, b.o.rate, latencies, b.config+", enqueue with Client.Insert one job at a time"), nil
}
