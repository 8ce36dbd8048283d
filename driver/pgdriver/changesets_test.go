package pgdriver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// feedAll waits until the final feed holds n changes and returns them (a
// change is final once every older transaction on the cluster ended;
// other tests' transactions may hold it back a while).
func feedAll(t *testing.T, x driver.Executor, n int) []*hoppertype.Change {
	t.Helper()
	var all []*hoppertype.Change
	require.Eventually(t, func() bool {
		all = pageAll(t, x, n+1)
		return len(all) == n
	}, 20*time.Second, 20*time.Millisecond, "the feed holds %d changes, want %d", len(all), n)
	return all
}

// pageAll reads the whole final feed in pages of page.
func pageAll(t *testing.T, x driver.Executor, page int) []*hoppertype.Change {
	t.Helper()
	var all []*hoppertype.Change
	var after hoppertype.ChangeCursor
	for {
		chs, err := x.ChangeList(t.Context(), &driver.ChangeListParams{After: after, Limit: page})
		require.NoError(t, err)
		if len(chs) == 0 {
			return all
		}
		all = append(all, chs...)
		after = hoppertype.CursorOf(chs[len(chs)-1])
	}
}

// TestChangeSetsOfAStatement claims 5,000 jobs in one statement: their
// changes are two change sets (4,096 and 904 entries), and every reading
// of the feed expands them in its order, whatever its page size or
// direction: forwards in pages that end inside a set, backwards, by
// entity, by the transaction that wrote them, by a scan's filter, and the
// tail. It fails if a set's entries are skipped, repeated or misplaced by
// a cursor inside a set, or if a statement's changes stop being sets.
func TestChangeSetsOfAStatement(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	const n = 5000
	jobs := make([]*hoppertype.JobRow, n)
	for i := range jobs {
		jobs[i] = newJob("sets")
	}
	insert(t, x, jobs...)

	var own []*hoppertype.Change
	require.NoError(t, x.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		claimed, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "sets", Limit: n, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		if err != nil {
			return err
		}
		require.Len(t, claimed, n)
		for after := (hoppertype.ChangeCursor{}); ; {
			chs, err := tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: after, Limit: 333})
			if err != nil {
				return err
			}
			if len(chs) == 0 {
				return nil
			}
			own = append(own, chs...)
			after = hoppertype.CursorOf(chs[len(chs)-1])
		}
	}))
	require.Len(t, own, n, "the claiming transaction lists each of its changes once")
	for _, ch := range own {
		require.Equal(t, "pending>running", ch.Prev+">"+ch.State)
	}

	var sets []int
	rows, err := pool.Query(ctx, `SELECT cardinality(entity_ids) FROM `+d.q.schema+`.change_sets ORDER BY tx, position`)
	require.NoError(t, err)
	for rows.Next() {
		var c int
		require.NoError(t, rows.Scan(&c))
		sets = append(sets, c)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{4096, 904}, sets, "one statement's claims are sets of at most 4,096")

	whole := feedAll(t, x, 2*n)
	// Final now, the changes stay so: each paging reads them all once.
	for _, page := range []int{97, 500, 4095, 4097} {
		paged := pageAll(t, x, page)
		require.Equal(t, cursors(whole), cursors(paged), "pages of %d", page)
	}
	for i := 1; i < len(whole); i++ {
		require.True(t, hoppertype.CursorOf(whole[i-1]).Before(whole[i]), "the feed is in (tx, position) order at %d", i)
	}
	seen := map[string][]string{}
	for _, ch := range whole {
		seen[ch.EntityID] = append(seen[ch.EntityID], ch.Prev+">"+ch.State)
	}
	require.Len(t, seen, n)
	for id, tr := range seen {
		require.Equal(t, []string{">pending", "pending>running"}, tr, "job %s", id)
	}
	// The claims, with what the trigger recorded.
	claim := whole[len(whole)-1]
	require.Equal(t, hoppertype.ChangeKind("job"), claim.Kind)
	require.Equal(t, "t", claim.Type)
	require.Equal(t, "sets", claim.Queue)
	require.Equal(t, 1, claim.Attempt)
	require.Equal(t, "w", claim.Worker)
	require.Contains(t, claim.Fields, "attempt")
	require.Equal(t, testBase, claim.DueAt.UTC(), "a claim records when its job was due")

	// Backwards from the tail, in pages that end inside a set.
	tail, err := x.ChangeTail(ctx, &driver.ChangeTailParams{})
	require.NoError(t, err)
	require.Equal(t, hoppertype.CursorOf(claim), tail, "the tail is a set's last entry")
	var back []*hoppertype.Change
	for before := tail; ; {
		chs, err := x.ChangeListBefore(ctx, &driver.ChangeListBeforeParams{Before: before, Limit: 999})
		require.NoError(t, err)
		if len(chs) == 0 {
			break
		}
		back = append(back, chs...)
		before = hoppertype.CursorOf(chs[len(chs)-1])
	}
	slices.Reverse(back)
	require.Equal(t, cursors(whole[:len(whole)-1]), cursors(back), "backwards lists what forwards does")

	// By entity: the job's insert (a row) and its claim (a set entry).
	for _, j := range []*hoppertype.JobRow{jobs[0], jobs[4200], jobs[n-1]} {
		chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: j.ID, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{">pending", "pending>running"}, transitions(chs), "job %s", j.ID)
	}

	// A scan for running states reads every claim and nothing else.
	var scanned []*hoppertype.Change
	for after := (hoppertype.ChangeCursor{}); ; {
		res, err := x.ChangeScan(ctx, &driver.ChangeScanParams{After: after, States: []string{"running"}, Limit: 1500})
		require.NoError(t, err)
		scanned = append(scanned, res.Changes...)
		if res.Next == after {
			break
		}
		after = res.Next
	}
	require.Len(t, scanned, n)
	require.Equal(t, cursors(whole[n:]), cursors(scanned))
	res, err := x.ChangeScan(ctx, &driver.ChangeScanParams{Types: []string{"other"}, Limit: 2 * n})
	require.NoError(t, err)
	require.Empty(t, res.Changes, "a type filter applies to the sets' entries")
	require.Equal(t, tail, res.Next)
}

