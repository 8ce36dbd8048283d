package sqlitedriver

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// syncModes are the durability settings each benchmark runs under.
var syncModes = []string{"FULL", "NORMAL"}

// reportJobs reports throughput in jobs per second.
func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// benchJob returns a job with a small payload, like an engine's enqueue.
func benchJob(q string) *hoppertype.JobRow {
	j := newJob(q)
	j.Input = []byte(`{"to":"someone@example.com","subject":"hello","n":42}`)
	j.Metadata = map[string]string{"trace": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	return j
}

// BenchmarkInsertOne inserts one job per call from one goroutine: every call
// is its own transaction and commit.
func BenchmarkInsertOne(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode, func(b *testing.B) {
			d := openTemp(b, &Options{Synchronous: mode})
			ctx := context.Background()
			for b.Loop() {
				if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{benchJob("bench")}}); err != nil {
					b.Fatal(err)
				}
			}
			reportJobs(b, b.N)
		})
	}
}

// BenchmarkInsertOneParallel inserts one job per call from many goroutines:
// the writer groups their calls into shared commits.
func BenchmarkInsertOneParallel(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode, func(b *testing.B) {
			d := openTemp(b, &Options{Synchronous: mode})
			ctx := context.Background()
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{benchJob("bench")}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportJobs(b, b.N)
		})
	}
}

// BenchmarkInsertBatch1000 inserts 1000 jobs per call.
func BenchmarkInsertBatch1000(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode, func(b *testing.B) {
			d := openTemp(b, &Options{Synchronous: mode})
			ctx := context.Background()
			jobs := make([]*hoppertype.JobRow, 1000)
			for b.Loop() {
				for i := range jobs {
					jobs[i] = benchJob("bench")
				}
				if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
					b.Fatal(err)
				}
			}
			reportJobs(b, 1000*b.N)
		})
	}
}

// BenchmarkClaimFinish claims 100 jobs and finishes them (two calls) per
// iteration, on a queue filled beforehand.
func BenchmarkClaimFinish(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode, func(b *testing.B) {
			d := openTemp(b, &Options{Synchronous: mode})
			ctx := context.Background()
			fill := func(n int) {
				for n > 0 {
					jobs := make([]*hoppertype.JobRow, min(n, 1000))
					for i := range jobs {
						jobs[i] = benchJob("bench")
					}
					if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
						b.Fatal(err)
					}
					n -= len(jobs)
				}
			}
			now := testBase
			items := make([]driver.JobFinishParams, 0, 100)
			claimed := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if claimed%10000 == 0 {
					b.StopTimer()
					fill(10000)
					b.StartTimer()
				}
				rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{
					Queue: "bench", Limit: 100, Now: now, LeaseExpiresAt: now.Add(time.Minute), Worker: "bench",
				})
				if err != nil || len(rows) != 100 {
					b.Fatalf("claim: %d rows, %v", len(rows), err)
				}
				items = items[:0]
				for _, r := range rows {
					items = append(items, driver.JobFinishParams{ID: r.ID, LeaseToken: r.LeaseToken,
						State: hoppertype.JobStateSucceeded, Attempt: r.Attempt, RunAt: r.RunAt, Result: []byte(`"ok"`), EndedAt: now, Claimed: r})
				}
				res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				claimed += 100
			}
			reportJobs(b, 100*b.N)
		})
	}
}

// BenchmarkStepCheckpoint appends one workflow step to a run's history per
// op (see drivertest.BenchStepCheckpoint): each its own transaction.
func BenchmarkStepCheckpoint(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode, func(b *testing.B) {
			drivertest.BenchStepCheckpoint(b, openTemp(b, &Options{Synchronous: mode}))
		})
	}
}
