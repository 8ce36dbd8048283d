package drivertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// gateCases cover GateInsert, GateGet, GateWaitList, GateEdges and the
// gate bookkeeping of JobFinishMany, JobCancel, JobRetry and
// JobDeleteFinished.
func gateCases() []testCase {
	return []testCase{
		{"InsertCountsCurrentStates", testGateInsertCounts},
		{"InsertWakesDecidedGate", testGateInsertWakes},
		{"InsertDuplicates", testGateInsertDuplicates},
		{"GetNotFound", testGateNotFound},
		{"FinishWakesWhenMet", testGateFinishMet},
		{"FinishWakesWhenImpossible", testGateFinishImpossible},
		{"CountConditions", testGateCount},
		{"CancelIsObserved", testGateCancel},
		{"RetryUnobservesAndUnsticks", testGateRetry},
		{"RunningGateNotWoken", testGateRunningNotWoken},
		{"Edges", testGateEdges},
		{"Watchers", testGateWatchers},
		{"DeleteKeepsObservedStates", testGateDelete},
		{"RollsBackWithTx", testGateRollback},
		{"ConcurrentFinishesAreExact", testGateConcurrent},
		{"ObserveRepairsAMissedTransition", testGateObserve},
	}
}

// gateJob inserts a gate's job: scheduled an hour from base, in a queue of
// its own.
func (f *fixture) gateJob(t *testing.T) *hoppertype.JobRow {
	t.Helper()
	return f.insertOne(t, ofType("hopper.gate"), inQueue("gq-"+f.id()), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
}

func (f *fixture) gateInsert(t *testing.T, specs ...*driver.GateSpec) []*hoppertype.GateRow {
	t.Helper()
	rows, err := f.x.GateInsert(f.ctx, &driver.GateInsertParams{Gates: specs, Now: nanos(base)})
	require.NoError(t, err)
	require.Len(t, rows, len(specs))
	for i, r := range rows {
		require.Equal(t, specs[i].ID, r.ID)
		require.Equal(t, r, f.gateGet(t, r.ID), "GateInsert returns the stored gate")
	}
	return rows
}

func (f *fixture) gateGet(t *testing.T, id string) *hoppertype.GateRow {
	t.Helper()
	g, err := f.x.GateGet(f.ctx, &driver.GateGetParams{ID: id})
	require.NoError(t, err)
	require.Equal(t, base, g.CreatedAt.UTC(), "created at, to the microsecond")
	g.CreatedAt = g.CreatedAt.UTC()
	return g
}

func requireCounts(t *testing.T, g *hoppertype.GateRow, total, done, succeeded int, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, [3]int{total, done, succeeded}, [3]int{g.Total, g.Done, g.Succeeded}, msgAndArgs...)
}

// finishAs claims job j (which must be pending in a queue of its own) and
// finishes it in state s at the given time.
func (f *fixture) finishAs(t *testing.T, j *hoppertype.JobRow, s hoppertype.JobState, when time.Time) *hoppertype.JobRow {
	t.Helper()
	rows := f.claim(t, j.Queue, when, 1)
	require.Len(t, rows, 1)
	require.Equal(t, j.ID, rows[0].ID)
	p := driver.JobFinishParams{ID: j.ID, LeaseToken: rows[0].LeaseToken, State: s, Attempt: 1, RunAt: rows[0].RunAt}
	if s.Terminal() {
		p.EndedAt = when
	}
	return f.finishOK(t, p)
}

func (f *fixture) ownQueueJob(t *testing.T, mods ...func(*hoppertype.JobRow)) *hoppertype.JobRow {
	t.Helper()
	return f.insertOne(t, append([]func(*hoppertype.JobRow){inQueue("q-" + f.id())}, mods...)...)
}

