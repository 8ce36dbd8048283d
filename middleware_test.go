package hopper_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestMiddleware: insert middleware run in order around the insert and
// may add metadata (held to the rules of any metadata) or refuse it; work
// middleware run the client's then the type's, in order, around the
// handler, read the job's metadata, and decide the attempt's outcome.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var trail []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		trail = append(trail, s)
	}
	insert := func(name string) hopper.InsertMiddleware {
		return hopper.InsertMiddlewareFunc(func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
			note("insert " + name + " in")
			for _, r := range rows {
				if r.Metadata == nil {
					r.Metadata = map[string]string{}
				}
				r.Metadata["seen-by"] += name
			}
			if rows[0].Metadata["refuse"] == "yes" {
				return errors.New("refused by " + name)
			}
			err := doInner(ctx)
			note("insert " + name + " out")
			return err
		})
	}
	work := func(name string) hopper.WorkMiddleware {
		return hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
			note("work " + name + " " + job.Metadata["seen-by"])
			if job.Metadata["fail-in"] == name {
				return errors.New("stopped by " + name)
			}
			return doInner(ctx)
		})
	}
	typed := hopper.Define("mw", func(ctx context.Context, n int) (int, error) {
		note("handler " + hopper.JobFromContext(ctx).Metadata()["seen-by"])
		return n * 2, nil
	}, &hopper.TypeOpts[int]{WorkMiddleware: []hopper.WorkMiddleware{work("type")}, Retry: hopper.RetryPolicy{Attempts: 1}})
	c := newClient(t, hopper.Config{
		InsertMiddleware: []hopper.InsertMiddleware{insert("a"), insert("b")},
		WorkMiddleware:   []hopper.WorkMiddleware{work("client")},
	})
	require.NoError(t, c.Register(typed))
	ctx := testCtx(t)

	h, err := typed.Enqueue(ctx, c, 21, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, out)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, "ab", row.Metadata["seen-by"], "metadata added at insert is stored")
	mu.Lock()
	// The job may start as soon as its insert commits, before the insert
	// middleware return: each chain is in order, and the attempt comes
	// after the insert began.
	var inserts, works []string
	for _, n := range trail {
		if strings.HasPrefix(n, "insert ") {
			inserts = append(inserts, n)
		} else {
			works = append(works, n)
		}
	}
	require.Equal(t, []string{"insert a in", "insert b in", "insert b out", "insert a out"}, inserts)
	require.Equal(t, []string{"work client ab", "work type ab", "handler ab"}, works)
	require.Less(t, slices.Index(trail, "insert b in"), slices.Index(trail, "work client ab"), "the attempt follows the insert: %v", trail)
	trail = nil
	mu.Unlock()

	// A middleware may refuse an insert: nothing is stored.
	_, err = typed.Enqueue(ctx, c, 1, &hopper.InsertOpts{ID: "refused", Metadata: map[string]string{"refuse": "yes"}})
	require.ErrorContains(t, err, "refused by a")
	_, err = c.JobGet(ctx, "refused")
	require.ErrorIs(t, err, hopper.ErrNotFound)

	// What a middleware adds is held to the rules of metadata.
	bad := newClient(t, hopper.Config{InsertMiddleware: []hopper.InsertMiddleware{hopper.InsertMiddlewareFunc(
		func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
			rows[0].Metadata = map[string]string{"k": "nul\x00byte"}
			return doInner(ctx)
		})}})
	_, err = typed.Enqueue(ctx, bad, 1, nil)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)

	// A work middleware's error is the attempt's: the handler does not run.
	h, err = typed.Enqueue(ctx, c, 1, &hopper.InsertOpts{Metadata: map[string]string{"fail-in": "type"}})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "stopped by type"), err.Error())
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, strings.Join(trail, "|"), "handler")

}

