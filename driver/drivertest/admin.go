package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// adminCases cover JobCancel, JobRetry and JobDeleteFinished.
func adminCases() []testCase {
	return []testCase{
		{"CancelWaitingOrStuck", testCancelWaiting},
		{"CancelRunningRequestsCancel", testCancelRunning},
		{"CancelTerminalConflicts", testCancelTerminal},
		{"CancelNotFound", testCancelNotFound},
		{"RetryByIDs", testRetryByIDs},
		{"RetryByType", testRetryByType},
		{"RetrySkipsRunStatuses", testRetrySkipsRunStatuses},
		{"RetryAll", testRetryAll},
		{"RetryLimit", testRetryLimit},
		{"RetrySkipsHeldUniqueKey", testRetryUniqueHeld},
		{"RetryTwoJobsSharingAKey", testRetrySharedKey},
		{"RetryStuckJobKeepsItsOwnKey", testRetryStuckOwnKey},
		{"DeleteFinished", testDeleteFinished},
		{"DeleteFinishedTakesEmptySettledGroups", testDeleteFinishedGroups},
		{"DeleteFinishedByIDs", testDeleteFinishedByIDs},
	}
}

func cancelErr(ts time.Time) *hoppertype.ErrorInfo {
	return &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancelled by operator", At: ts}
}

func testCancelWaiting(t *testing.T, f *fixture) {
	for _, s := range []hoppertype.JobState{
		hoppertype.JobStatePending, hoppertype.JobStateScheduled, hoppertype.JobStateRetrying, hoppertype.JobStateStuck,
	} {
		j := f.insertOne(t, inState(s), inQueue("q-"+string(s)), runAt(at(-time.Minute)))
		got, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: nanos(at(time.Minute)), Error: cancelErr(at(time.Minute))})
		require.NoError(t, err, "cancel %s job", s)
		want := j.Clone()
		want.State = hoppertype.JobStateCancelled
		want.EndedAt = at(time.Minute)
		want.Error = cancelErr(at(time.Minute))
		requireJob(t, want, got, "cancel %s job: result", s)
		requireJob(t, want, f.get(t, j.ID), "cancel %s job: stored", s)
		require.Empty(t, f.claim(t, j.Queue, at(time.Hour), 10), "a cancelled %s job is never claimed", s)
		next, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: j.Queue})
		require.NoError(t, err)
		require.True(t, next.IsZero(), "a cancelled %s job is not waiting", s)
	}
}

func testCancelRunning(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	got, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: at(time.Second), Error: cancelErr(at(time.Second))})
	require.NoError(t, err)
	want := j.Clone()
	want.CancelRequested = true
	requireJob(t, want, got, "a running job keeps running with CancelRequested")
	requireJob(t, want, f.get(t, j.ID))

	// Cancelling again is harmless; the worker still holds its lease and
	// finishes the job as it sees fit.
	got, err = f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: at(2 * time.Second)})
	require.NoError(t, err)
	requireJob(t, want, got)
	done := f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateCancelled, Attempt: 1, RunAt: base,
		Error: cancelErr(at(3 * time.Second)), EndedAt: at(3 * time.Second),
	})
	require.Equal(t, hoppertype.JobStateCancelled, done.State)
}

func testCancelTerminal(t *testing.T, f *fixture) {
	for _, s := range []hoppertype.JobState{
		hoppertype.JobStateSucceeded, hoppertype.JobStateDead, hoppertype.JobStateExpired, hoppertype.JobStateCancelled,
	} {
		j := f.insertOne(t, inState(s), endedAt(at(-time.Minute)), func(r *hoppertype.JobRow) {
			r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "earlier", At: at(-time.Minute)}
		})
		got, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: at(time.Minute), Error: cancelErr(at(time.Minute))})
		require.ErrorIs(t, err, hoppertype.ErrStateConflict, "cancel %s job", s)
		requireJob(t, j, got, "cancel %s job returns it as it is", s)
		requireJob(t, j, f.get(t, j.ID), "cancel %s job leaves it as it is", s)
	}
}

func testCancelNotFound(t *testing.T, f *fixture) {
	got, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: f.id(), Now: base})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, got)
}

