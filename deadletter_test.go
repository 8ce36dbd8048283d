package hopper_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/stretchr/testify/require"
)

// TestCompensatedSagaIsNoDeadLetter: the job of a saga that undid its work
// ends dead, but no redrive moves it — by id, by type, of every dead
// letter, or in bulk — and the dead-letter listing leaves it out; the run
// is retried as a run.
func TestCompensatedSagaIsNoDeadLetter(t *testing.T) {
	forEachDriver(t, testCompensatedSagaIsNoDeadLetter)
}

func testCompensatedSagaIsNoDeadLetter(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	saga := retrySaga("saga-dead", &l, &hopper.WorkflowOpts{Retry: retryNow})
	broken := hopper.Define("broken", func(context.Context, int) (int, error) {
		return 0, hopper.Abort(errors.New("downstream down"))
	}, nil)
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(saga, broken))
	ctx := testCtx(t)

	run, err := saga.Start(ctx, c, sagaIn{OKFrom: 99}, nil)
	require.NoError(t, err)
	_, err = run.Result(ctx)
	var re *hopper.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, hopper.RunCompensated, re.Status)
	job, err := broken.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = job.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)

	did := len(l.all())
	sagaJob, err := c.JobGet(ctx, run.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateDead, sagaJob.State, "the run's job ends dead")
	dead, err := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{hopper.StateDead}, HideCompensated: true})
	require.NoError(t, err)
	require.Len(t, dead.Jobs, 1)
	require.Equal(t, job.ID(), dead.Jobs[0].ID, "the dead letters are the broken job alone")

	for _, p := range []*hopper.RedriveParams{{IDs: []string{run.ID()}}, {Type: sagaJob.Type}} {
		n, err := c.JobRedrive(ctx, p)
		require.NoError(t, err)
		require.Zero(t, n, "redrive %+v moves no compensated saga", p)
	}
	res, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, IDs: []string{run.ID()}})
	require.NoError(t, err)
	require.Zero(t, res.Changed, "a bulk redrive moves no compensated saga")
	n, err := c.JobRedrive(ctx, &hopper.RedriveParams{All: true})
	require.NoError(t, err)
	require.Equal(t, 1, n, "redriving every dead letter moves the broken job alone")
	info, err := c.RunGet(ctx, run.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompensated, info.Status)
	sagaJob, err = c.JobGet(ctx, run.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateDead, sagaJob.State)
	require.Equal(t, did, len(l.all()), "the saga did not run again")

	require.NoError(t, c.RunRetry(ctx, run.ID()), "the run is retried as a run")
	// The retried run fails and compensates again (its input has not
	// changed), at once or a moment later: what shows it was retried is
	// that the saga ran again.
	_, err = run.Result(ctx)
	require.ErrorAs(t, err, &re)
	require.Greater(t, len(l.all()), did, "the retried run ran the saga again")
}
