package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// queueCases cover QueueSetPaused and QueueList; claiming from a paused
// queue is in the claim cases.
func queueCases() []testCase {
	return []testCase{
		{"SetPausedAndList", testQueueList},
	}
}

func testQueueList(t *testing.T, f *fixture) {
	list := func() []*driver.QueueRow {
		t.Helper()
		rows, err := f.x.QueueList(f.ctx, &driver.QueueListParams{})
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, list(), "a fresh store has no queue states")

	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "b", Paused: true, Now: nanos(base)}))
	rows := list()
	require.Len(t, rows, 1)
	require.Equal(t, "b", rows[0].Name)
	require.True(t, rows[0].Paused)
	requireTime(t, base, rows[0].UpdatedAt)

	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "a", Paused: false, Now: at(time.Second)}))
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "b", Paused: false, Now: at(time.Minute)}))
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "c", Paused: true, Now: at(time.Hour)}))
	rows = list()
	require.Len(t, rows, 3)
	want := []struct {
		name    string
		paused  bool
		updated time.Time
	}{{"a", false, at(time.Second)}, {"b", false, at(time.Minute)}, {"c", true, at(time.Hour)}}
	for i, w := range want {
		require.Equal(t, w.name, rows[i].Name, "queues are listed by name")
		require.Equal(t, w.paused, rows[i].Paused, "queue %s", w.name)
		requireTime(t, w.updated, rows[i].UpdatedAt, "queue %s", w.name)
	}
}
