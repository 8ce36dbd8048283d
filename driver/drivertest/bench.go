package drivertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// BenchStepCheckpoint measures a workflow step's checkpoint on d: one
// history append per op (a step's output, fenced by the run's lease), ten
// steps per run, one after the other as a run records them. The runs are
// started and their jobs claimed before the timer starts. Each driver's
// tests call it from a BenchmarkStepCheckpoint.
func BenchStepCheckpoint(b *testing.B, drv driver.Driver) {
	d := drv.Executor()
	ctx := b.Context()
	const steps = 10
	runs := b.N/steps + 1
	now := time.Now().UTC().Truncate(time.Microsecond)
	queue := fmt.Sprintf("bench-steps-%d", now.UnixNano())
	for start := 0; start < runs; start += 1000 {
		err := d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			for i := start; i < min(runs, start+1000); i++ {
				id := fmt.Sprintf("%s-%07d", queue, i)
				run := &hoppertype.RunRow{ID: id, Workflow: "bench", Status: hoppertype.RunPending, CodeVersion: "v1",
					CreatedAt: now, UpdatedAt: now}
				job := &hoppertype.JobRow{ID: id, Type: "workflow:bench", Queue: queue, State: hoppertype.JobStatePending,
					GroupID: id, Input: []byte(`{}`), Retry: hoppertype.RetryPolicy{Attempts: 1, Backoff: "constant"},
					QueuedAt: now, RunAt: now}
				if _, err := tx.RunStart(ctx, &driver.RunStartParams{Run: run, Job: job}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	tokens := make(map[string]int64, runs)
	for len(tokens) < runs {
		rows, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Limit: 1000, Now: now,
			LeaseExpiresAt: now.Add(time.Hour), Worker: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) == 0 {
			b.Fatalf("claimed %d of %d runs' jobs", len(tokens), runs)
		}
		for _, r := range rows {
			tokens[r.ID] = r.LeaseToken
		}
	}
	data := []byte(`{"ok":true,"n":42}`)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("%s-%07d", queue, i/steps)
		seq := i%steps + 1
		err := d.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: id, LeaseToken: tokens[id], Now: now,
			Events: []*hoppertype.RunEvent{{RunID: id, Attempt: 1, Seq: seq, Kind: "step", Name: fmt.Sprintf("s%d", seq), Data: data, At: now}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BacklogEnv names the size of the backlog BenchQueueDepth reads.
const BacklogEnv = "HOPPER_BENCH_BACKLOG"

// BenchBacklog returns the number of jobs a driver's BenchmarkQueueDepth
// stores: $HOPPER_BENCH_BACKLOG, or 10,000 so that go test -bench . stays
// quick (docs/BENCHMARKS.md measures 1,000,000).
func BenchBacklog(b *testing.B) int {
	v := os.Getenv(BacklogEnv)
	if v == "" {
		return 10_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		b.Fatalf("%s=%q: want a number of jobs, at least 1000", BacklogEnv, v)
	}
	return n
}

// BacklogRunning is how many jobs of a benchmark's backlog run: as many as
// a fleet's slots, whatever the backlog.
const BacklogRunning = 100

// BacklogState is the state of job i of a benchmark's backlog, and whether
// it is due, the same in every driver's fill: the first BacklogRunning
// jobs run; of the others, per thousand jobs of a queue, 880 are pending,
// 60 scheduled ahead, 15 retrying overdue and 15 ahead, and 30 succeeded.
// Drivers fill their stores with SQL of their own that follows it (queue
// 'q' || i % 4, the state of (i / 4) % 1000, priority i % 3);
// BenchQueueDepth checks the counts it reads against it.
func BacklogState(i int) (state hoppertype.JobState, due bool) {
	if i < BacklogRunning {
		return hoppertype.JobStateRunning, false
	}
	switch k := (i / 4) % 1000; {
	case k < 880:
		return hoppertype.JobStatePending, true
	case k < 940:
		return hoppertype.JobStateScheduled, false
	case k < 955:
		return hoppertype.JobStateRetrying, true
	case k < 970:
		return hoppertype.JobStateRetrying, false
	}
	return hoppertype.JobStateSucceeded, false
}

// BenchQueueDepth measures the two reads of a backlog of n jobs (see
// BacklogState) stored in d, at now: "count", the count of every job by
// queue and state (JobCountByState, what /metrics read at each scrape
// before QueueDepthList), and "depth", QueueDepthList at hopper's cap
// (10,000) and at 1,000. It first checks that the depths match the
// backlog.
func BenchQueueDepth(b *testing.B, drv driver.Driver, n int, now time.Time) {
	d := drv.Executor()
	ctx := b.Context()
	const queues = 4
	for _, capped := range []int{10_000, 1000} {
		rows, err := d.QueueDepthList(ctx, &driver.QueueDepthListParams{Cap: capped, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) != queues {
			b.Fatalf("%d queues, want %d", len(rows), queues)
		}
		for q, r := range rows {
			var due, delayed, running int
			for i := q; i < n; i += queues {
				switch st, isDue := BacklogState(i); {
				case st == hoppertype.JobStateRunning:
					running++
				case isDue:
					due++
				case st != hoppertype.JobStateSucceeded:
					delayed++
				}
			}
			want := [3]int{min(due, capped+1), min(delayed, capped+1), running}
			if got := [3]int{r.Due, r.Delayed, r.Running}; got != want || r.OldestDueAt.IsZero() {
				b.Fatalf("queue %s at cap %d: due, delayed, running %v (oldest due %v), want %v", r.Queue, capped, got, r.OldestDueAt, want)
			}
		}
	}
	b.Run("count", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.JobCountByState(ctx, &driver.JobCountParams{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, capped := range []int{10_000, 1000} {
		b.Run(fmt.Sprintf("depth-cap-%d", capped), func(b *testing.B) {
			for b.Loop() {
				if _, err := d.QueueDepthList(ctx, &driver.QueueDepthListParams{Cap: capped, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
