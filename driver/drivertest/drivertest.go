// Package drivertest is the conformance suite every hopper driver passes.
//
// A driver's tests call Run with a constructor of fresh, empty stores:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t *testing.T) driver.Driver {
//			d := memdriver.New()
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// The suite checks every method's contract as documented on driver.Executor
// and driver.Driver, with one file per area: jobs (insert, get, count), list,
// claim (claim, promote, next run, heartbeat, expired leases), finish, admin
// (cancel, retry, delete), groups, keys, leader, queues, tx (transactions,
// notifications, close), and the workflow operations: wake (JobWake), runs
// (run rows, and the run state that retention and rollback take), events
// (a run's history under its lease), hooks and streams; and, for drivers
// that implement driver.TxJoiner, apptx (operations through an
// application's own transaction). An operation a driver reports as
// driver.ErrNotImplemented fails the case that needs it, with that error in
// the message: the suite never passes a missing capability silently.
//
// All times the suite passes in are whole microseconds unless a case checks
// truncation, and times are compared with time.Time.Equal, so drivers may
// return them in any location.
package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Run runs the conformance suite against fresh stores: newDriver is called
// once per subtest and must return an empty store (it registers its own
// cleanup with t.Cleanup).
func Run(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	areas := []struct {
		name  string
		cases []testCase
	}{
		{"Jobs", jobCases()},
		{"JobList", listCases()},
		{"Claim", claimCases()},
		{"Finish", finishCases()},
		{"Admin", adminCases()},
		{"Groups", groupCases()},
		{"Keys", keyCases()},
		{"Leader", leaderCases()},
		{"Queues", queueCases()},
		{"Schedules", scheduleCases()},
		{"Tx", txCases()},
		{"Wake", wakeCases()},
		{"Runs", runCases()},
		{"Events", eventCases()},
		{"Hooks", hookCases()},
		{"Streams", streamCases()},
		{"Gates", gateCases()},
		{"Concurrency", concurrencyCases()},
		{"Workers", workerCases()},
		{"Changes", changeCases()},
		{"DeleteQueue", purgeCases()},
		{"AppTx", appTxCases()},
	}
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			t.Parallel()
			runArea(t, area.cases, newDriver)
		})
	}
}

// RunAppTx runs the suite's AppTx area alone (operations through an
// application's own transaction, see driver.TxJoiner), for a driver that
// joins more than one kind of transaction: Run covers the kind its TxBegin
// opens, and RunAppTx, given a driver whose TxBegin opens another kind,
// covers that one.
func RunAppTx(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	runArea(t, appTxCases(), newDriver)
}

// runArea runs an area's cases in parallel, each on a fresh store.
func runArea(t *testing.T, cases []testCase, newDriver func(t *testing.T) driver.Driver) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, setup(t, newDriver))
		})
	}
}

// testCase is one subtest of an area; it gets a fresh store.
type testCase struct {
	name string
	fn   func(t *testing.T, f *fixture)
}

// base is the suite's reference time: whole microseconds, in UTC.
var base = time.Date(2025, time.March, 14, 15, 9, 26, 535897000, time.UTC)

// at returns base + d.
func at(d time.Duration) time.Time { return base.Add(d) }

// notifyWait bounds how long a case waits for a notification before failing.
const notifyWait = 5 * time.Second

// finalWait bounds a wait for changes to become final (delivered). On
// PostgreSQL a change is final once every older transaction of the whole
// cluster has ended, and under load the parallel tests' long transactions
// can hold that back for seconds.
const finalWait = 30 * time.Second

// fixture is the store under test plus helpers bound to it.
type fixture struct {
	d      driver.Driver
	x      driver.Executor // d's executor
	ctx    context.Context
	prefix string
	seq    atomic.Int64
}

