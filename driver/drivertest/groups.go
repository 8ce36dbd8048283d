package drivertest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// groupCases cover GroupInsert, GroupGet and GroupUpdate.
func groupCases() []testCase {
	return []testCase{
		{"InsertGetRoundTrip", testGroupRoundTrip},
		{"InsertDuplicate", testGroupDuplicate},
		{"GetNotFound", testGroupNotFound},
		{"SettleAtZero", testGroupSettle},
		{"ReopenAndSettleAgain", testGroupReopen},
		{"ContributionLastWriterWins", testGroupLastWriter},
		{"FinalLocksValue", testGroupFinal},
		{"FoldSeesExistingValue", testGroupFold},
		{"FoldErrorChangesNothing", testGroupFoldError},
		{"ConcurrentFoldsAreExact", testGroupConcurrentFold},
	}
}

// group inserts an open group with open jobs, created at base.
func (f *fixture) group(t *testing.T, open int) *hoppertype.GroupRow {
	t.Helper()
	g := &hoppertype.GroupRow{ID: "g-" + f.id(), Open: open, State: hoppertype.GroupOpen, CreatedAt: base}
	require.NoError(t, f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: g}))
	return g
}

func (f *fixture) groupGet(t *testing.T, id string) *hoppertype.GroupRow {
	t.Helper()
	g, err := f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: id})
	require.NoError(t, err)
	return g
}

func (f *fixture) groupUpdate(t *testing.T, p driver.GroupUpdateParams) *driver.GroupUpdateResult {
	t.Helper()
	res, err := f.x.GroupUpdate(f.ctx, &p)
	require.NoError(t, err)
	require.NotNil(t, res)
	require.NotNil(t, res.Group)
	require.Equal(t, p.ID, res.Group.ID)
	requireGroup(t, res.Group, f.groupGet(t, p.ID), "GroupUpdate returns the stored group")
	return res
}

func testGroupRoundTrip(t *testing.T, f *fixture) {
	open := &hoppertype.GroupRow{
		ID: "g-" + f.id(), Open: 3, State: hoppertype.GroupOpen, Value: []byte(`[1,2]`), ValueSet: true,
		CreatedAt: nanos(at(time.Second)),
	}
	settled := &hoppertype.GroupRow{
		ID: "g-" + f.id(), Open: 0, State: hoppertype.GroupSettled, Value: []byte(`"v"`), ValueSet: true, Final: true,
		CreatedAt: base, SettledAt: nanos(at(time.Minute)),
	}
	require.NoError(t, f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: open}))
	require.NoError(t, f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: settled}))
	wantOpen := *open
	wantOpen.Value = []byte(`[1,2]`)
	wantOpen.CreatedAt = at(time.Second)
	requireGroup(t, &wantOpen, f.groupGet(t, open.ID))
	wantSettled := *settled
	wantSettled.SettledAt = at(time.Minute)
	requireGroup(t, &wantSettled, f.groupGet(t, settled.ID))

	got := f.groupGet(t, open.ID)
	got.Value[0] = 'X'
	open.Value[1] = 'Y'
	requireGroup(t, &wantOpen, f.groupGet(t, open.ID), "rows are copied in and out")
}

func testGroupDuplicate(t *testing.T, f *fixture) {
	g := f.group(t, 2)
	err := f.x.GroupInsert(f.ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: g.ID, Open: 9, State: hoppertype.GroupOpen, CreatedAt: at(time.Hour)}})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	requireGroup(t, g, f.groupGet(t, g.ID), "the existing group is unchanged")
}

func testGroupNotFound(t *testing.T, f *fixture) {
	g, err := f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: "g-" + f.id()})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, g)
	res, err := f.x.GroupUpdate(f.ctx, &driver.GroupUpdateParams{ID: "g-" + f.id(), OpenDelta: -1, Now: base})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, res)
}

func testGroupSettle(t *testing.T, f *fixture) {
	g := f.group(t, 2)
	res := f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: 3, Now: base})
	require.False(t, res.Settled)
	require.Equal(t, 5, res.Group.Open)
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -4, Now: base})
	require.False(t, res.Settled)
	require.Equal(t, 1, res.Group.Open)
	require.Equal(t, hoppertype.GroupOpen, res.Group.State)
	require.True(t, res.Group.SettledAt.IsZero())

	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Now: nanos(at(time.Minute))})
	require.True(t, res.Settled, "the update that brings Open to 0 settles the group")
	require.Zero(t, res.Group.Open)
	require.Equal(t, hoppertype.GroupSettled, res.Group.State)
	requireTime(t, at(time.Minute), res.Group.SettledAt)

	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, Contribute: true, Value: []byte(`"late"`), Now: at(2 * time.Minute)})
	require.False(t, res.Settled, "only the settling update reports Settled")
	require.Equal(t, hoppertype.GroupSettled, res.Group.State)
	requireTime(t, at(time.Minute), res.Group.SettledAt)
	require.Equal(t, []byte(`"late"`), res.Group.Value)
}

