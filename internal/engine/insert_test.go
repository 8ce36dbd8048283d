package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

func insertRow(id, typ, input, queue string, runAt time.Time) *hoppertype.JobRow {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	state := hoppertype.JobStatePending
	if runAt.After(now) {
		state = hoppertype.JobStateScheduled
	}
	return &hoppertype.JobRow{ID: id, Type: typ, Queue: queue, State: state, GroupID: id, Input: []byte(input),
		Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: runAt}
}

// TestInsertDuplicates: an insert whose one job has an explicit id stored
// already with the same type and input is an idempotent repeat (the stored
// job, Existing, no second queued event); another type, another input or
// an id the caller did not choose is ErrDuplicateID, and nothing is stored.
func TestInsertDuplicates(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	cfg := testConfig(d)
	var mu sync.Mutex
	queued := map[string]int{}
	cfg.Hooks.OnEvent = func(ev hoppertype.Event) {
		if ev.Kind == hoppertype.EventQueued {
			mu.Lock()
			queued[ev.JobID]++
			mu.Unlock()
		}
	}
	e := New(cfg)
	t.Cleanup(e.Close)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(explicit bool, rows ...*hoppertype.JobRow) ([]driver.JobInsertResult, error) {
		return e.Insert(ctx, &InsertParams{Rows: rows, ExplicitID: explicit})
	}

	res, err := insert(true, insertRow("a", "t", `1`, "q", now))
	require.NoError(t, err)
	require.False(t, res[0].Existing)
	res, err = insert(true, insertRow("a", "t", `1`, "q", now))
	require.NoError(t, err)
	require.True(t, res[0].Existing, "the same job again is a repeat")
	require.Equal(t, "a", res[0].Job.ID)

	for name, tc := range map[string]struct {
		explicit bool
		row      *hoppertype.JobRow
	}{
		"another type":     {true, insertRow("a", "u", `1`, "q", now)},
		"another input":    {true, insertRow("a", "t", `2`, "q", now)},
		"an id not chosen": {false, insertRow("a", "t", `1`, "q", now)},
	} {
		_, err := insert(tc.explicit, tc.row)
		require.ErrorIs(t, err, hoppertype.ErrDuplicateID, name)
	}
	_, err = insert(false, insertRow("b", "t", `1`, "q", now), insertRow("a", "t", `1`, "q", now))
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID, "a batch holding a taken id")
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: "b"})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "stores none of the batch")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"a": 1}, queued, "one queued event, for the job stored")
}

// TestPendingQueues: the queues an insert announces are those that
// received due jobs it stored, sorted, once each.
func TestPendingQueues(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	res := []driver.JobInsertResult{
		{Job: insertRow("1", "t", "", "b", now)},
		{Job: insertRow("2", "t", "", "a", now)},
		{Job: insertRow("3", "t", "", "b", now)},
		{Job: insertRow("4", "t", "", "later", now.Add(time.Hour))},
		{Job: insertRow("5", "t", "", "stored", now), Existing: true},
	}
	require.Equal(t, []string{"a", "b"}, pendingQueues(res))
}
