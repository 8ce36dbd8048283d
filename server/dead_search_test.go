package server_test

import (
	"context"
	"errors"
	"net/url"
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
