// Command bigstore fills a store as a busy fleet leaves it, to measure the
// dashboard's pages at a million jobs (docs/BENCHMARKS.md):
//
//	go run ./internal/tools/bigstore -db /tmp/big.db
//	go run ./internal/tools/bigstore -db 'postgres://…' -schema bigpage
//
// It writes, straight through the driver, 800,000 jobs scheduled a day
// ahead, 100,000 succeeded and 100,000 dead charges (metadata of 100
// tenants, unique keys on a tenth, errors of four kinds, one of them in ten
// jobs only), and through the engine a fan-out of 10,000 children watched
// by a gate, 2,000 sagas that end compensated after a retry and 2,000
// workflow runs that complete.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertype"
)

func main() {
	db := flag.String("db", "/tmp/big.db", "a SQLite path, or a postgres:// URL")
	schema := flag.String("schema", "bigpage", "the PostgreSQL schema")
	scale := flag.Int("scale", 1, "divides every count (for a quick try)")
	flag.Parse()
	ctx := context.Background()
	var d driver.Driver
	var err error
	if len(*db) > 11 && (*db)[:11] == "postgres://" {
		d, err = pgdriver.Open(ctx, *db, &pgdriver.Options{Schema: *schema})
	} else {
		d, err = sqlitedriver.Open(*db, nil)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	start := time.Now()
	if err := direct(ctx, d, *scale); err != nil {
		log.Fatal(err)
	}
	log.Printf("rows written in %s", time.Since(start).Round(time.Second))
	if err := engine(ctx, d, *scale); err != nil {
		log.Fatal(err)
	}
	log.Printf("done in %s", time.Since(start).Round(time.Second))
}

func direct(ctx context.Context, d driver.Driver, scale int) error {
	now := time.Now().UTC()
	errs := []string{"card declined by issuer", "gateway timeout after 30s", "insufficient funds", "card reported stolen"}
	var batch []*hoppertype.JobRow
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: batch})
		batch = batch[:0]
		return err
	}
	add := func(i int, typ string, state hoppertype.JobState, at time.Time) error {
		id := uuid.Must(uuid.NewV7()).String()
		r := &hoppertype.JobRow{ID: id, GroupID: id, Type: typ, Queue: "default", State: state,
			Input:    []byte(fmt.Sprintf(`{"account":%d,"amount":%d}`, i%5000, i%977)),
			Metadata: map[string]string{"tenant": fmt.Sprintf("tenant-%02d", i%100)},
			Retry:    hoppertype.RetryPolicy{Attempts: 3, Backoff: "exponential", Base: time.Second, Factor: 2, Max: time.Minute, Jitter: 0.2},
			QueuedAt: at.Add(-time.Minute), RunAt: at}
		if i%10 == 0 {
			r.UniqueKey = fmt.Sprintf("%s-%d", typ, i)
		}
		if state.Terminal() {
			r.Attempt, r.StartedAt, r.EndedAt = 1, at, at.Add(50*time.Millisecond)
		}
		if state == hoppertype.JobStateDead {
			r.Attempt = 3
			msg := errs[i%3]
			if i%10000 == 7 {
				msg = errs[3] // ten in 100,000
			}
			r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: fmt.Sprintf("charge %d: %s", i, msg), Attempt: 3, At: r.EndedAt}
		}
		batch = append(batch, r)
		if len(batch) == 1000 {
			return flush()
		}
		return nil
	}
	for i := range 800_000 / scale {
		if err := add(i, "sync", hoppertype.JobStateScheduled, now.Add(24*time.Hour+time.Duration(i)*time.Millisecond)); err != nil {
			return err
		}
	}
	for i := range 100_000 / scale {
		if err := add(i, "sync", hoppertype.JobStateSucceeded, now.Add(-time.Duration(100_000-i)*500*time.Millisecond)); err != nil {
			return err
		}
	}
	for i := range 100_000 / scale {
		if err := add(i, "charge", hoppertype.JobStateDead, now.Add(-time.Duration(100_000-i)*500*time.Millisecond)); err != nil {
			return err
		}
	}
	return flush()
}

type leafIn struct{ N int }

func engine(ctx context.Context, d driver.Driver, scale int) error {
	leaf := hopper.Define("leaf", func(context.Context, leafIn) (int, error) { return 1, nil }, nil)
	fan := hopper.Define("fan", func(ctx context.Context, n int) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		specs := make([]*hopper.JobSpec, n)
		for i := range specs {
			specs[i] = leaf.Job(leafIn{N: i}, nil)
		}
		return hopper.None{}, jc.Spawn(specs...)
	}, nil)
	saga := hopper.Workflow("saga", func(wf hopper.WorkflowContext, n int) (string, error) {
		for _, s := range []string{"charge", "reserve"} {
			if _, err := hopper.Step(wf, s, func(context.Context) (string, error) { return s + "d", nil }, nil); err != nil {
				return "", err
			}
			wf.Compensate("undo-"+s, func(context.Context) error { return nil })
		}
		return "", errors.New("carrier unavailable")
	}, &hopper.WorkflowOpts{MaxRetries: 1, Retry: hopper.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond}})
	order := hopper.Workflow("order", func(wf hopper.WorkflowContext, n int) (string, error) {
		for _, s := range []string{"price", "charge", "ship"} {
			if _, err := hopper.Step(wf, s, func(context.Context) (string, error) { return s + "d", nil }, nil); err != nil {
				return "", err
			}
		}
		return "shipped", nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: d, MaxWorkers: 50})
	if err != nil {
		return err
	}
	if err := c.Register(leaf, fan, saga, order); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Stop(context.Background())
	h, err := fan.Enqueue(ctx, c, 10_000/scale, &hopper.InsertOpts{ID: "big-fan"})
	if err != nil {
		return err
	}
	if _, err := h.Group(ctx); err != nil {
		return err
	}
	var runs []string
	for i := range 2000 / scale {
		s, err := saga.Start(ctx, c, i, nil)
		if err != nil {
			return err
		}
		o, err := order.Start(ctx, c, i, nil)
		if err != nil {
			return err
		}
		runs = append(runs, s.ID(), o.ID())
	}
	for _, id := range runs {
		if _, err := c.RunWait(ctx, id); err != nil {
			return err
		}
	}
	log.Printf("fan-out big-fan settled; %d runs ended (one saga: %s)", len(runs), runs[0])
	return nil
}
