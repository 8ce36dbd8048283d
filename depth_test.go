package hopper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestQueueDepths: the depths list the queues with live jobs, a stored
// state, this client's and a live worker's queues (not a dead worker's),
// count a delayed job as due once its time has come, age the oldest due
// job with the client's clock, and stop counting at the cap; QueueDemands
// reads the same due jobs.
func TestQueueDepths(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := hoppertest.NewClock(t0)
	d := memdriver.New(memdriver.WithClock(clk.Now))
	t.Cleanup(func() { _ = d.Close() })
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, Queues: []string{"idle"}})
	ctx := testCtx(t)

	// No process works "mail": three jobs due now, one an hour ahead.
	send := hopper.Define("send", func(context.Context, int) (int, error) { return 0, nil }, nil)
	_, err := c.EnqueueMany(ctx, send.Job(1, &hopper.InsertOpts{Queue: "mail"}), send.Job(2, &hopper.InsertOpts{Queue: "mail"}),
		send.Job(3, &hopper.InsertOpts{Queue: "mail"}), send.Job(4, &hopper.InsertOpts{Queue: "mail", Delay: time.Hour}))
	require.NoError(t, err)
	require.NoError(t, c.QueuePause(ctx, "held", &hopper.PauseOpts{Create: true}))

	clk.Jump(t0.Add(10 * time.Minute))
	// Another process works "elsewhere"; one that stopped reporting worked
	// "gone".
	now := clk.Now()
	for _, w := range []*driver.WorkerRow{
		{ID: "other", StartedAt: now, SeenAt: now, Info: []byte(`{"queues":["elsewhere"],"status":"idle"}`)},
		{ID: "stopped", StartedAt: now.Add(-30 * time.Minute), SeenAt: now.Add(-30 * time.Minute), Info: []byte(`{"queues":["gone"],"status":"idle"}`)},
	} {
		require.NoError(t, d.Executor().WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: w}))
	}
	byName := func() (names []string, by map[string]hopper.QueueDepth) {
		t.Helper()
		depths, err := c.QueueDepths(ctx)
		require.NoError(t, err)
		by = map[string]hopper.QueueDepth{}
		for _, q := range depths {
			names = append(names, q.Queue)
			by[q.Queue] = q
		}
		return names, by
	}
	names, got := byName()
	require.Equal(t, []string{"default", "elsewhere", "held", "idle", "mail"}, names)
	require.Equal(t, hopper.QueueDepth{Queue: "mail", Due: 3, Delayed: 1, OldestDueAt: t0, OldestDueAge: 10 * time.Minute}, got["mail"])
	require.Equal(t, hopper.QueueDepth{Queue: "held", Paused: true}, got["held"])
	require.Equal(t, hopper.QueueDepth{Queue: "elsewhere"}, got["elsewhere"])

	// An hour on, the delayed job is due too.
	clk.Jump(t0.Add(70 * time.Minute))
	_, got = byName()
	require.Equal(t, hopper.QueueDepth{Queue: "mail", Due: 4, OldestDueAt: t0, OldestDueAge: 70 * time.Minute}, got["mail"])
	demands, err := c.QueueDemands(ctx)
	require.NoError(t, err)
	due := map[string]int{}
	for _, dm := range demands {
		due[dm.Queue] = dm.Due
	}
	require.Equal(t, 4, due["mail"], "the demand reads the depths")
	dm, err := c.QueueDemand(ctx, "mail")
	require.NoError(t, err)
	require.Equal(t, 4, dm.Due)

	// Past the cap, the count says more than the cap.
	specs := make([]*hopper.JobSpec, hopper.QueueDepthCap+5)
	for i := range specs {
		specs[i] = send.Job(i, &hopper.InsertOpts{Queue: "bulk"})
	}
	_, err = c.EnqueueMany(ctx, specs...)
	require.NoError(t, err)
	_, got = byName()
	require.Equal(t, hopper.QueueDepthCap+1, got["bulk"].Due)
	require.Zero(t, got["bulk"].OldestDueAge, "due from now")
}

// Watch a queue's backlog: its due jobs, its delayed ones, and how long the
// oldest due job has waited.
func ExampleClient_QueueDepths() {
	send := hopper.Define("send", func(ctx context.Context, to string) (hopper.None, error) {
		return hopper.None{}, nil
	}, nil)
	clk := hoppertest.NewClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	// A client that enqueues and works nothing (it is not started).
	c, err := hopper.New(hopper.Config{Driver: memdriver.New(), Clock: clk})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	_, _ = send.EnqueueMany(ctx, c, []string{"ann", "bob"}, nil)
	_, _ = send.Enqueue(ctx, c, "cat", &hopper.InsertOpts{Delay: time.Hour})
	clk.AdvanceTo(time.Date(2030, 1, 1, 9, 5, 0, 0, time.UTC))

	depths, err := c.QueueDepths(ctx)
	if err != nil {
		panic(err)
	}
	for _, d := range depths {
		fmt.Printf("%s: %d due, the oldest for %v; %d delayed; %d running\n", d.Queue, d.Due, d.OldestDueAge, d.Delayed, d.Running)
	}
	// Output: default: 2 due, the oldest for 5m0s; 1 delayed; 0 running
}
