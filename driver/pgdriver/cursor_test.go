package pgdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestClaimCursor follows a queue's claim cursor: a claim after a full one
// starts after its last job, jobs of higher priority still come first, a
// job made pending behind the cursor waits for the cursor to end (at most
// cursorUses claims or cursorLife), and a claim that comes back short after
// the cursor takes the rest from the head in the same call.
func TestClaimCursor(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ex := d.Executor()
	ctx := t.Context()
	now := testBase.Add(time.Hour)
	claim := func(limit int, at time.Time) []string {
		t.Helper()
		rows, err := ex.JobClaim(ctx, &driver.JobClaimParams{Queue: "cq", Limit: limit, Now: at,
			LeaseExpiresAt: at.Add(time.Minute), Worker: "w"})
		require.NoError(t, err)
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids
	}
	job := func(id string, prio int, runAt time.Time) *hoppertype.JobRow {
		j := newJob("cq")
		j.ID, j.GroupID, j.Priority, j.RunAt = id, id, prio, runAt
		return j
	}
	var backlog []*hoppertype.JobRow
	for i := range 20 {
		backlog = append(backlog, job(fmt.Sprintf("b%02d", i), 0, testBase.Add(time.Duration(i)*time.Millisecond)))
	}
	insert(t, ex, backlog...)

	require.Equal(t, []string{"b00", "b01", "b02"}, claim(3, now), "the first claim looks from the head")
	// Behind the cursor (b02): a job of the same priority due earlier.
	insert(t, ex, job("early", 0, testBase.Add(-time.Second)))
	require.Equal(t, []string{"b03", "b04", "b05"}, claim(3, now), "a claim after a full one starts after its last job")
	// A job of higher priority does not wait for the cursor.
	insert(t, ex, job("urgent", 5, testBase.Add(time.Hour)))
	require.Equal(t, []string{"urgent", "b06", "b07"}, claim(3, now), "jobs of higher priority come first")
	// The cursor ends cursorLife after the claim that set it: the next
	// claim looks from the head and finds the job behind it.
	require.Equal(t, []string{"early", "b08", "b09"}, claim(3, now.Add(cursorLife)))

	// A short claim after the cursor takes the rest from the head at once.
	insert(t, ex, job("early2", 0, testBase.Add(-time.Second)))
	require.Equal(t, []string{"b10", "b11", "b12"}, claim(3, now.Add(cursorLife)))
	require.Equal(t, []string{"early2", "b13", "b14", "b15", "b16", "b17", "b18", "b19"}, claim(10, now.Add(cursorLife)),
		"a claim that comes back short after the cursor looks from the head for the rest")
	require.Empty(t, claim(3, now.Add(cursorLife)))
	ok := hasCursor(d, "cq")
	require.False(t, ok, "a short claim drops the cursor")

	// A claim in a transaction neither follows nor sets a cursor: the
	// transaction may roll back.
	insert(t, ex, job("t1", 0, testBase), job("t2", 0, testBase.Add(time.Millisecond)))
	require.NoError(t, ex.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		rows, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "cq", Limit: 1, Now: now,
			LeaseExpiresAt: now.Add(time.Minute), Worker: "w"})
		require.Len(t, rows, 1)
		return err
	}))
	ok = hasCursor(d, "cq")
	require.False(t, ok, "a claim in a transaction set a cursor")
}

// TestClaimCursorEnds: a cursor lasts cursorUses claims at most, and a claim
// that promotes due jobs ends it (they keep their RunAt, which may sort
// before it), so a job made pending behind it is claimed by the claim after.
func TestClaimCursorEnds(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ex := d.Executor()
	ctx := t.Context()
	claim := func() *hoppertype.JobRow {
		t.Helper()
		rows, err := ex.JobClaim(ctx, &driver.JobClaimParams{Queue: "cq", Limit: 1, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		return rows[0]
	}
	var backlog []*hoppertype.JobRow
	for i := range 3*cursorUses + 10 {
		j := newJob("cq")
		j.RunAt = testBase.Add(-time.Hour + time.Duration(i)*time.Millisecond)
		backlog = append(backlog, j)
	}
	insert(t, ex, backlog...)
	claim() // sets the cursor

	early := newJob("cq")
	early.RunAt = testBase.Add(-2 * time.Hour)
	insert(t, ex, early)
	for i := range cursorUses {
		require.NotEqual(t, early.ID, claim().ID, "claim %d after the cursor", i+1)
	}
	require.Equal(t, early.ID, claim().ID, "the claim after cursorUses claims looks from the head")

	// A claim that promotes a due job drops the cursor it set.
	claim() // sets the cursor again
	early2, due := newJob("cq"), newJob("cq")
	early2.RunAt = testBase.Add(-2 * time.Hour)
	due.State, due.RunAt = hoppertype.JobStateScheduled, testBase.Add(-3*time.Hour)
	insert(t, ex, early2, due)
	got := claim() // promotes due, claims after the cursor
	require.NotEqual(t, early2.ID, got.ID)
	require.NotEqual(t, due.ID, got.ID)
	require.Equal(t, due.ID, claim().ID, "the claim after a promotion looks from the head")
	require.Equal(t, early2.ID, claim().ID)
}

// TestClaimCursorNotForKeyedJobs: a claim that takes a job with a
// concurrency limit leaves no cursor, since it passes by jobs whose keys are
// full, and those must be claimed once their keys have room.
func TestClaimCursorNotForKeyedJobs(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ex := d.Executor()
	ctx := t.Context()
	var jobs []*hoppertype.JobRow
	for i := range 6 {
		j := newJob("kq")
		j.RunAt = testBase.Add(time.Duration(i) * time.Millisecond)
		j.ConcurrencyKey, j.ConcurrencyLimit = fmt.Sprintf("k%d", i%2), 1
		jobs = append(jobs, j)
	}
	plain := newJob("kq")
	plain.RunAt = testBase.Add(time.Second)
	insert(t, ex, append(jobs, plain)...)
	claim := func() []*hoppertype.JobRow {
		t.Helper()
		rows, err := ex.JobClaim(ctx, &driver.JobClaimParams{Queue: "kq", Limit: 2, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		require.NoError(t, err)
		return rows
	}
	first := claim() // one job of each key
	require.Len(t, first, 2)
	ok := hasCursor(d, "kq")
	require.False(t, ok, "a claim of keyed jobs set a cursor")
	// Both keys are full: the claim passes their jobs by.
	second := claim()
	require.Len(t, second, 1)
	require.Equal(t, plain.ID, second[0].ID)
	// k0 has room again: its next job, before any cursor, is claimed.
	_, err := ex.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: first[0].ID,
		LeaseToken: first[0].LeaseToken, Attempt: first[0].Attempt, State: hoppertype.JobStateSucceeded, RunAt: first[0].RunAt, EndedAt: testBase}}})
	require.NoError(t, err)
	third := claim()
	require.Len(t, third, 1)
	require.Equal(t, jobs[2].ID, third[0].ID)
}

// hasCursor reports whether d holds a claim cursor under key.
func hasCursor(d *Driver, key string) bool {
	d.cursors.mu.Lock()
	defer d.cursors.mu.Unlock()
	_, ok := d.cursors.m[key]
	return ok
}
