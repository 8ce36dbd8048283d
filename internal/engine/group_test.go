package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestApplyGroup: a root job that spawned children opens a group of them,
// with its own result as the value; each member's end counts it off and
// contributes, and the last one settles the group. A root job that spawned
// nothing, or a member of a group that is gone, needs no group row.
func TestApplyGroup(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	e := New(testConfig(d))
	t.Cleanup(e.Close)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ended := func(id, group string, state hoppertype.JobState, result string) *hoppertype.JobRow {
		j := insertRow(id, "t", "", "q", now)
		j.GroupID, j.State = group, state
		if result != "" {
			j.Result = []byte(result)
		}
		return j
	}
	apply := func(job *hoppertype.JobRow, eff *groupEffect) ([]driver.JobInsertResult, []*hoppertype.GroupRow) {
		var ins []driver.JobInsertResult
		var settled []*hoppertype.GroupRow
		require.NoError(t, d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			var err error
			ins, settled, err = e.applyGroup(ctx, tx, job, eff)
			return err
		}))
		return ins, settled
	}
	group := func(id string) *hoppertype.GroupRow {
		g, err := d.Executor().GroupGet(ctx, &driver.GroupGetParams{ID: id})
		require.NoError(t, err)
		return g
	}

	ins, settled := apply(ended("alone", "alone", hoppertype.JobStateSucceeded, `0`), nil)
	require.Empty(t, ins)
	require.Empty(t, settled)
	_, err := d.Executor().GroupGet(ctx, &driver.GroupGetParams{ID: "alone"})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a job that spawned nothing is a group of one, with no row")

	kids := []*hoppertype.JobRow{insertRow("k1", "t", "", "q", now), insertRow("k2", "t", "", "q", now)}
	for _, k := range kids {
		k.GroupID = "root"
	}
	ins, settled = apply(ended("root", "root", hoppertype.JobStateSucceeded, `1`), &groupEffect{children: kids, fold: addFold(1).fold})
	require.Len(t, ins, 2, "the children are inserted")
	require.Empty(t, settled)
	g := group("root")
	require.Equal(t, 2, g.Open)
	require.JSONEq(t, `1`, string(g.Value), "the root's fold starts the value")

	_, settled = apply(ended("k1", "root", hoppertype.JobStateSucceeded, ``), &groupEffect{fold: addFold(10).fold})
	require.Empty(t, settled)
	require.Equal(t, 1, group("root").Open)
	_, settled = apply(ended("k2", "root", hoppertype.JobStateDead, ``), nil)
	require.Len(t, settled, 1, "the last member settles the group")
	require.Equal(t, "root", settled[0].ID)
	require.JSONEq(t, `11`, string(settled[0].Value), "a failed member contributes nothing")

	ins, settled = apply(ended("stray", "gone", hoppertype.JobStateSucceeded, `1`), nil)
	require.Empty(t, ins)
	require.Empty(t, settled, "a member of a group that is gone changes nothing")
}

// TestOrphanGroupReportedOnce: a settled group nobody awaited is reported
// to OnOrphanGroup once across the fleet; one a waiter marked is not.
func TestOrphanGroupReportedOnce(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	cfg := testConfig(d)
	var orphans []string
	cfg.Hooks.OnOrphanGroup = func(g *hoppertype.GroupRow) { orphans = append(orphans, g.ID) }
	e := New(cfg)
	t.Cleanup(e.Close)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	awaited, err := e.MarkAwaited(ctx, "waited-for")
	require.NoError(t, err)
	require.True(t, awaited)
	e.groupSettled(ctx, &hoppertype.GroupRow{ID: "waited-for"}, now)
	e.groupSettled(ctx, &hoppertype.GroupRow{ID: "orphan"}, now)
	e.groupSettled(ctx, &hoppertype.GroupRow{ID: "orphan"}, now) // another process's report
	require.Equal(t, []string{"orphan"}, orphans)
}
