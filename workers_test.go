package hopper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

func TestWorkers(t *testing.T) { forEachDriver(t, testWorkers) }

func testWorkers(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	a := newClient(t, hopper.Config{Driver: d, WorkerID: "worker-a", MaxWorkers: 7})
	require.NoError(t, a.Register(hopper.Define("wk-add", addHandler, nil)))
	b, err := hopper.New(hopper.Config{Driver: d, WorkerID: "worker-b", Queues: []string{"bulk"}})
	require.NoError(t, err)
	ctx := testCtx(t)
	require.NoError(t, b.Start(ctx))

	ws, err := a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.Equal(t, "worker-a", ws[0].ID)
	require.Equal(t, 7, ws[0].MaxWorkers)
	require.Equal(t, "worker-b", ws[1].ID)
	require.Contains(t, ws[1].Queues, "bulk")
	require.False(t, ws[1].StartedAt.IsZero())
	require.Positive(t, ws[0].PID)

	require.NoError(t, b.Stop(context.Background()))
	ws, err = a.WorkerList(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1, "a stopped client removes itself")
	require.Equal(t, "worker-a", ws[0].ID)
}

// TestWorkerReport: a worker reports its status (idle, busy with the jobs
// it runs), its slots, and the attempts it completed and failed, at each
// heartbeat; one that stopped reporting without stopping is listed as
// dead.
func TestWorkerReport(t *testing.T) { forEachDriver(t, testWorkerReport) }

func testWorkerReport(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	spy := spyOn(newDriver(t))
	ctx := testCtx(t)
	clk := hoppertest.NewClock(time.Time{})
	release := make(chan struct{})
	running := make(chan string, 1)
	hold := hopper.Define("wr-hold", func(ctx context.Context, n int) (int, error) {
		if n < 0 {
			return 0, hopper.Abort(errors.New("negative"))
		}
		running <- hopper.JobFromContext(ctx).ID()
		<-release
		return n, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: spy, Clock: clk, WorkerID: "wr-a", MaxWorkers: 5})
	require.NoError(t, c.Register(hold))

	// report moves the clock a heartbeat on and returns the client's row
	// once it shows want.
	report := func(want string) *hopper.WorkerInfo {
		t.Helper()
		var w *hopper.WorkerInfo
		clk.Advance(10 * time.Second)
		await(t, "a worker report "+want, func() bool {
			ws, err := c.WorkerList(ctx)
			require.NoError(t, err)
			for _, x := range ws {
				if x.ID == "wr-a" && x.Status == want {
					w = x
					return true
				}
			}
			return false
		}, spy.answered.next)
		return w
	}
	w := report(hopper.WorkerIdle)
	require.Equal(t, 5, w.Slots)

	h, err := hold.Enqueue(ctx, c, 1, nil)
	require.NoError(t, err)
	require.Equal(t, h.ID(), <-running)
	w = report(hopper.WorkerBusy)
	require.Equal(t, []string{h.ID()}, w.Jobs)
	require.Equal(t, 1, w.Active)

	close(release)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	bad, err := hold.Enqueue(ctx, c, -1, nil)
	require.NoError(t, err)
	_, err = bad.Wait(ctx)
	require.NoError(t, err)
	w = report(hopper.WorkerIdle)
	require.Equal(t, int64(1), w.Completed)
	require.Equal(t, int64(1), w.Failed)
	require.Empty(t, w.Jobs)

	// A process that stopped reporting a minute ago, its row left behind.
	gone := clk.Now().Add(-time.Minute)
	require.NoError(t, spy.WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{
		ID: "wr-killed", StartedAt: gone.Add(-time.Hour), SeenAt: gone, Info: []byte(`{"status":"busy","active":3}`)}}))
	ws, err := c.WorkerList(ctx)
	require.NoError(t, err)
	var killed *hopper.WorkerInfo
	for _, x := range ws {
		if x.ID == "wr-killed" {
			killed = x
		}
	}
	require.NotNil(t, killed, "a dead worker is listed")
	require.Equal(t, hopper.WorkerDead, killed.Status)
}