func testGateInsertCounts(t *testing.T, f *fixture) {
	ok := f.ownQueueJob(t, inState(hoppertype.JobStateSucceeded), endedAt(at(-time.Minute)))
	dead := f.ownQueueJob(t, inState(hoppertype.JobStateDead), endedAt(at(-time.Minute)))
	waiting := f.ownQueueJob(t)
	stuck := f.ownQueueJob(t, inState(hoppertype.JobStateStuck))
	missing := f.id()
	g := f.gateJob(t)
	got := f.gateInsert(t, &driver.GateSpec{
		ID: g.ID, Cond: hoppertype.GateCondition{Kind: hoppertype.GateAllDone},
		On: []string{waiting.ID, ok.ID, dead.ID, missing, stuck.ID, ok.ID}, Queues: []string{f.id()},
	})[0]
	requireCounts(t, got, 5, 2, 1, "duplicates in On count once; missing and stuck jobs are not done")
	require.Equal(t, hoppertype.GateCondition{Kind: hoppertype.GateAllDone}, got.Cond)
	waits, err := f.x.GateWaitList(f.ctx, &driver.GateWaitListParams{GateID: g.ID})
	require.NoError(t, err)
	want := map[string]hoppertype.JobState{ok.ID: hoppertype.JobStateSucceeded, dead.ID: hoppertype.JobStateDead, waiting.ID: "", stuck.ID: "", missing: ""}
	gotWaits := map[string]hoppertype.JobState{}
	for i, w := range waits {
		require.Equal(t, g.ID, w.GateID)
		gotWaits[w.JobID] = w.State
		if i > 0 {
			require.Less(t, waits[i-1].JobID, w.JobID, "waits are listed by job id")
		}
	}
	require.Equal(t, want, gotWaits)
	requireJob(t, g, f.get(t, g.ID), "an undecided gate's job is not woken")
}

func testGateInsertWakes(t *testing.T, f *fixture) {
	ok := f.ownQueueJob(t, inState(hoppertype.JobStateSucceeded), endedAt(at(-time.Minute)))
	dead := f.ownQueueJob(t, inState(hoppertype.JobStateDead), endedAt(at(-time.Minute)))
	met, impossible := f.gateJob(t), f.gateJob(t)
	sub, err := f.d.Listen(f.ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer sub.Close()
	f.gateInsert(t,
		&driver.GateSpec{ID: met.ID, On: []string{ok.ID}},
		&driver.GateSpec{ID: impossible.ID, On: []string{ok.ID, dead.ID}},
	)
	for _, g := range []*hoppertype.JobRow{met, impossible} {
		want := g.Clone()
		want.State, want.RunAt = hoppertype.JobStatePending, base
		requireJob(t, want, f.get(t, g.ID), "a gate decided at insert is woken at once")
	}
	requireNotified(t, sub, met.Queue)
	// A gate on nothing: all-success of no jobs holds.
	empty := f.gateJob(t)
	require.Equal(t, 0, f.gateInsert(t, &driver.GateSpec{ID: empty.ID})[0].Total)
	require.Equal(t, hoppertype.JobStatePending, f.get(t, empty.ID).State)
}

// requireNotified waits for payload on sub, skipping others.
func requireNotified(t *testing.T, sub driver.Subscription, payload string) {
	t.Helper()
	timeout := time.After(notifyWait)
	for {
		select {
		case p, ok := <-sub.C():
			require.True(t, ok, "subscription closed")
			if p == payload || p == "" {
				return
			}
		case <-timeout:
			t.Fatalf("no notification %q", payload)
		}
	}
}

func testGateInsertDuplicates(t *testing.T, f *fixture) {
	g1, g2 := f.gateJob(t), f.gateJob(t)
	queued := f.id()
	f.gateInsert(t, &driver.GateSpec{ID: g1.ID, On: []string{f.id()}, Queues: []string{queued}})
	_, err := f.x.GateInsert(f.ctx, &driver.GateInsertParams{Gates: []*driver.GateSpec{{ID: g1.ID}}, Now: base})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID, "an existing gate id")
	require.NotContains(t, err.Error(), "Key (", "the error names no database internals")
	_, err = f.x.GateInsert(f.ctx, &driver.GateInsertParams{Gates: []*driver.GateSpec{{ID: g2.ID, Queues: []string{f.id(), queued}}}, Now: base})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID, "a job another gate queues")
	for _, internal := range []string{"Key (", ")=(", "pkey", "SQLSTATE", "gate_queues"} {
		require.NotContains(t, err.Error(), internal, "the error names no database internals")
	}
	_, err = f.x.GateGet(f.ctx, &driver.GateGetParams{ID: g2.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a failed GateInsert stores nothing")
	requireJob(t, g2, f.get(t, g2.ID))
}

func testGateNotFound(t *testing.T, f *fixture) {
	g, err := f.x.GateGet(f.ctx, &driver.GateGetParams{ID: f.id()})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, g)
	waits, err := f.x.GateWaitList(f.ctx, &driver.GateWaitListParams{GateID: f.id()})
	require.NoError(t, err)
	require.Empty(t, waits)
}

