package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// runCases cover RunInsert, RunGet, RunList, RunUpdate, the workflow state
// JobDeleteFinished takes with a run, and rollback of workflow writes.
func runCases() []testCase {
	return []testCase{
		{"InsertGetRoundTrip", testRunRoundTrip},
		{"InsertEmptyFields", testRunEmptyFields},
		{"InsertDuplicate", testRunDuplicate},
		{"NotFound", testRunNotFound},
		{"ListFilters", testRunListFilters},
		{"ListOffsetPaging", testRunListPaging},
		{"ListKeysetPaging", testRunListKeysetPaging},
		{"UpdateWritesFields", testRunUpdate},
		{"UpdateExpectStatuses", testRunUpdateExpect},
		{"UpdateRaceOneWinner", testRunUpdateRace},
		{"DeleteFinishedTakesRunState", testRunDeleteCascade},
		{"RollbackUndoesWorkflowWrites", testRunRollback},
		{"NestedRollbackUndoesOnlyNested", testRunNestedRollback},
		{"StartStoresRunAndJob", testRunStart},
		{"StartInTxRollsBack", testRunStartInTx},
		{"LoadIsGetAndEvents", testRunLoad},
		{"LoadManyIsLoadOfEach", testRunLoadMany},
	}
}

// testRunLoadMany: RunLoadMany answers what RunLoad does for each run it
// finds (a history in order, an empty one for a run without), leaves out
// ids without a run, and reads inside a transaction what it wrote.
func testRunLoadMany(t *testing.T, f *fixture) {
	bl, ok := f.x.(driver.RunBatchLoader)
	if !ok {
		t.Skip("the executor reads runs one by one (no driver.RunBatchLoader)")
	}
	r1, j1 := f.leasedRun(t)
	r2, _ := f.leasedRun(t)
	f.appendEvents(t, r1.ID, j1.LeaseToken, event(r1.ID, 1, 1, "step"), event(r1.ID, 1, 2, "sleep"))
	f.appendEvents(t, r1.ID, j1.LeaseToken, event(r1.ID, 2, 1, "step"))

	got, err := bl.RunLoadMany(f.ctx, &driver.RunLoadManyParams{IDs: []string{r2.ID, "no-such-run", r1.ID}})
	require.NoError(t, err)
	require.Len(t, got, 2, "the missing id is left out")
	for _, id := range []string{r1.ID, r2.ID} {
		run, events, err := f.x.RunLoad(f.ctx, &driver.RunLoadParams{ID: id})
		require.NoError(t, err)
		l := got[id]
		require.NotNil(t, l, id)
		require.Equal(t, run.ID, l.Run.ID)
		require.Equal(t, run.Workflow, l.Run.Workflow)
		require.Equal(t, run.Status, l.Run.Status)
		require.True(t, run.CreatedAt.Equal(l.Run.CreatedAt))
		require.NotNil(t, l.Events, "an empty history is empty, not nil")
		requireEvents(t, events, l.Events)
	}
	require.Equal(t, []string{"1.1", "1.2", "2.1"}, seqs(got[r1.ID].Events))
	require.Empty(t, got[r2.ID].Events)

	none, err := bl.RunLoadMany(f.ctx, &driver.RunLoadManyParams{})
	require.NoError(t, err)
	require.Empty(t, none)

	// Inside a transaction: the runs it started are there.
	require.NoError(t, f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		run := f.runRow(func(r *hoppertype.RunRow) { r.Status = hoppertype.RunPending })
		job := f.job(func(j *hoppertype.JobRow) { j.ID, j.GroupID = run.ID, run.ID })
		_, err := tx.RunStart(ctx, &driver.RunStartParams{Run: run, Job: job})
		require.NoError(t, err)
		tbl, ok := tx.(driver.RunBatchLoader)
		require.True(t, ok, "a transaction's executor loads in batches as its driver's does")
		got, err := tbl.RunLoadMany(ctx, &driver.RunLoadManyParams{IDs: []string{run.ID, r1.ID}})
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, hoppertype.RunPending, got[run.ID].Run.Status)
		return nil
	}))
}

