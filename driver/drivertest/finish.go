package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// finishCases cover JobFinishMany.
func finishCases() []testCase {
	return []testCase{
		{"WritesEveryField", testFinishFields},
		{"NilClearsResultAndError", testFinishClears},
		{"Stuck", testFinishStuck},
		{"ItemsAreIndependent", testFinishItems},
		{"SecondFinishLosesLease", testFinishTwice},
		{"RequireLeaseExpiredBefore", testFinishRequireExpired},
		{"RescueThenReclaimFencesOldWorker", testFinishRescueReclaim},
		{"RaceRescueAgainstCompletion", testFinishRace},
		{"TerminalReleasesUniqueKey", testFinishReleasesKey},
		{"SnoozedJobIsClaimableLater", testFinishSnooze},
		{"ClaimedRowGivesTheStoredRow", testFinishClaimed},
		{"ClaimedRowOfAnotherLeaseIsIgnored", testFinishClaimedStale},
		{"HandBackLeavesTheAttemptUnused", testFinishHandBack},
	}
}

func testFinishFields(t *testing.T, f *fixture) {
	j := f.claimOne(t, func(r *hoppertype.JobRow) {
		r.Metadata = map[string]string{"k": "v"}
		r.Deadline = at(time.Hour)
	})
	item := driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken,
		State:   hoppertype.JobStateRetrying,
		Attempt: 1,
		RunAt:   nanos(at(5 * time.Minute)),
		Result:  []byte(`{"partial":1}`),
		Error:   &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindTimeout, Message: "too slow", Stack: "s", Attempt: 1, At: at(time.Second)},
		EndedAt: nanos(at(2 * time.Second)),
	}
	got := f.finishOK(t, item)
	want := j.Clone()
	want.State = hoppertype.JobStateRetrying
	want.Attempt = 1
	want.RunAt = at(5 * time.Minute)
	want.Result = []byte(`{"partial":1}`)
	want.Error = item.Error
	want.EndedAt = at(2 * time.Second)
	// The lease is released: token kept, expiry and worker cleared.
	want.LeaseExpiresAt = time.Time{}
	want.Worker = ""
	requireJob(t, want, got, "finish result")
	requireJob(t, want, f.get(t, j.ID), "stored row")
	require.Equal(t, j.LeaseToken, got.LeaseToken, "the lease token is kept")
	requireTime(t, base, got.StartedAt, "StartedAt is kept")
}

func testFinishClears(t *testing.T, f *fixture) {
	j := f.claimOne(t, func(r *hoppertype.JobRow) {
		r.Result = []byte(`"old"`)
		r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "old", Attempt: 0, At: at(-time.Hour)}
	})
	got := f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1,
		RunAt: j.RunAt, EndedAt: at(time.Second),
	})
	require.Nil(t, got.Result, "nil Result clears the stored result")
	require.Nil(t, got.Error, "nil Error clears the stored error")
	stored := f.requireState(t, j.ID, hoppertype.JobStateSucceeded)
	require.Nil(t, stored.Result)
	require.Nil(t, stored.Error)
	requireTime(t, at(time.Second), stored.EndedAt)
}

func testFinishStuck(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	retryable := false
	stuck := &hoppertype.StuckInfo{
		Cause: hoppertype.StuckEngineFailure, Retryable: &retryable, BlockerIDs: []string{"x", "y"},
		Detail: "history diverged", ObservedAt: at(time.Second),
	}
	got := f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateStuck, Attempt: 1, RunAt: j.RunAt, Stuck: stuck,
	})
	require.Equal(t, hoppertype.JobStateStuck, got.State)
	want := j.Clone()
	want.State = hoppertype.JobStateStuck
	want.Stuck = stuck
	want.LeaseExpiresAt = time.Time{}
	want.Worker = ""
	requireJob(t, want, f.get(t, j.ID))

	// A later transition with a nil Stuck clears it.
	again := f.claimOne(t)
	f.finishOK(t, driver.JobFinishParams{ID: again.ID, LeaseToken: again.LeaseToken, State: hoppertype.JobStateStuck, Attempt: 1, RunAt: base, Stuck: stuck})
	f.finish(t) // an empty batch is fine
	res, err := f.x.JobRetry(f.ctx, &driver.JobRetryParams{IDs: []string{again.ID}, States: []hoppertype.JobState{hoppertype.JobStateStuck}, Now: base})
	require.NoError(t, err)
	require.Len(t, res, 1)
	rows := f.claim(t, again.Queue, base, 1)
	require.Len(t, rows, 1)
	done := f.finishOK(t, driver.JobFinishParams{ID: again.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Second)})
	require.Nil(t, done.Stuck)
	require.Nil(t, f.get(t, again.ID).Stuck)
}