func cursors(chs []*hoppertype.Change) []hoppertype.ChangeCursor {
	out := make([]hoppertype.ChangeCursor, len(chs))
	for i, ch := range chs {
		out[i] = hoppertype.CursorOf(ch)
	}
	return out
}

func transitions(chs []*hoppertype.Change) []string {
	out := make([]string, len(chs))
	for i, ch := range chs {
		out[i] = ch.Prev + ">" + ch.State
	}
	return out
}

// insertClaimed inserts a job on queue and claims it with another (one set
// of two entries), returning the claimed row.
func insertClaimed(t *testing.T, x driver.Executor, queue string) *hoppertype.JobRow {
	t.Helper()
	return claimPair(t, x, queue)[0]
}

// claimPair inserts two jobs on queue and claims them in one statement, so
// that their transitions are a change set (a statement of one job writes
// a row, schema 26); the first inserted comes first.
func claimPair(t *testing.T, x driver.Executor, queue string) []*hoppertype.JobRow {
	t.Helper()
	a, b := newJob(queue), newJob(queue)
	insert(t, x, a, b)
	claimed, err := x.JobClaim(t.Context(), &driver.JobClaimParams{Queue: queue, Limit: 2, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	if claimed[0].ID != a.ID {
		claimed[0], claimed[1] = claimed[1], claimed[0]
	}
	require.Equal(t, a.ID, claimed[0].ID)
	return claimed
}

// TestChangeOfOneJob: a finish of one job writes its change as a row of
// the changes table, not as a set of one (schema 26); a claim's change is
// a set even of one, chained from the job's row (schema 29); a statement
// of two writes a set; the feed lists them all in order.
func TestChangeOfOneJob(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	one := newJob("one")
	insert(t, x, one)
	claimed, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "one", Limit: 5, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	count := func(sql string, args ...any) int { t.Helper(); return countOf(t, pool, sql, args...) }
	require.Zero(t, count(`SELECT count(*) FROM `+d.q.schema+`.changes WHERE entity_id = $1 AND prev_state = 'pending'`, one.ID),
		"the claim of one job is no row")
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets s JOIN `+d.q.schema+`.jobs j ON j.set_position = s.position
WHERE j.id = $1 AND s.entity_ids = ARRAY[j.id] AND s.prev_positions = ARRAY[NULL::bigint]`, one.ID),
		"but a set of one, the job's row holding its position, with no set before it")

	_, err = x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: one.ID, LeaseToken: claimed[0].LeaseToken,
		Attempt: 1, State: hoppertype.JobStateSucceeded, RunAt: claimed[0].RunAt, EndedAt: testBase}}})
	require.NoError(t, err)
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets`), "its finish alone is no set")
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.changes WHERE entity_id = $1 AND prev_state = 'running'`, one.ID),
		"but a row")

	pair := claimPair(t, x, "two")
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets WHERE cardinality(entity_ids) = 2`), "a claim of two is a set")
	chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: one.ID, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, transitions(chs))
	chs, err = x.ChangeList(ctx, &driver.ChangeListParams{EntityID: pair[1].ID, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running"}, transitions(chs))
	// The whole feed: one's insert, claim and finish as rows, the pair's
	// inserts as rows and its claim as a set's two entries, in one order.
	all := feedAll(t, x, 7)
	var ofOne []*hoppertype.Change
	for _, c := range all {
		if c.EntityID == one.ID {
			ofOne = append(ofOne, c)
		}
	}
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, transitions(ofOne))
}