// testRunLoad: RunLoad returns what RunGet and RunEventList do.
func testRunLoad(t *testing.T, f *fixture) {
	_, _, err := f.x.RunLoad(f.ctx, &driver.RunLoadParams{ID: "no-such-run"})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)

	r, j := f.leasedRun(t)
	run, events, err := f.x.RunLoad(f.ctx, &driver.RunLoadParams{ID: r.ID})
	require.NoError(t, err)
	want, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: r.ID})
	require.NoError(t, err)
	require.Equal(t, want.ID, run.ID)
	require.Equal(t, want.Status, run.Status)
	require.Empty(t, events, "no history yet")

	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"), event(r.ID, 1, 2, "sleep"))
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 2, 1, "step"))
	run, events, err = f.x.RunLoad(f.ctx, &driver.RunLoadParams{ID: r.ID})
	require.NoError(t, err)
	require.Equal(t, r.Workflow, run.Workflow)
	require.True(t, run.CreatedAt.Equal(want.CreatedAt))
	requireEvents(t, f.events(t, r.ID, 0), events)
	require.Equal(t, []string{"1.1", "1.2", "2.1"}, seqs(events))

	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		run, events, err := tx.RunLoad(ctx, &driver.RunLoadParams{ID: r.ID})
		require.NoError(t, err)
		require.Equal(t, r.ID, run.ID)
		require.Len(t, events, 3)
		return nil
	})
	require.NoError(t, err)
}

// testRunStart: RunStart stores the run and its job and announces the
// queue; a second start of the id writes nothing.
func testRunStart(t *testing.T, f *fixture) {
	queue := "q-" + f.id()
	sub := f.listen(t, driver.TopicJobAvailable)
	run := f.runRow(func(r *hoppertype.RunRow) { r.Status = hoppertype.RunPending })
	job := f.job(func(j *hoppertype.JobRow) { j.ID, j.GroupID, j.Queue, j.Type = run.ID, run.ID, queue, "workflow:wf" })
	existing, err := f.x.RunStart(f.ctx, &driver.RunStartParams{Run: run, Job: job})
	require.NoError(t, err)
	require.False(t, existing)
	got, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: run.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunPending, got.Status)
	requireJob(t, job, f.get(t, run.ID))
	for p := recv(t, sub); p != queue; p = recv(t, sub) {
	}

	// The same id again: existing, and neither row changes.
	again := f.runRow(func(r *hoppertype.RunRow) { r.ID, r.Workflow, r.Status = run.ID, "other", hoppertype.RunPending })
	job2 := f.job(func(j *hoppertype.JobRow) {
		j.ID, j.GroupID, j.Queue, j.Input = run.ID, run.ID, queue, []byte(`{"n":2}`)
	})
	existing, err = f.x.RunStart(f.ctx, &driver.RunStartParams{Run: again, Job: job2})
	require.NoError(t, err)
	require.True(t, existing)
	got, err = f.x.RunGet(f.ctx, &driver.RunGetParams{ID: run.ID})
	require.NoError(t, err)
	require.Equal(t, "wf", got.Workflow)
	requireJob(t, job, f.get(t, run.ID))

	// A job that does not carry the run's id is refused.
	bad := f.runRow()
	_, err = f.x.RunStart(f.ctx, &driver.RunStartParams{Run: bad, Job: f.job()})
	require.Error(t, err)
	_, err = f.x.RunGet(f.ctx, &driver.RunGetParams{ID: bad.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
}

// testRunStartInTx: a start inside a transaction that rolls back leaves
// nothing, and announces nothing.
func testRunStartInTx(t *testing.T, f *fixture) {
	queue := "q-" + f.id()
	sub := f.listen(t, driver.TopicJobAvailable)
	run := f.runRow(func(r *hoppertype.RunRow) { r.Status = hoppertype.RunPending })
	job := f.job(func(j *hoppertype.JobRow) { j.ID, j.GroupID, j.Queue = run.ID, run.ID, queue })
	boom := errors.New("boom")
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		existing, err := tx.RunStart(ctx, &driver.RunStartParams{Run: run, Job: job})
		require.NoError(t, err)
		require.False(t, existing)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = f.x.RunGet(f.ctx, &driver.RunGetParams{ID: run.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	_, err = f.x.JobGet(f.ctx, &driver.JobGetParams{ID: run.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)

	// Committed, it is all there and announced.
	require.NoError(t, f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.RunStart(ctx, &driver.RunStartParams{Run: run, Job: job})
		return err
	}))
	requireJob(t, job, f.get(t, run.ID))
	for p := recv(t, sub); p != queue; p = recv(t, sub) {
	}
}

// runRow builds a running run of workflow "wf" created and updated at
// base, with a fresh id; mods adjust it.
func (f *fixture) runRow(mods ...func(*hoppertype.RunRow)) *hoppertype.RunRow {
	r := &hoppertype.RunRow{
		ID:          f.id(),
		Workflow:    "wf",
		Status:      hoppertype.RunRunning,
		CodeVersion: "v1",
		CreatedAt:   base,
		UpdatedAt:   base,
	}
	for _, m := range mods {
		m(r)
	}
	return r
}

// insertRun inserts a run built from mods and returns what was inserted.
func (f *fixture) insertRun(t *testing.T, mods ...func(*hoppertype.RunRow)) *hoppertype.RunRow {
	t.Helper()
	r := f.runRow(mods...)
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: r}))
	return r
}