// TestMiddlewareWrapsEveryInsert: what a handler spawns, a workflow run's
// start and its activities go through the insert middleware too, with the
// handler's or the run's context.
func TestMiddlewareWrapsEveryInsert(t *testing.T) {
	t.Parallel()
	type ctxKey struct{}
	stamp := hopper.InsertMiddlewareFunc(func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
		for _, r := range rows {
			if r.Metadata == nil {
				r.Metadata = map[string]string{}
			}
			r.Metadata["stamped"] = "yes"
			if v, ok := ctx.Value(ctxKey{}).(string); ok {
				r.Metadata["from"] = v
			}
		}
		return doInner(ctx)
	})
	mark := hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
		return doInner(context.WithValue(ctx, ctxKey{}, job.Type))
	})
	leaf := hopper.Define("mw-leaf", func(context.Context, int) (int, error) { return 1, nil }, nil)
	parent := hopper.Define("mw-parent", func(ctx context.Context, _ int) (hopper.None, error) {
		return hopper.None{}, hopper.JobFromContext(ctx).Spawn(leaf.Job(1, &hopper.InsertOpts{ID: "mw-child"}))
	}, nil)
	flow := hopper.Workflow("mw-flow", func(wf hopper.WorkflowContext, _ int) (int, error) {
		return hopper.Activity(wf, leaf, 2, nil)
	}, nil)
	c := newClient(t, hopper.Config{InsertMiddleware: []hopper.InsertMiddleware{stamp}, WorkMiddleware: []hopper.WorkMiddleware{mark}})
	require.NoError(t, c.Register(leaf, parent, flow))
	ctx := testCtx(t)

	h, err := parent.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = h.Group(ctx)
	require.NoError(t, err)
	child, err := c.JobGet(ctx, "mw-child")
	require.NoError(t, err)
	require.Equal(t, "yes", child.Metadata["stamped"], "a spawned job")
	require.Equal(t, "mw-parent", child.Metadata["from"], "with the handler's context")

	run, err := flow.Start(ctx, c, 0, &hopper.StartOpts{ID: "mw-run"})
	require.NoError(t, err)
	_, err = run.Result(ctx)
	require.NoError(t, err)
	runJob, err := c.JobGet(ctx, "mw-run")
	require.NoError(t, err)
	require.Equal(t, "yes", runJob.Metadata["stamped"], "a run's job")
	info, err := c.RunGet(ctx, "mw-run")
	require.NoError(t, err)
	require.Len(t, info.Activities, 1)
	act, err := c.JobGet(ctx, info.Activities[0].JobID)
	require.NoError(t, err)
	require.Equal(t, "yes", act.Metadata["stamped"], "an activity")
	require.Equal(t, "workflow:mw-flow", act.Metadata["from"], "with the run's context")
}

// TestStepMiddleware: step middleware wrap each try of a step's function,
// with the step's metadata, and not a replay of a recorded step.
func TestStepMiddleware(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var tries []string
	mw := hopper.StepMiddlewareFunc(func(ctx context.Context, step hopper.StepMetadata, doInner func(context.Context) error) error {
		meta, ok := hopper.StepFromContext(ctx)
		mu.Lock()
		tries = append(tries, step.Name+"#"+strconv.Itoa(step.Attempt)+"/"+strconv.FormatBool(ok && meta == step))
		mu.Unlock()
		return doInner(ctx)
	})
	calls := 0
	flow := hopper.Workflow("mw-steps", func(wf hopper.WorkflowContext, _ int) (int, error) {
		v, err := hopper.Step(wf, "flaky", func(context.Context) (int, error) {
			calls++
			if calls == 1 {
				return 0, errors.New("once")
			}
			return 7, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Second, Jitter: hopper.NoJitter}})
		if err != nil {
			return 0, err
		}
		if err := wf.Sleep(time.Hour); err != nil { // the run resumes by replaying "flaky"
			return 0, err
		}
		return v, nil
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{StepMiddleware: []hopper.StepMiddleware{mw}})
	require.NoError(t, c.Register(flow))
	ctx := testCtx(t)
	run, err := flow.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	require.NoError(t, err)
	require.Equal(t, 7, out)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"flaky#1/true", "flaky#2/true"}, tries, "each try, not the replay")
}

// TestWorkMiddlewareSeesWaitAsSnooze: a workflow run's execution that
// ends waiting returns, to the work middleware, an error matching
// *SnoozeError (a deferral, not a failure); a handler's panic one
// matching ErrPanic.
func TestWorkMiddlewareSeesWaitAsSnooze(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []error
	mw := hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
		err := doInner(ctx)
		mu.Lock()
		seen = append(seen, err)
		mu.Unlock()
		return err
	})
	flow := hopper.Workflow("mw-waits", func(wf hopper.WorkflowContext, _ int) (int, error) {
		if err := wf.Sleep(time.Hour); err != nil {
			return 0, err
		}
		return 1, nil
	}, nil)
	boom := hopper.Define("mw-panics", func(context.Context, int) (int, error) { panic("boom") },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}})
	c, clk := hoppertest.NewClient(t, hopper.Config{WorkMiddleware: []hopper.WorkMiddleware{mw}})
	require.NoError(t, c.Register(flow, boom))
	ctx := testCtx(t)
	run, err := flow.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, seen, 2, "one execution waits, the next completes")
	var snooze *hopper.SnoozeError
	require.ErrorAs(t, seen[0], &snooze)
	require.Equal(t, clk.Now(), snooze.RunAt, "until the sleep's end")
	require.NoError(t, seen[1])
	seen = nil
	mu.Unlock()

	h, err := boom.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrPanic)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 1)
	require.ErrorIs(t, seen[0], hopper.ErrPanic)
}

