package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// workerCases cover WorkerUpsert, WorkerList and WorkerDelete.
func workerCases() []testCase {
	return []testCase{
		{"UpsertListDelete", testWorkers},
	}
}

func testWorkers(t *testing.T, f *fixture) {
	a, b := "w-a-"+f.id(), "w-b-"+f.id()
	require.NoError(t, f.x.WorkerUpsert(f.ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: a, StartedAt: nanos(base), SeenAt: nanos(base), Info: []byte(`{"active":1}`)}}))
	require.NoError(t, f.x.WorkerUpsert(f.ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: b, StartedAt: base, SeenAt: at(time.Minute)}}))
	// A refresh replaces what the worker reported and when it was seen.
	require.NoError(t, f.x.WorkerUpsert(f.ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: a, StartedAt: base, SeenAt: at(2 * time.Minute), Info: []byte(`{"active":2}`)}}))

	got, err := f.x.WorkerList(f.ctx, &driver.WorkerListParams{SeenAfter: base})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, a, got[0].ID, "by id")
	requireTime(t, base, got[0].StartedAt)
	requireTime(t, at(2*time.Minute), got[0].SeenAt)
	require.JSONEq(t, `{"active":2}`, string(got[0].Info))
	require.Empty(t, got[1].Info)

	got, err = f.x.WorkerList(f.ctx, &driver.WorkerListParams{SeenAfter: at(90 * time.Second)})
	require.NoError(t, err)
	require.Len(t, got, 1, "only the workers seen since")
	require.Equal(t, a, got[0].ID)

	n, err := f.x.WorkerDelete(f.ctx, &driver.WorkerDeleteParams{Before: at(90 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the worker not seen for long")
	n, err = f.x.WorkerDelete(f.ctx, &driver.WorkerDeleteParams{ID: a})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err = f.x.WorkerList(f.ctx, &driver.WorkerListParams{SeenAfter: time.Time{}})
	require.NoError(t, err)
	require.Empty(t, got)
}
