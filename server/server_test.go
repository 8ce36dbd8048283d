package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

const token = "s3cret-token-of-32-characters-ok"

type env struct {
	t   *testing.T
	c   *hopper.Client
	url string
	srv *server.Server
}

// newDriver is the store the API tests run on: a temporary SQLite file,
// as hopper dev uses.
var newDriver = func(t *testing.T) driver.Driver {
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "hopper.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func setup(t *testing.T, opts *server.Options) *env {
	t.Helper()
	return setupOn(t, newDriver(t), opts)
}

// setupOn is setup on the store d.
func setupOn(t *testing.T, d driver.Driver, opts *server.Options) *env {
	t.Helper()
	add := hopper.Define("add", func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil }, nil)
	fail := hopper.Define("fail", func(context.Context, hopper.None) (int, error) {
		return 0, hopper.Abort(errors.New("always fails"))
	}, nil)
	block := hopper.Define("block", func(ctx context.Context, _ hopper.None) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, nil)
	saga := hopper.Workflow("saga", func(wf hopper.WorkflowContext, in struct {
		FailAt string `json:"fail_at"`
	}) (string, error) {
		for _, step := range []string{"charge", "reserve", "ship"} {
			if _, err := hopper.Step(wf, step, func(context.Context) (string, error) {
				if in.FailAt == step {
					return "", hopper.Fatal(errors.New(step + " failed"))
				}
				return step, nil
			}, nil); err != nil {
				return "", err
			}
			wf.Compensate("undo-"+step, func(context.Context) error { return nil })
		}
		return "done", nil
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})
	approval := hopper.Workflow("approval", func(wf hopper.WorkflowContext, _ hopper.None) (json.RawMessage, error) {
		h, err := hopper.NewHook[json.RawMessage](wf, "approval")
		if err != nil {
			return nil, err
		}
		if err := wf.Stream().Write(map[string]string{"waiting": "approval"}); err != nil {
			return nil, err
		}
		return h.Wait(nil)
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(add, fail, block, saga, approval))
	require.NoError(t, c.Start(context.Background()))
	s := server.New(c, opts)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	select {
	case <-server.FleetReady(s): // what the test does next, the fleet's figures see
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not begin following the store")
	}
	return &env{t: t, c: c, url: ts.URL, srv: s}
}

// do sends a request with the token and decodes a JSON answer into out.
func (e *env) do(method, path, body string, out any) int {
	e.t.Helper()
	return e.doAuth(method, path, body, "Bearer "+token, out)
}

func (e *env) doAuth(method, path, body, authz string, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(data, out), "body: %s", data)
	}
	return resp.StatusCode
}

type errBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestAPIJobs(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}, MaxBodyBytes: 4096})

	var health map[string]any
	require.Equal(t, 200, e.doAuth("GET", "/healthz", "", "", &health), "healthz needs no auth")
	require.Equal(t, true, health["ok"])

	// Enqueue, then long-poll the result.
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"priority":5,"metadata":{"k":"v"}}}`, &created))
	require.NotEmpty(t, created.ID)
	require.Equal(t, created.ID, created.GroupID)
	var job server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID+"/result?wait=10s", "", &job))
	require.Equal(t, "succeeded", job.State)
	require.JSONEq(t, `3`, string(job.Result))
	require.JSONEq(t, `{"a":1,"b":2}`, string(job.Input))
	require.Equal(t, 5, job.Priority)
	require.Equal(t, map[string]string{"k": "v"}, job.Metadata)
	require.NotNil(t, job.EndedAt)

	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID, "", &job))
	require.Equal(t, created.ID, job.ID)

	var group server.GroupJSON
	require.Equal(t, 200, e.do("GET", "/v1/groups/"+created.ID+"?wait=5s", "", &group))
	require.Equal(t, "settled", group.State)
	require.JSONEq(t, `3`, string(group.Value))

	// A scheduled job: the long poll returns it as it stands when the wait elapses.
	var later server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1},"opts":{"delay":"1h","retry":{"attempts":5,"base":"2s","jitter":0}}}`, &later))
	require.Equal(t, "scheduled", later.State)
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+later.ID+"/result?wait=50ms", "", &job))
	require.Equal(t, "scheduled", job.State)
	require.Equal(t, 5, job.MaxAttempts)
	require.Equal(t, 200, e.do("GET", "/v1/groups/"+later.ID+"?wait=10ms", "", &group))
	require.Equal(t, "open", group.State)

	// Unique keys: the second enqueue returns the first job with 200.
	var u1, u2 server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"unique_key":"u","delay":60000}}`, &u1))
	require.Equal(t, 200, e.do("POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"unique_key":"u"}}`, &u2))
	require.Equal(t, u1.ID, u2.ID)
	require.True(t, u2.Deduplicated)

	// Cancel and retry.
	require.Equal(t, 200, e.do("POST", "/v1/jobs/"+later.ID+"/cancel", "", &job))
	require.Equal(t, "cancelled", job.State)
	var eb errBody
	require.Equal(t, 409, e.do("POST", "/v1/jobs/"+later.ID+"/cancel", "", &eb))
	require.Equal(t, "conflict", eb.Error.Code)
	require.Equal(t, 200, e.do("POST", "/v1/jobs/"+later.ID+"/retry", "", &job))
	require.Equal(t, "pending", job.State)
	require.Equal(t, 409, e.do("POST", "/v1/jobs/"+created.ID+"/retry", "", &eb), "a succeeded job cannot be retried")

	// Listing with filters and paging.
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs?type=add&limit=2", "", &page))
	require.Len(t, page.Jobs, 2)
	require.NotEmpty(t, page.NextCursor)
	var page2 server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs?type=add&limit=2&cursor="+url.QueryEscape(page.NextCursor), "", &page2))
	require.NotEqual(t, page.Jobs[0].ID, page2.Jobs[0].ID)
	require.Equal(t, 200, e.do("GET", "/v1/jobs?state=succeeded", "", &page))
	for _, j := range page.Jobs {
		require.Equal(t, "succeeded", j.State)
	}

	// Types and queues.
	var types struct{ Types []string }
	require.Equal(t, 200, e.do("GET", "/v1/types", "", &types))
	require.Equal(t, []string{"add", "block", "fail"}, types.Types)
	var both struct{ Workflows []string }
	require.Equal(t, 200, e.do("GET", "/v1/types", "", &both))
	require.Equal(t, []string{"approval", "saga"}, both.Workflows)
	// Schedules: the server's client's, with their next occurrence.
	var scheds struct{ Schedules []server.ScheduleJSON }
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.Empty(t, scheds.Schedules)
	stop, err := e.c.Schedule(hopper.Schedule{Name: "hourly-add", Cron: "@hourly", Location: time.UTC, CatchUp: -1,
		Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
	require.NoError(t, err)
	defer stop()
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.Len(t, scheds.Schedules, 1)
	got := scheds.Schedules[0]
	require.Equal(t, []string{"hourly-add", "@hourly", "0s"}, []string{got.Name, got.Cron, got.CatchUp})
	require.NotNil(t, got.Next)
	require.Equal(t, 0, got.Next.Minute(), "the top of an hour")
	require.True(t, got.Next.After(time.Now()))
	require.True(t, got.Registered)
	require.False(t, got.Paused)
	require.Zero(t, got.Occurrences)
	require.Nil(t, got.Last)
	// Pause, resume and delete, as the store keeps them.
	require.Equal(t, 200, e.do("POST", "/v1/schedules/hourly-add/pause", "", nil))
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.True(t, scheds.Schedules[0].Paused)
	require.NotNil(t, scheds.Schedules[0].UpdatedAt)
	require.Equal(t, 200, e.do("POST", "/v1/schedules/hourly-add/resume", "", nil))
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.False(t, scheds.Schedules[0].Paused)
	require.Equal(t, 204, e.do("DELETE", "/v1/schedules/hourly-add", "", nil))
	require.Equal(t, 404, e.do("DELETE", "/v1/schedules/hourly-add", "", nil))
	require.Equal(t, 404, e.do("DELETE", "/v1/schedules/nope", "", nil))
	require.Equal(t, 404, e.do("POST", "/v1/schedules/nope/resume", "", nil))
	// A schedule defined in the store, run by the server's client, which
	// registers its type.
	var defined server.ScheduleJSON
	require.Equal(t, 201, e.do("POST", "/v1/schedules", `{"name":"stored-add","cron":"@daily","location":"Europe/Paris","catch_up":"5m","type":"add","input":{"a":1,"b":2}}`, &defined))
	require.True(t, defined.Stored)
	require.True(t, defined.Registered, "the server's client runs it")
	require.Equal(t, "add", defined.Type)
	require.JSONEq(t, `{"a":1,"b":2}`, string(defined.Input))
	require.Equal(t, "5m0s", defined.CatchUp)
	require.NotNil(t, defined.Next)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	require.Equal(t, 0, defined.Next.In(paris).Hour(), "midnight in Paris")
	for _, bad := range []string{
		`{"name":"b","cron":"@daily","type":"add","input":{"a":"x"}}`,
		`{"name":"b","cron":"nope","type":"add"}`,
		`{"name":"b","cron":"@daily"}`,
		`{"name":"b","cron":"@daily","type":"add","catch_up":"soon"}`,
		`{"name":"b","cron":"@daily","type":"add","extra":1}`,
	} {
		require.Equal(t, 400, e.do("POST", "/v1/schedules", bad, nil), bad)
	}
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.Len(t, scheds.Schedules, 2, "nothing stored for the bad definitions")
	require.Equal(t, []string{"hourly-add", "stored-add"}, []string{scheds.Schedules[0].Name, scheds.Schedules[1].Name})
	require.Equal(t, 204, e.do("DELETE", "/v1/schedules/stored-add", "", nil))

	var qs struct{ Queues []server.QueueJSON }
	require.Equal(t, 200, e.do("POST", "/v1/queues/default/pause", "", nil))
	require.Equal(t, 200, e.do("GET", "/v1/queues", "", &qs))
	require.Len(t, qs.Queues, 1)
	require.True(t, qs.Queues[0].Paused)
	require.Equal(t, 200, e.do("POST", "/v1/queues/default/resume", "", nil))
}

func TestAPIChangesAndAttempts(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":2,"b":2}}`, &created))
	var job server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID+"/result?wait=10s", "", &job))
	require.Equal(t, "succeeded", job.State)

	var attempts server.AttemptListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID+"/attempts", "", &attempts))
	require.Len(t, attempts.Attempts, 1)
	require.Equal(t, 1, attempts.Attempts[0].Generation)
	require.Equal(t, 1, attempts.Attempts[0].Number)
	require.Equal(t, "succeeded", attempts.Attempts[0].Outcome)
	require.NotNil(t, attempts.Attempts[0].EndedAt)
	var eb errBody
	require.Equal(t, 404, e.do("GET", "/v1/jobs/nope/attempts", "", &eb))

	// The feed, page by page: the job's three changes among them, in order.
	var mine []string
	after := ""
	for range 100 {
		var page server.ChangeListJSON
		require.Equal(t, 200, e.do("GET", "/v1/changes?limit=2&after="+url.QueryEscape(after), "", &page))
		require.LessOrEqual(t, len(page.Changes), 2)
		if len(page.Changes) == 0 {
			require.Equal(t, after, page.Next, "an empty page reads on from where it was")
			break
		}
		for _, ch := range page.Changes {
			if ch.EntityID == created.ID {
				mine = append(mine, ch.Prev+">"+ch.State)
			}
		}
		after = page.Next
	}
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, mine)
	require.Equal(t, 400, e.do("GET", "/v1/changes?after=x", "", &eb))
	require.Equal(t, 400, e.do("GET", "/v1/changes?limit=0", "", &eb))
	require.Equal(t, 401, e.doAuth("GET", "/v1/changes", "", "", &eb))

	// The feed as SSE, from a cursor, with another process's changes in it.
	other, err := hopper.New(hopper.Config{Driver: e.c.Driver(), WorkerID: "other"})
	require.NoError(t, err)
	elsewhere := hopper.Define("elsewhere", func(context.Context, int) (int, error) { return 7, nil }, nil)
	require.NoError(t, other.Register(elsewhere))
	require.NoError(t, other.Start(context.Background()))
	defer func() { require.NoError(t, other.Stop(context.Background())) }()
	req, _ := http.NewRequest("GET", e.url+"/v1/changes/stream?type=elsewhere&after="+url.QueryEscape(after), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	eh, err := elsewhere.Enqueue(context.Background(), other, 1, nil)
	require.NoError(t, err)
	rd := bufio.NewReader(resp.Body)
	var ids, states []string
	for len(states) < 3 {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		switch {
		case strings.HasPrefix(line, "id: "):
			ids = append(ids, strings.TrimSpace(strings.TrimPrefix(line, "id: ")))
		case strings.HasPrefix(line, "data: "):
			var ch server.ChangeJSON
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ch))
			require.Equal(t, eh.ID(), ch.EntityID)
			states = append(states, ch.State)
		}
	}
	resp.Body.Close()
	require.Equal(t, []string{"pending", "running", "succeeded"}, states, "another process's job, in order")
	// Reconnecting with Last-Event-ID resumes after that event.
	req, _ = http.NewRequest("GET", e.url+"/v1/changes/stream?type=elsewhere", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", ids[0])
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	rd = bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "id: ") {
			require.Equal(t, ids[1], strings.TrimSpace(strings.TrimPrefix(line, "id: ")))
			break
		}
	}
	resp.Body.Close()
	require.Equal(t, 400, e.do("GET", "/v1/changes/stream?kind=nope", "", &eb))
	// From the end: only what comes next.
	req, _ = http.NewRequest("GET", e.url+"/v1/changes/stream?after=end&type=elsewhere", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	next, err := elsewhere.Enqueue(context.Background(), other, 2, nil)
	require.NoError(t, err)
	rd = bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "data: ") {
			var ch server.ChangeJSON
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ch))
			require.Equal(t, next.ID(), ch.EntityID, "nothing from before the stream began")
			break
		}
	}
	resp.Body.Close()

	// The retry observer's cursor is stored when its deliverer first
	// leases it, which announces nothing: look until it is.
	var obs struct{ Observers []server.ObserverJSON }
	require.Eventually(t, func() bool {
		return e.do("GET", "/v1/observers", "", &obs) == 200 && len(obs.Observers) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, hopper.RetryObserverName, obs.Observers[0].Name)

	// The dashboard's job page lists the attempts.
	req, _ = http.NewRequest("GET", e.url+"/jobs/"+created.ID, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(b), "<h2>Attempts</h2>")
}

func TestAPIDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var ids []string
	for range 3 {
		var created server.EnqueueResponse
		require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"fail","input":{}}`, &created))
		var job server.JobJSON
		require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID+"/result?wait=10s", "", &job))
		require.Equal(t, "dead", job.State)
		require.Equal(t, "aborted", job.Error.Kind)
		ids = append(ids, created.ID)
	}
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/dead", "", &page))
	require.Len(t, page.Jobs, 3)
	var res map[string]int
	require.Equal(t, 200, e.do("POST", "/v1/dead/redrive", `{"ids":["`+ids[0]+`"]}`, &res))
	require.Equal(t, 1, res["redriven"])
	var eb errBody
	require.Equal(t, 400, e.do("POST", "/v1/dead/redrive", `{}`, &eb))
	require.Equal(t, 400, e.do("POST", "/v1/dead/redrive", `{"everything":true}`, &eb), "unknown fields are refused")
}

func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}, MaxBodyBytes: 256})
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/jobs", `{"type":"nope","input":{}}`, 404, "unknown_type"},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":"one"}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{"z":1}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"input":{}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", ``, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"extra":1}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"delay":"-5s"}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"delay":"soon"}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"run_at":"tomorrow"}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"retry":{"attempts":-1}}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"retry":{"jitter":7}}}`, 400, "bad_request"},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"metadata":{"x":"` + strings.Repeat("y", 300) + `"}}}`, 413, "payload_too_large"},
		{"GET", "/v1/jobs?state=bogus", "", 400, "bad_request"},
		{"GET", "/v1/jobs?limit=0", "", 400, "bad_request"},
		{"GET", "/v1/jobs?limit=abc", "", 400, "bad_request"},
		{"GET", "/v1/jobs?queued_after=yesterday", "", 400, "bad_request"},
		{"GET", "/v1/jobs?order=sideways", "", 400, "bad_request"},
		{"GET", "/v1/jobs/missing", "", 404, "not_found"},
		{"GET", "/v1/jobs/missing/result?wait=1s", "", 404, "not_found"},
		{"GET", "/v1/jobs/x/result?wait=forever", "", 400, "bad_request"},
		{"POST", "/v1/jobs/missing/cancel", "", 404, "not_found"},
		{"POST", "/v1/jobs/missing/retry", "", 404, "not_found"},
		{"GET", "/v1/groups/missing", "", 404, "not_found"},
		{"GET", "/v1/events?kind=exploded", "", 400, "bad_request"},
		{"GET", "/v1/nowhere", "", 404, "not_found"},
	}
	for _, tc := range cases {
		var eb errBody
		got := e.do(tc.method, tc.path, tc.body, &eb)
		require.Equal(t, tc.status, got, "%s %s %s: %+v", tc.method, tc.path, tc.body, eb)
		require.Equal(t, tc.code, eb.Error.Code, "%s %s", tc.method, tc.path)
		require.NotEmpty(t, eb.Error.Message)
	}
	// Every route but /healthz needs the token.
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/jobs"}, {"POST", "/v1/jobs"}, {"GET", "/v1/jobs/x"}, {"GET", "/v1/jobs/x/result"},
		{"POST", "/v1/jobs/x/cancel"}, {"POST", "/v1/jobs/x/retry"}, {"GET", "/v1/groups/x"}, {"GET", "/v1/dead"},
		{"POST", "/v1/dead/redrive"}, {"GET", "/v1/queues"}, {"GET", "/v1/queues/q/demand"}, {"POST", "/v1/queues/q/pause"}, {"POST", "/v1/queues/q/resume"},
		{"GET", "/v1/types"}, {"GET", "/v1/schedules"}, {"GET", "/v1/events"}, {"GET", "/v1/stats"}, {"GET", "/metrics"}, {"GET", "/"}, {"GET", "/jobs"}, {"GET", "/dead"},
		{"POST", "/v1/runs"}, {"GET", "/v1/runs"}, {"GET", "/v1/runs/x"}, {"POST", "/v1/runs/x/cancel"}, {"GET", "/v1/runs/x/stream"},
		{"POST", "/v1/hooks/x"}, {"GET", "/runs"}, {"GET", "/runs/x"},
	} {
		require.Equal(t, 401, e.doAuth(r.method, r.path, "", "", nil), "%s %s without a token", r.method, r.path)
		require.Equal(t, 401, e.doAuth(r.method, r.path, "", "Bearer wrong", nil), "%s %s with a wrong token", r.method, r.path)
	}
	// A body over the limit is refused before it is read.
	req, _ := http.NewRequest("POST", e.url+"/v1/jobs", strings.NewReader(strings.Repeat("x", 1000)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 413, resp.StatusCode)
}

func TestAPIEventsAndMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events?kind=succeeded&type=add", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	_, err = rd.ReadString('\n') // the opening comment
	require.NoError(t, err)

	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"fail","input":{}}`, &created))
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":2,"b":3}}`, &created))
	var idLine, evLine, dataLine string
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "id: ") {
			idLine = line
		}
		if strings.HasPrefix(line, "event: ") {
			evLine = line
			dataLine, err = rd.ReadString('\n')
			require.NoError(t, err)
			break
		}
	}
	require.Equal(t, "event: succeeded\n", evLine, "filtered to succeeded events of type add")
	var ev server.EventJSON
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(dataLine, "data: ")), &ev))
	require.Equal(t, created.ID, ev.JobID)
	require.Equal(t, "id: "+ev.Cursor+"\n", idLine, "the event's id is its cursor in the feed")
	require.Equal(t, 1, ev.Attempt)

	// The same events as a page, from the beginning of the feed; and a
	// stream resumed with Last-Event-ID starts after the event it names.
	var page server.EventListJSON
	require.Equal(t, 200, e.do("GET", "/v1/events/list?type=add", "", &page))
	var kinds []string
	for _, pe := range page.Events {
		kinds = append(kinds, pe.Kind)
	}
	require.Equal(t, []string{"queued", "started", "succeeded"}, kinds)
	require.Equal(t, 400, e.do("GET", "/v1/events/list?limit=0", "", nil))
	require.Equal(t, 400, e.do("GET", "/v1/events/list?after=nope", "", nil))
	rreq, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events?type=add", nil)
	rreq.Header.Set("Last-Event-ID", page.Events[0].Cursor)
	rresp, err := http.DefaultClient.Do(rreq)
	require.NoError(t, err)
	defer rresp.Body.Close()
	rrd := bufio.NewReader(rresp.Body)
	for {
		line, err := rrd.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, "event: ") {
			require.Equal(t, "event: started\n", line, "the resumed stream goes on after the queued event")
			break
		}
	}

	mreq, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	mresp, err := http.DefaultClient.Do(mreq)
	require.NoError(t, err)
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	require.Contains(t, string(body), `hopper_work_succeeded_total{type="add"} 1`)
	require.Contains(t, string(body), `hopper_work_dead_total{type="fail"} 1`)
	require.Contains(t, string(body), `hopper_queue_depth{queue="default",state="due"} 0`)
	require.Contains(t, string(body), `hopper_queue_desired_workers{queue="default"} 1`, "nothing due, but jobs arrived in the last minute")
	require.Contains(t, string(body), `hopper_queue_due_jobs{queue="default"} 0`)
	var demand hopper.QueueDemand
	require.Equal(t, 200, e.do("GET", "/v1/queues/default/demand", "", &demand))
	require.Equal(t, "default", demand.Queue)
	require.Equal(t, 1, demand.DesiredWorkers)
	require.Positive(t, demand.SlotsPerWorker)

	var st server.StatsJSON
	succeeded := func() int {
		st = server.StatsJSON{}
		require.Equal(t, 200, e.do("GET", "/v1/stats", "", &st))
		total := 0
		for _, n := range st.Succeeded {
			total += n
		}
		return total
	}
	awaitFleet(t, e.srv, "the success in the fleet's figures", func() bool { return succeeded() == 1 })
	add, ok := st.Fleet.Type("default", "add")
	require.True(t, ok, "the fleet's figures have the add jobs")
	require.Equal(t, int64(1), add.Succeeded)
	require.Equal(t, int64(1), add.Wait.Count, "the start's pickup lag, from the store")
	proc, ok := st.Process.Type("default", "add")
	require.True(t, ok, "the process's figures too")
	require.Equal(t, int64(1), proc.Succeeded)
	require.Equal(t, "2m", st.Window)
	require.Equal(t, 120, st.Buckets)
	require.Len(t, st.LagP50, st.Buckets)
	require.Len(t, st.LagP99, st.Buckets)
	withLag := 0
	for i := range st.LagP99 {
		require.GreaterOrEqual(t, st.LagP99[i], st.LagP50[i])
		if st.Started[i] > 0 {
			withLag++
		}
	}
	require.Positive(t, withLag, "the seconds in which jobs started have a lag")
	require.Contains(t, st.Types, "add")
	require.Contains(t, st.Queues, "default")

	// Other windows, per type; a window that is none is refused.
	var hour server.StatsJSON
	require.Equal(t, 200, e.do("GET", "/v1/stats?window=1h&type=add", "", &hour))
	require.Equal(t, 60, hour.StepSeconds)
	require.Equal(t, 60, hour.Buckets)
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	require.Equal(t, 1, sum(hour.Succeeded), "the add job, in its minute")
	require.Equal(t, 0, sum(hour.Failed), "the failed job is another type's")
	var other server.StatsJSON
	awaitFleet(t, e.srv, "the failed job in the fleet's figures", func() bool {
		other = server.StatsJSON{}
		require.Equal(t, 200, e.do("GET", "/v1/stats?window=24h&type=fail", "", &other))
		return sum(other.Failed) == 1
	})
	require.Equal(t, 1440, other.Buckets)
	require.Equal(t, 0, sum(other.Succeeded))
	require.Equal(t, 400, e.do("GET", "/v1/stats?window=1y", "", nil))
}

