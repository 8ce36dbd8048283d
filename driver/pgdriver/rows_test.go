package pgdriver

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// A query's rows share one scanner: a column NULL in a row must not keep the
// value of the row before it, and every row keeps its own bytes.
func TestJobScannerReusedAcrossRows(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 2))
	ctx := t.Context()
	var jobs []*hoppertype.JobRow
	var ids []string
	for i := range 6 {
		j := newJob("scan")
		if i%2 == 0 { // every other job carries the optional columns
			j.Metadata = map[string]string{"k": j.ID}
			j.Dependents = []string{"dep-" + j.ID}
			j.UniqueKey = "u-" + j.ID
			j.ParentID = "p-" + j.ID
			j.Input = []byte(`{"id":"` + j.ID + `"}`)
		} else {
			j.Input = nil
		}
		jobs = append(jobs, j)
		ids = append(ids, j.ID)
	}
	insert(t, d.Executor(), jobs...)
	many, err := d.Executor().JobGetMany(ctx, &driver.JobGetManyParams{IDs: ids})
	require.NoError(t, err)
	require.Len(t, many, len(ids))
	for i, got := range many {
		one, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: ids[i]})
		require.NoError(t, err)
		require.Equal(t, one, got, "job %d read in a batch as alone", i)
		if i%2 == 0 {
			require.Equal(t, jobs[i].Metadata, got.Metadata)
			require.Equal(t, jobs[i].Dependents, got.Dependents)
			require.Equal(t, jobs[i].UniqueKey, got.UniqueKey)
			require.JSONEq(t, string(jobs[i].Input), string(got.Input))
		} else {
			require.Nil(t, got.Metadata, "job %d", i)
			require.Nil(t, got.Dependents, "job %d", i)
			require.Empty(t, got.UniqueKey, "job %d", i)
			require.Empty(t, got.ParentID, "job %d", i)
			require.Nil(t, got.Input, "job %d", i)
		}
	}
}

// TestJobScannerSharesRepeatedStrings: the rows of one result that repeat a
// column's value (a claim's type, queue, state, worker; a job's group that
// is its own id) share one string, and a row whose value differs has its
// own.
func TestJobScannerSharesRepeatedStrings(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 2))
	ctx := t.Context()
	a, b, c := newJob("share"), newJob("share"), newJob("share")
	c.Type = "other"
	c.GroupID = "a-group"
	insert(t, d.Executor(), a, b, c)
	got, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "share", Limit: 3, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w-share"})
	require.NoError(t, err)
	require.Len(t, got, 3)
	byID := map[string]*hoppertype.JobRow{}
	for _, r := range got {
		byID[r.ID] = r
	}
	ga, gb, gc := byID[a.ID], byID[b.ID], byID[c.ID]
	require.Equal(t, []string{"t", "t", "other"}, []string{ga.Type, gb.Type, gc.Type})
	require.Equal(t, []string{a.ID, b.ID, "a-group"}, []string{ga.GroupID, gb.GroupID, gc.GroupID})
	for _, r := range got {
		require.Equal(t, "share", r.Queue)
		require.Equal(t, "w-share", r.Worker)
		require.Equal(t, hoppertype.JobStateRunning, r.State)
		if r != gc {
			require.Same(t, unsafe.StringData(r.ID), unsafe.StringData(r.GroupID), "a job's own group is its id's string")
		}
	}
	// got is sorted by claim order, not by id: compare every pair.
	for _, f := range []func(*hoppertype.JobRow) string{
		func(r *hoppertype.JobRow) string { return r.Queue },
		func(r *hoppertype.JobRow) string { return r.Worker },
		func(r *hoppertype.JobRow) string { return string(r.State) },
	} {
		require.Same(t, unsafe.StringData(f(got[0])), unsafe.StringData(f(got[1])))
		require.Same(t, unsafe.StringData(f(got[1])), unsafe.StringData(f(got[2])))
	}
	require.Same(t, unsafe.StringData(ga.Type), unsafe.StringData(gb.Type), "a and b are claimed one after the other")
}

// TestFinishArraysReused: a finish's argument arrays are reused by the
// next finish, which must not carry the values of the one before (a
// larger one with results and errors).
func TestFinishArraysReused(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 2))
	ctx := t.Context()
	x := d.Executor()
	jobs := []*hoppertype.JobRow{newJob("reuse"), newJob("reuse"), newJob("reuse")}
	insert(t, x, jobs...)
	got, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "reuse", Limit: 3, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, got, 3)
	finish := func(rows []*hoppertype.JobRow, state hoppertype.JobState, result []byte, e *hoppertype.ErrorInfo) {
		t.Helper()
		items := make([]driver.JobFinishParams, len(rows))
		for i, r := range rows {
			items[i] = driver.JobFinishParams{ID: r.ID, LeaseToken: r.LeaseToken, Attempt: r.Attempt, State: state,
				RunAt: r.RunAt, EndedAt: testBase, Result: result, Error: e, Claimed: r}
		}
		res, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
	finish(got[:2], hoppertype.JobStateDead, []byte(`"out"`), &hoppertype.ErrorInfo{Message: "boom", At: testBase})
	finish(got[2:], hoppertype.JobStateSucceeded, nil, nil)
	last, err := x.JobGet(ctx, &driver.JobGetParams{ID: got[2].ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateSucceeded, last.State)
	require.Nil(t, last.Result, "no result carried over")
	require.Nil(t, last.Error, "no error carried over")
	first, err := x.JobGet(ctx, &driver.JobGetParams{ID: got[0].ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateDead, first.State)
	require.JSONEq(t, `"out"`, string(first.Result))
	require.Equal(t, "boom", first.Error.Message)
}
