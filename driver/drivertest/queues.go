package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// queueCases cover QueueSetPaused, QueueList and QueueDepthList; claiming
// from a paused queue is in the claim cases.
func queueCases() []testCase {
	return []testCase{
		{"SetPausedAndList", testQueueList},
		{"Depth", testQueueDepth},
		{"DepthInTx", testQueueDepthInTx},
	}
}

func testQueueList(t *testing.T, f *fixture) {
	list := func() []*driver.QueueRow {
		t.Helper()
		rows, err := f.x.QueueList(f.ctx, &driver.QueueListParams{})
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, list(), "a fresh store has no queue states")

	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "b", Paused: true, Now: nanos(base)}))
	rows := list()
	require.Len(t, rows, 1)
	require.Equal(t, "b", rows[0].Name)
	require.True(t, rows[0].Paused)
	requireTime(t, base, rows[0].UpdatedAt)

	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "a", Paused: false, Now: at(time.Second)}))
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "b", Paused: false, Now: at(time.Minute)}))
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "c", Paused: true, Now: at(time.Hour)}))
	rows = list()
	require.Len(t, rows, 3)
	want := []struct {
		name    string
		paused  bool
		updated time.Time
	}{{"a", false, at(time.Second)}, {"b", false, at(time.Minute)}, {"c", true, at(time.Hour)}}
	for i, w := range want {
		require.Equal(t, w.name, rows[i].Name, "queues are listed by name")
		require.Equal(t, w.paused, rows[i].Paused, "queue %s", w.name)
		requireTime(t, w.updated, rows[i].UpdatedAt, "queue %s", w.name)
	}
}

// depth is a QueueDepthRow without its queue's name, for comparisons.
type depth struct {
	due, delayed, running int
	oldest                time.Time
}

func depthsOf(t *testing.T, rows []*driver.QueueDepthRow) (names []string, by map[string]depth) {
	t.Helper()
	by = map[string]depth{}
	for _, r := range rows {
		require.NotContains(t, by, r.Queue, "queue %s listed twice", r.Queue)
		names = append(names, r.Queue)
		by[r.Queue] = depth{r.Due, r.Delayed, r.Running, r.OldestDueAt}
	}
	return names, by
}

func requireDepth(t *testing.T, want, got depth, queue string) {
	t.Helper()
	require.Equal(t, [3]int{want.due, want.delayed, want.running}, [3]int{got.due, got.delayed, got.running},
		"queue %s: due, delayed, running", queue)
	requireTime(t, want.oldest, got.oldest, "queue %s: the oldest due job's run_at", queue)
}