// runGet returns a run that must exist.
func (f *fixture) runGet(t *testing.T, id string) *hoppertype.RunRow {
	t.Helper()
	r, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: id})
	require.NoError(t, err, "get run %s", id)
	require.NotNil(t, r)
	return r
}

// requireRunMissing requires that a run row does not exist.
func (f *fixture) requireRunMissing(t *testing.T, id string) {
	t.Helper()
	r, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: id})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "run %s should not exist", id)
	require.Nil(t, r)
}

// leasedRun inserts a run and its job (same id) in a queue of its own and
// claims the job at base, so the run's history can be written under the
// returned job's LeaseToken.
func (f *fixture) leasedRun(t *testing.T) (*hoppertype.RunRow, *hoppertype.JobRow) {
	t.Helper()
	j := f.claimOne(t, ofType("workflow"))
	r := f.runRow(func(r *hoppertype.RunRow) { r.ID = j.ID })
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: r}))
	return r, j
}

// requireRun requires two run rows to be equal, comparing times as instants.
func requireRun(t *testing.T, want, got *hoppertype.RunRow, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	require.Equal(t, normRun(want), normRun(got), msgAndArgs...)
}

func normRun(r *hoppertype.RunRow) hoppertype.RunRow {
	c := *r
	c.CreatedAt = normTime(c.CreatedAt)
	c.UpdatedAt = normTime(c.UpdatedAt)
	c.EndedAt = normTime(c.EndedAt)
	if r.Error != nil {
		e := *r.Error
		e.At = normTime(e.At)
		c.Error = &e
	}
	return c
}

func runIDs(rows []*hoppertype.RunRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func runErr(msg string, ts time.Time) *hoppertype.ErrorInfo {
	return &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: msg, Stack: "wf.go:7", Attempt: 2, At: ts}
}

func testRunRoundTrip(t *testing.T, f *fixture) {
	zone := time.FixedZone("UTC-5", -5*3600)
	in := f.runRow(func(r *hoppertype.RunRow) {
		r.Workflow = "order-fulfilment"
		r.Status = hoppertype.RunFailed
		r.ParentID = "parent-" + r.ID
		r.CodeVersion = "2025-03-14.1"
		r.Error = runErr("payment declined", nanos(at(3*time.Second)))
		r.CreatedAt = nanos(at(time.Second)).In(zone)
		r.UpdatedAt = nanos(at(2 * time.Second))
		r.EndedAt = nanos(at(3 * time.Second))
	})
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: in}))
	want := *in
	want.Error = runErr("payment declined", at(3*time.Second))
	want.CreatedAt = at(time.Second)
	want.UpdatedAt = at(2 * time.Second)
	want.EndedAt = at(3 * time.Second)
	got := f.runGet(t, in.ID)
	requireRun(t, &want, got, "times are stored with microsecond precision")

	got.Error.Message = "changed"
	in.Error.Message = "changed too"
	in.Workflow = "other"
	requireRun(t, &want, f.runGet(t, in.ID), "rows are copied in and out")
}

func testRunEmptyFields(t *testing.T, f *fixture) {
	in := f.runRow(func(r *hoppertype.RunRow) { r.CodeVersion = "" })
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: in}))
	got := f.runGet(t, in.ID)
	requireRun(t, in, got)
	require.Nil(t, got.Error, "a nil Error stays nil")
	require.True(t, got.EndedAt.IsZero(), "a zero EndedAt stays zero")
	require.Empty(t, got.ParentID)
}

