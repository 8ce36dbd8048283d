package hoppertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// approval sleeps a day, charges through a step that fails twice (its
// retries wait on the clock while the run's attempt is in flight), then
// waits for a person's approval through a hook.
func approvalWorkflow(charges *atomic.Int32) *hopper.WorkflowType[string, string] {
	return hopper.Workflow("approval", func(wf hopper.WorkflowContext, order string) (string, error) {
		if err := wf.Sleep(24 * time.Hour); err != nil {
			return "", err
		}
		receipt, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) {
			if charges.Add(1) < 3 {
				return "", errors.New("card declined")
			}
			return "r-" + order, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Minute, Max: time.Hour, Jitter: hopper.NoJitter}})
		if err != nil {
			return "", err
		}
		answer, err := hopper.WaitHook[string](wf, "approve", nil)
		if err != nil {
			return "", err
		}
		return receipt + " " + answer, nil
	}, nil)
}

// fewAdvances caps the clock's moves where it should go straight from
// each thing due to the next: stepping through the client's one-second
// polls instead would take hundreds.
var fewAdvances = &hoppertest.RunOpts{Advances: 20}

// TestRunUntilComplete: a workflow with a day-long sleep, a step retried
// twice and a hook runs to its end in virtual time, the clock jumping over
// the sleep and the step's backoffs (fewAdvances). The hook stops the
// first run with an error that names it; once resumed, the run completes.
func TestRunUntilComplete(t *testing.T) {
	t.Parallel()
	var charges atomic.Int32
	wf := approvalWorkflow(&charges)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(wf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	run, err := wf.Start(ctx, c, "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hoppertest.RunUntilComplete(ctx, c, clk, run, fewAdvances)
	if !errors.Is(err, hoppertest.ErrWaitingOutside) || !strings.Contains(err.Error(), `hook "approve"`) {
		t.Fatalf("want an error naming the hook, got %v", err)
	}
	if got := charges.Load(); got != 3 {
		t.Fatalf("the step ran %d times, want 3", got)
	}
	if waited := clk.Now().Sub(start); waited < 24*time.Hour+3*time.Minute {
		t.Fatalf("the clock moved %s, want at least the sleep and the step's backoffs", waited)
	}
	info, err := c.RunGet(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Hooks) != 1 {
		t.Fatalf("want one hook, got %d", len(info.Hooks))
	}
	if err := c.HookResume(ctx, info.Hooks[0].Token, json.RawMessage(`"approved"`)); err != nil {
		t.Fatal(err)
	}
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, fewAdvances)
	if err != nil {
		t.Fatal(err)
	}
	if out != "r-o-1 approved" {
		t.Fatalf("got %q", out)
	}
}

// TestRunUntilCompleteStepBackoff: a step that fails twice with an hour's
// backoff, waiting on the clock while the run's attempt is in flight,
// completes: the clock jumps to the end of each backoff, and the attempt
// keeps its lease over the jump.
func TestRunUntilCompleteStepBackoff(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	wf := hopper.Workflow("hourly-step", func(wf hopper.WorkflowContext, in string) (string, error) {
		return hopper.Step(wf, "flaky", func(ctx context.Context) (string, error) {
			if tries.Add(1) < 3 {
				return "", errors.New("not yet")
			}
			return "done " + in, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Hour, Max: 24 * time.Hour, Jitter: hopper.NoJitter}})
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(wf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	run, err := wf.Start(ctx, c, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, fewAdvances)
	if err != nil || out != "done x" {
		t.Fatalf("got %q, %v", out, err)
	}
	if got := tries.Load(); got != 3 {
		t.Fatalf("the step ran %d times, want 3", got)
	}
	if info, _ := c.RunGet(ctx, run.ID()); info.Attempt != 1 {
		t.Fatalf("the run took %d attempts, want 1 (its lease held over the backoffs)", info.Attempt)
	}
	if got := clk.Now().Sub(start); got != 3*time.Hour {
		t.Fatalf("the clock moved %s, want the two backoffs (1h, 2h)", got)
	}
}

// TestRunUntilIdleRetryInHandler: hopper.Retry inside a handler, backing
// off an hour twice, waits on the clock while its attempt is in flight;
// RunUntilIdle jumps over each backoff and the attempt succeeds.
func TestRunUntilIdleRetryInHandler(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	job := hopper.Define("patient", func(ctx context.Context, _ int) (int32, error) {
		err := hopper.Retry(ctx, func(context.Context) error {
			if calls.Add(1) < 3 {
				return errors.New("busy")
			}
			return nil
		}, hopper.RetryPolicy{Attempts: 3, Base: time.Hour, Max: 24 * time.Hour, Jitter: hopper.NoJitter})
		return calls.Load(), err
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(job); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	h, err := job.Enqueue(ctx, c, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hoppertest.RunUntilIdle(ctx, c, clk, fewAdvances); err != nil {
		t.Fatal(err)
	}
	row, err := c.JobGet(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if row.State != hopper.StateSucceeded || row.Attempt != 1 {
		t.Fatalf("the job is %s after %d attempts, want succeeded after 1 (its lease held)", row.State, row.Attempt)
	}
	if got := clk.Now().Sub(start); got != 3*time.Hour {
		t.Fatalf("the clock moved %s, want the two backoffs (1h, 2h)", got)
	}
}

// TestRunUntilIdle: a job that fails twice with an hour's backoff, and a
// job delayed a week, all run; RunUntilIdle returns once every job is
// finished.
func TestRunUntilIdle(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	flaky := hopper.Define("flaky", func(context.Context, int) (int32, error) {
		if n := calls.Add(1); n < 3 {
			return 0, fmt.Errorf("try %d failed", n)
		}
		return calls.Load(), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 5, Base: time.Hour, Jitter: hopper.NoJitter}})
	later := hopper.Define("later", func(context.Context, int) (string, error) { return "done", nil }, nil)
	// Kept a month: the clock moves a week, past the default retention.
	c, clk := hoppertest.NewClient(t, hopper.Config{Retention: hopper.Retention{Succeeded: 30 * 24 * time.Hour}})
	if err := c.Register(flaky, later); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	hf, err := flaky.Enqueue(ctx, c, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := later.Enqueue(ctx, c, 1, &hopper.InsertOpts{Delay: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := hoppertest.RunUntilIdle(ctx, c, clk, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{hf.ID(), hl.ID()} {
		row, err := c.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.State != hopper.StateSucceeded {
			t.Fatalf("job %s is %s, want succeeded", id, row.State)
		}
	}
	if row, _ := c.JobGet(ctx, hf.ID()); row.Attempt != 3 {
		t.Fatalf("flaky ran %d attempts, want 3", row.Attempt)
	}
	if got := clk.Now().Sub(start); got != 7*24*time.Hour {
		t.Fatalf("the clock moved %s, want exactly to the delayed job (a week)", got)
	}
}

// TestRunUntilIdleLimit: work scheduled past the limit is an error, and
// the clock stays short of it.
func TestRunUntilIdleLimit(t *testing.T) {
	t.Parallel()
	job := hopper.Define("far", func(context.Context, int) (int, error) { return 0, nil }, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(job); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	if _, err := job.Enqueue(ctx, c, 1, &hopper.InsertOpts{Delay: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	err := hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Limit: 24 * time.Hour})
	if !errors.Is(err, hoppertest.ErrLimit) {
		t.Fatalf("want ErrLimit, got %v", err)
	}
	if clk.Now().Sub(start) > 24*time.Hour {
		t.Fatalf("the clock moved past the limit to %s", clk.Now())
	}
}

// TestRunUntilIdleLimitNamesRun: a run waiting on a hook that times out
// past the limit is named in the error, with the hook it waits on.
func TestRunUntilIdleLimitNamesRun(t *testing.T) {
	t.Parallel()
	wf := hopper.Workflow("order", func(wf hopper.WorkflowContext, _ string) (string, error) {
		return hopper.WaitHook[string](wf, "approve", &hopper.HookWaitOpts{Timeout: 48 * time.Hour})
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(wf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := wf.Start(ctx, c, "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Limit: 24 * time.Hour})
	want := fmt.Sprintf(`still waiting: run %s (order, waiting) waits on hook "approve"`, run.ID())
	if !errors.Is(err, hoppertest.ErrLimit) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want ErrLimit with %q, got %v", want, err)
	}
}

// TestRunUntilIdleStalls: a job no client can run (its type is not
// registered) makes RunUntilIdle fail, saying what is due, rather than
// hang.
func TestRunUntilIdleStalls(t *testing.T) {
	t.Parallel()
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	ctx := context.Background()
	h, err := sendEmail.Enqueue(ctx, c, email{To: "ada@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Stall: 100 * time.Millisecond})
	want := fmt.Sprintf("still waiting: job %s (send-email, pending)", h.ID())
	if !errors.Is(err, hoppertest.ErrStalled) || !strings.Contains(err.Error(), "1 due") || !strings.Contains(err.Error(), want) {
		t.Fatalf("want ErrStalled naming the due job (%q), got %v", want, err)
	}
}

// TestAutoAdvance: with AutoAdvance on, a test waits on a delayed job's
// result as it would against a real clock.
func TestAutoAdvance(t *testing.T) {
	t.Parallel()
	job := hopper.Define("tomorrow", func(context.Context, string) (string, error) { return "hello", nil }, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(job); err != nil {
		t.Fatal(err)
	}
	stop := hoppertest.AutoAdvance(c, clk, nil)
	ctx := context.Background()
	start := clk.Now()
	h, err := job.Enqueue(ctx, c, "x", &hopper.InsertOpts{Delay: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Result(ctx)
	if err != nil || out != "hello" {
		t.Fatalf("got %q, %v", out, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if clk.Now().Sub(start) < 24*time.Hour {
		t.Fatalf("the clock moved only %s", clk.Now().Sub(start))
	}
}

// TestRunUntilIdleSchedule: an hourly schedule fires at each hour while a
// job delayed 5.5 hours remains: 01:00 to 05:00, five times, each stored
// before the clock moves on.
func TestRunUntilIdleSchedule(t *testing.T) {
	t.Parallel()
	var fired atomic.Int32
	tick := hopper.Define("tick", func(context.Context, int) (int, error) { fired.Add(1); return 0, nil }, nil)
	later := hopper.Define("later", func(context.Context, int) (int, error) { return 0, nil }, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{Clock: hoppertest.NewClock(hoppertest.Epoch().Add(time.Minute))})
	if err := c.Register(tick, later); err != nil {
		t.Fatal(err)
	}
	_, err := c.Schedule(hopper.Schedule{Name: "hourly", Cron: "@hourly", Location: time.UTC,
		Job: func(time.Time) (*hopper.JobSpec, error) { return tick.Job(0, nil), nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := later.Enqueue(ctx, c, 0, &hopper.InsertOpts{Delay: 5*time.Hour + 30*time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := hoppertest.RunUntilIdle(ctx, c, clk, fewAdvances); err != nil {
		t.Fatal(err)
	}
	if got := fired.Load(); got != 5 {
		t.Fatalf("the hourly schedule fired %d times over 5.5 hours, want 5", got)
	}
}

// TestRunUntilCompleteHookTimeout: a hook nobody resumes times out after
// two days of virtual time, and the run goes on.
func TestRunUntilCompleteHookTimeout(t *testing.T) {
	t.Parallel()
	wf := hopper.Workflow("approval-or-not", func(wf hopper.WorkflowContext, _ string) (string, error) {
		v, err := hopper.WaitHook[string](wf, "approve", &hopper.HookWaitOpts{Timeout: 48 * time.Hour})
		if errors.Is(err, hopper.ErrHookTimeout) {
			return "timed out", nil
		}
		return v, err
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(wf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := clk.Now()
	run, err := wf.Start(ctx, c, "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, fewAdvances)
	if err != nil || out != "timed out" {
		t.Fatalf("got %q, %v", out, err)
	}
	if got := clk.Now().Sub(start); got != 48*time.Hour {
		t.Fatalf("the clock moved %s, want the hook's timeout (48h)", got)
	}
}
