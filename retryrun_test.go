package hopper_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestRetryRun: a run that ended without completing runs again as a fresh
// attempt with its whole retry budget; its earlier undo stays; a run still
// going or completed cannot be retried.
func TestRetryRun(t *testing.T) { forEachDriver(t, testRetryRun) }

func testRetryRun(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var charges, refunds, tries atomic.Int32
	var healthy atomic.Bool
	body := func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if _, err := hopper.Step(wf, "charge", func(context.Context) (int, error) { charges.Add(1); return 1, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("refund", func(context.Context) error { refunds.Add(1); return nil })
		tries.Add(1)
		if !healthy.Load() {
			return "", errors.New("the warehouse is down")
		}
		return "shipped", nil
	}
	once := hopper.Workflow("once", body, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})
	twice := hopper.Workflow("twice", body, &hopper.WorkflowOpts{MaxRetries: 1, Retry: hopper.RetryPolicy{Base: 1, Jitter: hopper.NoJitter}})
	waits := hopper.Workflow("waits", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		h, err := hopper.NewHook[string](wf, "go")
		if err != nil {
			return "", err
		}
		return h.Wait(nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(once, twice, waits))
	ctx := testCtx(t)

	// A compensated run, retried once the cause is fixed, completes.
	h, err := once.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	healthy.Store(true)
	require.NoError(t, c.RunRetry(ctx, h.ID()))
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "shipped", out)
	require.Equal(t, int32(2), charges.Load(), "a fresh attempt charges again")
	require.Equal(t, int32(1), refunds.Load(), "the first attempt's charge stays refunded, once")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.Nil(t, info.Error, "the earlier failure is cleared")
	require.ErrorIs(t, c.RunRetry(ctx, h.ID()), hopper.ErrStateConflict, "a completed run")

	// A run that used its retries has them all again.
	healthy.Store(false)
	tries.Store(0)
	h, err = twice.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.Equal(t, int32(2), tries.Load())
	require.NoError(t, c.RunRetry(ctx, h.ID()))
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.Equal(t, int32(4), tries.Load(), "two more tries: the budget counts anew")

	// A cancelled run starts again and waits again.
	w, err := waits.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	awaitRunStatus(t, c, w.ID(), hopper.RunWaiting)
	require.ErrorIs(t, c.RunRetry(ctx, w.ID()), hopper.ErrStateConflict, "a run still going")
	require.NoError(t, c.RunCancel(ctx, w.ID()))
	_, err = w.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	require.NoError(t, c.RunRetry(ctx, w.ID()))
	awaitRunStatus(t, c, w.ID(), hopper.RunWaiting)
	info, err = c.RunGet(ctx, w.ID())
	require.NoError(t, err)
	var token string
	for _, hk := range info.Hooks {
		if hk.State == hoppertype.HookWaiting {
			token = hk.Token
		}
	}
	require.NotEmpty(t, token, "the new attempt waits on a hook of its own: %+v", info.Hooks)
	require.NoError(t, c.HookResume(ctx, token, []byte(`"go"`)))
	out, err = w.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "go", out)

	require.ErrorIs(t, c.RunRetry(ctx, "no-such-run"), hopper.ErrNotFound)
}
