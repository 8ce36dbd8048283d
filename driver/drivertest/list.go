package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// listCases cover JobList and JobScan.
func listCases() []testCase {
	return []testCase{
		{"Filters", testListFilters},
		{"CursorPagingDescending", testListPagingDesc},
		{"CursorPagingAscending", testListPagingAsc},
		{"CursorWithFilter", testListCursorWithFilter},
		{"GroupWithItsRoot", testListGroupWithItsRoot},
		{"SearchMetadataUniqueKeyError", testListSearch},
		{"ScanWindow", testScanWindow},
		{"ScanWithoutUnindexedFilters", testScanIndexedOnly},
	}
}

// listData inserts six jobs j[0..5] whose ids sort in index order:
//
//	j  type queue state      group parent queued
//	0  a    q1    pending    g1    -      base
//	1  b    q1    scheduled  g1    p1     base+1m
//	2  a    q2    dead       g2    p1     base+2m
//	3  c    q2    pending    g2    -      base+3m
//	4  a    q1    succeeded  g1    p2     base+4m
//	5  b    q3    stuck      g3    -      base+5m
func (f *fixture) listData(t *testing.T) []*hoppertype.JobRow {
	t.Helper()
	spec := []struct {
		typ, queue    string
		state         hoppertype.JobState
		group, parent string
	}{
		{"a", "q1", hoppertype.JobStatePending, "g1", ""},
		{"b", "q1", hoppertype.JobStateScheduled, "g1", "p1"},
		{"a", "q2", hoppertype.JobStateDead, "g2", "p1"},
		{"c", "q2", hoppertype.JobStatePending, "g2", ""},
		{"a", "q1", hoppertype.JobStateSucceeded, "g1", "p2"},
		{"b", "q3", hoppertype.JobStateStuck, "g3", ""},
	}
	rows := make([]*hoppertype.JobRow, len(spec))
	for i, s := range spec {
		rows[i] = f.job(ofType(s.typ), inQueue(s.queue), inState(s.state), func(r *hoppertype.JobRow) {
			r.GroupID = f.prefix + s.group
			if s.parent != "" {
				r.ParentID = f.prefix + s.parent
			}
			r.QueuedAt = at(time.Duration(i) * time.Minute)
			if s.state.Terminal() {
				r.EndedAt = at(time.Duration(10+i) * time.Minute) // 2 at base+12m, 4 at base+14m
			}
		})
	}
	// Insert out of id order so an implementation cannot lean on insertion order.
	shuffled := []*hoppertype.JobRow{rows[3], rows[0], rows[5], rows[1], rows[4], rows[2]}
	f.insert(t, shuffled...)
	return rows
}

func (f *fixture) list(t *testing.T, p driver.JobListParams) []string {
	t.Helper()
	rows, err := f.x.JobList(f.ctx, &p)
	require.NoError(t, err)
	return ids(rows)
}

