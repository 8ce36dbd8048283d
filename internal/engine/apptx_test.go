package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestConfirmTx: once a handler that completed its job in an application's
// transaction returns, one read of the job decides: succeeded under the
// attempt's lease, the transaction committed, and the engine does what
// follows a commit (the notifications the store held for it, the waiters
// woken with the row, the event); still running under the lease, it
// rolled back, and the attempt ends through the completer; taken by
// another attempt or gone, there is nothing left to do.
func TestConfirmTx(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	s := &session{e: f.e, life: newLifetimes(ctx)}
	t.Cleanup(s.life.end)
	sub, err := f.d.Listen(ctx, "held")
	require.NoError(t, err)
	defer sub.Close()

	f.running("j")
	row := f.get("j")
	at := f.e.NewAttempt(row)
	item := succeed(row, `1`, nil)
	tf := &txFinish{f: finished{item: &item}, notes: []driver.NotifyParams{{Topic: "held", Payload: "j"}}}
	require.False(t, s.confirmTx(at, tf), "still running under the lease: the transaction rolled back")
	require.Empty(t, pending(sub))

	// The application's transaction commits the success.
	res, err := f.ex.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: "j", LeaseToken: row.LeaseToken,
		State: hoppertype.JobStateSucceeded, Attempt: row.Attempt, RunAt: row.RunAt, EndedAt: f.now, Result: []byte(`1`)}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	tf.f.job = f.get("j")
	w, release := f.e.waiters.watch(waitJob, "j")
	defer release()
	require.True(t, s.confirmTx(at, tf), "committed")
	require.Equal(t, []string{"j"}, pending(sub), "the notifications held for the commit are sent")
	require.True(t, isClosed(w.ch))
	require.Equal(t, hoppertype.JobStateSucceeded, f.e.waiters.finished(w).State, "the waiters get the committed row")
	require.Equal(t, []string{"j"}, f.events.of(hoppertype.EventSucceeded))

	stale := row.Clone()
	stale.LeaseToken++
	require.True(t, s.confirmTx(f.e.NewAttempt(stale), tf), "another attempt's job: nothing to record")
	gone := row.Clone()
	gone.ID = "gone"
	require.True(t, s.confirmTx(f.e.NewAttempt(gone), tf), "a job that is gone: nothing to record")
	require.Empty(t, pending(sub), "nor anything to announce")
	require.Equal(t, []string{"j"}, f.events.of(hoppertype.EventSucceeded))
}

// TestCompleteTxRefuses: CompleteTx needs an attempt run by a started
// engine, of a job that is no workflow run, over a store that joins an
// application's transactions; each refusal changes nothing.
func TestCompleteTxRefuses(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	f.running("j")
	row := f.get("j")
	require.ErrorIs(t, f.e.NewAttempt(row).CompleteTx(ctx, struct{}{}, nil), hoppertype.ErrInvalidInput, "outside a session")

	life := newLifetimes(ctx)
	t.Cleanup(life.end)
	run := row.Clone()
	run.Type = WorkflowTypePrefix + "w"
	require.ErrorIs(t, (&Attempt{e: f.e, row: run, life: life}).CompleteTx(ctx, struct{}{}, nil), hoppertype.ErrInvalidInput, "a run's job")
	err := (&Attempt{e: f.e, row: row, life: life}).CompleteTx(ctx, struct{}{}, nil)
	require.ErrorIs(t, err, hoppertype.ErrTxUnsupported, "the memory store joins no transaction")
	require.ErrorIs(t, err, driver.ErrNotImplemented)
	require.Equal(t, hoppertype.JobStateRunning, f.get("j").State)
}

// TestSameTx: one transaction is itself; two of a kind, or of kinds that do
// not compare, are not taken for one another.
func TestSameTx(t *testing.T) {
	t.Parallel()
	a, b := &struct{ n int }{1}, &struct{ n int }{1}
	require.True(t, sameTx(a, a))
	require.False(t, sameTx(a, b))
	require.False(t, sameTx(nil, nil))
	require.False(t, sameTx([]int{1}, []int{1}), "not comparable: never the same")
}