func testGateFinishMet(t *testing.T, f *fixture) {
	a, b := f.ownQueueJob(t), f.ownQueueJob(t)
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID, b.ID}})
	sub, err := f.d.Listen(f.ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer sub.Close()

	f.finishAs(t, a, hoppertype.JobStateSucceeded, at(time.Second))
	requireCounts(t, f.gateGet(t, g.ID), 2, 1, 1)
	requireJob(t, g, f.get(t, g.ID), "half met: still waiting")

	// A failed attempt that will retry is not terminal: nothing changes.
	f.finishAs(t, b, hoppertype.JobStateRetrying, at(2*time.Second))
	requireCounts(t, f.gateGet(t, g.ID), 2, 1, 1)

	b2 := f.get(t, b.ID)
	rows := f.claim(t, b.Queue, at(time.Hour), 1)
	require.Len(t, rows, 1)
	f.finishOK(t, driver.JobFinishParams{ID: b2.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateSucceeded,
		Attempt: 2, RunAt: rows[0].RunAt, EndedAt: nanos(at(3 * time.Second))})
	requireCounts(t, f.gateGet(t, g.ID), 2, 2, 2)
	want := g.Clone()
	want.State, want.RunAt = hoppertype.JobStatePending, at(3*time.Second)
	requireJob(t, want, f.get(t, g.ID), "met: the gate's job is due at the transition's time")
	requireNotified(t, sub, g.Queue)
	waits, err := f.x.GateWaitList(f.ctx, &driver.GateWaitListParams{GateID: g.ID})
	require.NoError(t, err)
	require.Len(t, waits, 2)
	for _, w := range waits {
		require.Equal(t, hoppertype.JobStateSucceeded, w.State)
	}
}

func testGateFinishImpossible(t *testing.T, f *fixture) {
	a, b := f.ownQueueJob(t), f.ownQueueJob(t)
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID, b.ID}})
	f.finishAs(t, a, hoppertype.JobStateDead, at(time.Second))
	requireCounts(t, f.gateGet(t, g.ID), 2, 1, 0)
	require.Equal(t, hoppertype.JobStatePending, f.get(t, g.ID).State, "all-success with a dead job: woken to report itself")
}

func testGateCount(t *testing.T, f *fixture) {
	a, b, c := f.ownQueueJob(t), f.ownQueueJob(t), f.ownQueueJob(t)
	twoDone, twoOK := f.gateJob(t), f.gateJob(t)
	f.gateInsert(t,
		&driver.GateSpec{ID: twoDone.ID, Cond: hoppertype.GateCondition{Kind: hoppertype.GateCount, Count: 2}, On: []string{a.ID, b.ID, c.ID}},
		&driver.GateSpec{ID: twoOK.ID, Cond: hoppertype.GateCondition{Kind: hoppertype.GateCount, Count: 2, Of: hoppertype.GateOfSuccess}, On: []string{a.ID, b.ID, c.ID}},
	)
	require.Equal(t, hoppertype.GateCondition{Kind: hoppertype.GateCount, Count: 2, Of: hoppertype.GateOfDone}, f.gateGet(t, twoDone.ID).Cond, "Of defaults to done")
	f.finishAs(t, a, hoppertype.JobStateDead, at(time.Second))
	require.Equal(t, hoppertype.JobStateScheduled, f.get(t, twoDone.ID).State)
	require.Equal(t, hoppertype.JobStateScheduled, f.get(t, twoOK.ID).State, "two of success still possible")
	f.finishAs(t, b, hoppertype.JobStateSucceeded, at(2*time.Second))
	require.Equal(t, hoppertype.JobStatePending, f.get(t, twoDone.ID).State, "two done")
	require.Equal(t, hoppertype.JobStateScheduled, f.get(t, twoOK.ID).State, "one success so far")
	f.finishAs(t, c, hoppertype.JobStateCancelled, at(3*time.Second))
	requireCounts(t, f.gateGet(t, twoOK.ID), 3, 3, 1)
	require.Equal(t, hoppertype.JobStatePending, f.get(t, twoOK.ID).State, "two of success now impossible")
}

func testGateCancel(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t, inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, Cond: hoppertype.GateCondition{Kind: hoppertype.GateAllDone}, On: []string{a.ID}})
	_, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: a.ID, Now: nanos(at(time.Minute)), Error: cancelErr(at(time.Minute))})
	require.NoError(t, err)
	requireCounts(t, f.gateGet(t, g.ID), 1, 1, 0)
	got := f.get(t, g.ID)
	require.Equal(t, hoppertype.JobStatePending, got.State)
	requireTime(t, at(time.Minute), got.RunAt)
}