func testListFilters(t *testing.T, f *fixture) {
	j := f.listData(t)
	pick := func(idx ...int) []string { return idsAt(j, idx...) }
	cases := []struct {
		name string
		p    driver.JobListParams
		want []string
	}{
		{"all, descending by default", driver.JobListParams{Limit: 100}, pick(5, 4, 3, 2, 1, 0)},
		{"all, ascending", driver.JobListParams{Limit: 100, Ascending: true}, pick(0, 1, 2, 3, 4, 5)},
		{"limit", driver.JobListParams{Limit: 2}, pick(5, 4)},
		{"limit ascending", driver.JobListParams{Limit: 2, Ascending: true}, pick(0, 1)},
		{"ids", driver.JobListParams{Limit: 100, IDs: []string{j[1].ID, f.id(), j[3].ID}}, pick(3, 1)},
		{"states", driver.JobListParams{Limit: 100, States: []hoppertype.JobState{hoppertype.JobStatePending, hoppertype.JobStateDead}}, pick(3, 2, 0)},
		{"types", driver.JobListParams{Limit: 100, Types: []string{"a"}}, pick(4, 2, 0)},
		{"several types", driver.JobListParams{Limit: 100, Types: []string{"b", "c"}}, pick(5, 3, 1)},
		{"queues", driver.JobListParams{Limit: 100, Queues: []string{"q1", "q3"}}, pick(5, 4, 1, 0)},
		{"group", driver.JobListParams{Limit: 100, GroupID: f.prefix + "g2"}, pick(3, 2)},
		{"parent", driver.JobListParams{Limit: 100, ParentID: f.prefix + "p1"}, pick(2, 1)},
		{"queued after is inclusive", driver.JobListParams{Limit: 100, QueuedAfter: at(2 * time.Minute)}, pick(5, 4, 3, 2)},
		{"queued before is exclusive", driver.JobListParams{Limit: 100, QueuedBefore: at(2 * time.Minute)}, pick(1, 0)},
		{"queued window", driver.JobListParams{Limit: 100, QueuedAfter: at(time.Minute), QueuedBefore: at(4 * time.Minute)}, pick(3, 2, 1)},
		{"ended after is inclusive, and leaves out what has not ended", driver.JobListParams{Limit: 100, EndedAfter: at(12 * time.Minute)}, pick(4, 2)},
		{"ended after", driver.JobListParams{Limit: 100, EndedAfter: at(13 * time.Minute)}, pick(4)},
		{"ended before is exclusive, and leaves out what has not ended", driver.JobListParams{Limit: 100, EndedBefore: at(14 * time.Minute)}, pick(2)},
		{"ended window and state", driver.JobListParams{Limit: 100, EndedAfter: at(time.Minute), EndedBefore: at(time.Hour),
			States: []hoppertype.JobState{hoppertype.JobStateDead}}, pick(2)},
		{"combined", driver.JobListParams{Limit: 100, Types: []string{"a"}, Queues: []string{"q1"}}, pick(4, 0)},
		{"combined with states", driver.JobListParams{Limit: 100, Types: []string{"a"}, States: []hoppertype.JobState{hoppertype.JobStateSucceeded}}, pick(4)},
		{"combined, limit", driver.JobListParams{Limit: 1, Queues: []string{"q2"}, Ascending: true}, pick(2)},
		{"no match", driver.JobListParams{Limit: 100, Types: []string{"zzz"}}, []string{}},
		{"filter and ids", driver.JobListParams{Limit: 100, IDs: pick(0, 1, 2), States: []hoppertype.JobState{hoppertype.JobStatePending}}, pick(0)},
	}
	for _, c := range cases {
		got := f.list(t, c.p)
		if len(c.want) == 0 {
			require.Empty(t, got, c.name)
			continue
		}
		require.Equal(t, c.want, got, c.name)
	}
}

// page lists all jobs page by page and returns the pages.
func (f *fixture) pages(t *testing.T, p driver.JobListParams) [][]string {
	t.Helper()
	var out [][]string
	for range 10 {
		page := f.list(t, p)
		if len(page) == 0 {
			return out
		}
		require.LessOrEqual(t, len(page), p.Limit)
		out = append(out, page)
		p.Cursor = page[len(page)-1]
	}
	require.Fail(t, "paging did not end")
	return nil
}

func testListPagingDesc(t *testing.T, f *fixture) {
	j := f.listData(t)
	require.Equal(t, [][]string{
		{j[5].ID, j[4].ID}, {j[3].ID, j[2].ID}, {j[1].ID, j[0].ID},
	}, f.pages(t, driver.JobListParams{Limit: 2}))
	require.Equal(t, [][]string{
		{j[5].ID, j[4].ID, j[3].ID, j[2].ID}, {j[1].ID, j[0].ID},
	}, f.pages(t, driver.JobListParams{Limit: 4}))
}

func testListPagingAsc(t *testing.T, f *fixture) {
	j := f.listData(t)
	require.Equal(t, [][]string{
		{j[0].ID, j[1].ID}, {j[2].ID, j[3].ID}, {j[4].ID, j[5].ID},
	}, f.pages(t, driver.JobListParams{Limit: 2, Ascending: true}))
	require.Equal(t, [][]string{
		{j[0].ID, j[1].ID, j[2].ID, j[3].ID}, {j[4].ID, j[5].ID},
	}, f.pages(t, driver.JobListParams{Limit: 4, Ascending: true}))
}

