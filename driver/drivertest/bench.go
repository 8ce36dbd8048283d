package drivertest

import (
	"context"
	"fmt"
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
