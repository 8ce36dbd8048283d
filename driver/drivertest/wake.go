package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// wakeCases cover JobWake.
func wakeCases() []testCase {
	return []testCase{
		{"WakesWaitingJobs", testWakeWaiting},
		{"LeavesOtherStates", testWakeOthers},
		{"RollsBackWithTx", testWakeRollback},
	}
}

func (f *fixture) wake(t *testing.T, now time.Time, ids ...string) []*hoppertype.JobRow {
	t.Helper()
	rows, err := f.x.JobWake(f.ctx, &driver.JobWakeParams{IDs: ids, Now: now})
	require.NoError(t, err)
	return rows
}

func testWakeWaiting(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	sched := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
	retrying := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateRetrying), runAt(at(time.Minute)), func(r *hoppertype.JobRow) {
		r.Attempt = 1
		r.LeaseToken = 5
		r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "first failed", Attempt: 1, At: at(-time.Second)}
		r.StartedAt = at(-2 * time.Second)
	})
	// A due scheduled job is woken too, to RunAt = Now.
	due := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateScheduled), runAt(at(-time.Hour)))
	later := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateScheduled), runAt(at(2*time.Hour)))

	now := nanos(at(time.Second))
	got := f.wake(t, now, retrying.ID, f.id(), sched.ID, due.ID, sched.ID)
	require.ElementsMatch(t, []string{sched.ID, retrying.ID, due.ID}, ids(got), "the woken jobs, each once; missing ids are ignored")
	byID := make(map[string]*hoppertype.JobRow, len(got))
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, orig := range []*hoppertype.JobRow{sched, retrying, due} {
		want := orig.Clone()
		want.State = hoppertype.JobStatePending
		want.RunAt = at(time.Second)
		requireJob(t, want, byID[orig.ID], "woken job %s: result", orig.ID)
		requireJob(t, want, f.get(t, orig.ID), "woken job %s: stored", orig.ID)
	}
	requireJob(t, later, f.get(t, later.ID), "a job not named is not woken")

	next, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: q})
	require.NoError(t, err)
	requireTime(t, at(2*time.Hour), next, "woken jobs no longer wait")
	claimed := f.claim(t, q, at(time.Second), 10)
	require.Equal(t, []string{sched.ID, retrying.ID, due.ID}, ids(claimed), "woken jobs are claimable now, by RunAt = Now then id")
	require.Equal(t, 2, claimed[1].Attempt, "the attempt count carries on")

	require.Empty(t, f.wake(t, at(time.Minute), sched.ID), "a running job is not woken")
	require.Empty(t, f.wake(t, at(time.Minute)), "no ids")
}

func testWakeOthers(t *testing.T, f *fixture) {
	pending := f.insertOne(t, runAt(at(-time.Minute)))
	running := f.claimOne(t)
	stuck := f.insertOne(t, inState(hoppertype.JobStateStuck), inQueue("stuck"), func(r *hoppertype.JobRow) {
		r.Stuck = &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, ObservedAt: base}
	})
	terminal := []*hoppertype.JobRow{
		f.finished(t, hoppertype.JobStateSucceeded),
		f.finished(t, hoppertype.JobStateDead),
		f.finished(t, hoppertype.JobStateExpired),
		f.finished(t, hoppertype.JobStateCancelled),
	}
	all := append([]*hoppertype.JobRow{pending, running, stuck}, terminal...)
	require.Empty(t, f.wake(t, at(time.Hour), append(ids(all), f.id())...))
	for _, r := range all {
		requireJob(t, r, f.get(t, r.ID), "a %s job is left as it is", r.State)
	}
}

func testWakeRollback(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	sched := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		rows, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{sched.ID}, Now: base})
		require.NoError(t, err)
		require.Equal(t, []string{sched.ID}, ids(rows))
		got, err := tx.JobGet(ctx, &driver.JobGetParams{ID: sched.ID})
		require.NoError(t, err)
		require.Equal(t, hoppertype.JobStatePending, got.State, "the transaction reads its own wake")
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	requireJob(t, sched, f.get(t, sched.ID), "the wake rolled back")
	next, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: q})
	require.NoError(t, err)
	requireTime(t, at(time.Hour), next, "the job waits again")
	require.Empty(t, f.claim(t, q, base, 10), "the job is not due before its RunAt")
	require.Equal(t, []string{sched.ID}, ids(f.wake(t, base, sched.ID)), "it can be woken again")
	require.Equal(t, []string{sched.ID}, ids(f.claim(t, q, base, 10)))
}
