// Command floor is the raw-SQL floor of the hopper benchmarks: the least work
// a durable SQL queue can do, in throughput mode only.
//
// A minimal jobs table (id, state smallint, payload) is filled in batches of
// 5,000 (COPY on PostgreSQL; multi-row INSERTs in one transaction on SQLite),
// then --workers goroutines each repeatedly claim --claim jobs in one
// statement, "run" them (nothing), and mark them completed in one statement:
//
//	PostgreSQL: WITH c AS MATERIALIZED (SELECT id FROM jobs WHERE state = 0
//	            ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
//	            UPDATE jobs SET state = 1 FROM c WHERE jobs.id = c.id RETURNING jobs.id
//	            UPDATE jobs SET state = 2 WHERE id = ANY($1)
//	SQLite:     UPDATE jobs SET state = 1 WHERE id IN (SELECT id FROM jobs
//	            WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id
//	            UPDATE jobs SET state = 2 WHERE id IN (SELECT value FROM json_each(?))
//
// Each statement is its own transaction (autocommit), so a claim and a
// completion are each durable when they return. A completion is counted
// after its statement has committed. Durability is hopper's default:
// PostgreSQL's synchronous_commit as the server has it (on by default);
// SQLite in WAL mode with synchronous=FULL over one writer connection
// (--synchronous NORMAL for an extra row). At the end the store must hold
// exactly --jobs completed jobs.
//
// --shape realistic (SQLite) is the floor of a queue with a change feed
// instead: what such a queue must write, with no engine around it (see
// realistic.go).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/hopper-go/hopper/bench/internal/common"
)

type opts struct {
	driver      string
	db          string
	mode        string
	jobs        int
	workers     int
	claim       int
	backlog     int
	synchronous string
	shape       string
	extras      string
	asJSON      bool
}

const (
	stateAvailable = 0
	stateRunning   = 1
	stateCompleted = 2
	stateScheduled = 3 // backlog rows: never claimed
)