func testGateRetry(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID}})
	f.finishAs(t, a, hoppertype.JobStateDead, at(time.Second))
	// The gate's job runs and reports itself stuck on the failed blocker.
	rows := f.claim(t, g.Queue, at(2*time.Second), 1)
	require.Len(t, rows, 1)
	stuck := f.finishOK(t, driver.JobFinishParams{ID: g.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateStuck,
		Attempt: 1, RunAt: rows[0].RunAt, Stuck: &hoppertype.StuckInfo{Cause: hoppertype.StuckFailedBlocker, BlockerIDs: []string{a.ID}, ObservedAt: at(2 * time.Second)}})
	require.Equal(t, hoppertype.JobStateStuck, stuck.State)

	// Redriving the blocker makes the condition possible again: the gate
	// waits again (woken, its stuck slot cleared).
	_, err := f.x.JobRetry(f.ctx, &driver.JobRetryParams{IDs: []string{a.ID}, States: []hoppertype.JobState{hoppertype.JobStateDead}, Now: at(time.Minute)})
	require.NoError(t, err)
	requireCounts(t, f.gateGet(t, g.ID), 1, 0, 0, "the redriven job is not done any more")
	got := f.get(t, g.ID)
	require.Equal(t, hoppertype.JobStatePending, got.State)
	require.Nil(t, got.Stuck)
	requireTime(t, at(time.Minute), got.RunAt)

	// Stuck for another cause: not woken.
	b := f.ownQueueJob(t)
	g2 := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g2.ID, On: []string{b.ID}})
	rows = f.claim(t, g2.Queue, at(2*time.Hour), 1)
	require.Len(t, rows, 1)
	f.finishOK(t, driver.JobFinishParams{ID: g2.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateStuck,
		Attempt: 1, RunAt: rows[0].RunAt, Stuck: &hoppertype.StuckInfo{Cause: hoppertype.StuckCycle, ObservedAt: at(2 * time.Hour)}})
	f.finishAs(t, b, hoppertype.JobStateSucceeded, at(3*time.Second))
	require.Equal(t, hoppertype.JobStateStuck, f.get(t, g2.ID).State, "a gate stuck on a cycle stays stuck")
}

func testGateRunningNotWoken(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID}})
	rows := f.claim(t, g.Queue, at(2*time.Hour), 1)
	require.Len(t, rows, 1, "the gate's job runs (its recheck)")
	f.finishAs(t, a, hoppertype.JobStateSucceeded, at(2*time.Hour))
	requireCounts(t, f.gateGet(t, g.ID), 1, 1, 1, "counted while the gate runs")
	got := f.get(t, g.ID)
	require.Equal(t, hoppertype.JobStateRunning, got.State, "a running gate is not touched")
	require.Equal(t, rows[0].LeaseToken, got.LeaseToken)
}

func testGateEdges(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	g := f.gateJob(t)
	missing, queued := f.id(), f.id()
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{missing, a.ID}, Queues: []string{queued}})
	edges, err := f.x.GateEdges(f.ctx, &driver.GateEdgesParams{IDs: []string{g.ID, queued, a.ID, missing, f.id()}})
	require.NoError(t, err)
	require.Len(t, edges, 2, "only ids with edges: %v", edges)
	require.ElementsMatch(t, []string{a.ID, missing}, edges[g.ID], "a gate waits on its watched jobs")
	require.Equal(t, []string{g.ID}, edges[queued], "a queued job waits on its gate")
}