func testFinishItems(t *testing.T, f *fixture) {
	j1, j2, j3 := f.claimOne(t), f.claimOne(t), f.claimOne(t)
	pending := f.insertOne(t)
	missing := f.id()
	done := func(id string, token int64) driver.JobFinishParams {
		return driver.JobFinishParams{ID: id, LeaseToken: token, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Second)}
	}
	res := f.finish(t,
		done(j1.ID, j1.LeaseToken),
		done(j2.ID, j2.LeaseToken+1000),
		done(pending.ID, pending.LeaseToken),
		done(missing, 1),
		done(j3.ID, j3.LeaseToken),
	)
	require.NoError(t, res[0].Err)
	require.Equal(t, j1.ID, res[0].Job.ID)
	require.Equal(t, hoppertype.JobStateSucceeded, res[0].Job.State)
	require.ErrorIs(t, res[1].Err, hoppertype.ErrLeaseLost, "wrong token")
	require.Nil(t, res[1].Job)
	require.ErrorIs(t, res[2].Err, hoppertype.ErrLeaseLost, "job not running")
	require.Nil(t, res[2].Job)
	require.ErrorIs(t, res[3].Err, hoppertype.ErrNotFound, "missing job")
	require.Nil(t, res[3].Job)
	require.NoError(t, res[4].Err, "a lost item does not fail the others")
	require.Equal(t, j3.ID, res[4].Job.ID)

	f.requireState(t, j1.ID, hoppertype.JobStateSucceeded)
	f.requireState(t, j3.ID, hoppertype.JobStateSucceeded)
	requireJob(t, j2, f.get(t, j2.ID), "a lost item changes nothing")
	requireJob(t, pending, f.get(t, pending.ID), "a lost item changes nothing")
}

func testFinishTwice(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	item := driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, Result: []byte(`1`), EndedAt: at(time.Second)}
	first := f.finishOK(t, item)
	item.State = hoppertype.JobStateRetrying
	item.Result = []byte(`2`)
	res := f.finish(t, item)
	require.ErrorIs(t, res[0].Err, hoppertype.ErrLeaseLost)
	requireJob(t, first, f.get(t, j.ID), "a finished job is never overwritten")
}

func testFinishRequireExpired(t *testing.T, f *fixture) {
	rescue := func(j *hoppertype.JobRow, before time.Time) driver.JobFinishResult {
		t.Helper()
		return f.finish(t, driver.JobFinishParams{
			ID: j.ID, LeaseToken: j.LeaseToken, RequireLeaseExpiredBefore: before,
			State: hoppertype.JobStateRetrying, Attempt: j.Attempt, RunAt: before,
			Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindLeaseLost, Message: "lease expired", Attempt: j.Attempt, At: before},
		})[0]
	}
	// claimOne leases until base+30s.
	expired := f.claimOne(t)
	res := rescue(expired, at(time.Minute))
	require.NoError(t, res.Err)
	require.Equal(t, hoppertype.JobStateRetrying, res.Job.State)
	require.Equal(t, hoppertype.ErrorKindLeaseLost, res.Job.Error.Kind)

	renewed := f.claimOne(t)
	hb, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{
		Leases: []driver.Lease{{ID: renewed.ID, Token: renewed.LeaseToken}}, ExpiresAt: at(2 * time.Minute),
	})
	require.NoError(t, err)
	require.True(t, hb[0].Held)
	res = rescue(renewed, at(time.Minute))
	require.ErrorIs(t, res.Err, hoppertype.ErrLeaseLost, "a heartbeat that landed before the rescue wins")
	got := f.requireState(t, renewed.ID, hoppertype.JobStateRunning)
	requireTime(t, at(2*time.Minute), got.LeaseExpiresAt)

	boundary := f.claimOne(t)
	res = rescue(boundary, at(30*time.Second))
	require.ErrorIs(t, res.Err, hoppertype.ErrLeaseLost, "a lease expiring at the bound has not expired before it")
	f.requireState(t, boundary.ID, hoppertype.JobStateRunning)
}