func testQueueDepth(t *testing.T, f *fixture) {
	list := func(p *driver.QueueDepthListParams) []*driver.QueueDepthRow {
		t.Helper()
		rows, err := f.x.QueueDepthList(f.ctx, p)
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, list(&driver.QueueDepthListParams{Cap: 10, Now: base}), "a fresh store has no queues")
	_, err := f.x.QueueDepthList(f.ctx, &driver.QueueDepthListParams{Now: base})
	require.Error(t, err, "a cap of 0 is refused")

	now := at(time.Hour)
	waiting := func(s hoppertype.JobState, when time.Time, q string) *hoppertype.JobRow {
		return f.job(inQueue(q), inState(s), runAt(when))
	}
	f.insert(t,
		// a: pending jobs of three priorities (the oldest of the lowest),
		// one overdue scheduled job, two delayed jobs, jobs that are not
		// counted (stuck, terminal), and two running jobs.
		f.job(inQueue("a"), withPriority(2), runAt(now.Add(-time.Minute))),
		f.job(inQueue("a"), withPriority(2), runAt(now.Add(-2*time.Minute))),
		f.job(inQueue("a"), withPriority(1), runAt(now.Add(-4*time.Minute))),
		f.job(inQueue("a"), withPriority(0), runAt(now.Add(-10*time.Minute))),
		waiting(hoppertype.JobStateScheduled, now.Add(-30*time.Second), "a"),
		waiting(hoppertype.JobStateScheduled, now.Add(time.Hour), "a"),
		waiting(hoppertype.JobStateRetrying, now.Add(time.Minute), "a"),
		f.job(inQueue("a"), inState(hoppertype.JobStateStuck), runAt(now.Add(-time.Hour))),
		f.job(inQueue("a"), inState(hoppertype.JobStateDead), runAt(now.Add(-time.Hour)), endedAt(now)),
		f.job(inQueue("a"), inState(hoppertype.JobStateSucceeded), runAt(now.Add(-time.Hour)), endedAt(now)),
		f.job(inQueue("a"), inState(hoppertype.JobStateRunning), runAt(now.Add(-time.Hour))),
		f.job(inQueue("a"), inState(hoppertype.JobStateRunning), runAt(now.Add(-time.Hour))),
		// b: four delayed jobs; one due exactly now.
		waiting(hoppertype.JobStateScheduled, now.Add(time.Hour), "b"),
		waiting(hoppertype.JobStateScheduled, now.Add(2*time.Hour), "b"),
		waiting(hoppertype.JobStateRetrying, now.Add(time.Second), "b"),
		waiting(hoppertype.JobStateRetrying, now.Add(time.Microsecond), "b"),
		waiting(hoppertype.JobStateScheduled, now, "b"),
		// c: running jobs only (claimed below).
		f.job(inQueue("c")), f.job(inQueue("c")), f.job(inQueue("c")),
		// e: nothing live.
		f.job(inQueue("e"), inState(hoppertype.JobStateSucceeded), endedAt(now)),
		f.job(inQueue("e"), inState(hoppertype.JobStateStuck)),
		// f: an overdue retrying job only; g: a scheduled job due before
		// its pending one.
		waiting(hoppertype.JobStateRetrying, now.Add(-20*time.Minute), "f"),
		f.job(inQueue("g"), runAt(now.Add(-time.Minute))),
		waiting(hoppertype.JobStateScheduled, now.Add(-5*time.Minute), "g"),
	)
	require.Len(t, f.claim(t, "c", base, 3), 3)
	// d: a stored state only.
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "d", Paused: true, Now: base}))

	names, got := depthsOf(t, list(&driver.QueueDepthListParams{Cap: 100, Now: now}))
	require.Equal(t, []string{"a", "b", "c", "d", "f", "g"}, names, "the queues with live jobs or a stored state, by name")
	want := map[string]depth{
		"a": {5, 2, 2, now.Add(-10 * time.Minute)},
		"b": {1, 4, 0, now},
		"c": {0, 0, 3, time.Time{}},
		"d": {},
		"f": {1, 0, 0, now.Add(-20 * time.Minute)},
		"g": {2, 0, 0, now.Add(-5 * time.Minute)},
	}
	for q, w := range want {
		requireDepth(t, w, got[q], q)
	}

	// Capped at 3: a count of 4 means more than 3.
	_, got = depthsOf(t, list(&driver.QueueDepthListParams{Cap: 3, Now: now}))
	requireDepth(t, depth{4, 2, 2, now.Add(-10 * time.Minute)}, got["a"], "a")
	requireDepth(t, depth{1, 4, 0, now}, got["b"], "b")
	// (With a cap below its priorities, a store may read the oldest due
	// job of the highest priorities only.)
	_, got = depthsOf(t, list(&driver.QueueDepthListParams{Cap: 1, Now: now}))
	got["a"] = depth{got["a"].due, got["a"].delayed, got["a"].running, time.Time{}}
	requireDepth(t, depth{2, 2, 2, time.Time{}}, got["a"], "a")
	requireDepth(t, depth{1, 2, 0, now}, got["b"], "b")
	requireDepth(t, depth{0, 0, 3, time.Time{}}, got["c"], "c")

	// Earlier, fewer jobs are due: those due later are delayed.
	_, got = depthsOf(t, list(&driver.QueueDepthListParams{Cap: 100, Now: now.Add(-time.Minute)}))
	requireDepth(t, depth{4, 3, 2, now.Add(-10 * time.Minute)}, got["a"], "a")
	requireDepth(t, depth{0, 5, 0, time.Time{}}, got["b"], "b")

	// One queue.
	names, got = depthsOf(t, list(&driver.QueueDepthListParams{Queue: "a", Cap: 100, Now: now}))
	require.Equal(t, []string{"a"}, names)
	requireDepth(t, want["a"], got["a"], "a")
	names, got = depthsOf(t, list(&driver.QueueDepthListParams{Queue: "e", Cap: 100, Now: now}))
	require.Equal(t, []string{"e"}, names, "a queue asked for has a row, even with no live job")
	requireDepth(t, depth{}, got["e"], "e")

	// Jobs move: the claim takes the due jobs of a (the overdue one too).
	require.Len(t, f.claim(t, "a", now, 10), 5)
	_, got = depthsOf(t, list(&driver.QueueDepthListParams{Queue: "a", Cap: 100, Now: now}))
	requireDepth(t, depth{0, 2, 7, time.Time{}}, got["a"], "a")
}

// testQueueDepthInTx reads depths in a transaction, which sees its own
// writes.
func testQueueDepthInTx(t *testing.T, f *fixture) {
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{
			f.job(inQueue("tx"), runAt(at(-time.Minute))), f.job(inQueue("tx"), inState(hoppertype.JobStateScheduled), runAt(at(time.Minute))),
		}})
		require.NoError(t, err)
		for _, queue := range []string{"", "tx"} {
			rows, err := tx.QueueDepthList(ctx, &driver.QueueDepthListParams{Queue: queue, Cap: 10, Now: base})
			require.NoError(t, err)
			names, got := depthsOf(t, rows)
			require.Equal(t, []string{"tx"}, names)
			requireDepth(t, depth{1, 1, 0, at(-time.Minute)}, got["tx"], "tx")
		}
		return nil
	})
	require.NoError(t, err)
}