// finished inserts a terminal job with the traces of a past run.
func (f *fixture) finished(t *testing.T, s hoppertype.JobState, mods ...func(*hoppertype.JobRow)) *hoppertype.JobRow {
	t.Helper()
	return f.insertOne(t, append([]func(*hoppertype.JobRow){inState(s), func(r *hoppertype.JobRow) {
		r.Attempt = 3
		r.Result = []byte(`"partial"`)
		r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "last failure", Attempt: 3, At: at(-time.Minute)}
		r.StartedAt = at(-2 * time.Minute)
		r.EndedAt = at(-time.Minute)
		r.LeaseToken = 9
		r.LeaseExpiresAt = at(-time.Minute)
		r.Worker = "worker-gone"
		r.RunAt = at(-time.Hour)
	}}, mods...)...)
}

// retry calls JobRetry and returns its results by job id.
func (f *fixture) retry(t *testing.T, p driver.JobRetryParams) map[string]driver.JobRetryResult {
	t.Helper()
	res, err := f.x.JobRetry(f.ctx, &p)
	require.NoError(t, err)
	out := make(map[string]driver.JobRetryResult, len(res))
	for _, r := range res {
		require.NotNil(t, r.Job)
		require.NotContains(t, out, r.Job.ID, "job retried twice in one call")
		out[r.Job.ID] = r
	}
	return out
}

// requireRedriven requires got to be orig moved back to pending at now.
func requireRedriven(t *testing.T, orig, got *hoppertype.JobRow, now time.Time) {
	t.Helper()
	require.Equal(t, orig.ID, got.ID)
	require.Equal(t, hoppertype.JobStatePending, got.State)
	require.Zero(t, got.Attempt)
	requireTime(t, now, got.RunAt, "RunAt = Now")
	require.True(t, got.EndedAt.IsZero(), "EndedAt cleared")
	require.Nil(t, got.Result, "Result cleared")
	require.True(t, got.LeaseExpiresAt.IsZero(), "lease cleared")
	require.Empty(t, got.Worker, "lease cleared")
	require.Equal(t, normJob(orig).Error, normJob(got).Error, "the last error is kept")
	require.Equal(t, orig.Type, got.Type)
	require.Equal(t, orig.Queue, got.Queue)
	require.Equal(t, orig.Input, got.Input)
	requireTime(t, orig.QueuedAt, got.QueuedAt)
}

func testRetryByIDs(t *testing.T, f *fixture) {
	dead := f.finished(t, hoppertype.JobStateDead)
	cancelled := f.finished(t, hoppertype.JobStateCancelled)
	succeeded := f.finished(t, hoppertype.JobStateSucceeded)
	pending := f.insertOne(t)
	now := nanos(at(time.Hour))
	got := f.retry(t, driver.JobRetryParams{
		IDs:    []string{dead.ID, cancelled.ID, succeeded.ID, pending.ID, f.id()},
		States: []hoppertype.JobState{hoppertype.JobStateDead, hoppertype.JobStateCancelled},
		Now:    now,
	})
	require.ElementsMatch(t, []string{dead.ID, cancelled.ID}, keys(got))
	require.Equal(t, hoppertype.JobStateDead, got[dead.ID].PrevState)
	require.Equal(t, hoppertype.JobStateCancelled, got[cancelled.ID].PrevState)
	for _, orig := range []*hoppertype.JobRow{dead, cancelled} {
		requireRedriven(t, orig, got[orig.ID].Job, at(time.Hour))
		requireJob(t, got[orig.ID].Job, f.get(t, orig.ID), "stored row")
	}
	requireJob(t, succeeded, f.get(t, succeeded.ID), "a state not in States is left alone")
	requireJob(t, pending, f.get(t, pending.ID), "a state not in States is left alone")

	claimed := f.claim(t, "default", at(time.Hour), 10)
	require.ElementsMatch(t, []string{dead.ID, cancelled.ID, pending.ID}, ids(claimed))
	for _, r := range claimed {
		require.Equal(t, 1, r.Attempt, "a redriven job starts again at attempt 1")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testRetryByType(t *testing.T, f *fixture) {
	x1 := f.finished(t, hoppertype.JobStateDead, ofType("x"))
	x2 := f.finished(t, hoppertype.JobStateDead, ofType("x"))
	x3 := f.finished(t, hoppertype.JobStateSucceeded, ofType("x"))
	y := f.finished(t, hoppertype.JobStateDead, ofType("y"))
	got := f.retry(t, driver.JobRetryParams{Type: "x", States: []hoppertype.JobState{hoppertype.JobStateDead}, Now: base})
	require.ElementsMatch(t, []string{x1.ID, x2.ID}, keys(got))
	requireRedriven(t, x1, got[x1.ID].Job, base)
	f.requireState(t, x3.ID, hoppertype.JobStateSucceeded)
	f.requireState(t, y.ID, hoppertype.JobStateDead)
}

// testRetrySkipsRunStatuses: the jobs of runs in a skipped status stay
// where they are, whichever way the jobs are picked.
func testRetrySkipsRunStatuses(t *testing.T, f *fixture) {
	skip := []hoppertype.RunStatus{hoppertype.RunCompensated}
	dead := []hoppertype.JobState{hoppertype.JobStateDead}
	pick := func(st hoppertype.RunStatus) *hoppertype.JobRow {
		j := f.finished(t, hoppertype.JobStateDead, ofType("saga"))
		if st != "" {
			require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: f.runRow(func(r *hoppertype.RunRow) { r.ID, r.Status = j.ID, st })}))
		}
		return j
	}
	for _, by := range []string{"ids", "type", "all"} {
		compensated, failed, plain := pick(hoppertype.RunCompensated), pick(hoppertype.RunFailed), pick("")
		p := driver.JobRetryParams{States: dead, SkipRunStatuses: skip, Now: base}
		switch by {
		case "ids":
			p.IDs = []string{compensated.ID, failed.ID, plain.ID}
		case "type":
			p.Type = "saga"
		case "all":
			p.All = true
		}
		got := f.retry(t, p)
		require.ElementsMatch(t, []string{failed.ID, plain.ID}, keys(got), "by %s", by)
		f.requireState(t, compensated.ID, hoppertype.JobStateDead)
	}
}

