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
// and falls as arrivals stop, to nothing for a paused or empty queue.
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
	require.Equal(t, 2*time.Second, dm.MeanRun)
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

	// Two minutes on, nothing arrives: the backlog alone.
	clk.Jump(clk.Now().Add(2 * time.Minute))
	dm, err = c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.Zero(t, dm.ArrivalPerSecond)
	require.Equal(t, 20, dm.DesiredSlots, "600 × 2 s ÷ 60 s")
	require.Equal(t, 2, dm.DesiredWorkers)

	require.NoError(t, c.QueuePause(ctx, "bulk", nil))
	dm, err = c.QueueDemand(ctx, "bulk")
	require.NoError(t, err)
	require.True(t, dm.Paused)
	require.Zero(t, dm.DesiredWorkers, "a paused queue needs no worker")
}