// TestChangeSetsGoByAge: change sets are deleted by retention once older
// than TransitionsOlderThan by the server's clock, and only then; a job's
// own rows stay with it.
func TestChangeSetsGoByAge(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	j := insertClaimed(t, x, "age")
	listed := func() []string {
		chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: j.ID, Limit: 10})
		require.NoError(t, err)
		return transitions(chs)
	}
	require.Equal(t, []string{">pending", "pending>running"}, listed())

	hour, none := time.Hour, time.Duration(0)
	_, err := x.WorkerDelete(ctx, &driver.WorkerDeleteParams{Before: testBase, TransitionsOlderThan: &hour})
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running"}, listed(), "a set younger than the cut stays")

	_, err = x.WorkerDelete(ctx, &driver.WorkerDeleteParams{Before: testBase})
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running"}, listed(), "without an age, sets stay")
	_, err = x.WorkerDelete(ctx, &driver.WorkerDeleteParams{Before: testBase, TransitionsOlderThan: &none})
	require.NoError(t, err)
	require.Equal(t, []string{">pending"}, listed(), "an older set goes; the job's insert stays with it")
	var left int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+d.q.schema+`.change_sets`).Scan(&left))
	require.Zero(t, left)
}

// TestChangeSetsOfADeletedJob: a deleted job's set entries are not listed
// as the changes of a later job given the same id (they stay in the feed
// until retention takes their sets).
func TestChangeSetsOfADeletedJob(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	pair := claimPair(t, x, "reuse")
	first := pair[0]
	var items []driver.JobFinishParams
	for _, j := range pair {
		items = append(items, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken,
			Attempt: 1, State: hoppertype.JobStateSucceeded, RunAt: j.RunAt, EndedAt: testBase})
	}
	_, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
	require.NoError(t, err)
	n, err := x.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: testBase.Add(time.Second), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: first.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, chs, "a deleted job lists no changes")

	again := newJob("reuse")
	again.ID = first.ID
	again.GroupID = first.ID
	insert(t, x, again)
	chs, err = x.ChangeList(ctx, &driver.ChangeListParams{EntityID: first.ID, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{">pending"}, transitions(chs), "the new job lists its own changes alone")
}