func testRunDuplicate(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	err := f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: f.runRow(func(d *hoppertype.RunRow) {
		d.ID = r.ID
		d.Workflow = "other"
		d.Status = hoppertype.RunCompleted
	})})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	requireRun(t, r, f.runGet(t, r.ID), "the existing run is unchanged")
}

func testRunNotFound(t *testing.T, f *fixture) {
	f.requireRunMissing(t, f.id())
	got, err := f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{ID: f.id(), Status: hoppertype.RunCompleted, Now: base})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, got)
	got, err = f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{
		ID: f.id(), Status: hoppertype.RunCompleted, ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunRunning}, Now: base,
	})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a missing run is not found, not a state conflict")
	require.Nil(t, got)
}

// runListData inserts six runs r[0..5] whose ids sort in index order:
//
//	r  workflow status     parent created
//	0  a        running    -      base
//	1  b        waiting    p1     base+1m
//	2  a        completed  p1     base+2m
//	3  a        running    -      base+2m
//	4  c        failed     p2     base+3m
//	5  b        running    p1     base+4m
func (f *fixture) runListData(t *testing.T) []*hoppertype.RunRow {
	t.Helper()
	spec := []struct {
		workflow string
		status   hoppertype.RunStatus
		parent   string
		created  time.Duration
	}{
		{"a", hoppertype.RunRunning, "", 0},
		{"b", hoppertype.RunWaiting, "p1", time.Minute},
		{"a", hoppertype.RunCompleted, "p1", 2 * time.Minute},
		{"a", hoppertype.RunRunning, "", 2 * time.Minute},
		{"c", hoppertype.RunFailed, "p2", 3 * time.Minute},
		{"b", hoppertype.RunRunning, "p1", 4 * time.Minute},
	}
	rows := make([]*hoppertype.RunRow, len(spec))
	for i, s := range spec {
		rows[i] = f.runRow(func(r *hoppertype.RunRow) {
			r.Workflow = f.prefix + s.workflow
			r.Status = s.status
			if s.parent != "" {
				r.ParentID = f.prefix + s.parent
			}
			r.CreatedAt = at(s.created)
			// UpdatedAt runs against CreatedAt, so ordering by it is wrong.
			r.UpdatedAt = at(time.Hour - s.created)
		})
	}
	// Insert out of order so an implementation cannot lean on insertion order.
	for _, i := range []int{2, 0, 5, 3, 1, 4} {
		require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: rows[i]}))
	}
	return rows
}

func (f *fixture) runList(t *testing.T, p driver.RunListParams) []*hoppertype.RunRow {
	t.Helper()
	rows, err := f.x.RunList(f.ctx, &p)
	require.NoError(t, err)
	return rows
}