func testFinishRescueReclaim(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, RequireLeaseExpiredBefore: at(time.Minute),
		State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Minute),
	})
	again := f.claim(t, j.Queue, at(time.Minute), 1)
	require.Len(t, again, 1)
	require.Equal(t, 2, again[0].Attempt)
	res := f.finish(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(2 * time.Minute),
	})
	require.ErrorIs(t, res[0].Err, hoppertype.ErrLeaseLost, "the old worker's finish is fenced off")
	got := f.requireState(t, j.ID, hoppertype.JobStateRunning)
	require.Equal(t, again[0].LeaseToken, got.LeaseToken)
	require.Equal(t, 2, got.Attempt)
	f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: again[0].LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 2, RunAt: at(time.Minute), EndedAt: at(2 * time.Minute),
	})
}

func testFinishRace(t *testing.T, f *fixture) {
	const n = 200
	var rows []*hoppertype.JobRow
	for range n {
		rows = append(rows, f.job())
	}
	f.insert(t, rows...)
	claimed := f.claim(t, "default", base, n)
	require.Len(t, claimed, n)

	type outcome struct{ worker, rescuer driver.JobFinishResult }
	outcomes := make([]outcome, n)
	errs := make(chan error, 2*n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, j := range claimed {
		wg.Go(func() {
			<-start
			res, err := f.x.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
				ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1,
				RunAt: base, Result: []byte(`"done"`), EndedAt: at(10 * time.Second), Claimed: j,
			}}})
			if err != nil || len(res) != 1 {
				errs <- err
				return
			}
			outcomes[i].worker = res[0]
		})
		wg.Go(func() {
			<-start
			res, err := f.x.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
				ID: j.ID, LeaseToken: j.LeaseToken, RequireLeaseExpiredBefore: at(time.Minute),
				State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Minute),
				Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindLeaseLost, Message: "rescued", Attempt: 1, At: at(time.Minute)},
			}}})
			if err != nil || len(res) != 1 {
				errs <- err
				return
			}
			outcomes[i].rescuer = res[0]
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
		require.Fail(t, "JobFinishMany returned no result")
	}
	for i, j := range claimed {
		o := outcomes[i]
		workerWon, rescuerWon := o.worker.Err == nil, o.rescuer.Err == nil
		require.True(t, workerWon != rescuerWon, "job %s: exactly one writer wins (worker err %v, rescuer err %v)", j.ID, o.worker.Err, o.rescuer.Err)
		got := f.get(t, j.ID)
		if workerWon {
			require.ErrorIs(t, o.rescuer.Err, hoppertype.ErrLeaseLost)
			require.Equal(t, hoppertype.JobStateSucceeded, got.State, "a finished job is never overwritten")
			require.Equal(t, []byte(`"done"`), got.Result)
			require.Nil(t, got.Error)
		} else {
			require.ErrorIs(t, o.worker.Err, hoppertype.ErrLeaseLost)
			require.Equal(t, hoppertype.JobStateRetrying, got.State)
			require.Nil(t, got.Result)
			require.Equal(t, "rescued", got.Error.Message)
		}
	}
}

func testFinishReleasesKey(t *testing.T, f *fixture) {
	j := f.claimOne(t, uniqueBy("k"))
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Minute)})
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job(uniqueBy("k"))}})
	require.NoError(t, err)
	require.True(t, res[0].Existing, "a retrying job still holds its key")
	require.Equal(t, j.ID, res[0].Job.ID)

	rows := f.claim(t, j.Queue, at(time.Minute), 1)
	require.Len(t, rows, 1)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateDead, Attempt: 2, RunAt: at(time.Minute), EndedAt: at(2 * time.Minute)})
	next := f.insertOne(t, uniqueBy("k"))
	f.requireState(t, next.ID, hoppertype.JobStatePending)
}

func testFinishSnooze(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateScheduled, Attempt: 0, RunAt: at(time.Hour)})
	next, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: j.Queue})
	require.NoError(t, err)
	requireTime(t, at(time.Hour), next)
	require.Empty(t, f.claim(t, j.Queue, at(30*time.Minute), 1))
	rows := f.claim(t, j.Queue, at(time.Hour), 1)
	require.Equal(t, []string{j.ID}, ids(rows))
	require.Equal(t, 1, rows[0].Attempt, "the claim counts from the Attempt the finish wrote")
}

