package pgdriver

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestRetryClearsPastDeadline checks the contract's "a Deadline at or before
// Now cleared" (a future deadline is kept).
func TestRetryClearsPastDeadline(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	past, future := newJob("q"), newJob("q")
	for _, j := range []*hoppertype.JobRow{past, future} {
		j.State, j.EndedAt = hoppertype.JobStateExpired, testBase
	}
	past.Deadline = testBase
	future.Deadline = testBase.Add(time.Hour)
	insert(t, d.Executor(), past, future)
	res, err := d.Executor().JobRetry(ctx, &driver.JobRetryParams{IDs: []string{past.ID, future.ID}, States: []hoppertype.JobState{hoppertype.JobStateExpired}, Now: testBase})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, past.ID, res[0].Job.ID, "results follow the ids given")
	require.True(t, res[0].Job.Deadline.IsZero(), "a deadline at Now is cleared")
	require.True(t, res[1].Job.Deadline.Equal(future.Deadline), "a later deadline is kept")
	require.Equal(t, hoppertype.JobStateExpired, res[0].PrevState)
}

// TestRetryPages moves more jobs than one page of candidates, with and
// without a limit, and skips a job whose key another job of the call took.
func TestRetryPages(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	const n = retryPage*2 + 100
	jobs := make([]*hoppertype.JobRow, n)
	for i := range jobs {
		jobs[i] = newJob("q")
		jobs[i].ID = fmt.Sprintf("retry-%s-%05d", d.schema, i)
		jobs[i].State, jobs[i].EndedAt = hoppertype.JobStateDead, testBase
	}
	jobs[10].UniqueKey, jobs[n-10].UniqueKey = "shared", "shared" // on different pages
	insert(t, d.Executor(), jobs...)
	dead := []hoppertype.JobState{hoppertype.JobStateDead}
	res, err := d.Executor().JobRetry(ctx, &driver.JobRetryParams{All: true, States: dead, Limit: retryPage + 7, Now: testBase})
	require.NoError(t, err)
	require.Len(t, res, retryPage+7)
	res, err = d.Executor().JobRetry(ctx, &driver.JobRetryParams{All: true, States: dead, Now: testBase})
	require.NoError(t, err)
	require.Len(t, res, n-(retryPage+7)-1, "every other dead job but the one whose key is taken")
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: jobs[n-10].ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateDead, got.State)
}

// TestLeaderReacquireAfterResign checks that the term rises even when the
// same owner takes a leadership back after resigning.
func TestLeaderReacquireAfterResign(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	attempt := func(owner string, now time.Time) *driver.LeaderRow {
		t.Helper()
		row, err := d.Executor().LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: "l", Owner: owner, Now: now, TTL: time.Minute})
		require.NoError(t, err)
		return row
	}
	first := attempt("a", testBase)
	require.Equal(t, int64(1), first.Term)
	require.NoError(t, d.Executor().LeaderResign(ctx, &driver.LeaderResignParams{Name: "l", Owner: "a"}))
	again := attempt("a", testBase.Add(time.Second))
	require.Equal(t, "a", again.Owner)
	require.Equal(t, int64(2), again.Term, "a new leadership, a new term")
	require.Equal(t, int64(2), attempt("a", testBase.Add(2*time.Second)).Term, "a renewal keeps the term")
	_, err := d.Executor().LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: "l", Now: testBase, TTL: time.Minute})
	require.Error(t, err, "an empty owner is refused")
}