func testRunListFilters(t *testing.T, f *fixture) {
	r := f.runListData(t)
	pick := func(idx ...int) []string {
		out := make([]string, len(idx))
		for i, x := range idx {
			out[i] = r[x].ID
		}
		return out
	}
	running := hoppertype.RunRunning
	cases := []struct {
		name string
		p    driver.RunListParams
		want []string
	}{
		{"all, newest first, ties by id descending", driver.RunListParams{Limit: 100}, pick(5, 4, 3, 2, 1, 0)},
		{"one status", driver.RunListParams{Limit: 100, Statuses: []hoppertype.RunStatus{running}}, pick(5, 3, 0)},
		{"several statuses", driver.RunListParams{Limit: 100, Statuses: []hoppertype.RunStatus{hoppertype.RunWaiting, hoppertype.RunFailed, hoppertype.RunCompleted}}, pick(4, 2, 1)},
		{"workflow", driver.RunListParams{Limit: 100, Workflow: f.prefix + "a"}, pick(3, 2, 0)},
		{"parent", driver.RunListParams{Limit: 100, ParentID: f.prefix + "p1"}, pick(5, 2, 1)},
		{"created after is inclusive", driver.RunListParams{Limit: 100, CreatedAfter: at(2 * time.Minute)}, pick(5, 4, 3, 2)},
		{"created before is exclusive", driver.RunListParams{Limit: 100, CreatedBefore: at(2 * time.Minute)}, pick(1, 0)},
		{"created window", driver.RunListParams{Limit: 100, CreatedAfter: at(time.Minute), CreatedBefore: at(3 * time.Minute)}, pick(3, 2, 1)},
		{"workflow and status", driver.RunListParams{Limit: 100, Workflow: f.prefix + "a", Statuses: []hoppertype.RunStatus{running}}, pick(3, 0)},
		{"parent and status", driver.RunListParams{Limit: 100, ParentID: f.prefix + "p1", Statuses: []hoppertype.RunStatus{running}}, pick(5)},
		{"workflow and window", driver.RunListParams{Limit: 100, Workflow: f.prefix + "b", CreatedBefore: at(4 * time.Minute)}, pick(1)},
		{"no match", driver.RunListParams{Limit: 100, Workflow: "zzz"}, nil},
		{"no match by status", driver.RunListParams{Limit: 100, Statuses: []hoppertype.RunStatus{hoppertype.RunStuck}}, nil},
		{"limit", driver.RunListParams{Limit: 2}, pick(5, 4)},
		{"offset and limit", driver.RunListParams{Offset: 2, Limit: 2}, pick(3, 2)},
		{"offset to the end", driver.RunListParams{Offset: 4, Limit: 100}, pick(1, 0)},
		{"offset past the end", driver.RunListParams{Offset: 6, Limit: 100}, nil},
		{"offset with a filter", driver.RunListParams{Workflow: f.prefix + "a", Offset: 1, Limit: 1}, pick(2)},
	}
	for _, c := range cases {
		got := f.runList(t, c.p)
		if len(c.want) == 0 {
			require.Empty(t, got, c.name)
			continue
		}
		require.Equal(t, c.want, runIDs(got), c.name)
	}
	// Listed rows carry every field.
	got := f.runList(t, driver.RunListParams{Limit: 1, ParentID: f.prefix + "p2"})
	require.Len(t, got, 1)
	requireRun(t, r[4], got[0])
}

func testRunListPaging(t *testing.T, f *fixture) {
	r := f.runListData(t)
	var pages [][]string
	for off := 0; ; off += 4 {
		page := runIDs(f.runList(t, driver.RunListParams{Offset: off, Limit: 4}))
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 4)
		pages = append(pages, page)
		require.Less(t, off, 100, "paging did not end")
	}
	require.Equal(t, [][]string{{r[5].ID, r[4].ID, r[3].ID, r[2].ID}, {r[1].ID, r[0].ID}}, pages)
}

// testRunListKeysetPaging pages with After, the key of a page's last row:
// every run once, in order, across a tie of creation times at a page
// boundary and under a filter.
func testRunListKeysetPaging(t *testing.T, f *fixture) {
	r := f.runListData(t)
	page := func(p driver.RunListParams) [][]string {
		var pages [][]string
		for i := 0; ; i++ {
			rows := f.runList(t, p)
			if len(rows) == 0 {
				return pages
			}
			pages = append(pages, runIDs(rows))
			last := rows[len(rows)-1]
			p.After = driver.RunKey{CreatedAt: last.CreatedAt, ID: last.ID}
			require.Less(t, i, 100, "paging did not end")
		}
	}
	// Runs 3 and 2 were created at the same time: the first page ends between them.
	require.Equal(t, [][]string{{r[5].ID, r[4].ID, r[3].ID}, {r[2].ID, r[1].ID, r[0].ID}}, page(driver.RunListParams{Limit: 3}))
	require.Equal(t, [][]string{{r[5].ID, r[4].ID}, {r[3].ID, r[2].ID}, {r[1].ID, r[0].ID}}, page(driver.RunListParams{Limit: 2}))
	require.Equal(t, [][]string{{r[3].ID}, {r[2].ID}, {r[0].ID}}, page(driver.RunListParams{Limit: 1, Workflow: f.prefix + "a"}))
	// A key between rows starts after it.
	got := f.runList(t, driver.RunListParams{Limit: 100, After: driver.RunKey{CreatedAt: at(2 * time.Minute), ID: r[3].ID}})
	require.Equal(t, []string{r[2].ID, r[1].ID, r[0].ID}, runIDs(got))
	got = f.runList(t, driver.RunListParams{Limit: 100, After: driver.RunKey{CreatedAt: at(150 * time.Second), ID: ""}})
	require.Equal(t, []string{r[3].ID, r[2].ID, r[1].ID, r[0].ID}, runIDs(got))
}

