package memdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		d := memdriver.New()
		t.Cleanup(func() { d.Close() })
		return d
	})
}

// BenchmarkClaim claims and finishes one job at a time from a large queue:
// the cost per claim stays logarithmic in the queue's size.
func BenchmarkClaim(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("queue=%d", size), func(b *testing.B) {
			ctx := context.Background()
			d := memdriver.New()
			defer d.Close()
			base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			insert := func(n int, prefix string) {
				rows := make([]*hoppertype.JobRow, n)
				for i := range rows {
					rows[i] = &hoppertype.JobRow{
						ID: fmt.Sprintf("%s-%09d", prefix, i), Type: "t", Queue: "q", State: hoppertype.JobStatePending,
						Priority: i % 5, QueuedAt: base, RunAt: base.Add(time.Duration(i) * time.Microsecond),
					}
				}
				if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows}); err != nil {
					b.Fatal(err)
				}
			}
			insert(size, "fill")
			insert(b.N, "bench")
			b.ResetTimer()
			for range b.N {
				rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{
					Queue: "q", Limit: 1, Now: base, LeaseExpiresAt: base.Add(time.Minute), Worker: "w",
				})
				if err != nil || len(rows) != 1 {
					b.Fatal(err, len(rows))
				}
				if _, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
					ID: rows[0].ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateSucceeded,
					Attempt: rows[0].Attempt, RunAt: rows[0].RunAt, EndedAt: base,
				}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStepCheckpoint appends one workflow step to a run's history per
// op (see drivertest.BenchStepCheckpoint).
func BenchmarkStepCheckpoint(b *testing.B) {
	d := memdriver.New()
	defer d.Close()
	drivertest.BenchStepCheckpoint(b, d)
}

// BenchmarkInsertBatch1000 inserts 1,000 jobs per op in one call.
func BenchmarkInsertBatch1000(b *testing.B) {
	ctx := context.Background()
	d := memdriver.New()
	defer d.Close()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 1000
	n := 0
	for b.Loop() {
		b.StopTimer()
		rows := make([]*hoppertype.JobRow, batch)
		for i := range rows {
			id := fmt.Sprintf("job-%09d", n)
			n++
			rows[i] = &hoppertype.JobRow{ID: id, Type: "t", Queue: "q", State: hoppertype.JobStatePending, GroupID: id,
				Input: []byte(`{"to":"someone@example.com","n":42}`), QueuedAt: base, RunAt: base}
		}
		b.StartTimer()
		if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}

// TestPanicUndoesAndUnlocks: a panic in a transaction of the Driver's
// executor, in InTx's function or in an operation (a GroupUpdate's Fold),
// reaches the caller, undoes the transaction's writes and releases the
// store for the next operation.
func TestPanicUndoesAndUnlocks(t *testing.T) {
	ctx := context.Background()
	d := memdriver.New()
	defer d.Close()
	ex := d.Executor()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("%s: recovered %v, want the panic boom", name, r)
			}
		}()
		fn()
	}

	mustPanic("InTx", func() {
		ex.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { //nolint:errcheck // it panics
			row := &hoppertype.JobRow{ID: "a", Type: "t", Queue: "q", State: hoppertype.JobStatePending, QueuedAt: base, RunAt: base}
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}}); err != nil {
				t.Error(err)
			}
			panic("boom")
		})
	})
	if _, err := ex.JobGet(ctx, &driver.JobGetParams{ID: "a"}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("job inserted before the panic: JobGet = %v, want ErrNotFound", err)
	}

	if err := ex.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: "g", Open: 1, CreatedAt: base}}); err != nil {
		t.Fatal(err)
	}
	mustPanic("GroupUpdate", func() {
		ex.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: "g", OpenDelta: -1, Contribute: true, Now: base, //nolint:errcheck // it panics
			Fold: func([]byte, bool) ([]byte, error) { panic("boom") }})
	})
	g, err := ex.GroupGet(ctx, &driver.GroupGetParams{ID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Open != 1 || g.ValueSet {
		t.Fatalf("group after a panicking update: Open %d, ValueSet %v; want 1, false", g.Open, g.ValueSet)
	}
}
