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

// TestRunUntilComplete: a workflow with a day-long sleep, a step retried
// twice and a hook runs to its end in virtual time. The hook stops the
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
	_, err = hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
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
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "r-o-1 approved" {
		t.Fatalf("got %q", out)
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

// TestRunUntilIdleStalls: a job no client can run (its type is not
// registered) makes RunUntilIdle fail, saying what is due, rather than
// hang.
func TestRunUntilIdleStalls(t *testing.T) {
	t.Parallel()
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	ctx := context.Background()
	if _, err := sendEmail.Enqueue(ctx, c, email{To: "ada@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	err := hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Stall: 100 * time.Millisecond})
	if !errors.Is(err, hoppertest.ErrStalled) || !strings.Contains(err.Error(), "1 due") {
		t.Fatalf("want ErrStalled naming the due job, got %v", err)
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