func (f *fixture) runUpdate(t *testing.T, p driver.RunUpdateParams) *hoppertype.RunRow {
	t.Helper()
	got, err := f.x.RunUpdate(f.ctx, &p)
	require.NoError(t, err)
	require.NotNil(t, got)
	requireRun(t, got, f.runGet(t, p.ID), "RunUpdate returns the stored run")
	return got
}

func testRunUpdate(t *testing.T, f *fixture) {
	r := f.insertRun(t, func(r *hoppertype.RunRow) { r.ParentID = "p" })
	want := *r

	got := f.runUpdate(t, driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunWaiting, Now: nanos(at(time.Second))})
	want.Status = hoppertype.RunWaiting
	want.UpdatedAt = at(time.Second)
	requireRun(t, &want, got, "status and UpdatedAt only")

	e1 := runErr("first", nanos(at(2*time.Second)))
	got = f.runUpdate(t, driver.RunUpdateParams{
		ID: r.ID, Status: hoppertype.RunFailed, Error: e1, EndedAt: nanos(at(2 * time.Second)), Now: at(2 * time.Second),
	})
	want.Status = hoppertype.RunFailed
	want.Error = runErr("first", at(2*time.Second))
	want.EndedAt = at(2 * time.Second)
	want.UpdatedAt = at(2 * time.Second)
	requireRun(t, &want, got, "error and end time written")
	e1.Message = "mutated after the call"
	requireRun(t, &want, f.runGet(t, r.ID), "the error is copied in")

	got = f.runUpdate(t, driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunCompensating, Now: at(3 * time.Second)})
	want.Status = hoppertype.RunCompensating
	want.UpdatedAt = at(3 * time.Second)
	requireRun(t, &want, got, "a nil Error keeps the stored error, a zero EndedAt keeps the stored end time")

	got = f.runUpdate(t, driver.RunUpdateParams{
		ID: r.ID, Status: hoppertype.RunCompensated, Error: runErr("second", at(4*time.Second)), EndedAt: at(4 * time.Second), Now: at(4 * time.Second),
	})
	want.Status = hoppertype.RunCompensated
	want.Error = runErr("second", at(4*time.Second))
	want.EndedAt = at(4 * time.Second)
	want.UpdatedAt = at(4 * time.Second)
	requireRun(t, &want, got, "a later error and end time replace the stored ones")

	got = f.runUpdate(t, driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunPending, Reset: true,
		Error: runErr("ignored", at(5*time.Second)), EndedAt: at(5 * time.Second), Now: at(5 * time.Second)})
	want.Status = hoppertype.RunPending
	want.Error = nil
	want.EndedAt = time.Time{}
	want.UpdatedAt = at(5 * time.Second)
	requireRun(t, &want, got, "Reset clears the error and the end")
	requireRun(t, &want, f.runGet(t, r.ID), "and stores it")
}

func testRunUpdateExpect(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	got, err := f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{
		ID: r.ID, Status: hoppertype.RunCompleted, Error: runErr("x", at(time.Second)), EndedAt: at(time.Second),
		ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunPending, hoppertype.RunWaiting}, Now: at(time.Second),
	})
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	requireRun(t, r, got, "a conflict returns the run as it is")
	requireRun(t, r, f.runGet(t, r.ID), "a conflict changes nothing")

	got = f.runUpdate(t, driver.RunUpdateParams{
		ID: r.ID, Status: hoppertype.RunCompleted, EndedAt: at(2 * time.Second),
		ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunWaiting, hoppertype.RunRunning}, Now: at(2 * time.Second),
	})
	require.Equal(t, hoppertype.RunCompleted, got.Status, "any one of ExpectStatuses lets the update apply")
	done := *got

	got, err = f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{
		ID: r.ID, Status: hoppertype.RunCancelled, ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunRunning}, Now: at(3 * time.Second),
	})
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	requireRun(t, &done, got)
	requireRun(t, &done, f.runGet(t, r.ID))
}

