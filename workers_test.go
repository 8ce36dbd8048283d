package hopper_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
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
