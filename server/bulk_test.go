package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

func TestAPIBulkAndSearch(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	for _, tenant := range []string{"acme", "acme", "acme", "globex"} {
		var out server.EnqueueResponse
		require.Equal(t, http.StatusCreated, e.do("POST", "/v1/jobs", `{"type":"fail","input":null,"opts":{"metadata":{"tenant":"`+tenant+`"}}}`, &out))
	}
	dead := func(query string) []string {
		t.Helper()
		var page server.JobListJSON
		require.Equal(t, http.StatusOK, e.do("GET", "/v1/dead?"+query, "", &page))
		ids := []string{}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		return ids
	}
	e.await(t, "four dead jobs", func() bool { return len(dead("type=fail")) == 4 })

	// Search: metadata, error text, both, and a time range.
	require.Len(t, dead("meta="+url.QueryEscape("tenant=acme")), 3)
	require.Len(t, dead("error=always+fails&meta="+url.QueryEscape("tenant=globex")), 1)
	require.Empty(t, dead("error=Always"), "error text is case-sensitive")
	require.Empty(t, dead("queued_before=2001-01-01T00:00"), "a browser's datetime-local, read as UTC")
	require.Len(t, dead("queued_after=2001-01-01T00:00:00Z"), 4)
	var apiErr struct {
		Error struct{ Code, Message string }
	}
	require.Equal(t, http.StatusBadRequest, e.do("GET", "/v1/jobs?meta=tenant", "", &apiErr))
	require.Contains(t, apiErr.Error.Message, "key=value")

	// The Dead letters page: the search in its fields, the error column,
	// and the action bar's filter (dead jobs, as searched).
	_, page := e.page("/dead?error=always&meta=" + url.QueryEscape("tenant=<acme>"))
	require.Contains(t, page, `<input name="error" value="always"`)
	require.Contains(t, page, `data-query="error=always&amp;hide_compensated=true&amp;meta=tenant%3D%3Cacme%3E&amp;state=dead"`)
	require.Contains(t, page, `No jobs.`, "no tenant is <acme>")
	_, page = e.page("/dead?error=always")
	require.Contains(t, page, `<td class="err"><span title="always fails">always fails</span></td>`)
	require.Contains(t, page, `<button type="button" class="bulk-act" data-action="redrive" disabled>Redrive</button>`)
	code, page := e.page("/dead?queued_after=soon")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, page, "queued_after must be")

	// Bulk: a dry run counts, an action by filter needs its max.
	filter := `"filter":{"type":["fail"],"meta":{"tenant":"acme"},"error":"always"}`
	var res server.BulkResultJSON
	require.Equal(t, http.StatusOK, e.do("POST", "/v1/jobs/bulk", `{"action":"redrive",`+filter+`,"dry_run":true}`, &res))
	require.Equal(t, server.BulkResultJSON{Action: "redrive", DryRun: true, Matched: 3}, res)
	for body, want := range map[string]string{
		`{"action":"redrive",` + filter + `}`:                           "needs max",
		`{"action":"redrive",` + filter + `,"ids":["x"],"max":1}`:       "not both",
		`{"action":"archive","ids":["x"]}`:                              "unknown bulk action",
		`{"action":"redrive","filter":{"state":["asleep"]},"max":1}`:    "unknown state",
		`{"action":"redrive","filter":{"queued_after":"soon"},"max":1}`: "queued_after",
	} {
		require.Equal(t, http.StatusBadRequest, e.do("POST", "/v1/jobs/bulk", body, &apiErr), body)
		require.Contains(t, apiErr.Error.Message, want, body)
	}
	require.Equal(t, http.StatusOK, e.do("POST", "/v1/jobs/bulk", `{"action":"delete",`+filter+`,"max":2}`, &res))
	require.Equal(t, server.BulkResultJSON{Action: "delete", Matched: 2, Changed: 2, More: true}, res)
	require.Len(t, dead("type=fail"), 2)
	ids := dead("type=fail")
	require.Equal(t, http.StatusOK, e.do("POST", "/v1/jobs/bulk", `{"action":"delete","ids":["`+ids[0]+`","`+ids[1]+`"]}`, &res))
	require.Equal(t, server.BulkResultJSON{Action: "delete", Matched: 2, Changed: 2}, res)
	require.Empty(t, dead(""))

	// Runs: a dry run, and a refused action.
	require.Equal(t, http.StatusOK, e.do("POST", "/v1/runs/bulk", `{"action":"retry","filter":{"workflow":"saga"},"dry_run":true}`, &res))
	require.Equal(t, server.BulkResultJSON{Action: "retry", DryRun: true}, res)
	require.Equal(t, http.StatusBadRequest, e.do("POST", "/v1/runs/bulk", `{"action":"redrive","ids":["r"]}`, &apiErr))
	require.Equal(t, http.StatusBadRequest, e.do("POST", "/v1/runs/bulk", `{"action":"cancel","filter":{"status":["asleep"]},"max":1}`, &apiErr))
}

// gatedDriver holds the first job listing of a bulk action (of type add)
// until the test lets it go.
type gatedDriver struct {
	driver.Driver
	baseExec
	entered, release chan struct{}
	once             sync.Once
}

func (d *gatedDriver) Executor() driver.Executor { return d }

func (d *gatedDriver) JobList(ctx context.Context, p *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	if slices.Contains(p.Types, "add") && slices.Contains(p.States, hoppertype.JobStateScheduled) {
		d.once.Do(func() {
			close(d.entered)
			<-d.release
		})
	}
	return d.baseExec.JobList(ctx, p)
}

// TestBulkOutlivesItsRequest: a bulk action goes on when its client goes
// away (a proxy's timeout on a long action): every job it confirmed is
// acted on.
func TestBulkOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	base := newDriver(t)
	d := &gatedDriver{Driver: base, baseExec: base.Executor(), entered: make(chan struct{}), release: make(chan struct{})}
	e := setupOn(t, d, &server.Options{Tokens: []string{token}})
	var ids []string
	for range 3 {
		var out server.EnqueueResponse
		require.Equal(t, http.StatusCreated, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"delay":"1h"}}`, &out))
		ids = append(ids, out.ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/jobs/bulk",
		strings.NewReader(`{"action":"cancel","filter":{"type":["add"],"state":["scheduled"]},"max":3}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-d.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the bulk action did not list the jobs")
	}
	cancel() // the client gives up
	require.Error(t, <-done)
	close(d.release)
	e.await(t, "every confirmed job cancelled", func() bool {
		for _, id := range ids {
			j, err := e.c.JobGet(context.Background(), id)
			if err != nil || j.State != hopper.StateCancelled {
				return false
			}
		}
		return true
	})
}
