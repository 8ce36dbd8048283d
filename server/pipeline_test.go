package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// setupTypes is setup with the given types and workflows registered
// instead of the API tests' own.
func setupTypes(t *testing.T, types ...hopper.AnyType) *env {
	t.Helper()
	c, err := hopper.New(hopper.Config{Driver: newDriver(t)})
	require.NoError(t, err)
	require.NoError(t, c.Register(types...))
	require.NoError(t, c.Start(context.Background()))
	s := server.New(c, &server.Options{Tokens: []string{token}})
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return &env{t: t, c: c, url: ts.URL, srv: s}
}

type leafIn struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
}

// TestAPIFanOutAndGates fans out children with a chained gate, and a
// second gate whose blocker fails: the children are listed with their
// states, the group is counted, the gates watching a child are found with
// where they stand in words, and the pages draw the pipeline.
func TestAPIFanOutAndGates(t *testing.T) {
	t.Parallel()
	leaf := hopper.Define("leaf", func(_ context.Context, in leafIn) (int, error) {
		if in.Fail {
			return 0, hopper.Abort(errors.New("leaf failed on purpose"))
		}
		return in.N, nil
	}, nil)
	var fan *hopper.Type[int, hopper.None]
	fan = hopper.Define("fan", func(ctx context.Context, n int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for i := range n {
			if err := job.Spawn(leaf.Job(leafIn{N: i}, &hopper.InsertOpts{ID: fmt.Sprintf("%s-leaf-%d", job.ID(), i)})); err != nil {
				return hopper.None{}, err
			}
		}
		job.Then(hopper.AllSuccess(), leaf.Job(leafIn{N: 100}, &hopper.InsertOpts{ID: job.ID() + "-after"}))
		return hopper.None{}, nil
	}, nil)
	e := setupTypes(t, leaf, fan)
	ctx := context.Background()

	h, err := fan.Enqueue(ctx, e.c, 30, &hopper.InsertOpts{ID: "fan-1"})
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	require.True(t, g.Settled)

	// Children, paged, with their states.
	var kids server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs?parent_id=fan-1&limit=10", "", &kids))
	require.Len(t, kids.Jobs, 10)
	require.NotEmpty(t, kids.NextCursor)

	// The group: settled, nothing open, counted by state.
	var grp server.GroupJSON
	require.Equal(t, 200, e.do("GET", "/v1/groups/fan-1?counts=true", "", &grp))
	require.Equal(t, "settled", grp.State)
	require.Equal(t, 0, grp.Open)
	require.Equal(t, 30+1+1+1, grp.Counts["succeeded"], "the fan, its leaves, the gate and the job it queued: %v", grp.Counts)
	require.False(t, grp.CountsCapped)
	require.Equal(t, 400, e.do("GET", "/v1/groups/fan-1?counts=maybe", "", nil))

	// The gate watching a leaf, fired.
	var gates server.GatesJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/fan-1-leaf-3/gates", "", &gates))
	require.Len(t, gates.Gates, 1)
	gate := gates.Gates[0]
	require.Equal(t, "succeeded", gate.State)
	require.Len(t, gate.On, 30)
	require.Contains(t, gate.Explain, "fired")
	require.Equal(t, "fan-1-after", gate.Next[0].ID)
	require.Equal(t, 200, e.do("GET", "/v1/jobs/fan-1/gates", "", &gates))
	require.Empty(t, gates.Gates, "nothing watches the fan itself")
	require.Equal(t, 400, e.do("GET", "/v1/jobs/fan-1/gates?limit=0", "", nil))

	// A gate whose blocker fails goes stuck, and says why in words.
	bad := leaf.Job(leafIn{Fail: true}, &hopper.InsertOpts{ID: "bad-leaf"})
	ok := leaf.Job(leafIn{N: 1}, &hopper.InsertOpts{ID: "ok-leaf"})
	stuck := hopper.Gate([]string{"bad-leaf", "ok-leaf"}, []*hopper.JobSpec{leaf.Job(leafIn{N: 2}, &hopper.InsertOpts{ID: "never"})}, hopper.AllSuccess(), 0)
	_, err = e.c.EnqueueMany(ctx, bad, ok, stuck)
	require.NoError(t, err)
	e.await(t, "the gate stuck", func() bool {
		return e.do("GET", "/v1/jobs/bad-leaf/gates", "", &gates) == 200 && len(gates.Gates) == 1 && gates.Gates[0].State == "stuck"
	})
	require.Equal(t, "stuck: job bad-leaf failed, so it can no longer fire (it needs all 2 jobs succeed); retry or redrive the failed jobs and it waits again", gates.Gates[0].Explain)
	var gj server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+stuck.ID(), "", &gj))
	require.Equal(t, gates.Gates[0].Explain, gj.Gate.Explain)

	// The pages: the fan's children, group and graph; a leaf's gate; the
	// stuck gate's cause in words and its graph.
	code, body := e.page("/jobs/fan-1")
	require.Equal(t, 200, code)
	for _, want := range []string{`id="pipeline"`, `id="children"`, `data-child="fan-1-leaf-0"`, `id="children-next"`, `id="group"`,
		`data-node="fan-1-leaf-0"`, `data-node="fan-1-after"`, "more children…", `<span class="state s-succeeded">succeeded</span> 33`} {
		require.Contains(t, body, want)
	}
	require.Equal(t, 25, strings.Count(body, `data-child=`), "the first page only")
	next := body[strings.Index(body, `id="children-next" href="`)+len(`id="children-next" href="`):]
	next = strings.ReplaceAll(next[:strings.IndexByte(next, '"')], "&amp;", "&")
	code, body = e.page(next)
	require.Equal(t, 200, code)
	require.Equal(t, 31-25, strings.Count(body, `data-child=`), "the second page: the rest of the leaves and the gate")
	require.NotContains(t, body, `id="children-next"`)

	code, body = e.page("/jobs/fan-1-leaf-3")
	require.Equal(t, 200, code)
	require.Contains(t, body, `id="watching"`)
	require.Contains(t, body, "fired: 1 job queued")
	require.Contains(t, body, `data-node="fan-1"`, "the graph shows the parent")

	code, body = e.page("/jobs/" + stuck.ID())
	require.Equal(t, 200, code)
	require.Contains(t, body, `id="gate-explain"`)
	require.Contains(t, body, "stuck: job bad-leaf failed, so it can no longer fire")
	require.Contains(t, body, `data-node="bad-leaf"`)
	require.Contains(t, body, `data-node="never"`)
	require.Contains(t, body, "(not queued yet)")
}

