package hopper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
)

// TestDeprecatedNamesAnswerAsTheNewOnes: the old method names still work
// and answer what their new names answer.
func TestDeprecatedNamesAnswerAsTheNewOnes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := newClient(t, hopper.Config{})
	add := hopper.Define("add", addHandler, nil)
	require.NoError(t, c.Register(add))
	h, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, nil)
	require.NoError(t, err)

	waited, err := c.Wait(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, waited.State)
	got, err := c.Get(ctx, h.ID())
	require.NoError(t, err)
	want, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, want, got)
	page, err := c.List(ctx, nil)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	attempts, err := c.Attempts(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	gens, err := c.Generations(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 1, gens)
	_, err = c.Cancel(ctx, h.ID())
	require.ErrorIs(t, err, hopper.ErrStateConflict, "a finished job is not cancelled")
	_, err = c.Retry(ctx, "nosuch")
	require.ErrorIs(t, err, hopper.ErrNotFound)
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	newQueues, err := c.QueueList(ctx)
	require.NoError(t, err)
	require.Equal(t, newQueues, queues)

	wf := hopper.Workflow("idle", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	run, err := wf.Start(ctx, c, 1, nil) // not registered: stays pending
	require.NoError(t, err)
	info, err := c.GetRun(ctx, run.ID())
	require.NoError(t, err)
	require.Equal(t, run.ID(), info.ID)
	runs, err := c.QueryRuns(ctx, &hopper.RunQuery{Workflow: "idle"})
	require.NoError(t, err)
	listed, err := c.ListRuns(ctx, &hopper.RunQuery{Workflow: "idle"})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, listed.Runs[0].ID, runs[0].ID)
	require.NoError(t, c.CancelRun(ctx, run.ID()))
	require.ErrorIs(t, c.CancelRun(ctx, "nosuch"), hopper.ErrNotFound)
}