// TestChangeSetsCompressWithLZ4: where the server has lz4 (this one, as
// Debian's and most builds do), every array of a change set compresses
// with it (schema 24); pglz was the server's costliest function.
func TestChangeSetsCompressWithLZ4(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 1)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	var lz4 bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals))`).Scan(&lz4))
	if !lz4 {
		t.Skip("this server has no lz4: the schema keeps its default compression")
	}
	rows, err := pool.Query(ctx, `SELECT a.attname, a.attcompression FROM pg_attribute a
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid IN (SELECT typarray FROM pg_type)`, d.q.schema+".change_sets")
	require.NoError(t, err)
	defer rows.Close() // a failed check must not leave the pool's connection taken
	n := 0
	for rows.Next() {
		var name, method string
		require.NoError(t, rows.Scan(&name, &method))
		require.Equal(t, "l", method, "column %s", name)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 11, n, "the sets' eleven arrays")
}

// TestEntityChangesFollowTheChain: a job's claims and finishes of claimed
// jobs write sets chained from its row (schema 29), which the entities'
// index no longer holds; its listing walks the chain back and finds the
// other statements' sets (here a promotion's, written by
// record_job_changes) by that index, in one order across both and its rows.
// A job inserted again under a deleted one's id lists only its own.
func TestEntityChangesFollowTheChain(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	s := d.q.schema
	count := func(sql string, args ...any) int { t.Helper(); return countOf(t, pool, sql, args...) }
	claim := func(at time.Time) []*hoppertype.JobRow {
		t.Helper()
		got, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "chain", Limit: 2, Now: at,
			LeaseExpiresAt: at.Add(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Len(t, got, 2)
		return got
	}
	finish := func(rows []*hoppertype.JobRow, state hoppertype.JobState, runAt, at time.Time) {
		t.Helper()
		items := make([]driver.JobFinishParams, len(rows))
		for i, r := range rows {
			items[i] = driver.JobFinishParams{ID: r.ID, LeaseToken: r.LeaseToken, Attempt: r.Attempt, State: state,
				RunAt: runAt, EndedAt: at, Claimed: r}
		}
		res, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
			require.NotNil(t, r.Job)
		}
	}
	a, b := newJob("chain"), newJob("chain")
	insert(t, x, a, b)
	first := claim(testBase)
	finish(first, hoppertype.JobStateRetrying, testBase.Add(time.Second), testBase)
	second := claim(testBase.Add(2 * time.Second)) // promotes both first
	finish(second, hoppertype.JobStateSucceeded, second[0].RunAt, testBase.Add(3*time.Second))

	require.Equal(t, 4, count(`SELECT count(*) FROM `+s+`.change_sets WHERE prev_positions IS NOT NULL`),
		"two claims and two finishes, chained")
	require.Equal(t, 1, count(`SELECT count(*) FROM `+s+`.change_sets WHERE prev_positions IS NULL AND states = ARRAY['pending', 'pending']`),
		"the promotion's set, by the entities' index")
	// Each chained set's entry points at the job's set before it: the
	// chain back from a's row is its four sets, newest first.
	var walked []string
	rows, err := pool.Query(ctx, `WITH RECURSIVE w(position, prev, states) AS (
	SELECT s.position, s.prev_positions[array_position(s.entity_ids, j.id)], s.prev_states[array_position(s.entity_ids, j.id)] || '>' || s.states[array_position(s.entity_ids, j.id)]
	FROM `+s+`.jobs j JOIN `+s+`.change_sets s ON s.position = j.set_position WHERE j.id = $1
	UNION ALL
	SELECT s.position, s.prev_positions[array_position(s.entity_ids, $1)], s.prev_states[array_position(s.entity_ids, $1)] || '>' || s.states[array_position(s.entity_ids, $1)]
	FROM w JOIN `+s+`.change_sets s ON s.position = w.prev
) SELECT states FROM w`, a.ID)
	require.NoError(t, err)
	for rows.Next() {
		var st string
		require.NoError(t, rows.Scan(&st))
		walked = append(walked, st)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"running>succeeded", "pending>running", "running>retrying", "pending>running"}, walked)

	want := []string{">pending", "pending>running", "running>retrying", "retrying>pending", "pending>running", "running>succeeded"}
	for _, j := range []*hoppertype.JobRow{a, b} {
		chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: j.ID, Limit: 100})
		require.NoError(t, err)
		require.Equal(t, want, transitions(chs), "job %s", j.ID)
		for i := 1; i < len(chs); i++ {
			require.True(t, hoppertype.CursorOf(chs[i-1]).Before(chs[i]), "in the feed's order")
		}
		// Paged one at a time, the same.
		var paged []*hoppertype.Change
		var after hoppertype.ChangeCursor
		for {
			page, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: j.ID, After: after, Limit: 1})
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = hoppertype.CursorOf(page[0])
		}
		require.Equal(t, want, transitions(paged), "job %s paged", j.ID)
	}

	// Deleted and inserted again: the new job's listing is its own.
	_, err = pool.Exec(ctx, `DELETE FROM `+s+`.jobs WHERE id = $1`, a.ID)
	require.NoError(t, err)
	again := *a
	insert(t, x, &again)
	chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: a.ID, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, ">pending", transitions(chs)[len(chs)-1], "its insert last")
	require.NotContains(t, transitions(chs), "running>succeeded", "none of the deleted job's sets")
}

// TestClaimOfMoreThanASet: a claim of more jobs than a change set holds
// (setSpan) is made of several, each a set of its own, and every job's
// claim is listed once.
func TestClaimOfMoreThanASet(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	n := setSpan + 10
	jobs := make([]*hoppertype.JobRow, n)
	for i := range jobs {
		jobs[i] = newJob("big")
	}
	insert(t, x, jobs...)
	got, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "big", Limit: n + 5, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, got, n, "every job, once")
	seen := map[string]bool{}
	for _, r := range got {
		require.False(t, seen[r.ID], "job %s claimed twice", r.ID)
		seen[r.ID] = true
	}
	require.Equal(t, 2, countOf(t, pool, `SELECT count(*) FROM `+d.q.schema+`.change_sets WHERE states[1] = 'running'`), "two sets")
	require.Equal(t, n, countOf(t, pool, `SELECT sum(cardinality(entity_ids))::int FROM `+d.q.schema+`.change_sets WHERE states[1] = 'running'`))
	chs, err := x.ChangeList(ctx, &driver.ChangeListParams{EntityID: got[n-1].ID, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running"}, transitions(chs))
}