func testListCursorWithFilter(t *testing.T, f *fixture) {
	j := f.listData(t)
	// The cursor need not be a row the filter matches.
	require.Equal(t, []string{j[2].ID, j[0].ID},
		f.list(t, driver.JobListParams{Limit: 100, Types: []string{"a"}, Cursor: j[3].ID}))
	require.Equal(t, []string{j[4].ID},
		f.list(t, driver.JobListParams{Limit: 100, Types: []string{"a"}, Cursor: j[3].ID, Ascending: true}))
	// A cursor that is no row at all still bounds by id order.
	require.Equal(t, slices.Clone(ids(j)),
		f.list(t, driver.JobListParams{Limit: 100, Ascending: true, Cursor: f.prefix + "-"}))
	require.Empty(t, f.list(t, driver.JobListParams{Limit: 100, Cursor: f.prefix + "-"}))
}

// groupWithRoot inserts five jobs in id order: 2 is the root of a group
// (the job whose id the group bears, as every job inserted alone is), 0, 1
// (succeeded) and 3 its members, 4 a job alone.
func (f *fixture) groupWithRoot(t *testing.T) []*hoppertype.JobRow {
	t.Helper()
	rows := make([]*hoppertype.JobRow, 5)
	for i := range rows {
		rows[i] = f.job()
	}
	root := rows[2]
	for i, r := range rows {
		if i < 4 {
			r.GroupID = root.ID // 0, 1 and 3 are members, 2 the root
		}
	}
	rows[1].State = hoppertype.JobStateSucceeded
	rows[4].GroupID = rows[4].ID // a root of its own
	f.insert(t, rows[4], rows[3], rows[2], rows[1], rows[0])
	return rows
}

// testListGroupWithItsRoot lists the group with its root among its
// members, in id order both ways, page by page and filtered.
func testListGroupWithItsRoot(t *testing.T, f *fixture) {
	j := f.groupWithRoot(t)
	pick := func(idx ...int) []string { return idsAt(j, idx...) }
	g := j[2].ID
	require.Equal(t, pick(3, 2, 1, 0), f.list(t, driver.JobListParams{Limit: 100, GroupID: g}), "descending")
	require.Equal(t, pick(0, 1, 2, 3), f.list(t, driver.JobListParams{Limit: 100, GroupID: g, Ascending: true}), "ascending")
	require.Equal(t, pick(3, 2), f.list(t, driver.JobListParams{Limit: 2, GroupID: g}), "limit")
	require.Equal(t, [][]string{pick(0, 1), pick(2, 3)}, f.pages(t, driver.JobListParams{Limit: 2, GroupID: g, Ascending: true}), "pages")
	require.Equal(t, pick(3, 2, 0), f.list(t, driver.JobListParams{Limit: 100, GroupID: g,
		States: []hoppertype.JobState{hoppertype.JobStatePending}}), "filtered")
	require.Equal(t, pick(4), f.list(t, driver.JobListParams{Limit: 100, GroupID: j[4].ID}), "a root alone")
	require.Equal(t, pick(1), f.list(t, driver.JobListParams{Limit: 100, GroupID: g, IDs: pick(1, 4)}), "with ids")
}

// idsAt returns the ids of rows[idx[0]], rows[idx[1]] … in that order.
func idsAt(rows []*hoppertype.JobRow, idx ...int) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = rows[x].ID
	}
	return out
}