func setup(t *testing.T, newDriver func(t *testing.T) driver.Driver) *fixture {
	t.Helper()
	d := newDriver(t)
	require.NotNil(t, d, "newDriver returned nil")
	return &fixture{
		d:      d,
		x:      d.Executor(),
		ctx:    t.Context(),
		prefix: fmt.Sprintf("%08x", rand.Uint32()),
	}
}

// id returns a new id; ids of one fixture sort in the order they were made.
func (f *fixture) id() string {
	return fmt.Sprintf("%s-%06d", f.prefix, f.seq.Add(1))
}

// job builds a pending job of type "test-job" in queue "default", due and
// queued at base, with the default retry policy; mods adjust it.
func (f *fixture) job(mods ...func(*hoppertype.JobRow)) *hoppertype.JobRow {
	id := f.id()
	r := &hoppertype.JobRow{
		ID:      id,
		Type:    "test-job",
		Queue:   "default",
		State:   hoppertype.JobStatePending,
		Input:   []byte(`{"n":1}`),
		GroupID: id,
		Retry: hoppertype.RetryPolicy{
			Attempts: 3, Backoff: "exponential", Base: time.Second, Factor: 2, Max: 30 * time.Second, Jitter: 0.5,
		},
		QueuedAt: base,
		RunAt:    base,
	}
	for _, m := range mods {
		m(r)
	}
	return r
}

// Row modifiers for fixture.job.

func inState(s hoppertype.JobState) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.State = s }
}

func inQueue(q string) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.Queue = q }
}

func ofType(typ string) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.Type = typ }
}

func withPriority(p int) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.Priority = p }
}

func runAt(ts time.Time) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.RunAt = ts }
}

func uniqueBy(key string) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.UniqueKey = key }
}

func endedAt(ts time.Time) func(*hoppertype.JobRow) {
	return func(r *hoppertype.JobRow) { r.EndedAt = ts }
}

// insert inserts rows, requires each to be inserted (not Existing), and
// returns the stored rows.
func (f *fixture) insert(t *testing.T, rows ...*hoppertype.JobRow) []*hoppertype.JobRow {
	t.Helper()
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: rows})
	require.NoError(t, err)
	require.Len(t, res, len(rows))
	out := make([]*hoppertype.JobRow, len(res))
	for i, r := range res {
		require.False(t, r.Existing, "job %s reported as existing", rows[i].ID)
		require.NotNil(t, r.Job)
		require.Equal(t, rows[i].ID, r.Job.ID)
		out[i] = r.Job
	}
	return out
}

// insertOne inserts one job built from mods and returns the stored row.
func (f *fixture) insertOne(t *testing.T, mods ...func(*hoppertype.JobRow)) *hoppertype.JobRow {
	t.Helper()
	return f.insert(t, f.job(mods...))[0]
}

// get returns a job that must exist.
func (f *fixture) get(t *testing.T, id string) *hoppertype.JobRow {
	t.Helper()
	r, err := f.x.JobGet(f.ctx, &driver.JobGetParams{ID: id})
	require.NoError(t, err, "get job %s", id)
	require.NotNil(t, r)
	return r
}

// requireMissing requires that a job does not exist.
func (f *fixture) requireMissing(t *testing.T, id string) {
	t.Helper()
	r, err := f.x.JobGet(f.ctx, &driver.JobGetParams{ID: id})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "job %s should not exist", id)
	require.Nil(t, r)
}

// requireState requires a job to exist in state s.
func (f *fixture) requireState(t *testing.T, id string, s hoppertype.JobState) *hoppertype.JobRow {
	t.Helper()
	r := f.get(t, id)
	require.Equal(t, s, r.State, "state of job %s", id)
	return r
}

// claim claims from queue at now with a 30s lease, for worker "worker-1".
func (f *fixture) claim(t *testing.T, queue string, now time.Time, limit int) []*hoppertype.JobRow {
	t.Helper()
	rows, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
		Queue: queue, Limit: limit, Now: now, LeaseExpiresAt: now.Add(30 * time.Second), Worker: "worker-1",
	})
	require.NoError(t, err)
	return rows
}

