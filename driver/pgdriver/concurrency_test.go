package pgdriver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestConcurrentClaimFinish has 8 claimers drain 2,000 jobs: each job is
// claimed exactly once, and once every claimer has finished its jobs none is
// left running.
func TestConcurrentClaimFinish(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 10)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	const jobs, claimers = 2000, 8
	rows := make([]*hoppertype.JobRow, jobs)
	for i := range rows {
		rows[i] = newJob("busy")
		rows[i].Priority = i % 5
	}
	insert(t, d.Executor(), rows...)

	var wg sync.WaitGroup
	claimed := make([][]*hoppertype.JobRow, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	for w := range claimers {
		wg.Go(func() {
			<-start
			errs[w] = func() error {
				for {
					got, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{
						Queue: "busy", Limit: 25, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: fmt.Sprintf("w%d", w),
					})
					if err != nil || len(got) == 0 {
						return err
					}
					claimed[w] = append(claimed[w], got...)
					items := make([]driver.JobFinishParams, len(got))
					for i, j := range got {
						items[i] = driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded,
							Attempt: j.Attempt, RunAt: j.RunAt, EndedAt: testBase.Add(time.Second)}
					}
					res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
					if err != nil {
						return err
					}
					for _, r := range res {
						if r.Err != nil {
							return r.Err
						}
					}
				}
			}()
		})
	}
	close(start)
	wg.Wait()

	owner := make(map[string]int, jobs)
	for w := range claimers {
		require.NoError(t, errs[w], "claimer %d", w)
		for _, r := range claimed[w] {
			prev, dup := owner[r.ID]
			require.False(t, dup, "job %s claimed by claimers %d and %d", r.ID, prev, w)
			owner[r.ID] = w
		}
	}
	require.Len(t, owner, jobs, "every job claimed")
	counts, err := d.Executor().JobCountByState(ctx, &driver.JobCountParams{Queue: "busy"})
	require.NoError(t, err)
	require.Equal(t, []driver.JobCount{{Queue: "busy", State: hoppertype.JobStateSucceeded, Count: jobs}}, counts,
		"none left running or pending")
}

// TestRoundTripBytes checks that nil and empty payloads stay distinct through
// both insert paths (unnest and COPY), finish and read.
func TestRoundTripBytes(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	for _, n := range []int{1, copyMinRows} {
		jobs := make([]*hoppertype.JobRow, n)
		for i := range jobs {
			jobs[i] = newJob("bytes")
		}
		jobs[0].Input, jobs[0].Result = nil, []byte{}
		if n > 1 {
			jobs[1].Input, jobs[1].Result = []byte{}, nil
			jobs[2].Input, jobs[2].Result = []byte{0, 1, 2, 0xff}, []byte("r")
		}
		insert(t, d.Executor(), jobs...)
		got, err := d.Executor().JobGetMany(ctx, &driver.JobGetManyParams{IDs: []string{jobs[0].ID, jobs[min(1, n-1)].ID, jobs[min(2, n-1)].ID}})
		require.NoError(t, err)
		require.Nil(t, got[0].Input, "n=%d", n)
		require.NotNil(t, got[0].Result, "n=%d: an empty result is not nil", n)
		require.Empty(t, got[0].Result)
		if n > 1 {
			require.NotNil(t, got[1].Input)
			require.Nil(t, got[1].Result, "a nil result stays nil")
			require.Equal(t, []byte{0, 1, 2, 0xff}, got[2].Input)
		}
	}

	j := newJob("bytes-finish")
	insert(t, d.Executor(), j)
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: j.Queue, Limit: 1, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: j.ID, LeaseToken: claimed[0].LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, Result: []byte{}, EndedAt: testBase,
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NotNil(t, res[0].Job.Result, "an empty result written by a finish is not nil")
	require.True(t, res[0].Job.RunAt.IsZero(), "a zero RunAt round-trips as zero")
}

// TestDuplicateIDInCopyBatch checks that a duplicate id in a batch large
// enough for COPY inserts nothing.
func TestDuplicateIDInCopyBatch(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	orig := newJob("copy")
	insert(t, d.Executor(), orig)
	jobs := make([]*hoppertype.JobRow, copyMinRows+10)
	for i := range jobs {
		jobs[i] = newJob("copy")
	}
	jobs[100].ID = orig.ID
	_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: jobs})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	counts, err := d.Executor().JobCountByState(ctx, &driver.JobCountParams{Queue: "copy"})
	require.NoError(t, err)
	require.Equal(t, []driver.JobCount{{Queue: "copy", State: hoppertype.JobStatePending, Count: 1}}, counts)
}

// TestInTxAfterStatementError checks that a failed statement in a nested
// InTx rolls back only the savepoint, so the transaction goes on.
func TestInTxAfterStatementError(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	orig := newJob("q")
	insert(t, d.Executor(), orig)
	kept := newJob("q")
	err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		err := tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{{ID: "bad", State: "nonsense"}}})
			return err
		})
		require.Error(t, err, "an invalid state is refused")
		_, err = tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{kept}})
		return err
	})
	require.NoError(t, err)
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: kept.ID})
	require.NoError(t, err)
}

// TestClaimCancelledContext checks that a claim whose context ended before
// it was sent claims nothing.
func TestClaimCancelledContext(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	j := newJob("q")
	insert(t, d.Executor(), j)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: 1, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.ErrorIs(t, err, context.Canceled)
	got, err := d.Executor().JobGet(t.Context(), &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStatePending, got.State)
}