// testListSearch: the filters no index serves — metadata key/value, unique
// key, error text — alone, together and beside the others, with paging.
func testListSearch(t *testing.T, f *fixture) {
	failed := func(msg string) func(*hoppertype.JobRow) {
		return func(r *hoppertype.JobRow) {
			r.State = hoppertype.JobStateDead
			r.Error = &hoppertype.ErrorInfo{Kind: "error", Message: msg, Attempt: 3, At: base}
		}
	}
	meta := func(kv ...string) func(*hoppertype.JobRow) {
		return func(r *hoppertype.JobRow) {
			r.Metadata = map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				r.Metadata[kv[i]] = kv[i+1]
			}
		}
	}
	j := []*hoppertype.JobRow{
		f.job(meta("tenant", "acme", "region", "eu"), failed(`dial tcp 10.0.0.1:5432: connection refused`)),
		f.job(meta("tenant", "acme", "region", "us"), uniqueBy("order-17")),
		f.job(meta("tenant", "globex"), failed(`payment "declined" <card>`)),
		f.job(uniqueBy("order-18"), failed("Connection Refused by peer")),
		f.job(meta("tenant", "acme", "region", "eu"), ofType("other")),
		f.job(meta("tenant", "")),
	}
	f.insert(t, j[4], j[2], j[0], j[5], j[3], j[1])
	// j[2] and j[3] are the jobs of workflow runs, j[2]'s compensated.
	for i, st := range map[int]hoppertype.RunStatus{2: hoppertype.RunCompensated, 3: hoppertype.RunFailed} {
		require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: f.runRow(func(r *hoppertype.RunRow) { r.ID, r.Status = j[i].ID, st })}))
	}
	pick := func(idx ...int) []string { return idsAt(j, idx...) }
	cases := []struct {
		name string
		p    driver.JobListParams
		want []string
	}{
		{"metadata key and value", driver.JobListParams{Metadata: map[string]string{"tenant": "acme"}}, pick(4, 1, 0)},
		{"metadata, every pair", driver.JobListParams{Metadata: map[string]string{"tenant": "acme", "region": "eu"}}, pick(4, 0)},
		{"metadata, no such value", driver.JobListParams{Metadata: map[string]string{"tenant": "initech"}}, nil},
		{"metadata, an empty value is a value", driver.JobListParams{Metadata: map[string]string{"tenant": ""}}, pick(5)},
		{"metadata and type", driver.JobListParams{Metadata: map[string]string{"region": "eu"}, Types: []string{"test-job"}}, pick(0)},
		{"unique key", driver.JobListParams{UniqueKey: "order-17"}, pick(1)},
		{"error text", driver.JobListParams{ErrorContains: "connection refused"}, pick(0)},
		{"error text is case-sensitive", driver.JobListParams{ErrorContains: "Connection Refused"}, pick(3)},
		{"error text with characters JSON escapes", driver.JobListParams{ErrorContains: `"declined" <card>`}, pick(2)},
		{"error text and state", driver.JobListParams{ErrorContains: "e", States: []hoppertype.JobState{hoppertype.JobStateDead}}, pick(3, 2, 0)},
		{"error text and unique key", driver.JobListParams{ErrorContains: "Refused", UniqueKey: "order-18"}, pick(3)},
		{"error text, ascending, limit", driver.JobListParams{ErrorContains: "e", Ascending: true, Limit: 2}, pick(0, 2)},
		{"error text after a cursor", driver.JobListParams{ErrorContains: "e", Cursor: j[3].ID}, pick(2, 0)},
		{"dead, without compensated runs' jobs", driver.JobListParams{States: []hoppertype.JobState{hoppertype.JobStateDead},
			SkipRunStatuses: []hoppertype.RunStatus{hoppertype.RunCompensated}}, pick(3, 0)},
		{"without the jobs of runs in either status", driver.JobListParams{ErrorContains: "e",
			SkipRunStatuses: []hoppertype.RunStatus{hoppertype.RunCompensated, hoppertype.RunFailed}}, pick(0)},
	}
	for _, c := range cases {
		if c.p.Limit == 0 {
			c.p.Limit = 100
		}
		got := f.list(t, c.p)
		if len(c.want) == 0 {
			require.Empty(t, got, c.name)
			continue
		}
		require.Equal(t, c.want, got, c.name)
	}
}

func (f *fixture) scan(t *testing.T, p driver.JobScanParams) (ids_ []string, next string) {
	t.Helper()
	res, err := f.x.JobScan(f.ctx, &p)
	require.NoError(t, err)
	require.NotNil(t, res.Jobs)
	return ids(res.Jobs), res.Next
}

// scanData inserts ten jobs j[0..9] in id order, all of j[4]'s group: the
// error "boom" on 1, 2 and 7; 1, 2, 5 and 7 dead (5 of another error); the
// unique key "k7" and the metadata tenant=acme on 7.
func (f *fixture) scanData(t *testing.T) []*hoppertype.JobRow {
	t.Helper()
	j := make([]*hoppertype.JobRow, 10)
	for i := range j {
		j[i] = f.job()
	}
	for i, r := range j {
		r.GroupID = j[4].ID
		msg := map[int]string{1: "boom 1", 2: "boom 2", 5: "other", 7: "boom 7"}[i]
		if msg != "" {
			r.State, r.Attempt, r.EndedAt = hoppertype.JobStateDead, 1, base
			r.Error = &hoppertype.ErrorInfo{Kind: "error", Message: msg, Attempt: 1, At: base}
		}
	}
	j[7].UniqueKey, j[7].Metadata = "k7", map[string]string{"tenant": "acme"}
	f.insert(t, j[9], j[3], j[5], j[0], j[8], j[2], j[6], j[4], j[1], j[7])
	return j
}