// claimOne inserts a job built from mods in a queue of its own and claims it
// at base with a lease until base+30s.
func (f *fixture) claimOne(t *testing.T, mods ...func(*hoppertype.JobRow)) *hoppertype.JobRow {
	t.Helper()
	q := "q-" + f.id()
	j := f.insertOne(t, append([]func(*hoppertype.JobRow){inQueue(q)}, mods...)...)
	rows := f.claim(t, q, base, 1)
	require.Len(t, rows, 1)
	require.Equal(t, j.ID, rows[0].ID)
	return rows[0]
}

// finish applies items and requires one result per item.
func (f *fixture) finish(t *testing.T, items ...driver.JobFinishParams) []driver.JobFinishResult {
	t.Helper()
	res, err := f.x.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: items})
	require.NoError(t, err)
	require.Len(t, res, len(items))
	return res
}

// finishOK applies one item and requires it to apply.
func (f *fixture) finishOK(t *testing.T, item driver.JobFinishParams) *hoppertype.JobRow {
	t.Helper()
	res := f.finish(t, item)
	require.NoError(t, res[0].Err)
	require.NotNil(t, res[0].Job)
	return res[0].Job
}

// ids returns the ids of rows in order.
func ids(rows []*hoppertype.JobRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// requireTime requires two times to be the same instant.
func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	if !want.Equal(got) {
		require.Fail(t, fmt.Sprintf("times differ:\nwant %s\n got %s", want.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano)), msgAndArgs...)
	}
}

// requireJob requires two rows to be equal field by field, comparing times
// as instants and treating empty and nil slices and maps of Input, Metadata,
// Dependents and BlockerIDs alike. Result is compared strictly: nil and
// non-nil differ.
func requireJob(t *testing.T, want, got *hoppertype.JobRow, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	require.Equal(t, normJob(want), normJob(got), msgAndArgs...)
}

func normJob(r *hoppertype.JobRow) *hoppertype.JobRow {
	c := r.Clone()
	c.Deadline = normTime(c.Deadline)
	c.QueuedAt = normTime(c.QueuedAt)
	c.RunAt = normTime(c.RunAt)
	c.StartedAt = normTime(c.StartedAt)
	c.EndedAt = normTime(c.EndedAt)
	c.LeaseExpiresAt = normTime(c.LeaseExpiresAt)
	if len(c.Input) == 0 {
		c.Input = nil
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	if len(c.Dependents) == 0 {
		c.Dependents = nil
	}
	if c.Error != nil {
		c.Error.At = normTime(c.Error.At)
	}
	if c.Stuck != nil {
		c.Stuck.ObservedAt = normTime(c.Stuck.ObservedAt)
		if len(c.Stuck.BlockerIDs) == 0 {
			c.Stuck.BlockerIDs = nil
		}
	}
	return c
}

// requireGroup requires two group rows to be equal, comparing times as
// instants and treating an empty Value like nil.
func requireGroup(t *testing.T, want, got *hoppertype.GroupRow, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	norm := func(g *hoppertype.GroupRow) hoppertype.GroupRow {
		c := *g
		c.CreatedAt = normTime(c.CreatedAt)
		c.SettledAt = normTime(c.SettledAt)
		if len(c.Value) == 0 {
			c.Value = nil
		}
		return c
	}
	require.Equal(t, norm(want), norm(got), msgAndArgs...)
}

// normTime maps a time to a canonical value for the same instant (UTC, no
// monotonic reading), so rows compare with require.Equal.
func normTime(ts time.Time) time.Time {
	if ts.IsZero() {
		return time.Time{}
	}
	return ts.Round(0).UTC()
}

// nanos returns ts plus a sub-microsecond offset, to check truncation.
func nanos(ts time.Time) time.Time { return ts.Add(789 * time.Nanosecond) }
