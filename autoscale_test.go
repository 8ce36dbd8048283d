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
)

// TestAutoscaleFollowsLoad: under a virtual clock, a step of load drives
// the slots from min to max and, once it is gone, back to min, with seed
// 004's counts at each 10 s evaluation; each change is an event.
func TestAutoscaleFollowsLoad(t *testing.T) { forEachDriver(t, testAutoscaleFollowsLoad) }

func testAutoscaleFollowsLoad(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	clk := hoppertest.NewClock(time.Time{})
	release := make(chan struct{})
	work := hopper.Define("work", func(ctx context.Context, _ int) (int, error) {
		select {
		case <-release:
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, nil)
	started := make(chan struct{}, 100)
	succeeded := make(chan struct{}, 100)
	scaled := make(chan hopper.ScalingInfo, 100)
	// No poll timer fires as the clock moves: a claim that polls while
	// the clock jumps would hold its reserved slots for the whole jump, in
	// virtual time, and read as load. Inserts and finishes wake the queue.
	d := newDriver(t)
	spy := &reportSpy{Driver: d, baseExec: d.Executor(), reported: make(chan struct{}, 1)}
	c, err := hopper.New(hopper.Config{Driver: spy, Clock: clk, PollInterval: time.Hour,
		Autoscale: &hopper.Autoscale{Min: 2, Max: 10},
		OnEvent: func(ev hopper.Event) {
			switch ev.Kind {
			case hopper.EventStarted:
				started <- struct{}{}
			case hopper.EventSucceeded:
				succeeded <- struct{}{}
			case hopper.EventScaled:
				scaled <- *ev.Scaling
			}
		}})
	require.NoError(t, err)
	require.NoError(t, c.Register(work))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	for i := range 20 {
		_, err := work.Enqueue(ctx, c, i, nil)
		require.NoError(t, err)
	}
	running := 0
	waitRunning := func(n int) {
		t.Helper()
		for running < n {
			select {
			case <-started:
				running++
			case <-ctx.Done():
				t.Fatalf("%d jobs running, want %d", running, n)
			}
		}
	}
	evaluate := func(before, after int) {
		t.Helper()
		// The running jobs' leases are held across the jump, as their
		// heartbeats would hold them: on a loaded machine the heartbeat
		// timers the jump fires may run after the rescuer's.
		require.NoError(t, c.HoldLeases(ctx, clk.Now().Add(10*time.Second)))
		clk.Advance(10 * time.Second)
		select {
		case s := <-scaled:
			require.Equal(t, before, s.Before, "slots before")
			require.Equal(t, after, s.After, "slots after (workload %.2f, busy %d)", s.Workload, s.Busy)
		case <-ctx.Done():
			t.Fatalf("no scaling from %d to %d", before, after)
		}
	}

	waitRunning(2) // the slots start at min
	for _, step := range [][2]int{{2, 6}, {6, 8}, {8, 9}, {9, 10}} {
		evaluate(step[0], step[1])
		waitRunning(step[1]) // busy: every slot takes a job
	}
	close(release)
	for range 20 {
		select {
		case <-succeeded:
		case <-ctx.Done():
			t.Fatal("the jobs did not all finish")
		}
	}
	st, err := c.Settle(ctx, 20*time.Millisecond)
	require.NoError(t, err)
	require.True(t, st.Idle)
	for _, step := range [][2]int{{10, 6}, {6, 4}, {4, 3}, {3, 2}} {
		// The last jump's timers (the worker row's refresh, maintenance)
		// may have woken a producer: its claim, in flight while the clock
		// jumps, would hold its slots for the whole 10 s and read as load.
		st, err := c.Settle(ctx, 20*time.Millisecond)
		require.NoError(t, err)
		require.True(t, st.Idle)
		evaluate(step[0], step[1])
	}

	// The worker's row reports the decisions, for the dashboard.
	want := [][2]int{{2, 6}, {6, 8}, {8, 9}, {9, 10}, {10, 6}, {6, 4}, {4, 3}, {3, 2}}
	for {
		ws, err := c.WorkerList(ctx)
		require.NoError(t, err)
		if len(ws) == 1 && len(ws[0].Scalings) == len(want) {
			for i, s := range ws[0].Scalings {
				require.Equal(t, want[i], [2]int{s.Before, s.After})
				require.False(t, s.At.IsZero())
			}
			break
		}
		select {
		case <-spy.reported:
		case <-ctx.Done():
			t.Fatalf("the worker row does not report its scalings: %+v", ws)
		}
	}
}

// TestAutoscaleBadConfig: bounds and thresholds that cannot work are
// refused when the client is made, naming the fields.
func TestAutoscaleBadConfig(t *testing.T) {
	for name, a := range map[string]hopper.Autoscale{
		"min above max":     {Min: 5, Max: 3},
		"negative min":      {Min: -1, Max: 3},
		"down above up":     {ScaleUp: 0.4, ScaleDown: 0.6},
		"up above one":      {ScaleUp: 1.5},
		"negative interval": {Interval: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			d := memdriver.New()
			t.Cleanup(func() { _ = d.Close() })
			_, err := hopper.New(hopper.Config{Driver: d, Autoscale: &a})
			require.ErrorIs(t, err, hopper.ErrInvalidInput)
			require.Contains(t, err.Error(), "Autoscale")
		})
	}
}