// testScanWindow: a search by a filter no index serves reads a window of
// ScanLimit jobs the other filters select, returns a short page and the
// cursor of the window's end, and finds the rest from there.
func testScanWindow(t *testing.T, f *fixture) {
	j := f.scanData(t)
	pick := func(idx ...int) []string { return idsAt(j, idx...) }
	boom := func(p driver.JobListParams, scan int) driver.JobScanParams {
		p.ErrorContains = "boom"
		if p.Limit == 0 {
			p.Limit = 100
		}
		return driver.JobScanParams{JobListParams: p, ScanLimit: scan}
	}
	type page struct {
		ids  []string
		next string
	}
	// search pages through a search and returns the pages.
	search := func(p driver.JobScanParams) []page {
		t.Helper()
		var out []page
		for range 10 {
			got, next := f.scan(t, p)
			out = append(out, page{got, next})
			switch {
			case len(got) == p.Limit:
				p.Cursor = got[len(got)-1]
			case next != "":
				p.Cursor = next
			default:
				return out
			}
		}
		require.Fail(t, "search did not end")
		return nil
	}
	none := []string{}
	require.Equal(t, []page{{pick(7), j[6].ID}, {pick(2), j[2].ID}, {pick(1), ""}},
		search(boom(driver.JobListParams{}, 4)), "descending, windows of 4")
	require.Equal(t, []page{{pick(1, 2), j[3].ID}, {pick(7), j[7].ID}, {none, ""}},
		search(boom(driver.JobListParams{Ascending: true}, 4)), "ascending, windows of 4")
	require.Equal(t, []page{{none, j[4].ID}, {pick(2, 1), j[1].ID}, {none, ""}},
		search(boom(driver.JobListParams{Cursor: j[7].ID}, 3)), "a window with no match")
	require.Equal(t, []page{{pick(7), ""}, {pick(2), ""}, {pick(1), ""}, {none, ""}},
		search(boom(driver.JobListParams{Limit: 1}, 8)), "pages that fill before their window ends")
	require.Equal(t, []page{{pick(7), j[5].ID}, {pick(2, 1), j[1].ID}, {none, ""}},
		search(boom(driver.JobListParams{States: []hoppertype.JobState{hoppertype.JobStateDead}}, 2)),
		"the window counts the jobs the other filters select")
	require.Equal(t, []page{{pick(7), j[6].ID}, {pick(2), j[2].ID}, {pick(1), ""}},
		search(boom(driver.JobListParams{GroupID: j[4].ID}, 4)), "a group's search")

	got, next := f.scan(t, driver.JobScanParams{JobListParams: driver.JobListParams{UniqueKey: "k7", Limit: 100}, ScanLimit: 2})
	require.Equal(t, none, got, "unique key")
	require.Equal(t, j[8].ID, next, "unique key")
	got, next = f.scan(t, driver.JobScanParams{JobListParams: driver.JobListParams{UniqueKey: "k7", Limit: 100, Cursor: next}, ScanLimit: 2})
	require.Equal(t, pick(7), got, "unique key, on")
	require.Equal(t, j[6].ID, next, "unique key, on")
	got, next = f.scan(t, driver.JobScanParams{JobListParams: driver.JobListParams{Metadata: map[string]string{"tenant": "acme"}, Limit: 100}, ScanLimit: 2})
	require.Equal(t, none, got, "metadata")
	require.Equal(t, j[8].ID, next, "metadata")

	_, err := f.x.JobScan(f.ctx, &driver.JobScanParams{JobListParams: driver.JobListParams{ErrorContains: "boom", Limit: 10}})
	require.Error(t, err, "a scan limit of 0")
}

// testScanIndexedOnly: without a filter no index serves, JobScan lists as
// JobList does, whatever its ScanLimit.
func testScanIndexedOnly(t *testing.T, f *fixture) {
	j := f.scanData(t)
	for _, p := range []driver.JobListParams{
		{Limit: 100},
		{Limit: 3, Ascending: true},
		{Limit: 100, States: []hoppertype.JobState{hoppertype.JobStateDead}, Cursor: j[5].ID},
		{Limit: 100, GroupID: j[4].ID},
	} {
		got, next := f.scan(t, driver.JobScanParams{JobListParams: p, ScanLimit: 1})
		require.Equal(t, f.list(t, p), got)
		require.Empty(t, next)
	}
}