// TestInsertMiddlewarePerTypeAndPath: a type's own insert middleware runs
// inside the client's with only that type's rows; a workflow's insert and
// work middleware wrap its runs' starts and executions; the jobs a
// schedule enqueues and those an in-commit observer enqueues go through
// the insert middleware too.
func TestInsertMiddlewarePerTypeAndPath(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var trail []string
	stamp := func(name string) hopper.InsertMiddleware {
		return hopper.InsertMiddlewareFunc(func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
			mu.Lock()
			trail = append(trail, name+" "+strconv.Itoa(len(rows)))
			mu.Unlock()
			for _, r := range rows {
				if r.Metadata == nil {
					r.Metadata = map[string]string{}
				}
				r.Metadata["by"] += "[" + name + "]"
			}
			return doInner(ctx)
		})
	}
	var worked []string
	flowWork := hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
		mu.Lock()
		worked = append(worked, job.Type)
		mu.Unlock()
		return doInner(ctx)
	})
	own := hopper.Define("mw-own", func(context.Context, int) (int, error) { return 1, nil },
		&hopper.TypeOpts[int]{InsertMiddleware: []hopper.InsertMiddleware{stamp("own")}})
	plain := hopper.Define("mw-plain", func(context.Context, int) (int, error) { return 1, nil }, nil)
	flow := hopper.Workflow("mw-own-flow", func(wf hopper.WorkflowContext, _ int) (int, error) { return 3, nil },
		&hopper.WorkflowOpts{InsertMiddleware: []hopper.InsertMiddleware{stamp("flow")}, WorkMiddleware: []hopper.WorkMiddleware{flowWork}})
	c, clk := hoppertest.NewClient(t, hopper.Config{InsertMiddleware: []hopper.InsertMiddleware{stamp("client")}})
	require.NoError(t, c.Register(own, plain, flow))
	ctx := testCtx(t)

	hs, err := c.EnqueueMany(ctx, own.Job(1, &hopper.InsertOpts{ID: "own-1"}), plain.Job(1, &hopper.InsertOpts{ID: "plain-1"}),
		own.Job(2, &hopper.InsertOpts{ID: "own-2"}))
	require.NoError(t, err)
	require.Len(t, hs, 3)
	mu.Lock()
	require.Equal(t, []string{"client 3", "own 2"}, trail, "the type's middleware inside the client's, with its rows")
	trail = nil
	mu.Unlock()
	for id, want := range map[string]string{"own-1": "[client][own]", "own-2": "[client][own]", "plain-1": "[client]"} {
		row, err := c.JobGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, row.Metadata["by"], id)
	}

	run, err := flow.Start(ctx, c, 0, &hopper.StartOpts{ID: "own-run"})
	require.NoError(t, err)
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	require.NoError(t, err)
	require.Equal(t, 3, out)
	row, err := c.JobGet(ctx, "own-run")
	require.NoError(t, err)
	require.Equal(t, "[client][flow]", row.Metadata["by"], "a run's start")
	mu.Lock()
	require.Equal(t, []string{"workflow:mw-own-flow"}, worked, "the workflow's work middleware wraps its execution")
	mu.Unlock()

	// A schedule's occurrence.
	stop, err := c.Schedule(hopper.Schedule{Name: "mw-every-minute", Cron: "* * * * *", Location: time.UTC,
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			return plain.Job(1, &hopper.InsertOpts{ID: "tick-" + at.Format("1504")}), nil
		}})
	require.NoError(t, err)
	defer stop()
	next := clk.Now().Truncate(time.Minute).Add(time.Minute)
	clk.AdvanceTo(next)
	waitUntil(c, func() bool {
		_, err := c.JobGet(ctx, "tick-"+next.Format("1504"))
		return err == nil
	})
	tick, err := c.JobGet(ctx, "tick-"+next.Format("1504"))
	require.NoError(t, err)
	require.Equal(t, "[client]", tick.Metadata["by"], "a schedule's job")

	// An in-commit observer's follow-up (observers are registered before
	// Start, so on a client of its own).
	od := memdriver.New()
	t.Cleanup(func() { _ = od.Close() })
	oc, err := hopper.New(hopper.Config{Driver: od, InsertMiddleware: []hopper.InsertMiddleware{stamp("client")}})
	require.NoError(t, err)
	require.NoError(t, oc.Register(own, plain))
	require.NoError(t, oc.Observe("mw-follow-up", hopper.InCommit, hopper.ChangeFilter{Types: []string{"mw-own"}, States: []string{"succeeded"}},
		func(ctx context.Context, ch hopper.Change) error {
			return hopper.CommitFromContext(ctx).Enqueue(ctx, plain.Job(9, &hopper.InsertOpts{ID: "after-" + ch.EntityID}))
		}))
	require.NoError(t, oc.Start(ctx))
	t.Cleanup(func() { require.NoError(t, oc.Stop(context.Background())) })
	h, err := own.Enqueue(ctx, oc, 3, &hopper.InsertOpts{ID: "own-3"})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	follow, err := oc.JobGet(ctx, "after-own-3")
	require.NoError(t, err, "the follow-up commits with the success")
	require.Equal(t, "[client]", follow.Metadata["by"], "a job enqueued in a commit")
}
