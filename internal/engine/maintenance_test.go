package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// maintenanceFixture is an engine over a fresh memory store on a virtual
// clock at start.
func maintenanceFixture(t *testing.T, start time.Time, tune func(*Config)) (*Engine, driver.Executor, *hclock.Virtual) {
	t.Helper()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	clk := hclock.NewVirtual(start)
	cfg := testConfig(d)
	cfg.Clock = clk
	if tune != nil {
		tune(&cfg)
	}
	e := New(cfg)
	t.Cleanup(e.Close)
	return e, d.Executor(), clk
}

// claimOne inserts a job of its own queue and claims it for worker, leased
// until lease.
func claimOne(t *testing.T, ex driver.Executor, id string, attempts int, now, lease time.Time, worker string) {
	t.Helper()
	ctx := context.Background()
	row := &hoppertype.JobRow{ID: id, Type: "t", Queue: "q-" + id, State: hoppertype.JobStatePending, GroupID: id,
		Retry: hoppertype.RetryPolicy{Attempts: attempts, Backoff: "exponential", Base: time.Second, Factor: 2, Max: time.Minute}, QueuedAt: now, RunAt: now}
	_, err := ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}})
	require.NoError(t, err)
	claimed, err := ex.JobClaim(ctx, &driver.JobClaimParams{Queue: row.Queue, Limit: 1, Now: now, LeaseExpiresAt: lease, Worker: worker})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
}

// TestRescue: the rescuer moves on the running jobs whose lease lapsed and
// those of a dead worker (silent for DeadAfter heartbeat intervals), even
// with their lease still running: retried with backoff while attempts
// remain, stuck when they are used up. A live worker's leased job is left
// alone.
func TestRescue(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e, ex, clk := maintenanceFixture(t, start, nil)
	ctx := context.Background()
	claimOne(t, ex, "lapsed", 3, start, start.Add(time.Minute), "alive")
	claimOne(t, ex, "last", 1, start, start.Add(time.Minute), "alive")
	claimOne(t, ex, "orphaned", 3, start, start.Add(time.Hour), "gone")
	claimOne(t, ex, "leased", 3, start, start.Add(time.Hour), "alive")
	clk.Set(start.Add(2 * time.Minute))
	now := e.now()
	require.NoError(t, ex.WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: "gone", StartedAt: start, SeenAt: start}}))
	require.NoError(t, ex.WorkerUpsert(ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: "alive", StartedAt: start, SeenAt: now}}))

	require.NoError(t, e.rescue(ctx))
	get := func(id string) *hoppertype.JobRow {
		row, err := ex.JobGet(ctx, &driver.JobGetParams{ID: id})
		require.NoError(t, err)
		return row
	}
	for _, id := range []string{"lapsed", "orphaned"} {
		row := get(id)
		require.Equal(t, hoppertype.JobStateRetrying, row.State, id)
		require.Equal(t, now.Add(time.Second), row.RunAt, "%s: after the policy's backoff", id)
		require.NotNil(t, row.Error, id)
		require.Equal(t, hoppertype.ErrorKindLeaseLost, row.Error.Kind, id)
	}
	last := get("last")
	require.Equal(t, hoppertype.JobStateStuck, last.State)
	require.NotNil(t, last.Stuck)
	require.Equal(t, hoppertype.StuckEngineFailure, last.Stuck.Cause)
	require.Equal(t, hoppertype.JobStateRunning, get("leased").State, "a live worker's lease is its own")
}

// TestRetention deletes the terminal jobs that ended longer ago than their
// state's retention, and keeps the newer ones and the states kept forever
// (a negative retention).
func TestRetention(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e, ex, clk := maintenanceFixture(t, start, func(c *Config) {
		c.Retention = Retention{Succeeded: time.Hour, Dead: -1, Expired: time.Hour, Cancelled: time.Hour}
	})
	ctx := context.Background()
	end := func(id string, state hoppertype.JobState, at time.Time) {
		claimOne(t, ex, id, 1, at, at.Add(time.Minute), "w")
		row, err := ex.JobGet(ctx, &driver.JobGetParams{ID: id})
		require.NoError(t, err)
		res, err := ex.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: id, LeaseToken: row.LeaseToken,
			State: state, Attempt: 1, RunAt: row.RunAt, EndedAt: at,
			Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "x", Attempt: 1, At: at}}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	end("old-ok", hoppertype.JobStateSucceeded, start)
	end("old-dead", hoppertype.JobStateDead, start)
	end("new-ok", hoppertype.JobStateSucceeded, start.Add(90*time.Minute))
	clk.Set(start.Add(2 * time.Hour))

	require.NoError(t, e.retain(ctx))
	for id, kept := range map[string]bool{"old-ok": false, "old-dead": true, "new-ok": true} {
		_, err := ex.JobGet(ctx, &driver.JobGetParams{ID: id})
		if kept {
			require.NoError(t, err, "%s is kept", id)
		} else {
			require.ErrorIs(t, err, hoppertype.ErrNotFound, "%s is deleted", id)
		}
	}
}

// TestLeadershipChanged: the engine announces when it begins to lead and
// when it stops, and IsLeader says so by then.
func TestLeadershipChanged(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	e := newTestEngine(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	changed := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no announcement that the engine %s", what)
		}
	}
	began := e.LeadershipChanged()
	require.False(t, e.IsLeader())
	require.NoError(t, e.Start(ctx))
	changed("leads", began)
	require.True(t, e.IsLeader())
	ended := e.LeadershipChanged()
	require.NoError(t, e.Stop(ctx))
	changed("stopped leading", ended)
	require.False(t, e.IsLeader())
}

// TestTransitionsAge: the store's change sets go once older than the
// longest retention of a terminal state, and never while one is kept
// forever.
func TestTransitionsAge(t *testing.T) {
	r := Retention{Succeeded: time.Hour, Dead: 7 * 24 * time.Hour, Expired: 24 * time.Hour, Cancelled: 0}
	require.Equal(t, 7*24*time.Hour, *transitionsAge(r), "the longest retention")
	r.Cancelled = -1
	require.Nil(t, transitionsAge(r), "a state kept forever keeps every set")
	require.Equal(t, time.Duration(0), *transitionsAge(Retention{}), "no retention at all: every set is old enough")
}