func TestDashboardPages(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":20,"b":22}}`, &created))
	var job server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID+"/result?wait=10s", "", &job))

	get := func(path, authz string) (int, string) {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/", "")
	require.Equal(t, 401, code)
	require.Contains(t, body, `name="token"`, "an unauthenticated browser gets a sign-in form")

	var workers struct {
		Workers []hopper.WorkerInfo `json:"workers"`
	}
	require.Equal(t, 200, e.do("GET", "/v1/workers", "", &workers))
	require.Len(t, workers.Workers, 1, "the server's own client")
	require.Equal(t, e.c.WorkerID(), workers.Workers[0].ID)
	require.Equal(t, hopper.WorkerIdle, workers.Workers[0].Status)
	stop, err := e.c.Schedule(hopper.Schedule{Name: "nightly-digest", Cron: "0 3 * * *",
		Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
	require.NoError(t, err)
	defer stop()
	for path, want := range map[string]string{
		"/":                     e.c.WorkerID(),
		"/?schedules":           "nightly-digest",
		"/?worker-status":       `<span class="state s-pending">idle</span>`,
		"/?schedule-pause":      `data-post="/v1/schedules/nightly-digest/pause"`,
		"/?schedule-define":     `id="define-schedule"`,
		"/jobs":                 created.ID,
		"/jobs?state=succeeded": created.ID,
		"/jobs/" + created.ID:   "42",
		"/dead":                 "Dead letters",
		"/static/app.js":        "EventSource",
	} {
		code, body := get(path, "Bearer "+token)
		require.Equal(t, 200, code, path)
		require.Contains(t, body, want, path)
	}
	code, _ = get("/jobs/missing", "Bearer "+token)
	require.Equal(t, 404, code)

	// A gate stuck on a failed blocker shows the cause and links the blocker.
	failing, err := e.c.NameJob("fail", json.RawMessage(`null`), nil)
	require.NoError(t, err)
	next, err := e.c.NameJob("add", json.RawMessage(`{"a":1,"b":1}`), nil)
	require.NoError(t, err)
	gate := hopper.Gate([]string{failing.ID()}, []*hopper.JobSpec{next}, hopper.AllSuccess(), 0)
	_, err = e.c.EnqueueMany(context.Background(), failing, gate)
	require.NoError(t, err)
	var gateJob server.JobJSON
	e.await(t, "the gate stuck", func() bool {
		return e.do("GET", "/v1/jobs/"+gate.ID(), "", &gateJob) == 200 && gateJob.State == "stuck"
	})
	require.Equal(t, "failed-blocker", gateJob.Stuck.Cause)
	require.Equal(t, []string{failing.ID()}, gateJob.Stuck.BlockerIDs)
	code, body = get("/jobs/"+gate.ID(), "Bearer "+token)
	require.Equal(t, 200, code)
	require.Contains(t, body, "failed-blocker")
	require.Contains(t, body, `href="/jobs/`+failing.ID()+`"`)

	// Signing in with the form sets the cookie the dashboard then uses.
	jar := &cookieJar{}
	cl := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.PostForm(e.url+"/login", url.Values{"token": {"wrong"}, "next": {"/jobs"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)
	resp, err = cl.PostForm(e.url+"/login", url.Values{"token": {token}, "next": {"/jobs"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 303, resp.StatusCode)
	require.Equal(t, "/jobs", resp.Header.Get("Location"))
	resp, err = cl.Get(e.url + "/jobs")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.cookies }

func TestListenRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	err := e.srv.ListenAndServe(context.Background(), "0.0.0.0:0")
	require.Error(t, err)
	require.Contains(t, err.Error(), "without an API token")
	require.True(t, server.IsLoopback("127.0.0.1:7700"))
	require.True(t, server.IsLoopback("[::1]:7700"))
	require.True(t, server.IsLoopback("localhost:1"))
	require.False(t, server.IsLoopback(":7700"))
	require.False(t, server.IsLoopback("10.0.0.1:7700"))
}

func TestAPIRuns(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})

	// A saga that completes, then one that fails and compensates.
	var started server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":""},"id":"run-ok"}`, &started))
	require.Equal(t, "run-ok", started.RunID)
	require.Equal(t, 200, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{},"id":"run-ok"}`, &started), "same id twice: the existing run")
	require.True(t, started.Existing)
	var eb errBody
	require.Equal(t, 409, e.do("POST", "/v1/runs", `{"workflow":"approval","input":null,"id":"run-ok"}`, &eb), "another workflow's run id")
	require.Equal(t, "duplicate_id", eb.Error.Code)
	require.Contains(t, eb.Error.Message, `run "run-ok" is a run of workflow "saga"`)
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"id":"job-1"}}`, nil))
	require.Equal(t, 409, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{},"id":"job-1"}`, &eb), "a job's id")
	require.Equal(t, "duplicate_id", eb.Error.Code)
	require.Contains(t, eb.Error.Message, `"job-1" is the id of`)
	run := waitRun(t, e, "run-ok")
	require.Equal(t, "completed", run.Status)
	require.JSONEq(t, `"done"`, string(run.Output))
	require.Len(t, run.Steps, 3)
	require.Equal(t, 1, run.Steps[0].Attempts)
	require.NotEmpty(t, run.History)
	require.NotContains(t, e.raw("/v1/runs/run-ok"), `"timeline"`, "one history array, not two")
	var hist hopper.History
	require.Equal(t, 200, e.do("GET", "/v1/runs/run-ok/history", "", &hist))
	require.Equal(t, "saga", hist.Workflow)
	require.Len(t, hist.Events, len(run.History))
	require.Equal(t, 404, e.do("GET", "/v1/runs/nope/history", "", nil))

	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":"ship"}}`, &started))
	run = waitRun(t, e, started.RunID)
	require.Equal(t, "compensated", run.Status)
	require.Equal(t, []server.CompensationJSON{{Name: "undo-reserve", Attempt: 1, Executed: true}, {Name: "undo-charge", Attempt: 1, Executed: true}}, run.Compensations)
	require.NotNil(t, run.Error)
	// A compensated saga is no dead letter: its job is dead, but the
	// dead-letter listing and its page leave it out unless asked.
	job, err := e.c.JobGet(context.Background(), started.RunID)
	require.NoError(t, err)
	require.Equal(t, hopper.StateDead, job.State)
	var dead server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/dead?type=workflow:saga", "", &dead))
	require.Empty(t, dead.Jobs, "the compensated saga's job is not listed")
	require.Equal(t, 200, e.do("GET", "/v1/dead?type=workflow:saga&hide_compensated=false", "", &dead))
	require.Len(t, dead.Jobs, 1, "unless asked for")
	require.Equal(t, 400, e.do("GET", "/v1/dead?hide_compensated=maybe", "", nil))

	var list server.RunListJSON
	require.Equal(t, 200, e.do("GET", "/v1/runs?workflow=saga&status=completed,compensated&limit=10", "", &list))
	require.Len(t, list.Runs, 2)
	require.Equal(t, started.RunID, list.Runs[0].RunID, "newest first")
	require.Equal(t, 200, e.do("GET", "/v1/runs?status=completed&offset=0&limit=1", "", &list))
	require.Len(t, list.Runs, 1)

	// A hook resumed through the API, another through the webhook URL.
	for _, via := range []string{"api", "webhook"} {
		require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval","input":{}}`, &started))
		var tok string
		e.await(t, "the hook", func() bool {
			var r server.RunJSON
			require.Equal(t, 200, e.do("GET", "/v1/runs/"+started.RunID, "", &r))
			if len(r.Hooks) == 1 && r.Status == "waiting" {
				tok = r.Hooks[0].Token
			}
			return tok != ""
		})
		if via == "api" {
			require.Equal(t, 200, e.do("POST", "/v1/hooks/"+tok, `{"approved":true}`, nil))
			var eb errBody
			require.Equal(t, 409, e.do("POST", "/v1/hooks/"+tok, `{"approved":false}`, &eb), "a hook resumes once")
		} else {
			// No API token: the hook's token is the authorisation.
			require.Equal(t, 200, e.doAuth("PUT", "/v1/webhooks/"+tok, "plain text body", "", nil))
		}
		run = waitRun(t, e, started.RunID)
		require.Equal(t, "completed", run.Status)
		if via == "api" {
			require.JSONEq(t, `{"approved":true}`, string(run.Output), "the output is the payload it was resumed with")
		} else {
			require.JSONEq(t, `"plain text body"`, string(run.Output))
		}
		// The stream: its one chunk, then the end.
		req, _ := http.NewRequest("GET", e.url+"/v1/runs/"+started.RunID+"/stream?from=0", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(t, string(body), "event: chunk\ndata: {\"waiting\":\"approval\"}")
		require.Contains(t, string(body), `event: end`)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/runs", `{"workflow":"nope","input":{}}`, 404},
		{"POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":5}}`, 400},
		{"POST", "/v1/runs", `{"input":{}}`, 400},
		{"GET", "/v1/runs/missing", "", 404},
		{"GET", "/v1/runs?status=bogus", "", 400},
		{"GET", "/v1/runs?limit=0", "", 400},
		{"GET", "/v1/runs?offset=-1", "", 400},
		{"GET", "/v1/runs?started_after=yesterday", "", 400},
		{"POST", "/v1/runs/missing/cancel", "", 404},
		{"POST", "/v1/runs/run-ok/cancel", "", 409},
		{"POST", "/v1/hooks/unknown", `{}`, 404},
		{"POST", "/v1/hooks/" + strings.Repeat("a", 32), `{not json`, 400},
		{"GET", "/v1/runs/missing/stream", "", 404},
		{"GET", "/v1/runs/run-ok/stream?from=-3", "", 400},
	} {
		eb = errBody{}
		require.Equal(t, tc.status, e.do(tc.method, tc.path, tc.body, &eb), "%s %s %s", tc.method, tc.path, tc.body)
		require.NotEmpty(t, eb.Error.Code)
	}
	require.Equal(t, 404, e.doAuth("POST", "/v1/webhooks/unknown", `{}`, "", &eb))
}

// waitRun waits for run id to finish (RunWait) and returns it as the API
// shows it.
func waitRun(t *testing.T, e *env, id string) server.RunJSON {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := e.c.RunWait(ctx, id)
	require.NoError(t, err)
	var r server.RunJSON
	require.Equal(t, 200, e.do("GET", "/v1/runs/"+id, "", &r))
	return r
}