func main() {
	o := &opts{}
	flag.StringVar(&o.driver, "driver", "postgres", "postgres or sqlite")
	flag.StringVar(&o.db, "db", "", "postgres: URL (default $HOPPER_TEST_POSTGRES_URL); a fresh schema is made in it and dropped after. sqlite: file path (default: a fresh file in a temp dir)")
	flag.StringVar(&o.mode, "mode", "throughput", "throughput (the only mode)")
	flag.IntVar(&o.jobs, "jobs", 100_000, "jobs to insert and work")
	flag.IntVar(&o.workers, "workers", 4, "claiming goroutines")
	flag.IntVar(&o.claim, "claim", 1000, "jobs claimed (and then completed) per statement")
	flag.IntVar(&o.backlog, "backlog", 0, "rows in a never-due state, stored before the run")
	flag.StringVar(&o.synchronous, "synchronous", "FULL", "sqlite: PRAGMA synchronous (FULL or NORMAL); postgres: FULL keeps the server's synchronous_commit, NORMAL sets it off for the session")
	flag.StringVar(&o.shape, "shape", "minimal", "minimal (a 3-column table) or realistic (sqlite: a queue's job row, its indexes and a change row per transition; claims and finishes of --claim jobs per transaction, default 100)")
	flag.StringVar(&o.extras, "extra", "", "with --shape realistic: what hopper's store writes beyond the floor, comma-separated: state-index, more-indexes, trigger-feed, wide-returning (needs more-indexes)")
	flag.BoolVar(&o.asJSON, "json", false, "print JSON")
	flag.Parse()
	if o.shape == "realistic" {
		claimSet := false
		flag.Visit(func(f *flag.Flag) { claimSet = claimSet || f.Name == "claim" })
		if !claimSet {
			o.claim = 100
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		common.Fail("floor", err)
	}
	if err := common.Print(os.Stdout, o.asJSON, res); err != nil {
		common.Fail("floor", err)
	}
}

// store is what the throughput loop needs of a database. A claim returns
// the claimed jobs' ids ([]int64 or []string) and how many there are.
type store interface {
	insert(ctx context.Context, n int, state int) error
	claim(ctx context.Context, n int) (ids any, claimed int, err error)
	complete(ctx context.Context, ids any) (int, error)
	count(ctx context.Context, state int) (int, error)
}

func run(ctx context.Context, o *opts) (*common.ThroughputResult, error) {
	if o.mode != "throughput" {
		return nil, fmt.Errorf("--mode %q: the floor has throughput mode only", o.mode)
	}
	if o.jobs < 1 || o.workers < 1 || o.claim < 1 {
		return nil, errors.New("--jobs, --workers and --claim must be positive")
	}
	if o.synchronous != "FULL" && o.synchronous != "NORMAL" {
		return nil, errors.New("--synchronous must be FULL or NORMAL")
	}
	switch o.shape {
	case "minimal":
	case "realistic":
		if o.driver != "sqlite" {
			return nil, errors.New("--shape realistic is SQLite's floor only")
		}
	default:
		return nil, fmt.Errorf("--shape %q: minimal or realistic", o.shape)
	}
	if o.extras != "" && o.shape != "realistic" {
		return nil, errors.New("--extra needs --shape realistic")
	}
	var (
		st     store
		name   string
		config string
	)
	switch o.driver {
	case "postgres":
		url := o.db
		if url == "" {
			url = common.DefaultPostgresURL()
		}
		schema, drop, err := common.FreshSchema(ctx, url, "floorbench")
		if err != nil {
			return nil, fmt.Errorf("fresh schema: %w", err)
		}
		defer drop()
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		sc := "server default"
		if o.synchronous == "NORMAL" {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
			sc = "off"
		}
		cfg.MaxConns = int32(o.workers + 2)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		var serverSC string
		if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&serverSC); err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, `
			CREATE TABLE jobs (id bigserial PRIMARY KEY, state smallint NOT NULL DEFAULT 0, payload bytea NOT NULL);
			CREATE INDEX jobs_available ON jobs (id) WHERE state = 0;`); err != nil {
			return nil, err
		}
		st = &pgStore{pool: pool}
		name = "floor-postgres"
		config = fmt.Sprintf("raw SQL on pgx: %d claiming goroutines, claim batch %d (MATERIALIZED CTE, FOR UPDATE SKIP LOCKED), complete by id = ANY, one autocommit statement each, synchronous_commit=%s (%s), insert with COPY in batches of 5000, partial index on id WHERE state=0, fresh schema",
			o.workers, o.claim, serverSC, sc)
	case "sqlite":
		path := o.db
		if path == "" {
			dir, err := os.MkdirTemp("", "floorbench-*")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "floor.db")
		}
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+o.synchronous+")&_pragma=busy_timeout(10000)")
		if err != nil {
			return nil, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1) // one writer connection
		if o.shape == "realistic" {
			var extras []string
			if o.extras != "" {
				extras = strings.Split(o.extras, ",")
			}
			if st, err = newRealistic(ctx, db, extras); err != nil {
				return nil, err
			}
			name = "floor-sqlite-realistic"
			config = fmt.Sprintf("raw SQL on modernc.org/sqlite: one writer connection, %d claiming goroutines; %s; WAL, synchronous=%s, fresh file",
				o.workers, realisticConfig(o.claim), o.synchronous)
			if len(extras) > 0 {
				name += "+" + strings.Join(extras, "+")
				config += "; with " + strings.Join(extras, ", ")
			}
			break
		}
		if _, err := db.ExecContext(ctx, `
			CREATE TABLE jobs (id INTEGER PRIMARY KEY, state INTEGER NOT NULL DEFAULT 0, payload BLOB NOT NULL);
			CREATE INDEX jobs_available ON jobs (id) WHERE state = 0;`); err != nil {
			return nil, err
		}
		st = &liteStore{db: db}
		name = "floor-sqlite"
		config = fmt.Sprintf("raw SQL on modernc.org/sqlite: one writer connection, %d claiming goroutines, claim batch %d (UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING id), complete by json_each, one autocommit statement each, WAL, synchronous=%s, insert with multi-row INSERTs in one transaction per 5000, partial index on id WHERE state=0, fresh file",
			o.workers, o.claim, o.synchronous)
	default:
		return nil, fmt.Errorf("unknown --driver %q", o.driver)
	}

	for left := o.backlog; left > 0; left -= common.InsertBatch {
		if err := st.insert(ctx, min(left, common.InsertBatch), stateScheduled); err != nil {
			return nil, fmt.Errorf("backlog: %w", err)
		}
	}
	start := time.Now()
	for left := o.jobs; left > 0; left -= common.InsertBatch {
		if err := st.insert(ctx, min(left, common.InsertBatch), stateAvailable); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	insertElapsed := time.Since(start)

	start = time.Now()
	var (
		done    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		errOnce.Do(func() { runErr = err; cancel() })
	}
	for range o.workers {
		wg.Go(func() {
			for wctx.Err() == nil && done.Load() < int64(o.jobs) {
				ids, claimed, err := st.claim(wctx, o.claim)
				if err != nil {
					fail(fmt.Errorf("claim: %w", err))
					return
				}
				if claimed == 0 {
					// Others hold the last rows: wait for them to finish.
					time.Sleep(time.Millisecond)
					continue
				}
				// The jobs run here: they are no-ops.
				n, err := st.complete(wctx, ids)
				if err != nil {
					fail(fmt.Errorf("complete: %w", err))
					return
				}
				done.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if runErr != nil {
		return nil, runErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	workElapsed := time.Since(start)
	completed, err := st.count(ctx, stateCompleted)
	if err != nil {
		return nil, err
	}
	if err := common.Verify(completed, o.jobs); err != nil {
		return nil, err
	}
	return &common.ThroughputResult{
		Mode: "throughput", Driver: name, Jobs: o.jobs, Workers: o.workers, Backlog: o.backlog,
		InsertJobsPerS: float64(o.jobs) / insertElapsed.Seconds(),
		WorkJobsPerS:   float64(o.jobs) / workElapsed.Seconds(),
		Completed:      completed,
		Config:         config + ", completions counted after their UPDATE committed",
	}, nil
}

var payload = []byte("0") // hopper bench's job argument, an int64 0, as JSON

type pgStore struct{ pool *pgxpool.Pool }

func (s *pgStore) insert(ctx context.Context, n, state int) error {
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"jobs"}, []string{"state", "payload"},
		pgx.CopyFromSlice(n, func(int) ([]any, error) { return []any{int16(state), payload}, nil }))
	return err
}

func (s *pgStore) claim(ctx context.Context, n int) (any, int, error) {
	rows, err := s.pool.Query(ctx, `
		WITH c AS MATERIALIZED (
			SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		UPDATE jobs SET state = 1 FROM c WHERE jobs.id = c.id RETURNING jobs.id`, n)
	if err != nil {
		return nil, 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, len(ids), err
}

func (s *pgStore) complete(ctx context.Context, ids any) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE jobs SET state = 2 WHERE id = ANY($1) AND state = 1`, ids.([]int64))
	return int(tag.RowsAffected()), err
}

func (s *pgStore) count(ctx context.Context, state int) (n int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state = $1`, state).Scan(&n)
	return n, err
}

type liteStore struct{ db *sql.DB }

func (s *liteStore) insert(ctx context.Context, n, state int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	const perStmt = 500
	for left := n; left > 0; left -= perStmt {
		k := min(left, perStmt)
		var b strings.Builder
		b.WriteString("INSERT INTO jobs (state, payload) VALUES ")
		args := make([]any, 0, 2*k)
		for i := range k {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?)")
			args = append(args, state, payload)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *liteStore) claim(ctx context.Context, n int) (any, int, error) {
	rows, err := s.db.QueryContext(ctx, `
		UPDATE jobs SET state = 1 WHERE id IN (
			SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id`, n)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, 0, err
		}
		ids = append(ids, id)
	}
	return ids, len(ids), rows.Err()
}

func (s *liteStore) complete(ctx context.Context, ids any) (int, error) {
	arr, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET state = 2 WHERE id IN (SELECT value FROM json_each(?)) AND state = 1`, string(arr))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (s *liteStore) count(ctx context.Context, state int) (n int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE state = ?`, state).Scan(&n)
	return n, err
}