// testFinishClaimed: items that pass their claimed row (Claimed) return
// the row as stored, the same as a read of it: the columns the transition
// writes, the rest as claimed, and what changed under the lease since the
// claim (a cancel's request) as stored. Mixed with items that pass none, in
// one call; a lost lease is still refused.
func testFinishClaimed(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	rich := func(r *hoppertype.JobRow) {
		r.Queue = q
		r.Metadata = map[string]string{"k": "v", "trace": `{"a":"b"}`}
		r.Deadline = nanos(at(time.Hour))
		r.Priority = 3
		r.AttemptTimeout = 90 * time.Second
		r.FairKey = "tenant-1"
		r.UniqueKey = "u-" + r.ID
		r.ConcurrencyKey, r.ConcurrencyLimit = "k-"+r.ID, 5
		r.Input = []byte(`{"n":1}`)
	}
	var rows []*hoppertype.JobRow
	for range 5 {
		j := f.job()
		rich(j)
		rows = append(rows, j)
	}
	f.insert(t, rows...)
	claimed := f.claim(t, q, base, 5)
	require.Len(t, claimed, 5)
	// Cancel the first while it runs: only its request is recorded.
	_, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: claimed[0].ID, Now: at(time.Second)})
	require.NoError(t, err)
	retry := true
	items := []driver.JobFinishParams{
		{ID: claimed[0].ID, LeaseToken: claimed[0].LeaseToken, State: hoppertype.JobStateCancelled, Attempt: 1, RunAt: claimed[0].RunAt,
			EndedAt: nanos(at(2 * time.Second)), Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancelled", Attempt: 1, At: nanos(at(2 * time.Second))}},
		{ID: claimed[1].ID, LeaseToken: claimed[1].LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: claimed[1].RunAt,
			Result: []byte(`{"ok":true}`), EndedAt: nanos(at(3 * time.Second))},
		{ID: claimed[2].ID, LeaseToken: claimed[2].LeaseToken, State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: nanos(at(time.Minute)),
			Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "boom", Stack: "stack", Attempt: 1, At: nanos(at(4 * time.Second))}},
		{ID: claimed[3].ID, LeaseToken: claimed[3].LeaseToken, State: hoppertype.JobStateStuck, Attempt: 1, RunAt: claimed[3].RunAt,
			Stuck: &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &retry, Detail: "d", ObservedAt: nanos(at(5 * time.Second))}},
		{ID: claimed[4].ID, LeaseToken: claimed[4].LeaseToken + 1, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: claimed[4].RunAt,
			EndedAt: at(6 * time.Second)},
	}
	for i := range items {
		if i != 2 { // the third passes none
			items[i].Claimed = claimed[i]
		}
	}
	items[4].Claimed = claimed[4].Clone()
	items[4].Claimed.LeaseToken = items[4].LeaseToken // a copy that claims a lease it does not hold
	res := f.finish(t, items...)
	for i, r := range res[:4] {
		require.NoError(t, r.Err, "item %d", i)
		stored := f.get(t, items[i].ID)
		requireJob(t, stored, r.Job, "item %d: the result is the stored row", i)
		require.Equal(t, items[i].State, r.Job.State)
	}
	require.True(t, res[0].Job.CancelRequested, "the cancel's request, recorded after the claim, is in the result")
	require.False(t, res[1].Job.CancelRequested)
	require.Equal(t, claimed[1].Metadata, res[1].Job.Metadata)
	require.Equal(t, claimed[1].Input, res[1].Job.Input)
	require.ErrorIs(t, res[4].Err, hoppertype.ErrLeaseLost, "a claimed row does not stand in for the lease")
	require.Nil(t, res[4].Job)
	f.requireState(t, items[4].ID, hoppertype.JobStateRunning)

	// Every item of a call with its claimed row, one of them cancelled
	// since its claim; and one item alone.
	rows = rows[:0]
	for range 4 {
		j := f.job()
		rich(j)
		rows = append(rows, j)
	}
	f.insert(t, rows...)
	claimed = f.claim(t, q, at(time.Minute), 4)
	require.Len(t, claimed, 4)
	_, err = f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: claimed[1].ID, Now: at(time.Minute)})
	require.NoError(t, err)
	items = items[:0]
	for i, c := range claimed {
		items = append(items, driver.JobFinishParams{ID: c.ID, LeaseToken: c.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1,
			RunAt: c.RunAt, Result: []byte(`"r"`), EndedAt: nanos(at(time.Minute + time.Duration(i)*time.Second)), Claimed: c})
	}
	items[2].State, items[2].Result = hoppertype.JobStateDead, nil
	items[2].Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "dead", Attempt: 1, At: nanos(at(2 * time.Minute))}
	res = append(f.finish(t, items[:3]...), f.finish(t, items[3])...)
	for i, r := range res {
		require.NoError(t, r.Err, "item %d", i)
		requireJob(t, f.get(t, items[i].ID), r.Job, "all claimed, item %d: the result is the stored row", i)
		require.Equal(t, i == 1, r.Job.CancelRequested, "item %d", i)
	}
}