func testRetryAll(t *testing.T, f *fixture) {
	d1 := f.finished(t, hoppertype.JobStateDead, ofType("a"))
	d2 := f.finished(t, hoppertype.JobStateDead, ofType("b"), inQueue("other"))
	e := f.finished(t, hoppertype.JobStateExpired)
	c := f.finished(t, hoppertype.JobStateCancelled)
	s := f.finished(t, hoppertype.JobStateSucceeded)
	got := f.retry(t, driver.JobRetryParams{All: true, States: []hoppertype.JobState{hoppertype.JobStateDead, hoppertype.JobStateExpired}, Now: base})
	require.ElementsMatch(t, []string{d1.ID, d2.ID, e.ID}, keys(got))
	require.Equal(t, hoppertype.JobStateExpired, got[e.ID].PrevState)
	requireRedriven(t, d2, got[d2.ID].Job, base)
	f.requireState(t, c.ID, hoppertype.JobStateCancelled)
	f.requireState(t, s.ID, hoppertype.JobStateSucceeded)
}

func testRetryLimit(t *testing.T, f *fixture) {
	var all []string
	for range 5 {
		all = append(all, f.finished(t, hoppertype.JobStateDead).ID)
	}
	dead := []hoppertype.JobState{hoppertype.JobStateDead}
	first := f.retry(t, driver.JobRetryParams{All: true, States: dead, Limit: 2, Now: base})
	require.Len(t, first, 2)
	rest := f.retry(t, driver.JobRetryParams{All: true, States: dead, Now: base})
	require.Len(t, rest, 3, "Limit 0 means no limit")
	require.ElementsMatch(t, all, append(keys(first), keys(rest)...))
	require.Empty(t, f.retry(t, driver.JobRetryParams{All: true, States: dead, Now: base}))
}

func testRetryUniqueHeld(t *testing.T, f *fixture) {
	old := f.finished(t, hoppertype.JobStateDead, uniqueBy("k"))
	live := f.insertOne(t, uniqueBy("k"))
	dead := []hoppertype.JobState{hoppertype.JobStateDead}
	require.Empty(t, f.retry(t, driver.JobRetryParams{IDs: []string{old.ID}, States: dead, Now: base}),
		"a job whose key another live job holds is skipped")
	requireJob(t, old, f.get(t, old.ID))

	_, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: live.ID, Now: base})
	require.NoError(t, err)
	got := f.retry(t, driver.JobRetryParams{IDs: []string{old.ID}, States: dead, Now: at(time.Second)})
	require.Equal(t, []string{old.ID}, keys(got))
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job(uniqueBy("k"))}})
	require.NoError(t, err)
	require.True(t, res[0].Existing, "the redriven job holds its key again")
	require.Equal(t, old.ID, res[0].Job.ID)
}

