package hopper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestQueueDemandFollowsBacklog: the recommendation follows a synthetic
// backlog — jobs that ran two seconds each, 600 arriving in a minute —
// grows as the backlog waits past the pickup target though arrivals stop,
// and is nothing for a paused or empty queue.
func TestQueueDemandFollowsBacklog(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	d := memdriver.New(memdriver.WithClock(clk.Now))
	t.Cleanup(func() { _ = d.Close() })
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, MaxWorkers: 10})
	ctx := testCtx(t)

	d0, err := c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.Zero(t, d0.DesiredSlots, "an empty queue needs nothing")
	require.Zero(t, d0.DesiredWorkers)

	// History: ten jobs queued five minutes ago that ran two seconds each.
	start := clk.Now().Add(-5 * time.Minute)
	var done []*hoppertype.JobRow
	for i := range 10 {
		done = append(done, &hoppertype.JobRow{ID: "done-" + string(rune('a'+i)), Type: "import", Queue: "bulk",
			State: hoppertype.JobStateSucceeded, Retry: hoppertype.RetryPolicy{Attempts: 1}, Attempt: 1,
			QueuedAt: start, RunAt: start, StartedAt: start, EndedAt: start.Add(2 * time.Second)})
	}
	_, err = d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: done})
	require.NoError(t, err)
	// 600 jobs arrive now; nobody works them.
	imp := hopper.Define("import", func(context.Context, int) (int, error) { return 0, nil }, nil)
	specs := make([]*hopper.JobSpec, 600)
	for i := range specs {
		specs[i] = imp.Job(i, &hopper.InsertOpts{Queue: "bulk"})
	}
	_, err = c.EnqueueMany(ctx, specs...)
	require.NoError(t, err)

	dm, err := c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.Equal(t, 600, dm.Due)
	require.Equal(t, 2*time.Second, dm.MeanRun, "none succeeded in the last minute: the ten minutes' mean")
	require.Zero(t, dm.CompletionPerSecond)
	require.Equal(t, time.Minute, dm.Drain, "no job has waited yet")
	require.InDelta(t, 10, dm.ArrivalPerSecond, 1e-9)
	require.Equal(t, 10, dm.SlotsPerWorker)
	require.Equal(t, 45, dm.DesiredSlots, "10/s × 2 s ÷ 0.8 + 600 × 2 s ÷ 60 s")
	require.Equal(t, 5, dm.DesiredWorkers)
	all, err := c.QueueDemands(ctx)
	require.NoError(t, err)
	var bulk *hopper.QueueDemand
	for _, x := range all {
		if x.Queue == "bulk" {
			bulk = x
		}
	}
	require.Equal(t, dm, bulk, "every queue's demand at once reads the same")

	// Two minutes on, nothing arrives, and the backlog has waited past the
	// pickup target: it is to start within the least drain, 10 s.
	clk.Jump(clk.Now().Add(2 * time.Minute))
	dm, err = c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.Zero(t, dm.ArrivalPerSecond)
	require.Equal(t, 2*time.Minute, dm.OldestDueAge)
	require.Equal(t, 10*time.Second, dm.Drain)
	require.Equal(t, 120, dm.DesiredSlots, "600 × 2 s ÷ 10 s")
	require.Equal(t, 12, dm.DesiredWorkers)

	require.NoError(t, c.QueuePause(ctx, "bulk", nil))
	dm, err = c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.True(t, dm.Paused)
	require.Zero(t, dm.DesiredWorkers, "a paused queue needs no worker")
}

// TestQueueDemandCompletions: the jobs that succeeded in the last minute
// are the completion rate and measure the service time; once none did,
// the ten minutes' mean does.
func TestQueueDemandCompletions(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	d := memdriver.New(memdriver.WithClock(clk.Now))
	t.Cleanup(func() { _ = d.Close() })
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk})
	ctx := testCtx(t)
	now := clk.Now()
	ran := func(queued, ended time.Time, run time.Duration) *hoppertype.JobRow {
		return &hoppertype.JobRow{ID: hopper.NewID(), Type: "import", Queue: "bulk", State: hoppertype.JobStateSucceeded,
			Retry: hoppertype.RetryPolicy{Attempts: 1}, Attempt: 1, QueuedAt: queued, RunAt: queued, StartedAt: ended.Add(-run), EndedAt: ended}
	}
	var rows []*hoppertype.JobRow
	for range 6 { // ran a second, ended 30 s ago
		rows = append(rows, ran(now.Add(-3*time.Minute), now.Add(-30*time.Second), time.Second))
	}
	for range 4 { // ran four seconds, ended five minutes ago
		rows = append(rows, ran(now.Add(-6*time.Minute), now.Add(-5*time.Minute), 4*time.Second))
	}
	_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
	require.NoError(t, err)

	dm, err := c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.InDelta(t, 0.1, dm.CompletionPerSecond, 1e-9, "6 in the last minute")
	require.Equal(t, time.Second, dm.MeanRun, "the last minute's completions")

	clk.Jump(now.Add(time.Minute))
	dm, err = c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.Zero(t, dm.CompletionPerSecond)
	require.Equal(t, 2200*time.Millisecond, dm.MeanRun, "(6 × 1 s + 4 × 4 s) ÷ 10")
}