func testGroupReopen(t *testing.T, f *fixture) {
	g := f.group(t, 1)
	require.True(t, f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Now: at(time.Minute)}).Settled)
	res := f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: 2, Now: at(2 * time.Minute)})
	require.False(t, res.Settled)
	require.Equal(t, 2, res.Group.Open)
	require.Equal(t, hoppertype.GroupOpen, res.Group.State, "Open above 0 reopens a settled group")
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Now: at(3 * time.Minute)})
	require.False(t, res.Settled)
	require.Equal(t, hoppertype.GroupOpen, res.Group.State)
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Now: at(4 * time.Minute)})
	require.True(t, res.Settled, "a reopened group settles again")
	require.Equal(t, hoppertype.GroupSettled, res.Group.State)
	requireTime(t, at(4*time.Minute), res.Group.SettledAt)
}

func testGroupLastWriter(t *testing.T, f *fixture) {
	g := f.group(t, 3)
	res := f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Contribute: true, Value: []byte(`"a"`), Now: base})
	require.True(t, res.Group.ValueSet)
	require.Equal(t, []byte(`"a"`), res.Group.Value)
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Contribute: true, Value: []byte(`"b"`), Now: base})
	require.Equal(t, []byte(`"b"`), res.Group.Value)
	require.False(t, res.Group.Final)
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Value: []byte(`"ignored"`), Now: base})
	require.Equal(t, []byte(`"b"`), res.Group.Value, "without Contribute the value is not touched")
	require.True(t, res.Settled)
}

func testGroupFinal(t *testing.T, f *fixture) {
	g := f.group(t, 3)
	res := f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Contribute: true, Value: []byte(`"a"`), Final: true, Now: base})
	require.True(t, res.Group.Final)
	require.Equal(t, []byte(`"a"`), res.Group.Value)
	folded := false
	res = f.groupUpdate(t, driver.GroupUpdateParams{
		ID: g.ID, OpenDelta: -1, Contribute: true, Value: []byte(`"b"`), Now: base,
		Fold: func([]byte, bool) ([]byte, error) { folded = true; return []byte(`"c"`), nil },
	})
	require.False(t, folded, "a final value is not folded")
	require.Equal(t, []byte(`"a"`), res.Group.Value, "a final value ignores later contributions")
	require.True(t, res.Group.Final)
	require.Equal(t, 1, res.Group.Open, "the open delta still applies")
}

func testGroupFold(t *testing.T, f *fixture) {
	g := f.group(t, 2)
	type call struct {
		existing []byte
		set      bool
	}
	var calls []call
	fold := func(existing []byte, set bool) ([]byte, error) {
		calls = append(calls, call{append([]byte(nil), existing...), set})
		return append(append([]byte(nil), existing...), 'x'), nil
	}
	res := f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Contribute: true, Fold: fold, Now: base})
	require.Equal(t, []byte("x"), res.Group.Value)
	require.True(t, res.Group.ValueSet)
	res = f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, OpenDelta: -1, Contribute: true, Fold: fold, Now: base})
	require.Equal(t, []byte("xx"), res.Group.Value)
	require.True(t, res.Settled)
	require.Len(t, calls, 2)
	require.Empty(t, calls[0].existing)
	require.False(t, calls[0].set, "no value yet")
	require.Equal(t, []byte("x"), calls[1].existing)
	require.True(t, calls[1].set)
}

func testGroupFoldError(t *testing.T, f *fixture) {
	g := f.group(t, 1)
	f.groupUpdate(t, driver.GroupUpdateParams{ID: g.ID, Contribute: true, Value: []byte(`"kept"`), Now: base})
	before := f.groupGet(t, g.ID)
	errFold := errors.New("fold failed")
	res, err := f.x.GroupUpdate(f.ctx, &driver.GroupUpdateParams{
		ID: g.ID, OpenDelta: -1, Contribute: true, Final: true, Now: at(time.Minute),
		Fold: func([]byte, bool) ([]byte, error) { return []byte(`"new"`), errFold },
	})
	require.ErrorIs(t, err, errFold)
	require.Nil(t, res)
	after := f.groupGet(t, g.ID)
	requireGroup(t, before, after, "a failed fold changes nothing")
	require.Equal(t, 1, after.Open)
	require.Equal(t, hoppertype.GroupOpen, after.State)
}

func testGroupConcurrentFold(t *testing.T, f *fixture) {
	const n = 50
	g := f.group(t, n)
	add := func(existing []byte, set bool) ([]byte, error) {
		v := 0
		if set {
			var err error
			if v, err = strconv.Atoi(string(existing)); err != nil {
				return nil, err
			}
		}
		return []byte(strconv.Itoa(v + 1)), nil
	}
	var wg sync.WaitGroup
	results := make([]*driver.GroupUpdateResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.x.GroupUpdate(f.ctx, &driver.GroupUpdateParams{
				ID: g.ID, OpenDelta: -1, Contribute: true, Fold: add, Now: base,
			})
		})
	}
	close(start)
	wg.Wait()
	settled := 0
	for i := range n {
		require.NoError(t, errs[i])
		if results[i].Settled {
			settled++
		}
	}
	require.Equal(t, 1, settled, "exactly one update settles the group")
	got := f.groupGet(t, g.ID)
	require.Equal(t, []byte(strconv.Itoa(n)), got.Value, "folds are exact under concurrency")
	require.Zero(t, got.Open)
	require.Equal(t, hoppertype.GroupSettled, got.State)
}
