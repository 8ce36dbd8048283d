package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

// TestMetricsDemandFollowsBacklog: /metrics' recommendation follows a
// synthetic backlog under a virtual clock, 5 → 2 → 0 worker processes as
// the due jobs go 600 → 240 → 0, with the run time read on the client's
// clock: jobs that ran five seconds twenty minutes ago are out of its
// ten-minute window, those that ran one second five minutes ago in it.
func TestMetricsDemandFollowsBacklog(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := hoppertest.NewClock(t0)
	d := memdriver.New(memdriver.WithClock(clk.Now))
	t.Cleanup(func() { _ = d.Close() })
	// The client works nothing (it is not started), but names the queue, so
	// the queue is listed when empty: two slots a process, as no live
	// worker says otherwise.
	c, err := hopper.New(hopper.Config{Driver: d, Clock: clk, MaxWorkers: 2, Queues: []string{"bulk"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := server.New(c, &server.Options{Tokens: []string{token}})
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	ctx := t.Context()

	row := func(state hoppertype.JobState, queued, runAt time.Time, ran time.Duration) *hoppertype.JobRow {
		r := &hoppertype.JobRow{ID: hopper.NewID(), Type: "import", Queue: "bulk", State: state,
			Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: queued, RunAt: runAt}
		if state == hoppertype.JobStateSucceeded {
			r.Attempt, r.StartedAt, r.EndedAt = 1, runAt, runAt.Add(ran)
		}
		return r
	}
	var rows []*hoppertype.JobRow
	for range 10 {
		old, recent := t0.Add(-20*time.Minute), t0.Add(-5*time.Minute)
		rows = append(rows, row(hoppertype.JobStateSucceeded, old, old, 5*time.Second),
			row(hoppertype.JobStateSucceeded, recent, recent, time.Second))
	}
	// The backlog: 600 jobs queued five minutes ago (no arrivals in the
	// last minute), due from now (none has waited yet).
	var backlog []string
	for range 600 {
		r := row(hoppertype.JobStatePending, t0.Add(-5*time.Minute), t0, 0)
		rows = append(rows, r)
		backlog = append(backlog, r.ID)
	}
	_, err = d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
	require.NoError(t, err)

	scrape := func(due, slots, workers int) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		for _, line := range []string{
			`hopper_queue_due_jobs{queue="bulk"} ` + strconv.Itoa(due),
			`hopper_queue_desired_slots{queue="bulk"} ` + strconv.Itoa(slots),
			`hopper_queue_desired_workers{queue="bulk"} ` + strconv.Itoa(workers),
		} {
			require.Contains(t, string(body), line+"\n")
		}
	}
	cancel := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			_, err := c.JobCancel(ctx, id)
			require.NoError(t, err)
		}
	}
	// W = 1 s: 600 × 1 s ÷ 60 s = 10 slots, 5 processes of 2.
	scrape(600, 10, 5)
	cancel(backlog[:360])
	scrape(240, 4, 2)
	cancel(backlog[360:])
	scrape(0, 0, 0)
}