// testFinishClaimedStale: a claimed row kept from an earlier lease (the
// job was rescued and claimed again since) is not taken for the row: the
// result is the row as stored under the new lease.
func testFinishClaimedStale(t *testing.T, f *fixture) {
	j := f.claimOne(t, func(r *hoppertype.JobRow) { r.Metadata = map[string]string{"k": "v"} })
	f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, RequireLeaseExpiredBefore: at(time.Minute),
		State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Minute),
	})
	again := f.claim(t, j.Queue, at(time.Minute), 1)
	require.Len(t, again, 1)
	got := f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: again[0].LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 2, RunAt: again[0].RunAt,
		EndedAt: at(2 * time.Minute), Claimed: j,
	})
	requireJob(t, f.get(t, j.ID), got, "the stored row, not the stale claim's")
	require.Equal(t, 2, got.Attempt)
	require.Equal(t, again[0].StartedAt, got.StartedAt, "started at the second claim")
}

// testFinishHandBack: a job claimed and handed back unrun (a client that
// claimed it ahead of a free slot gives it back when it stops, or when the
// job waited too long) goes back pending with its attempt unused, its
// lease released, and the change recorded as such; the next claim takes it
// at the same attempt under a new lease. Handed back in a batch of two
// and alone, with the claimed rows passed (the path a worker takes) and
// without.
func testFinishHandBack(t *testing.T, f *fixture) {
	for _, withClaimed := range []bool{true, false} {
		for _, n := range []int{2, 1} {
			q := "q-" + f.id()
			for range n {
				f.insertOne(t, inQueue(q))
			}
			claimed := f.claim(t, q, base, n)
			require.Len(t, claimed, n)
			items := make([]driver.JobFinishParams, n)
			for i, j := range claimed {
				require.Equal(t, 1, j.Attempt)
				items[i] = driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStatePending,
					Attempt: j.Attempt - 1, RunAt: j.RunAt}
				if withClaimed {
					items[i].Claimed = j
				}
			}
			at := fmt.Sprintf("claimed rows passed %v, %d jobs", withClaimed, n)
			for i, r := range f.finish(t, items...) {
				require.NoError(t, r.Err, at)
				require.NotNil(t, r.Job, at)
				require.Equal(t, hoppertype.JobStatePending, r.Job.State, at)
				require.Zero(t, r.Job.Attempt, "%s: the attempt is unused", at)
				require.Empty(t, r.Job.Worker, at)
				require.True(t, r.Job.LeaseExpiresAt.IsZero(), at)
				stored := f.requireState(t, claimed[i].ID, hoppertype.JobStatePending)
				require.Zero(t, stored.Attempt, at)
				chs := f.entityChanges(t, claimed[i].ID)
				last := chs[len(chs)-1]
				require.Equal(t, "running>pending", last.Prev+">"+last.State, at)
				require.Zero(t, last.Attempt, at)
				require.Contains(t, last.Fields, "attempt", at)
				require.Contains(t, last.Fields, "worker", at)
			}
			again := f.claim(t, q, base.Add(time.Second), n)
			require.Len(t, again, n, at)
			for _, j := range again {
				require.Equal(t, 1, j.Attempt, "%s: the same attempt again", at)
			}
			tokens := map[int64]bool{}
			for _, j := range claimed {
				tokens[j.LeaseToken] = true
			}
			for _, j := range again {
				require.False(t, tokens[j.LeaseToken], "%s: a new lease", at)
			}
		}
	}
}