func testGateWatchers(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	missing := f.id()
	g1, g2 := f.gateJob(t), f.gateJob(t)
	f.gateInsert(t,
		&driver.GateSpec{ID: g1.ID, On: []string{a.ID, missing}, Queues: []string{f.id()}},
		&driver.GateSpec{ID: g2.ID, On: []string{a.ID}, Queues: []string{f.id()}})
	want := []string{g1.ID, g2.ID}
	slices.Sort(want)
	got, err := f.x.GateWatcherList(f.ctx, &driver.GateWatcherListParams{JobID: a.ID, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, want, got, "both gates watch the job, in id order")
	got, err = f.x.GateWatcherList(f.ctx, &driver.GateWatcherListParams{JobID: a.ID, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, want[:1], got, "at most Limit")
	got, err = f.x.GateWatcherList(f.ctx, &driver.GateWatcherListParams{JobID: missing, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{g1.ID}, got, "a job not stored yet is watched too")
	got, err = f.x.GateWatcherList(f.ctx, &driver.GateWatcherListParams{JobID: g1.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, got, "nothing watches the gate")
	_, err = f.x.GateWatcherList(f.ctx, &driver.GateWatcherListParams{JobID: a.ID})
	require.ErrorIs(t, err, hoppertype.ErrInvalidInput, "a limit is required")
}

func testGateDelete(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	g := f.gateJob(t)
	queued := f.id()
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID}, Queues: []string{queued}, Cond: hoppertype.GateCondition{Kind: hoppertype.GateCount, Count: 2}})
	f.finishAs(t, a, hoppertype.JobStateSucceeded, at(time.Second))
	n, err := f.x.JobDeleteFinished(f.ctx, &driver.JobDeleteFinishedParams{Before: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	f.requireMissing(t, a.ID)
	requireCounts(t, f.gateGet(t, g.ID), 1, 1, 1, "a deleted job's observed state is kept")
	waits, err := f.x.GateWaitList(f.ctx, &driver.GateWaitListParams{GateID: g.ID})
	require.NoError(t, err)
	require.Len(t, waits, 1)
	require.Equal(t, hoppertype.JobStateSucceeded, waits[0].State)

	// Deleting the gate's job deletes the gate.
	_, err = f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: g.ID, Now: at(time.Minute)})
	require.NoError(t, err)
	_, err = f.x.JobDeleteFinished(f.ctx, &driver.JobDeleteFinishedParams{Before: at(time.Hour)})
	require.NoError(t, err)
	_, err = f.x.GateGet(f.ctx, &driver.GateGetParams{ID: g.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	edges, err := f.x.GateEdges(f.ctx, &driver.GateEdgesParams{IDs: []string{g.ID, queued}})
	require.NoError(t, err)
	require.Empty(t, edges)
	g2 := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g2.ID, On: []string{f.id()}, Queues: []string{queued}})
}

func testGateRollback(t *testing.T, f *fixture) {
	a := f.ownQueueJob(t)
	g := f.gateJob(t)
	boom := errors.New("boom")
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		if _, err := tx.GateInsert(ctx, &driver.GateInsertParams{Gates: []*driver.GateSpec{{ID: g.ID, On: []string{a.ID}}}, Now: base}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = f.x.GateGet(f.ctx, &driver.GateGetParams{ID: g.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)

	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{a.ID}})
	rows := f.claim(t, a.Queue, at(time.Second), 1)
	require.Len(t, rows, 1)
	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: a.ID, LeaseToken: rows[0].LeaseToken,
			State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: rows[0].RunAt, EndedAt: at(time.Second)}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	requireCounts(t, f.gateGet(t, g.ID), 1, 0, 0, "a rolled-back finish is not counted")
	requireJob(t, g, f.get(t, g.ID))
}

func testGateConcurrent(t *testing.T, f *fixture) {
	const n = 40
	q := "q-" + f.id()
	jobs := make([]*hoppertype.JobRow, n)
	on := make([]string, n)
	for i := range jobs {
		jobs[i] = f.job(inQueue(q))
		on[i] = jobs[i].ID
	}
	f.insert(t, jobs...)
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: on})
	claimed := f.claim(t, q, at(time.Second), n)
	require.Len(t, claimed, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, r := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.x.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: r.ID, LeaseToken: r.LeaseToken,
				State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: r.RunAt, EndedAt: at(2 * time.Second)}}})
			if err == nil {
				err = res[0].Err
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireCounts(t, f.gateGet(t, g.ID), n, n, n, "every concurrent finish counted once")
	require.Equal(t, hoppertype.JobStatePending, f.get(t, g.ID).State, "the last finish woke the gate")
}

func testGateObserve(t *testing.T, f *fixture) {
	missing := f.id()
	g := f.gateJob(t)
	f.gateInsert(t, &driver.GateSpec{ID: g.ID, On: []string{missing}})
	// The job appears and finishes without the gate seeing it (as a job
	// committed while the gate's insert was in flight would).
	j := f.insertOne(t, func(r *hoppertype.JobRow) { r.ID = missing }, inQueue("q-"+f.id()),
		inState(hoppertype.JobStateSucceeded), endedAt(at(time.Second)))
	requireCounts(t, f.gateGet(t, g.ID), 1, 0, 0, "inserted terminal: not observed")
	require.NoError(t, f.x.GateObserve(f.ctx, &driver.GateObserveParams{
		Jobs: []driver.GateObservation{{ID: j.ID, State: j.State}}, Now: at(time.Minute)}))
	requireCounts(t, f.gateGet(t, g.ID), 1, 1, 1, "observed now")
	got := f.get(t, g.ID)
	require.Equal(t, hoppertype.JobStatePending, got.State, "and the gate woken")
	requireTime(t, at(time.Minute), got.RunAt)
	// Observing again changes nothing.
	require.NoError(t, f.x.GateObserve(f.ctx, &driver.GateObserveParams{
		Jobs: []driver.GateObservation{{ID: j.ID, State: j.State}}, Now: at(time.Hour)}))
	requireCounts(t, f.gateGet(t, g.ID), 1, 1, 1)
}