func testRetrySharedKey(t *testing.T, f *fixture) {
	a := f.finished(t, hoppertype.JobStateDead, uniqueBy("k"))
	b := f.finished(t, hoppertype.JobStateDead, uniqueBy("k"))
	got := f.retry(t, driver.JobRetryParams{IDs: []string{a.ID, b.ID}, States: []hoppertype.JobState{hoppertype.JobStateDead}, Now: base})
	require.Len(t, got, 1, "only one of two jobs sharing a key can be live")
	moved := keys(got)[0]
	other := a.ID
	if moved == a.ID {
		other = b.ID
	}
	f.requireState(t, moved, hoppertype.JobStatePending)
	f.requireState(t, other, hoppertype.JobStateDead)
}

func testRetryStuckOwnKey(t *testing.T, f *fixture) {
	j := f.insertOne(t, inState(hoppertype.JobStateStuck), uniqueBy("k"), func(r *hoppertype.JobRow) {
		r.Stuck = &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, ObservedAt: base}
	})
	got := f.retry(t, driver.JobRetryParams{IDs: []string{j.ID}, States: []hoppertype.JobState{hoppertype.JobStateStuck}, Now: base})
	require.Equal(t, []string{j.ID}, keys(got), "a job holding its own key is not skipped")
	require.Equal(t, hoppertype.JobStateStuck, got[j.ID].PrevState)
	f.requireState(t, j.ID, hoppertype.JobStatePending)
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job(uniqueBy("k"))}})
	require.NoError(t, err)
	require.True(t, res[0].Existing)
	require.Equal(t, j.ID, res[0].Job.ID)
}

func testDeleteFinished(t *testing.T, f *fixture) {
	s1 := f.insertOne(t, inState(hoppertype.JobStateSucceeded), endedAt(at(-2*time.Hour)))
	s2 := f.insertOne(t, inState(hoppertype.JobStateSucceeded), endedAt(at(-10*time.Minute)))
	d1 := f.insertOne(t, inState(hoppertype.JobStateDead), endedAt(at(-2*time.Hour)))
	c1 := f.insertOne(t, inState(hoppertype.JobStateCancelled), endedAt(at(-3*time.Hour)))
	recent := f.insertOne(t, inState(hoppertype.JobStateSucceeded), endedAt(at(time.Minute)))
	pending := f.insertOne(t, endedAt(at(-5*time.Hour)))
	stuck := f.insertOne(t, inState(hoppertype.JobStateStuck), endedAt(at(-5*time.Hour)))

	del := func(p driver.JobDeleteFinishedParams) int {
		t.Helper()
		n, err := f.x.JobDeleteFinished(f.ctx, &p)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 1, del(driver.JobDeleteFinishedParams{
		States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: at(-time.Hour), Limit: 100,
	}))
	f.requireMissing(t, s1.ID)
	f.get(t, s2.ID)
	f.get(t, d1.ID)

	all := []hoppertype.JobState{
		hoppertype.JobStateSucceeded, hoppertype.JobStateDead, hoppertype.JobStateCancelled,
		hoppertype.JobStatePending, hoppertype.JobStateStuck,
	}
	require.Equal(t, 2, del(driver.JobDeleteFinishedParams{States: all, Before: base, Limit: 2}))
	require.Equal(t, 1, del(driver.JobDeleteFinishedParams{States: all, Before: base, Limit: 2}))
	require.Zero(t, del(driver.JobDeleteFinishedParams{States: all, Before: base, Limit: 2}))
	for _, id := range []string{s2.ID, d1.ID, c1.ID} {
		f.requireMissing(t, id)
	}
	f.requireState(t, recent.ID, hoppertype.JobStateSucceeded)
	f.requireState(t, pending.ID, hoppertype.JobStatePending)
	f.requireState(t, stuck.ID, hoppertype.JobStateStuck)
}

