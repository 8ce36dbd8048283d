package hoppertest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// slowQuiet is the RunOpts.Quiet of TestRunUntilIdleWaitsForSlowWork.
const slowQuiet = 50 * time.Millisecond // on the bubble's clock

// slowClaims is a store whose claims that take jobs return late on the
// wall clock, as on a loaded machine: the claimed jobs are running all the
// while, without an attempt starting.
type slowClaims struct {
	driver.Driver
	exec driver.Executor
}

type slowClaimExecutor struct {
	driver.Executor
	// before makes the claims slow before they take their jobs (which
	// stay pending, due), not after.
	before bool
}

func (s *slowClaims) Executor() driver.Executor { return s.exec }

func (e slowClaimExecutor) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if e.before {
		time.Sleep(4 * slowQuiet)
		return e.Executor.JobClaim(ctx, p)
	}
	rows, err := e.Executor.JobClaim(ctx, p)
	if len(rows) > 0 {
		time.Sleep(4 * slowQuiet) // four times RunOpts.Quiet, under ten
	}
	return rows, err
}

// TestRunUntilIdleWaitsForSlowWork: a claim that returns slowly (on a
// loaded machine) is work in flight, not work waiting on the clock: the
// clock moves to the delayed job and no further, not on to the next
// housekeeping timer (maintenance's, a minute on).
func TestRunUntilIdleWaitsForSlowWork(t *testing.T) {
	t.Parallel()
	// In a bubble the slow claims' sleeps and RunUntilIdle's quiet periods
	// run on the bubble's clock: the same order of events on every run.
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Time{})
		mem := memdriver.New(memdriver.WithClock(clk.Now))
		t.Cleanup(func() { _ = mem.Close() })
		later := hopper.Define("later", func(context.Context, int) (string, error) { return "done", nil }, nil)
		c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, Driver: &slowClaims{Driver: mem, exec: slowClaimExecutor{Executor: mem.Executor()}}})
		if err := c.Register(later); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := clk.Now()
		h, err := later.Enqueue(ctx, c, 1, &hopper.InsertOpts{Delay: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Quiet: slowQuiet}); err != nil {
			t.Fatal(err)
		}
		if row, err := c.JobGet(ctx, h.ID()); err != nil || row.State != hopper.StateSucceeded {
			t.Fatalf("the job is %v (%v), want succeeded", row, err)
		}
		if got := clk.Now().Sub(start); got != 24*time.Hour {
			t.Fatalf("the clock moved %s, want exactly to the delayed job (a day)", got)
		}
	})
}

// TestRunUntilIdleRunsDueWorkFirst: while a job due now waits for a slow
// claim, the clock does not move to a job due later. A job that fails once
// with an hour's backoff and a job delayed a week: the clock moves a week,
// not a week and the hour of a first attempt run only once it got there.
func TestRunUntilIdleRunsDueWorkFirst(t *testing.T) {
	t.Parallel()
	// In a bubble the slow claims' sleeps and RunUntilIdle's quiet periods
	// run on the bubble's clock: the same order of events on every run.
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Time{})
		mem := memdriver.New(memdriver.WithClock(clk.Now))
		t.Cleanup(func() { _ = mem.Close() })
		var calls atomic.Int32
		once := hopper.Define("once", func(context.Context, int) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("first try fails")
			}
			return 1, nil
		}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Hour, Jitter: hopper.NoJitter}})
		later := hopper.Define("later", func(context.Context, int) (string, error) { return "done", nil }, nil)
		c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, Driver: &slowClaims{Driver: mem, exec: slowClaimExecutor{Executor: mem.Executor(), before: true}}})
		if err := c.Register(once, later); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := clk.Now()
		if _, err := once.Enqueue(ctx, c, 1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := later.Enqueue(ctx, c, 1, &hopper.InsertOpts{Delay: 7 * 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := hoppertest.RunUntilIdle(ctx, c, clk, &hoppertest.RunOpts{Quiet: slowQuiet}); err != nil {
			t.Fatal(err)
		}
		if got := clk.Now().Sub(start); got != 7*24*time.Hour {
			t.Fatalf("the clock moved %s, want exactly to the delayed job (a week)", got)
		}
	})
}
