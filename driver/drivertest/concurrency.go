package drivertest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// concurrencyCases cover JobClaim's fleet-wide concurrency keys.
func concurrencyCases() []testCase {
	return []testCase{
		{"RoundTrip", testConcurrencyRoundTrip},
		{"ClaimRespectsKeyLimit", testConcurrencyClaim},
		{"FinishFreesTheKey", testConcurrencyFinish},
		{"ConcurrentClaimersRespectTheLimit", testConcurrencyConcurrent},
	}
}

func withKey(key string, limit int) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.ConcurrencyKey, r.ConcurrencyLimit = key, limit }
}

func testConcurrencyRoundTrip(t *testing.T, f *fixture) {
	j := f.insertOne(t, withKey("customer:42", 2))
	got := f.get(t, j.ID)
	require.Equal(t, "customer:42", got.ConcurrencyKey)
	require.Equal(t, 2, got.ConcurrencyLimit)
	requireJob(t, j, got)
}

func testConcurrencyClaim(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	var k, j, free []*hoppertype.JobRow
	for i := range 5 {
		k = append(k, f.insertOne(t, inQueue(q), withKey("k", 2), runAt(at(time.Duration(i)*time.Second))))
	}
	for i := range 2 {
		j = append(j, f.insertOne(t, inQueue(q), withKey("j", 1), runAt(at(time.Duration(i)*time.Second))))
	}
	for i := range 2 {
		free = append(free, f.insertOne(t, inQueue(q), runAt(at(time.Duration(i)*time.Second))))
	}
	got := f.claim(t, q, at(time.Minute), 20)
	require.ElementsMatch(t, []string{k[0].ID, k[1].ID, j[0].ID, free[0].ID, free[1].ID}, ids(got),
		"two of key k, one of key j, every job without a key; the first of each key by order")
	require.Empty(t, f.claim(t, q, at(time.Minute), 20), "the keys are at their limits")
	for _, r := range append(k[2:], j[1]) {
		f.requireState(t, r.ID, hoppertype.JobStatePending)
	}
}

func testConcurrencyFinish(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	a := f.insertOne(t, inQueue(q), withKey("k", 1), runAt(at(-time.Second)))
	b := f.insertOne(t, inQueue(q), withKey("k", 1))
	got := f.claim(t, q, at(time.Minute), 10)
	require.Equal(t, []string{a.ID}, ids(got))
	// A retry (not terminal) frees the key as well: the job is no longer running.
	f.finishOK(t, driver.JobFinishParams{ID: a.ID, LeaseToken: got[0].LeaseToken, State: hoppertype.JobStateRetrying,
		Attempt: 1, RunAt: at(time.Hour)})
	got = f.claim(t, q, at(time.Minute), 10)
	require.Equal(t, []string{b.ID}, ids(got))
	f.finishOK(t, driver.JobFinishParams{ID: b.ID, LeaseToken: got[0].LeaseToken, State: hoppertype.JobStateSucceeded,
		Attempt: 1, RunAt: got[0].RunAt, EndedAt: at(time.Minute)})
	got = f.claim(t, q, at(2*time.Hour), 10)
	require.Equal(t, []string{a.ID}, ids(got), "the retried job runs again once its key is free")
}

func testConcurrencyConcurrent(t *testing.T, f *fixture) {
	const limit = 3
	q := "q-" + f.id()
	rows := make([]*hoppertype.JobRow, 30)
	for i := range rows {
		rows[i] = f.job(inQueue(q), withKey("hot", limit))
	}
	f.insert(t, rows...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed := 0
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Claimers' clocks disagree: admission must not trust start times.
			now := at(time.Minute + time.Duration(w%4-2)*time.Second)
			got, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{Queue: q, Limit: 1 + w%3, Now: now,
				LeaseExpiresAt: at(time.Hour), Worker: "w"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			claimed += len(got)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Racing claimers may all give their jobs back (each counting the
	// others' claims first); never may they admit too many.
	require.LessOrEqual(t, claimed, limit, "claimers racing for one key never get more than its limit")
	more, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{Queue: q, Limit: 10, Now: at(time.Minute),
		LeaseExpiresAt: at(time.Hour), Worker: "w"})
	require.NoError(t, err)
	claimed += len(more)
	require.Equal(t, limit, claimed, "a later claim fills the key up to its limit, no more")
	n := 0
	for _, r := range rows {
		if f.get(t, r.ID).State == hoppertype.JobStateRunning {
			n++
		}
	}
	require.Equal(t, limit, n, "and no more jobs of the key are running")
}