type tripIn struct {
	FailAttempts int `json:"fail_attempts"`
}

// TestAPIRunTimeline runs a saga retried twice, whose activity fails once
// in every attempt: the timeline has every attempt, every try of every
// activity with its backoff, the sleeps and the compensations, on an axis
// with units; the run page draws it and links the run's job, whose page
// links back.
func TestAPIRunTimeline(t *testing.T) {
	t.Parallel()
	hotel := hopper.Define("hotel", func(ctx context.Context, _ hopper.None) (string, error) {
		if hopper.JobFromContext(ctx).Attempt() == 1 {
			return "", errors.New("hotel busy")
		}
		return "room", nil
	}, &hopper.TypeOpts[hopper.None]{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}})
	trip := hopper.Workflow("trip", func(wf hopper.WorkflowContext, in tripIn) (string, error) {
		if _, err := hopper.Step(wf, "book-flight", func(context.Context) (string, error) { return "flight", nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("cancel-flight", func(context.Context) error { return nil })
		if _, err := hopper.Activity(wf, hotel, hopper.None{}, nil); err != nil {
			return "", err
		}
		wf.Compensate("release-hotel", func(context.Context) error { return nil })
		if err := wf.Sleep(time.Millisecond); err != nil {
			return "", err
		}
		if wf.Attempt() <= in.FailAttempts {
			return "", fmt.Errorf("payment declined on attempt %d", wf.Attempt())
		}
		return "paid", nil
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyRetry, MaxRetries: 2, Retry: hopper.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond}})
	e := setupTypes(t, hotel, trip)
	ctx := context.Background()
	_, err := trip.Start(ctx, e.c, tripIn{FailAttempts: 5}, &hopper.StartOpts{ID: "trip-1"})
	require.NoError(t, err)
	run := waitRun(t, e, "trip-1")
	require.Equal(t, "compensated", run.Status)

	var tl server.TimelineJSON
	require.Equal(t, 200, e.do("GET", "/v1/runs/trip-1/timeline", "", &tl))
	require.Equal(t, "compensated", tl.Status)
	require.False(t, tl.End.Before(tl.Start))
	kinds := map[string]int{}
	var attempts []string
	for _, r := range tl.Rows {
		kinds[r.Kind]++
		if r.Kind == "attempt" {
			attempts = append(attempts, r.Label+": "+r.Note)
		}
		for _, b := range r.Bars {
			require.False(t, b.End.Before(b.Start), "row %s bar %+v", r.Label, b)
			require.False(t, b.Start.Before(tl.Start) || b.End.After(tl.End), "row %s bar %+v within the axis", r.Label, b)
		}
		if r.Kind == "activity" {
			classes := make([]string, len(r.Bars))
			for i, b := range r.Bars {
				classes[i] = b.Class
			}
			require.Equal(t, []string{"span", "failed", "retry", "ok"}, classes, "the activity, its failed try, the backoff, its second try")
			require.Equal(t, "2 tries", r.Note)
			require.True(t, strings.HasPrefix(r.Link, "/jobs/trip-1"), r.Link)
		}
	}
	require.Equal(t, []string{"attempt 1: failed, undone and retried", "attempt 2: failed, undone and retried", "attempt 3: ended the run (compensated)"}, attempts)
	require.Equal(t, map[string]int{"executions": 1, "attempt": 3, "step": 3, "activity": 3, "sleep": 3, "compensation": 6, "end": 3}, kinds)
	require.Equal(t, 404, e.do("GET", "/v1/runs/nope/timeline", "", nil))

	code, body := e.page("/runs/trip-1")
	require.Equal(t, 200, code)
	for _, want := range []string{`id="timeline"`, `class="tick"`, `data-kind="compensation"`, `undo: release-hotel`, `class="bar b-retry"`,
		`href="/jobs/trip-1.a4"`, `href="/jobs/trip-1@3.a4"`, `id="run-job" href="/jobs/trip-1"`} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `<text class="tick"[^>]*>[0-9.]+ (ms|s)</text>`, body, "the axis has units")
	require.Contains(t, body, `<td>2 of 3</td>`, "the hotel activity's attempts read as words")
	require.NotRegexp(t, `<td>\d+/\d+</td>`, body)
	code, body = e.page("/jobs/trip-1")
	require.Equal(t, 200, code)
	require.Contains(t, body, `href="/runs/trip-1"`, "the run's job links back to the run")
}
