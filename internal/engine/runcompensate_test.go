package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/hoppertype"
)

// TestUndoneCompensations: the compensations an attempt registered and
// never recorded the execution of are found by their place, also when
// two share a name.
func TestUndoneCompensations(t *testing.T) {
	t.Parallel()
	ev := func(kind, name string) *hoppertype.RunEvent { return &hoppertype.RunEvent{Kind: kind, Name: name} }
	events := []*hoppertype.RunEvent{
		ev(EvWorkflowStarted, ""),
		ev(EvCompensationAdded, "refund"),  // #0
		ev(EvCompensationAdded, "release"), // #1
		ev(EvCompensationAdded, "refund"),  // #2
		ev(EvWorkflowFailed, ""),
		ev(EvCompensationDone, CompKey("refund", 2)),
		ev(EvCompensationFail, CompKey("release", 1)),
	}
	require.Equal(t, []int{0}, undoneCompensations(events), "a failed undo counts as run")
	require.Equal(t, []int{0, 1, 2}, undoneCompensations(events[:5]))
	require.Empty(t, undoneCompensations(events[:1]))

	require.True(t, registeredCompensations([]Generation{{Events: events[:1]}, {Events: events[:2]}}))
	require.False(t, registeredCompensations([]Generation{{Events: events[:1]}}))
}

// TestRunCompensationPanics: a compensation that panics fails with
// ErrPanic, the panic's error kept as the cause.
func TestRunCompensationPanics(t *testing.T) {
	t.Parallel()
	cause := errors.New("ledger gone")
	err := runCompensation(context.Background(), func(context.Context) error { panic(cause) })
	require.ErrorIs(t, err, hoppertype.ErrPanic)
	require.ErrorIs(t, err, cause)
	require.NoError(t, runCompensation(context.Background(), func(context.Context) error { return nil }))
}

// TestCascade: a failed run cancels its parent and its live children; a
// child that ended and an unrelated run are left alone.
func TestCascade(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	f.run("parent", "", hoppertype.RunWaiting, hoppertype.JobStateScheduled)
	f.run("r", "parent", hoppertype.RunFailed, hoppertype.JobStateDead)
	f.run("live", "r", hoppertype.RunWaiting, hoppertype.JobStateScheduled)
	f.run("ended", "r", hoppertype.RunCompleted, hoppertype.JobStateSucceeded)
	f.run("other", "", hoppertype.RunWaiting, hoppertype.JobStateScheduled)

	f.e.cascade(ctx, f.e.NewAttempt(f.get("r")), f.getRun("r"))
	for _, id := range []string{"parent", "live"} {
		run := f.getRun(id)
		require.NotNil(t, run.Error, id)
		require.Equal(t, hoppertype.ErrorKindCancelled, run.Error.Kind, id)
		require.Equal(t, hoppertype.JobStatePending, f.get(id).State, "%s: its job is woken to end it", id)
	}
	for _, id := range []string{"ended", "other"} {
		require.Nil(t, f.getRun(id).Error, id)
	}
	require.Equal(t, hoppertype.RunCompleted, f.getRun("ended").Status)
}
