package hopper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestHeartbeatTimeout: an attempt that goes past its type's
// HeartbeatTimeout without a heartbeat is cancelled with
// ErrHeartbeatTimeout and retried; one that heartbeats in time runs on,
// past the timeout counted from its start. On the virtual clock, on every
// driver.
func TestHeartbeatTimeout(t *testing.T) { forEachDriver(t, testHeartbeatTimeout) }

func testHeartbeatTimeout(t *testing.T, newDriver func(*testing.T) driver.Driver) {
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
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), Visibility: time.Hour})
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

// TestHeartbeatTimeoutOfAnActivity: seed 004's activity heartbeat
// timeout. A workflow's activity whose handler hangs (it never heartbeats)
// is failed 10 s into each attempt, though its attempt timeout is an
// hour; once its retries are spent, the workflow's Activity returns the
// failure, a timeout naming the missing heartbeat, and the workflow goes
// on. On the virtual clock, on every driver.
func TestHeartbeatTimeoutOfAnActivity(t *testing.T) {
	forEachDriver(t, testHeartbeatTimeoutOfAnActivity)
}

func testHeartbeatTimeoutOfAnActivity(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	started := make(chan int, 4)
	label := hopper.Define("hb-label", func(ctx context.Context, _ hopper.None) (string, error) {
		started <- hopper.JobFromContext(ctx).Attempt()
		<-ctx.Done() // hung: never heartbeats
		return "", context.Cause(ctx)
	}, &hopper.TypeOpts[hopper.None]{HeartbeatTimeout: 10 * time.Second, AttemptTimeout: time.Hour,
		Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Nanosecond, Jitter: hopper.NoJitter}})
	wf := hopper.Workflow("hb-order", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		_, err := hopper.Activity(wf, label, hopper.None{}, nil)
		var se *hopper.StepError
		if errors.As(err, &se) && errors.Is(err, hopper.ErrAttemptTimeout) {
			return "no label: " + se.Message, nil
		}
		return "label printed", err
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), Visibility: time.Hour})
	require.NoError(t, c.Register(label, wf))
	ctx := testCtx(t)
	start := clk.Now()
	h, err := wf.Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "hb-order-1"})
	require.NoError(t, err)

	for attempt := 1; attempt <= 2; attempt++ {
		select {
		case n := <-started:
			require.Equal(t, attempt, n)
		case <-ctx.Done():
			t.Fatalf("attempt %d never started", attempt)
		}
		at := clk.Now()
		require.NoError(t, clk.WaitArmedAt(ctx, at.Add(10*time.Second)))
		clk.Advance(10 * time.Second) // the watchdog fires: the attempt fails
	}
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Contains(t, out, "no label: ")
	require.Contains(t, out, "no heartbeat")
	require.Equal(t, 20*time.Second, clk.Now().Sub(start), "failed twice 10 s in, not an hour")

	atts, err := c.JobAttempts(ctx, "hb-order-1.a2")
	require.NoError(t, err)
	require.Len(t, atts, 2)
	for _, a := range atts {
		require.NotNil(t, a.Error)
		require.Contains(t, a.Error.Message, "no heartbeat")
		require.Equal(t, "timeout", string(a.Error.Kind))
	}
}