func testRunUpdateRace(t *testing.T, f *fixture) {
	const n = 20
	r := f.insertRun(t)
	results := make([]*hoppertype.RunRow, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{
				ID: r.ID, Status: hoppertype.RunFailed, Error: runErr(fmt.Sprint(i), at(time.Second)), EndedAt: at(time.Second),
				ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunRunning}, Now: at(time.Second),
			})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil {
			require.Equal(t, -1, winner, "two updates expecting running both applied")
			winner = i
			continue
		}
		require.ErrorIs(t, errs[i], hoppertype.ErrStateConflict)
		require.NotNil(t, results[i])
		require.Equal(t, hoppertype.RunFailed, results[i].Status)
	}
	require.NotEqual(t, -1, winner, "no update applied")
	got := f.runGet(t, r.ID)
	require.Equal(t, hoppertype.RunFailed, got.Status)
	require.Equal(t, fmt.Sprint(winner), got.Error.Message, "the stored error is the winner's")
}

// workflowState writes a history, two hooks and three stream chunks for a
// leased run, and returns the hook tokens.
func (f *fixture) workflowState(t *testing.T, r *hoppertype.RunRow, j *hoppertype.JobRow) []string {
	t.Helper()
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"), event(r.ID, 1, 2, "sleep"))
	h1 := f.insertHook(t, r.ID)
	h2 := f.insertHook(t, r.ID)
	f.resumeHook(t, h2.Token, []byte(`"p"`), at(time.Second))
	f.streamAppend(t, r.ID, base, "a", "b", "c")
	return []string{h1.Token, h2.Token}
}

// requireWorkflowState requires a run's row, history, hooks and stream to
// be there (or, with present false, to be gone).
func (f *fixture) requireWorkflowState(t *testing.T, id string, tokens []string, present bool) {
	t.Helper()
	evs := f.events(t, id, 0)
	hooks := f.hooksOf(t, id)
	chunks := f.streamRead(t, id, 0, 100)
	if !present {
		f.requireRunMissing(t, id)
		require.Empty(t, evs, "history of run %s", id)
		require.Empty(t, hooks, "hooks of run %s", id)
		for _, tok := range tokens {
			h, err := f.x.HookGet(f.ctx, &driver.HookGetParams{Token: tok})
			require.ErrorIs(t, err, hoppertype.ErrNotFound, "hook %s of run %s", tok, id)
			require.Nil(t, h)
		}
		require.Empty(t, chunks, "stream of run %s", id)
		return
	}
	f.runGet(t, id)
	require.Len(t, evs, 2, "history of run %s", id)
	require.Len(t, hooks, 2, "hooks of run %s", id)
	for _, tok := range tokens {
		f.hookGet(t, tok)
	}
	require.Len(t, chunks, 3, "stream of run %s", id)
}

func testRunDeleteCascade(t *testing.T, f *fixture) {
	// old is a finished run old enough for retention; recent finished after
	// the cut-off and live is still running.
	old, oldJob := f.leasedRun(t)
	oldHooks := f.workflowState(t, old, oldJob)
	f.finishOK(t, driver.JobFinishParams{ID: oldJob.ID, LeaseToken: oldJob.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Minute)})
	recent, recentJob := f.leasedRun(t)
	recentHooks := f.workflowState(t, recent, recentJob)
	f.finishOK(t, driver.JobFinishParams{ID: recentJob.ID, LeaseToken: recentJob.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Hour)})
	live, liveJob := f.leasedRun(t)
	liveHooks := f.workflowState(t, live, liveJob)
	plain := f.finished(t, hoppertype.JobStateSucceeded)

	del := func(ctx context.Context, ex driver.Executor) (int, error) {
		return ex.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{
			States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: at(30 * time.Minute), Limit: 100,
		})
	}
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		n, err := del(ctx, tx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	f.get(t, old.ID)
	f.requireWorkflowState(t, old.ID, oldHooks, true)

	n, err := del(f.ctx, f.x)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the old run's job and the plain job")
	f.requireMissing(t, old.ID)
	f.requireMissing(t, plain.ID)
	f.requireWorkflowState(t, old.ID, oldHooks, false)
	f.requireWorkflowState(t, recent.ID, recentHooks, true)
	f.requireWorkflowState(t, live.ID, liveHooks, true)

	// The live run carries on: its history and stream continue where they were.
	f.appendEvents(t, live.ID, liveJob.LeaseToken, event(live.ID, 1, 3, "step"))
	require.Equal(t, []int64{3}, offsets(f.streamAppend(t, live.ID, base, "d")))
}

