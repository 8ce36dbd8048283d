package hopper_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
)

// TestWorkflowStrategyDefault: Config.WorkflowStrategy is the strategy of
// the workflows that set none (seed 004's world-level default); a
// workflow's own strategy wins; an unknown one is refused.
func TestWorkflowStrategyDefault(t *testing.T) { forEachDriver(t, testWorkflowStrategyDefault) }

func testWorkflowStrategyDefault(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var tries, refunds atomic.Int32
	body := func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		if _, err := hopper.Step(wf, "charge", func(context.Context) (int, error) { tries.Add(1); return 1, nil }, nil); err != nil {
			return 0, err
		}
		wf.Compensate("refund", func(context.Context) error { refunds.Add(1); return nil })
		return 0, errors.New("declined")
	}
	plain := hopper.Workflow("plain", body, nil)
	retried := hopper.Workflow("retried", body, &hopper.WorkflowOpts{Strategy: hopper.StrategyRetry, MaxRetries: 1,
		Retry: hopper.RetryPolicy{Base: 1, Jitter: hopper.NoJitter}})
	c := newClient(t, hopper.Config{Driver: newDriver(t), WorkflowStrategy: hopper.StrategyCompensate})
	require.NoError(t, c.Register(plain, retried))
	ctx := testCtx(t)

	h, err := plain.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompensated, info.Status, "the client's default: compensate at once")
	require.Equal(t, int32(1), tries.Load(), "no retry")
	require.Equal(t, int32(1), refunds.Load())
	job, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 1, hopper.MaxAttempts(job))

	tries.Store(0)
	refunds.Store(0)
	h, err = retried.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.Equal(t, int32(2), tries.Load(), "its own strategy wins: retried once")
	require.Equal(t, int32(2), refunds.Load(), "one refund per charge")

	_, err = hopper.New(hopper.Config{Driver: newDriver(t), WorkflowStrategy: "sometimes"})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}
