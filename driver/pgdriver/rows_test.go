package pgdriver

import (
	"testing"

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
