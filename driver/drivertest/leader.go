package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// leaderCases cover LeaderAttempt and LeaderResign.
func leaderCases() []testCase {
	return []testCase{
		{"FirstOwnerElected", testLeaderFirst},
		{"OtherOwnerSeesHolder", testLeaderOther},
		{"RenewKeepsTerm", testLeaderRenew},
		{"TakeoverAfterExpiry", testLeaderTakeover},
		{"ResignFrees", testLeaderResign},
		{"ResignByNonHolderIsIgnored", testLeaderResignOther},
		{"NamesAreIndependent", testLeaderNames},
		{"ConcurrentAttemptsOneHolder", testLeaderConcurrent},
	}
}

const leaderTTL = 30 * time.Second

func (f *fixture) attempt(t *testing.T, name, owner string, now time.Time) *driver.LeaderRow {
	t.Helper()
	row, err := f.x.LeaderAttempt(f.ctx, &driver.LeaderAttemptParams{Name: name, Owner: owner, Now: now, TTL: leaderTTL})
	require.NoError(t, err)
	require.NotNil(t, row)
	require.Equal(t, name, row.Name)
	return row
}

func requireLeader(t *testing.T, owner string, term int64, expires time.Time, got *driver.LeaderRow, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, owner, got.Owner, msgAndArgs...)
	require.Equal(t, term, got.Term, msgAndArgs...)
	requireTime(t, expires, got.ExpiresAt, msgAndArgs...)
}

func testLeaderFirst(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	requireLeader(t, "a", 1, at(leaderTTL), f.attempt(t, name, "a", nanos(base)))
}

func testLeaderOther(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	f.attempt(t, name, "a", base)
	requireLeader(t, "a", 1, at(leaderTTL), f.attempt(t, name, "b", at(10*time.Second)))
}

func testLeaderRenew(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	f.attempt(t, name, "a", base)
	requireLeader(t, "a", 1, at(20*time.Second+leaderTTL), f.attempt(t, name, "a", at(20*time.Second)))
	requireLeader(t, "a", 1, at(20*time.Second+leaderTTL), f.attempt(t, name, "b", at(40*time.Second)),
		"the renewed lease still holds after the first expiry")
}

func testLeaderTakeover(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	f.attempt(t, name, "a", base)
	took := f.attempt(t, name, "b", at(31*time.Second))
	requireLeader(t, "b", 2, at(31*time.Second+leaderTTL), took)
	requireLeader(t, "b", 2, at(31*time.Second+leaderTTL), f.attempt(t, name, "a", at(40*time.Second)),
		"the old holder learns it lost")
	back := f.attempt(t, name, "a", at(2*time.Minute))
	require.Equal(t, "a", back.Owner)
	require.Greater(t, back.Term, took.Term, "the term increases each time the holder changes")
}

func testLeaderResign(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	first := f.attempt(t, name, "a", base)
	require.NoError(t, f.x.LeaderResign(f.ctx, &driver.LeaderResignParams{Name: name, Owner: "a"}))
	got := f.attempt(t, name, "b", at(time.Second))
	require.Equal(t, "b", got.Owner, "a resigned leadership is free before its expiry")
	require.Greater(t, got.Term, first.Term, "the term increases across a resignation")
	requireTime(t, at(time.Second+leaderTTL), got.ExpiresAt)
	require.NoError(t, f.x.LeaderResign(f.ctx, &driver.LeaderResignParams{Name: "never-held-" + f.id(), Owner: "a"}))
}

func testLeaderResignOther(t *testing.T, f *fixture) {
	name := "leader-" + f.id()
	f.attempt(t, name, "a", base)
	require.NoError(t, f.x.LeaderResign(f.ctx, &driver.LeaderResignParams{Name: name, Owner: "b"}))
	requireLeader(t, "a", 1, at(leaderTTL), f.attempt(t, name, "c", at(time.Second)))
}

func testLeaderNames(t *testing.T, f *fixture) {
	x, y := "x-"+f.id(), "y-"+f.id()
	requireLeader(t, "a", 1, at(leaderTTL), f.attempt(t, x, "a", base))
	requireLeader(t, "b", 1, at(leaderTTL), f.attempt(t, y, "b", base))
}

func testLeaderConcurrent(t *testing.T, f *fixture) {
	const n = 16
	name := "leader-" + f.id()
	var wg sync.WaitGroup
	rows := make([]*driver.LeaderRow, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			rows[i], errs[i] = f.x.LeaderAttempt(f.ctx, &driver.LeaderAttemptParams{
				Name: name, Owner: fmt.Sprintf("owner-%d", i), Now: base, TTL: leaderTTL,
			})
		})
	}
	close(start)
	wg.Wait()
	elected := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, rows[0].Owner, rows[i].Owner, "every attempt sees the same holder")
		require.Equal(t, int64(1), rows[i].Term)
		if rows[i].Owner == fmt.Sprintf("owner-%d", i) {
			elected++
		}
	}
	require.Equal(t, 1, elected, "exactly one owner is elected")
}
