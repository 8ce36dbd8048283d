package hopper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestRetryWaitsOnTheClock: hopper.Retry inside a handler waits its
// backoff on the client's clock, and outside a job on the clock of
// WithClock; under a virtual clock nothing happens until the test moves it.
func TestRetryWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	calls := make(chan int, 10)
	policy := hopper.RetryPolicy{Attempts: 3, Base: time.Hour, Backoff: hopper.BackoffConstant, Jitter: hopper.NoJitter}
	flaky := func(n *int) func(context.Context) error {
		return func(context.Context) error {
			*n++
			calls <- *n
			if *n < 3 {
				return errors.New("not yet")
			}
			return nil
		}
	}
	job := hopper.Define("retrying", func(ctx context.Context, _ hopper.None) (int, error) {
		var n int
		return n, hopper.Retry(ctx, flaky(&n), policy)
	}, nil)
	// The handler stays in flight while the clock moves two hours: a lease
	// longer than that keeps the rescuer away from it (a heartbeat the
	// clock's jump overtakes would not).
	c, clk := hoppertest.NewClient(t, hopper.Config{Visibility: 24 * time.Hour})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, <-calls)
	// The backoff is a timer on the client's clock, an hour from now.
	require.NoError(t, clk.WaitArmedAt(ctx, clk.Now().Add(time.Hour)))
	require.Empty(t, calls, "no call before the clock moved")
	clk.Advance(time.Hour)
	require.Equal(t, 2, <-calls)
	require.NoError(t, clk.WaitArmedAt(ctx, clk.Now().Add(time.Hour)))
	clk.Advance(time.Hour)
	require.Equal(t, 3, <-calls)
	_, err = h.Result(ctx)
	require.NoError(t, err)

	// Outside a job, WithClock gives the clock.
	own := hoppertest.NewClock(time.Time{})
	done := make(chan error, 1)
	var n int
	go func() { done <- hopper.Retry(hopper.WithClock(ctx, own), flaky(&n), policy) }()
	require.Equal(t, 1, <-calls)
	require.NoError(t, own.WaitArmedAt(ctx, own.Now().Add(time.Hour)))
	own.Advance(time.Hour)
	require.Equal(t, 2, <-calls)
	require.NoError(t, own.WaitArmedAt(ctx, own.Now().Add(time.Hour)))
	own.Advance(time.Hour)
	require.Equal(t, 3, <-calls)
	require.NoError(t, <-done)
}

// TestAttemptTimesOnTheClock: under hoppertest the attempts read from the
// memory store's change feed carry the virtual clock's times, comparable
// with the job's due time.
func TestAttemptTimesOnTheClock(t *testing.T) {
	t.Parallel()
	job := hopper.Define("later", func(context.Context, hopper.None) (int, error) { return 1, nil }, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, &hopper.InsertOpts{Delay: time.Hour})
	require.NoError(t, err)
	clk.Advance(time.Hour)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	atts, err := c.JobAttempts(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.False(t, atts[0].StartedAt.Before(row.RunAt), "attempt started %v, due %v", atts[0].StartedAt, row.RunAt)
	require.True(t, atts[0].StartedAt.Equal(clk.Now()), "attempt started %v, clock at %v", atts[0].StartedAt, clk.Now())
	require.True(t, atts[0].EndedAt.Equal(clk.Now()))
}
