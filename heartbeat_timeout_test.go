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

// TestHeartbeatTimeout: an attempt that goes past its type's
// HeartbeatTimeout without a heartbeat is cancelled with
// ErrHeartbeatTimeout and retried; one that heartbeats in time runs on,
// past the timeout counted from its start. On the virtual clock.
func TestHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	started := make(chan int, 4)
	beat := make(chan struct{})
	job := hopper.Define("hb", func(ctx context.Context, _ hopper.None) (int, error) {
		jc := hopper.JobFromContext(ctx)
		started <- jc.Attempt()
		if jc.Attempt() == 1 {
			<-ctx.Done() // hung: never heartbeats
			return 0, context.Cause(ctx)
		}
		for range 2 {
			<-beat
			if err := jc.Heartbeat(ctx); err != nil {
				return 0, err
			}
		}
		<-beat
		return 7, ctx.Err()
	}, &hopper.TypeOpts[hopper.None]{HeartbeatTimeout: 10 * time.Second,
		Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Nanosecond, Jitter: hopper.NoJitter}})
	c, clk := hoppertest.NewClient(t, hopper.Config{Visibility: time.Hour})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	start := clk.Now()
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)

	require.Equal(t, 1, <-started)
	require.NoError(t, clk.WaitArmedAt(ctx, start.Add(10*time.Second)))
	clk.Advance(10 * time.Second) // the watchdog fires: attempt 1 fails
	require.Equal(t, 2, <-started)
	at := clk.Now()
	require.NoError(t, clk.WaitArmedAt(ctx, at.Add(10*time.Second)))
	for range 2 {
		clk.Advance(6 * time.Second) // 6 s after the last heartbeat: alive
		beat <- struct{}{}
		require.NoError(t, clk.WaitArmedAt(ctx, clk.Now().Add(10*time.Second)), "the heartbeat moved the watchdog on")
	}
	beat <- struct{}{}
	v, err := h.Result(ctx)
	require.NoError(t, err, "12 s past its start, but never 10 s without a heartbeat")
	require.Equal(t, 7, v)

	atts, err := c.JobAttempts(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, atts, 2)
	require.NotNil(t, atts[0].Error)
	require.Contains(t, atts[0].Error.Message, "no heartbeat")
	require.Equal(t, "timeout", string(atts[0].Error.Kind))
	require.True(t, errors.Is(&hopper.JobError{Kind: atts[0].Error.Kind}, hopper.ErrAttemptTimeout))
}
