package pgdriver

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// benchJobs returns n pending jobs of queue q with fresh ids.
func benchJobs(q string, n int) []*hoppertype.JobRow {
	jobs := make([]*hoppertype.JobRow, n)
	for i := range jobs {
		jobs[i] = newJob(q)
		jobs[i].Input = []byte(`{"to":"someone@example.com","n":42}`)
	}
	return jobs
}

// BenchmarkInsertBatch1000 inserts 1,000 jobs per op in one call.
func BenchmarkInsertBatch1000(b *testing.B) {
	pool := newPool(b, 4)
	d := newTestDriver(b, pool)
	ctx := b.Context()
	const batch = 1000
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		jobs := benchJobs("bench", batch)
		b.StartTimer()
		if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkInsertBatch1000Unique inserts 1,000 jobs with unique keys per op
// (the unnest INSERT … ON CONFLICT path).
func BenchmarkInsertBatch1000Unique(b *testing.B) {
	pool := newPool(b, 4)
	d := newTestDriver(b, pool)
	ctx := b.Context()
	const batch = 1000
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		jobs := benchJobs("bench", batch)
		for _, j := range jobs {
			j.UniqueKey = j.ID
		}
		b.StartTimer()
		if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimFinish100 claims 100 jobs and finishes them in one batch per
// op, from a queue filled beforehand.
func BenchmarkClaimFinish100(b *testing.B) {
	pool := newPool(b, 4)
	d := newTestDriver(b, pool)
	ctx := b.Context()
	const batch = 100
	q := fmt.Sprintf("bench-%d", b.N)
	for n := b.N * batch; n > 0; n -= 5000 {
		if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: benchJobs(q, min(n, 5000))}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+d.q.schema+`.jobs`); err != nil {
		b.Fatal(err)
	}
	items := make([]driver.JobFinishParams, 0, batch)
	b.ResetTimer()
	for range b.N {
		now := time.Now()
		rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: q, Limit: batch, Now: now, LeaseExpiresAt: now.Add(time.Minute), Worker: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) != batch {
			b.Fatalf("claimed %d jobs, want %d", len(rows), batch)
		}
		items = items[:0]
		for _, r := range rows {
			items = append(items, driver.JobFinishParams{ID: r.ID, LeaseToken: r.LeaseToken, State: hoppertype.JobStateSucceeded,
				Attempt: r.Attempt, RunAt: r.RunAt, Result: []byte(`{"ok":true}`), EndedAt: now})
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
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkStepCheckpoint appends one workflow step to a run's history per
// op (see drivertest.BenchStepCheckpoint).
func BenchmarkStepCheckpoint(b *testing.B) {
	pool := newPool(b, 4)
	drivertest.BenchStepCheckpoint(b, newTestDriver(b, pool))
}

// BenchmarkEncodeNullableArrays encodes a finish's three kinds of nullable
// column arrays (times, texts, bytes) of 200 jobs as pgx does for a
// statement's arguments, as slices and as FlatArrays, with no database.
func BenchmarkEncodeNullableArrays(b *testing.B) {
	m := pgtype.NewMap()
	const n = 200
	times, texts, blobs := make([]pgtype.Timestamptz, n), make([]pgtype.Text, n), make([][]byte, n)
	for i := range n {
		times[i] = pgtype.Timestamptz{Time: testBase.Add(time.Duration(i) * time.Millisecond), Valid: true}
		texts[i] = pgtype.Text{String: `{"kind":"error","message":"boom"}`, Valid: i%2 == 0}
		blobs[i] = []byte(`"ok"`)
	}
	run := func(b *testing.B, args ...any) {
		var buf []byte
		var err error
		oids := []uint32{pgtype.TimestamptzArrayOID, pgtype.TextArrayOID, pgtype.ByteaArrayOID}
		for range b.N {
			buf = buf[:0]
			for i, a := range args {
				if buf, err = m.Encode(oids[i], pgtype.BinaryFormatCode, a, buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("slices", func(b *testing.B) { run(b, times, texts, blobs) })
	b.Run("flat", func(b *testing.B) {
		run(b, pgtype.FlatArray[pgtype.Timestamptz](times), pgtype.FlatArray[pgtype.Text](texts), pgtype.FlatArray[[]byte](blobs))
	})
}