// testDeleteFinishedGroups: a group row goes with the last of its jobs,
// once settled; a group with a job left, or open, stays.
func testDeleteFinishedGroups(t *testing.T, f *fixture) {
	group := func(id string, state hoppertype.GroupState) {
		t.Helper()
		require.NoError(t, f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: id, Open: 0, State: state, Value: []byte(`1`), ValueSet: true,
			CreatedAt: at(-5 * time.Hour), SettledAt: at(-4 * time.Hour)}}))
	}
	old, recent := endedAt(at(-3*time.Hour)), endedAt(at(time.Minute))
	succeeded := inState(hoppertype.JobStateSucceeded)
	inGroup := func(id string) func(*hoppertype.JobRow) { return func(r *hoppertype.JobRow) { r.GroupID = id } }

	// Every job of the group is old: root and children go, and the row.
	gone := f.insertOne(t, succeeded, old)
	f.insertOne(t, succeeded, old, inGroup(gone.ID))
	f.insertOne(t, inState(hoppertype.JobStateDead), old, inGroup(gone.ID))
	group(gone.ID, hoppertype.GroupSettled)
	// A child ended recently: the root goes, the group row stays.
	kept := f.insertOne(t, succeeded, old)
	child := f.insertOne(t, succeeded, recent, inGroup(kept.ID))
	group(kept.ID, hoppertype.GroupSettled)
	// The root ended recently, its children long ago: the children go,
	// the root and the row stay.
	young := f.insertOne(t, succeeded, recent)
	f.insertOne(t, succeeded, old, inGroup(young.ID))
	group(young.ID, hoppertype.GroupSettled)
	// An open group (its rows say so) stays even with no job left.
	open := f.insertOne(t, succeeded, old)
	group(open.ID, hoppertype.GroupOpen)
	// A group not touched by this deletion stays.
	other := "other-" + f.id()
	group(other, hoppertype.GroupSettled)

	n, err := f.x.JobDeleteFinished(f.ctx, &driver.JobDeleteFinishedParams{Before: base, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 6, n)
	_, err = f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: gone.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "the settled group whose jobs are all gone")
	f.groupGet(t, kept.ID)
	f.groupGet(t, young.ID)
	f.groupGet(t, open.ID)
	f.groupGet(t, other)

	// Its last job gone, the kept group's row goes too; one pass at a time.
	n, err = f.x.JobDeleteFinished(f.ctx, &driver.JobDeleteFinishedParams{Before: at(time.Hour), Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	f.requireMissing(t, child.ID)
	_, err = f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: kept.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	_, err = f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: young.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "its root gone last, the group's row goes")

	// In a transaction that rolls back, the group row comes back.
	root := f.insertOne(t, succeeded, old)
	group(root.ID, hoppertype.GroupSettled)
	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		n, err := tx.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: base, Limit: 100})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = tx.GroupGet(ctx, &driver.GroupGetParams{ID: root.ID})
		require.ErrorIs(t, err, hoppertype.ErrNotFound)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	f.get(t, root.ID)
	f.groupGet(t, root.ID)
}

// testDeleteFinishedByIDs: with IDs, only the terminal jobs among them go
// (of the states asked for, ended before Before when it is set); the
// settled group whose last job goes takes its row.
func testDeleteFinishedByIDs(t *testing.T, f *fixture) {
	dead := f.insertOne(t, inState(hoppertype.JobStateDead), endedAt(at(-time.Hour)))
	done := f.insertOne(t, inState(hoppertype.JobStateSucceeded), endedAt(at(time.Hour)))
	other := f.insertOne(t, inState(hoppertype.JobStateDead), endedAt(at(-time.Hour)))
	pending := f.insertOne(t)
	running := f.insertOne(t, inState(hoppertype.JobStateRunning))
	require.NoError(t, f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: dead.ID, State: hoppertype.GroupSettled,
		CreatedAt: at(-2 * time.Hour), SettledAt: at(-time.Hour)}}))
	del := func(p driver.JobDeleteFinishedParams) int {
		t.Helper()
		n, err := f.x.JobDeleteFinished(f.ctx, &p)
		require.NoError(t, err)
		return n
	}
	ids := []string{dead.ID, done.ID, pending.ID, running.ID, f.id()}
	require.Equal(t, 0, del(driver.JobDeleteFinishedParams{IDs: ids, States: []hoppertype.JobState{hoppertype.JobStateExpired}}))
	require.Equal(t, 1, del(driver.JobDeleteFinishedParams{IDs: ids, Before: base}), "Before bounds when set")
	f.requireMissing(t, dead.ID)
	_, err := f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: dead.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Equal(t, 1, del(driver.JobDeleteFinishedParams{IDs: ids}), "a zero Before bounds nothing")
	f.requireMissing(t, done.ID)
	f.requireState(t, other.ID, hoppertype.JobStateDead)
	f.requireState(t, pending.ID, hoppertype.JobStatePending)
	f.requireState(t, running.ID, hoppertype.JobStateRunning)
	require.Equal(t, 0, del(driver.JobDeleteFinishedParams{IDs: ids}))
}
