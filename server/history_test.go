package server_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/server"
)

// eachFleetStore runs fn on a fresh SQLite file and a fresh PostgreSQL
// schema of the test database (named prefix and random hex).
func eachFleetStore(t *testing.T, prefix string, fn func(t *testing.T, kind, where string)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, "sqlite", filepath.Join(t.TempDir(), "hopper.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
		if url == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
			}
			t.Skip("set HOPPER_TEST_POSTGRES_URL")
		}
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		schema := prefix + hex.EncodeToString(b)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if conn, err := pgx.Connect(ctx, url); err == nil {
				_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
				_ = conn.Close(ctx)
			}
		})
		fn(t, "postgres", schema)
	})
}

// historyServer serves c with opts and returns the server once it has
// read the store's history back.
func historyServer(t *testing.T, ctx context.Context, c *hopper.Client, opts *server.Options) *httptest.Server {
	t.Helper()
	srv := server.New(c, opts)
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	select {
	case <-server.FleetHistoryRead(srv):
	case <-ctx.Done():
		t.Fatal("the server did not read the store's history")
	}
	return hs
}

// historyAgo is how long ago the recorded history happened.
const historyAgo = 90 * time.Minute

// recordHistory runs jobs and a workflow run on the store, then moves
// every change the store recorded historyAgo into the past, as if they had
// happened then.
func recordHistory(t *testing.T, ctx context.Context, kind, where string, jobs int) (driver.Driver, *hopper.Client) {
	t.Helper()
	d, err := openFleetStore(ctx, kind, where)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.Register(fleetAdd, fleetWF))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	})
	for i := range jobs {
		h, err := fleetAdd.Enqueue(ctx, c, i, nil)
		require.NoError(t, err)
		_, err = h.Result(ctx)
		require.NoError(t, err)
	}
	run, err := fleetWF.Start(ctx, c, 1, nil)
	require.NoError(t, err)
	_, err = run.Result(ctx)
	require.NoError(t, err)
	// The run's own job ends after the run: wait for it too.
	_, err = c.JobWait(ctx, run.ID())
	require.NoError(t, err)
	// And until the feed delivers that end: a change is final only once no
	// transaction that could commit one before it runs (on PostgreSQL, in
	// the whole database), and the server's read of the history starts at
	// the last final change.
	errSeen := errors.New("seen")
	err = c.TailEvents(ctx, hopper.ChangeCursor{}, nil, func(e hopper.Event) error {
		if e.JobID == run.ID() && e.Kind == hopper.EventSucceeded {
			return errSeen
		}
		return nil
	})
	require.ErrorIs(t, err, errSeen)

	if kind == "sqlite" {
		db, err := sql.Open("sqlite", where+"?_pragma=busy_timeout(5000)")
		require.NoError(t, err)
		defer db.Close()
		_, err = db.ExecContext(ctx, `UPDATE changes SET at = at - ?`, historyAgo.Microseconds())
		require.NoError(t, err)
	} else {
		conn, err := pgx.Connect(ctx, os.Getenv("HOPPER_TEST_POSTGRES_URL"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `UPDATE "`+where+`".changes SET at = at - make_interval(secs => $1)`, historyAgo.Seconds())
		require.NoError(t, err)
		// A statement's job transitions are a change set (schema 23).
		_, err = conn.Exec(ctx, `UPDATE "`+where+`".change_sets SET at = at - make_interval(secs => $1)`, historyAgo.Seconds())
		require.NoError(t, err)
	}
	return d, c
}

// statsOf reads GET /v1/stats?window=.
func statsOf(t *testing.T, ctx context.Context, url, window string) server.StatsJSON {
	t.Helper()
	var st server.StatsJSON
	require.NoError(t, json.Unmarshal([]byte(getText(t, ctx, url+"/v1/stats?window="+window)), &st))
	return st
}

func sum(ns []int) int {
	total := 0
	for _, n := range ns {
		total += n
	}
	return total
}

// TestChartsShowStoredHistory: a server started on a store that recorded
// jobs and a run an hour and a half ago shows them in its 24 h charts, in
// the minutes they happened, read from the store's feed — not in its
// counters, which count from its start — on SQLite and PostgreSQL.
func TestChartsShowStoredHistory(t *testing.T) {
	eachFleetStore(t, "hopper_history_", func(t *testing.T, kind, where string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const jobs = 5
		_, c := recordHistory(t, ctx, kind, where, jobs)

		hs := historyServer(t, ctx, c, nil)

		day := statsOf(t, ctx, hs.URL, "24h")
		require.True(t, day.History.Done)
		require.False(t, day.History.Capped)
		require.Positive(t, day.History.Changes)
		require.WithinDuration(t, time.Now().Add(-24*time.Hour), day.History.From, time.Minute)
		require.Equal(t, jobs+1, sum(day.Succeeded), "every job and the run's own job")
		require.Equal(t, jobs+1, sum(day.Started))
		require.Equal(t, 1, sum(day.RunsCompleted))
		ago := day.Buckets - 1 - int(historyAgo/time.Minute)
		near := 0
		for i := ago - 2; i <= ago+2; i++ {
			near += day.Succeeded[i]
		}
		require.Equal(t, jobs+1, near, "in the minutes they ended")
		require.Contains(t, day.Types, "fleet-add")

		hour := statsOf(t, ctx, hs.URL, "1h")
		require.Zero(t, sum(hour.Succeeded), "an hour and a half ago is not in the last hour")

		ts, _ := day.Fleet.Type("default", "fleet-add")
		require.Zero(t, ts.Succeeded, "the fleet's counters count from the server's start")
	})
}

// TestChartsHistoryCapped: a read of the history stops at
// Options.HistoryLimit changes, newest first, and says so.
func TestChartsHistoryCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, c := recordHistory(t, ctx, "sqlite", filepath.Join(t.TempDir(), "hopper.db"), 5)

	hs := historyServer(t, ctx, c, &server.Options{HistoryLimit: 4})
	day := statsOf(t, ctx, hs.URL, "24h")
	require.True(t, day.History.Done)
	require.True(t, day.History.Capped)
	require.Equal(t, 4, day.History.Changes)
	require.True(t, day.History.From.Before(time.Now().Add(-time.Hour)), "the read reached the recorded history: %v", day.History.From)
	require.LessOrEqual(t, sum(day.Succeeded)+sum(day.Started)+sum(day.Failed)+sum(day.RunsCompleted), 4, "no more than the changes read")
	require.Positive(t, sum(day.Succeeded), "the newest first: the run's own job's end")
}
