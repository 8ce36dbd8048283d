package server_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
	"github.com/stretchr/testify/require"
)

// TestAPIDeadByDeathTime: dead letters searched by when they died, in the
// API, a bulk filter and the Dead letters page's form.
func TestAPIDeadByDeathTime(t *testing.T) {
	t.Parallel()
	broken := hopper.Define("doomed", func(context.Context, int) (int, error) {
		return 0, hopper.Abort(errors.New("no"))
	}, nil)
	e := setupTypes(t, broken)
	ctx := context.Background()
	before := time.Now().Add(-time.Second).UTC()
	h, err := broken.Enqueue(ctx, e.c, 1, &hopper.InsertOpts{ID: "doomed-1"})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)
	after := time.Now().Add(time.Second).UTC()

	count := func(q url.Values) int {
		var page server.JobListJSON
		require.Equal(t, 200, e.do("GET", "/v1/dead?"+q.Encode(), "", &page), q.Encode())
		return len(page.Jobs)
	}
	f := func(k string, at time.Time) url.Values { return url.Values{k: {at.Format(time.RFC3339Nano)}} }
	require.Equal(t, 1, count(f("ended_after", before)))
	require.Zero(t, count(f("ended_after", after)), "it died before then")
	require.Equal(t, 1, count(f("ended_before", after)))
	require.Zero(t, count(f("ended_before", before)), "it died after then")
	require.Equal(t, 400, e.do("GET", "/v1/dead?ended_after=yesterday", "", nil))

	var res struct {
		Matched int `json:"matched"`
	}
	require.Equal(t, 200, e.do("POST", "/v1/jobs/bulk", `{"action":"redrive","dry_run":true,"filter":{"state":["dead"],"ended_after":"`+
		after.Format(time.RFC3339Nano)+`"}}`, &res))
	require.Zero(t, res.Matched, "a bulk filter reads ended_after too")

	code, body := e.page("/dead?ended_after=" + url.QueryEscape(before.Format("2006-01-02T15:04")))
	require.Equal(t, 200, code)
	require.Contains(t, body, `died from <input type="datetime-local" name="ended_after" value="`+before.Format("2006-01-02T15:04")+`"`)
	require.Contains(t, body, `href="/jobs/doomed-1"`)
	require.Contains(t, body, `id="dead-clear"`)
}

// TestSearchWindow: a search by what no index serves reads a window of
// `scan` jobs a page (100,000 by default); a page whose window ends first
// is short, its next_cursor searches on, and the dashboard says so.
func TestSearchWindow(t *testing.T) {
	t.Parallel()
	idle := hopper.Define("idle", func(context.Context, int) (int, error) { return 0, nil }, nil)
	e := setupTypes(t)
	ctx := context.Background()
	for i := range 6 {
		opts := &hopper.InsertOpts{ID: "w-" + strconv.Itoa(i)}
		if i == 1 || i == 4 {
			opts.Metadata = map[string]string{"tenant": "acme"}
		}
		_, err := idle.Enqueue(ctx, e.c, i, opts)
		require.NoError(t, err)
	}
	list := func(q string) ([]string, string) {
		t.Helper()
		var page server.JobListJSON
		require.Equal(t, 200, e.do("GET", "/v1/jobs?"+q, "", &page), q)
		ids := []string{}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		return ids, page.NextCursor
	}
	got, next := list("meta=tenant=acme&scan=2")
	require.Equal(t, []string{"w-4"}, got)
	require.Equal(t, "w-4", next, "the window ended at w-4")
	got, next = list("meta=tenant=acme&scan=2&cursor=w-4")
	require.Empty(t, got, "no match in w-3, w-2")
	require.Equal(t, "w-2", next)
	got, next = list("meta=tenant=acme&scan=2&cursor=w-2")
	require.Equal(t, []string{"w-1"}, got)
	require.Equal(t, "w-0", next)
	got, next = list("meta=tenant=acme")
	require.Equal(t, []string{"w-4", "w-1"}, got, "the default window holds them all")
	require.Empty(t, next)
	require.Equal(t, 400, e.do("GET", "/v1/jobs?meta=tenant=acme&scan=0", "", nil))
	p, err := server.ParseJobFilter(url.Values{"meta": {"tenant=acme"}})
	require.NoError(t, err)
	require.Equal(t, hopper.DefaultScanLimit, p.ScanLimit, "the default window")

	code, body := e.page("/jobs?meta=tenant%3Dacme&scan=2")
	require.Equal(t, 200, code)
	require.Contains(t, body, "Searched the newest 2 jobs;")
	require.Contains(t, body, "cursor=w-4")
	require.Contains(t, body, "search on →")
	_, body = e.page("/jobs?meta=tenant%3Dacme&scan=2&cursor=w-4")
	require.Contains(t, body, "Searched the next 2 jobs;")
	_, body = e.page("/jobs?meta=tenant%3Dacme")
	require.NotContains(t, body, "Searched")
	_, body = e.page("/dead?meta=tenant%3Dacme&scan=2")
	require.NotContains(t, body, "Searched", "no dead job: the window held none")
}