func testRunRollback(t *testing.T, f *fixture) {
	updated := f.insertRun(t)
	r, j := f.leasedRun(t)
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"))
	f.streamAppend(t, r.ID, base, "a")
	waiting := f.insertHook(t, r.ID)
	fresh := f.runRow()
	freshHook := f.hookRow(r.ID)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.RunInsert(ctx, &driver.RunInsertParams{Row: fresh}))
		_, err := tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: updated.ID, Status: hoppertype.RunFailed, Error: runErr("x", base), EndedAt: base, Now: base})
		require.NoError(t, err)
		require.NoError(t, tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 2, "step")}}))
		require.NoError(t, tx.HookInsert(ctx, &driver.HookInsertParams{Row: freshHook}))
		_, err = tx.HookResume(ctx, &driver.HookResumeParams{Token: waiting.Token, Payload: []byte(`1`), Now: base})
		require.NoError(t, err)
		_, err = tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: r.ID, Chunks: [][]byte{[]byte("b")}, Now: base})
		require.NoError(t, err)

		// The transaction reads its own writes.
		got, err := tx.RunGet(ctx, &driver.RunGetParams{ID: fresh.ID})
		require.NoError(t, err)
		requireRun(t, fresh, got)
		evs, err := tx.RunEventList(ctx, &driver.RunEventListParams{RunID: r.ID})
		require.NoError(t, err)
		require.Len(t, evs, 2)
		chunks, err := tx.StreamRead(ctx, &driver.StreamReadParams{RunID: r.ID, Limit: 10})
		require.NoError(t, err)
		require.Len(t, chunks, 2)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	f.requireRunMissing(t, fresh.ID)
	requireRun(t, updated, f.runGet(t, updated.ID), "update rolled back")
	require.Len(t, f.events(t, r.ID, 0), 1, "event append rolled back")
	_, err = f.x.HookGet(f.ctx, &driver.HookGetParams{Token: freshHook.Token})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "hook insert rolled back")
	requireHook(t, waiting, f.hookGet(t, waiting.Token), "hook resume rolled back")
	require.Equal(t, []string{"a"}, chunkData(f.streamRead(t, r.ID, 0, 10)), "stream append rolled back")

	// What was rolled back can be written again.
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: fresh}))
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 2, "step"))
	require.NoError(t, f.x.HookInsert(f.ctx, &driver.HookInsertParams{Row: freshHook}))
	f.resumeHook(t, waiting.Token, []byte(`2`), base)
	require.Equal(t, []int64{1}, offsets(f.streamAppend(t, r.ID, base, "b")), "the rolled-back offset is used again")
}

func testRunNestedRollback(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	outer, inner := f.runRow(), f.runRow()
	errInner := errors.New("inner")
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.RunInsert(ctx, &driver.RunInsertParams{Row: outer}))
		_, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: r.ID, Chunks: [][]byte{[]byte("outer")}, Now: base})
		require.NoError(t, err)
		err = tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			require.NoError(t, tx.RunInsert(ctx, &driver.RunInsertParams{Row: inner}))
			require.NoError(t, tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 1, "inner")}}))
			_, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: r.ID, Chunks: [][]byte{[]byte("inner")}, Now: base})
			require.NoError(t, err)
			_, err = tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: outer.ID, Status: hoppertype.RunCompleted, Now: base})
			require.NoError(t, err)
			return errInner
		})
		require.ErrorIs(t, err, errInner)
		require.NoError(t, tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 1, "outer")}}))
		_, err = tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: r.ID, Chunks: [][]byte{[]byte("outer 2")}, Now: base})
		require.NoError(t, err)
		return nil
	})
	require.NoError(t, err)
	requireRun(t, outer, f.runGet(t, outer.ID), "the nested update rolled back, the outer insert stayed")
	f.requireRunMissing(t, inner.ID)
	evs := f.events(t, r.ID, 0)
	require.Len(t, evs, 1)
	require.Equal(t, "outer", evs[0].Kind)
	got := f.streamRead(t, r.ID, 0, 10)
	require.Equal(t, []string{"outer", "outer 2"}, chunkData(got))
	require.Equal(t, []int64{0, 1}, offsets(got))
}
