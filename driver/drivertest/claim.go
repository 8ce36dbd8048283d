package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// claimCases cover JobClaim, JobPromote, JobNextRunAt, JobHeartbeat and
// JobListExpiredLeases.
func claimCases() []testCase {
	return []testCase{
		{"Order", testClaimOrder},
		{"Limit", testClaimLimit},
		{"ClaimedFields", testClaimFields},
		{"NeverStartedBeforeDue", testClaimNotBeforeRunAt},
		{"LeaseTokenChangesEachClaim", testClaimTokenChanges},
		{"OnlyTheQueue", testClaimOnlyQueue},
		{"TypesFilter", testClaimTypes},
		{"PromotesDueJobs", testClaimPromotes},
		{"PausedQueue", testClaimPaused},
		{"ConcurrentClaimersGetDisjointJobs", testClaimConcurrent},
		{"PromoteDueAcrossQueues", testPromote},
		{"PromoteLimit", testPromoteLimit},
		{"NextRunAtNone", testNextRunAtNone},
		{"NextRunAtEarliest", testNextRunAtEarliest},
		{"HeartbeatExtendsHeldLeases", testHeartbeat},
		{"HeartbeatAfterFinishNotHeld", testHeartbeatAfterFinish},
		{"HeartbeatReportsCancel", testHeartbeatCancel},
		{"ListExpiredLeases", testListExpiredLeases},
		{"ListDeadWorkersLeases", testListDeadWorkersLeases},
	}
}

func testClaimOrder(t *testing.T, f *fixture) {
	// ids are made in this order: a < b < c < d < e < g.
	a := f.job(withPriority(0), runAt(at(-time.Minute)))
	b := f.job(withPriority(5), runAt(base))
	c := f.job(withPriority(5), runAt(at(-2*time.Minute)))
	d := f.job(withPriority(0), runAt(at(-time.Minute)))
	e := f.job(withPriority(-1), runAt(at(-10*time.Minute)))
	g := f.job(withPriority(10), runAt(at(-5*time.Minute)))
	f.insert(t, e, d, g, c, b, a)
	got := f.claim(t, "default", base, 10)
	require.Equal(t, ids([]*hoppertype.JobRow{g, c, b, a, d, e}), ids(got),
		"priority desc, then RunAt asc, then id asc")
	require.Empty(t, f.claim(t, "default", base, 10))
}

func testClaimLimit(t *testing.T, f *fixture) {
	var rows []*hoppertype.JobRow
	for i := range 5 {
		rows = append(rows, f.job(runAt(at(time.Duration(i-10)*time.Second))))
	}
	f.insert(t, rows...)
	require.Equal(t, ids(rows[0:2]), ids(f.claim(t, "default", base, 2)))
	require.Equal(t, ids(rows[2:4]), ids(f.claim(t, "default", base, 2)))
	require.Equal(t, ids(rows[4:5]), ids(f.claim(t, "default", base, 2)))
	require.Empty(t, f.claim(t, "default", base, 2))
}

func testClaimFields(t *testing.T, f *fixture) {
	in := f.job(func(r *hoppertype.JobRow) {
		r.Attempt = 1
		r.LeaseToken = 7
		r.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "first failed", Attempt: 1, At: at(-time.Minute)}
		r.Metadata = map[string]string{"k": "v"}
		r.RunAt = at(-time.Second)
	})
	f.insert(t, in)
	now := nanos(at(time.Second))
	got, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
		Queue: "default", Limit: 1, Now: now, LeaseExpiresAt: nanos(at(31 * time.Second)), Worker: "worker-7",
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotEqual(t, int64(7), got[0].LeaseToken, "a claim hands out a new lease token")
	want := in.Clone()
	want.State = hoppertype.JobStateRunning
	want.Attempt = 2
	want.LeaseToken = got[0].LeaseToken
	want.LeaseExpiresAt = at(31 * time.Second)
	want.Worker = "worker-7"
	want.StartedAt = at(time.Second)
	requireJob(t, want, got[0], "claimed row")
	requireJob(t, want, f.get(t, in.ID), "stored row")
}

// testClaimNotBeforeRunAt: a pending job enqueued after the claimer read
// its clock (its RunAt is later than the claim's Now) starts at its RunAt,
// never before it was due.
func testClaimNotBeforeRunAt(t *testing.T, f *fixture) {
	// Pending, yet due after the claim's Now: made due by another process
	// after this claimer read its clock. It starts, and its lease (30 s
	// from Now) runs, from its RunAt: a rescuer at its RunAt + 20 s must
	// not find it expired.
	j := f.insertOne(t, runAt(at(time.Minute)))
	got := f.claim(t, "default", base, 1)
	require.Len(t, got, 1)
	requireTime(t, at(time.Minute), got[0].StartedAt)
	requireTime(t, at(time.Minute), f.get(t, j.ID).StartedAt)
	requireTime(t, at(time.Minute+30*time.Second), got[0].LeaseExpiresAt)
	requireTime(t, at(time.Minute+30*time.Second), f.get(t, j.ID).LeaseExpiresAt)
	expired, err := f.x.JobListExpiredLeases(f.ctx, &driver.JobListExpiredLeasesParams{Now: at(time.Minute + 20*time.Second), Limit: 10})
	require.NoError(t, err)
	require.Empty(t, expired)
	// A job due before Now keeps the lease it was given.
	k := f.insertOne(t, inQueue("q-"+f.id()), runAt(at(-time.Minute)))
	got = f.claim(t, k.Queue, base, 1)
	require.Len(t, got, 1)
	requireTime(t, base, got[0].StartedAt)
	requireTime(t, at(30*time.Second), got[0].LeaseExpiresAt)
}

func testClaimTokenChanges(t *testing.T, f *fixture) {
	j := f.insertOne(t)
	first := f.claim(t, "default", base, 1)
	require.Len(t, first, 1)
	require.NotEqual(t, j.LeaseToken, first[0].LeaseToken)
	f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: first[0].LeaseToken, State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Second),
	})
	second := f.claim(t, "default", at(time.Second), 1)
	require.Len(t, second, 1)
	require.Equal(t, 2, second[0].Attempt)
	require.NotEqual(t, first[0].LeaseToken, second[0].LeaseToken, "each claim of a job changes its lease token")
}

func testClaimOnlyQueue(t *testing.T, f *fixture) {
	other := f.insertOne(t, inQueue("other"))
	otherDue := f.insertOne(t, inQueue("other"), inState(hoppertype.JobStateScheduled), runAt(at(-time.Minute)))
	mine := f.insertOne(t, inQueue("mine"))
	require.Equal(t, []string{mine.ID}, ids(f.claim(t, "mine", base, 10)))
	f.requireState(t, other.ID, hoppertype.JobStatePending)
	f.requireState(t, otherDue.ID, hoppertype.JobStateScheduled)
	require.Empty(t, f.claim(t, "no-such-queue", base, 10))
}

func testClaimTypes(t *testing.T, f *fixture) {
	// Priorities interleave the types so a claimer must look past other types.
	var a, b, c []*hoppertype.JobRow
	for i := range 3 {
		p := 10 - 3*i
		a = append(a, f.job(ofType("a"), withPriority(p)))
		b = append(b, f.job(ofType("b"), withPriority(p-1)))
		c = append(c, f.job(ofType("c"), withPriority(p-2)))
	}
	f.insert(t, append(append(append([]*hoppertype.JobRow{}, a...), b...), c...)...)
	claim := func(types []string, limit int) []string {
		t.Helper()
		rows, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
			Queue: "default", Types: types, Limit: limit, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w",
		})
		require.NoError(t, err)
		if len(types) > 0 {
			for _, r := range rows {
				require.Contains(t, types, r.Type)
			}
		}
		return ids(rows)
	}
	require.Empty(t, claim([]string{"zzz"}, 10))
	require.Equal(t, []string{a[0].ID, c[0].ID, a[1].ID}, claim([]string{"a", "c"}, 3))
	require.Equal(t, []string{b[0].ID}, claim([]string{"b"}, 1))
	require.Equal(t, []string{c[1].ID, a[2].ID, c[2].ID}, claim([]string{"c", "a"}, 10))
	for _, r := range b[1:] {
		f.requireState(t, r.ID, hoppertype.JobStatePending)
	}
	require.Equal(t, []string{b[1].ID, b[2].ID}, claim(nil, 10), "empty Types claims any type")
}

func testClaimPromotes(t *testing.T, f *fixture) {
	sched := f.job(inState(hoppertype.JobStateScheduled), runAt(at(-time.Minute)))
	pending := f.job(runAt(at(-30 * time.Second)))
	retrying := f.job(inState(hoppertype.JobStateRetrying), runAt(base)) // RunAt == Now is due
	future := f.job(inState(hoppertype.JobStateScheduled), runAt(at(time.Microsecond)))
	later := f.job(inState(hoppertype.JobStateRetrying), runAt(at(time.Hour)))
	f.insert(t, later, future, retrying, pending, sched)
	require.Equal(t, []string{sched.ID, pending.ID, retrying.ID}, ids(f.claim(t, "default", base, 10)))
	f.requireState(t, future.ID, hoppertype.JobStateScheduled)
	f.requireState(t, later.ID, hoppertype.JobStateRetrying)
	require.Equal(t, []string{future.ID, later.ID}, ids(f.claim(t, "default", at(time.Hour), 10)))
}

func testClaimPaused(t *testing.T, f *fixture) {
	j := f.insertOne(t, inQueue("paused"))
	other := f.insertOne(t, inQueue("running"))
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "paused", Paused: true, Now: base}))
	require.Empty(t, f.claim(t, "paused", base, 10), "a paused queue yields no jobs")
	f.requireState(t, j.ID, hoppertype.JobStatePending)
	require.Equal(t, []string{other.ID}, ids(f.claim(t, "running", base, 10)), "other queues are not paused")
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "paused", Paused: false, Now: at(time.Second)}))
	require.Equal(t, []string{j.ID}, ids(f.claim(t, "paused", at(time.Second), 10)), "a resumed queue yields its jobs")
}

func testClaimConcurrent(t *testing.T, f *fixture) {
	const jobs, claimers = 500, 8
	var rows []*hoppertype.JobRow
	for i := range jobs {
		rows = append(rows, f.job(withPriority(i%7)))
	}
	f.insert(t, rows...)

	var wg sync.WaitGroup
	claimed := make([][]*hoppertype.JobRow, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	for w := range claimers {
		wg.Go(func() {
			<-start
			for {
				got, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
					Queue: "default", Limit: 7, Now: base, LeaseExpiresAt: at(time.Minute), Worker: fmt.Sprintf("w%d", w),
				})
				if err != nil {
					errs[w] = err
					return
				}
				if len(got) == 0 {
					return
				}
				claimed[w] = append(claimed[w], got...)
			}
		})
	}
	close(start)
	wg.Wait()

	owner := make(map[string]int)
	tokens := make(map[string]int64)
	for w := range claimers {
		require.NoError(t, errs[w], "claimer %d", w)
		for _, r := range claimed[w] {
			prev, dup := owner[r.ID]
			require.False(t, dup, "job %s claimed by claimer %d and claimer %d", r.ID, prev, w)
			owner[r.ID] = w
			tokens[r.ID] = r.LeaseToken
			require.Equal(t, 1, r.Attempt)
		}
	}
	require.Len(t, owner, jobs, "every job claimed exactly once")
	for _, r := range rows {
		got := f.requireState(t, r.ID, hoppertype.JobStateRunning)
		require.Equal(t, fmt.Sprintf("w%d", owner[r.ID]), got.Worker)
		require.Equal(t, tokens[r.ID], got.LeaseToken)
		require.Equal(t, 1, got.Attempt)
	}
}

func testPromote(t *testing.T, f *fixture) {
	s1 := f.job(inQueue("q1"), inState(hoppertype.JobStateScheduled), runAt(at(-time.Minute)))
	r2 := f.job(inQueue("q2"), inState(hoppertype.JobStateRetrying), runAt(base))
	fut := f.job(inQueue("q1"), inState(hoppertype.JobStateScheduled), runAt(at(time.Second)))
	p3 := f.job(inQueue("q3"))
	run := f.job(inQueue("q2"), inState(hoppertype.JobStateRunning), runAt(at(-time.Hour)))
	dead := f.job(inQueue("q2"), inState(hoppertype.JobStateDead), runAt(at(-time.Hour)))
	f.insert(t, s1, r2, fut, p3, run, dead)
	n, err := f.x.JobPromote(f.ctx, &driver.JobPromoteParams{Now: base, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	f.requireState(t, s1.ID, hoppertype.JobStatePending)
	f.requireState(t, r2.ID, hoppertype.JobStatePending)
	f.requireState(t, fut.ID, hoppertype.JobStateScheduled)
	f.requireState(t, p3.ID, hoppertype.JobStatePending)
	f.requireState(t, run.ID, hoppertype.JobStateRunning)
	f.requireState(t, dead.ID, hoppertype.JobStateDead)
	n, err = f.x.JobPromote(f.ctx, &driver.JobPromoteParams{Now: base, Limit: 100})
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{r2.ID}, ids(f.claim(t, "q2", base, 10)))
}

func testPromoteLimit(t *testing.T, f *fixture) {
	// Two queues with two due jobs each, so a limit must hold within a queue
	// as well as across queues.
	var rows []*hoppertype.JobRow
	for i := range 4 {
		rows = append(rows, f.job(inQueue(fmt.Sprintf("q%d", i%2)), inState(hoppertype.JobStateScheduled),
			runAt(at(-time.Duration(i+1)*time.Minute))))
	}
	f.insert(t, rows...)
	countPending := func() int {
		t.Helper()
		res, err := f.x.JobCountByState(f.ctx, &driver.JobCountParams{})
		require.NoError(t, err)
		n := 0
		for _, c := range res {
			if c.State == hoppertype.JobStatePending {
				n += c.Count
			}
		}
		return n
	}
	n, err := f.x.JobPromote(f.ctx, &driver.JobPromoteParams{Now: base, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, 3, countPending())
	n, err = f.x.JobPromote(f.ctx, &driver.JobPromoteParams{Now: base, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 4, countPending())
}

func testNextRunAtNone(t *testing.T, f *fixture) {
	next, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: "default"})
	require.NoError(t, err)
	require.True(t, next.IsZero(), "no jobs: zero time, got %s", next)
	f.insert(t, f.job(runAt(at(time.Hour))), f.job(inState(hoppertype.JobStateDead), runAt(at(time.Hour))),
		f.job(inState(hoppertype.JobStateRunning), runAt(at(time.Hour))),
		f.job(inQueue("other"), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour))))
	next, err = f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: "default"})
	require.NoError(t, err)
	require.True(t, next.IsZero(), "only pending, running and dead jobs: zero time, got %s", next)
}

func testNextRunAtEarliest(t *testing.T, f *fixture) {
	f.insert(t,
		f.job(inState(hoppertype.JobStateScheduled), runAt(at(2*time.Hour))),
		f.job(inState(hoppertype.JobStateRetrying), runAt(at(time.Hour))),
		f.job(runAt(at(-time.Hour))),
		f.job(inState(hoppertype.JobStateRunning), runAt(at(-time.Hour))),
		f.job(inState(hoppertype.JobStateCancelled), runAt(at(-time.Hour))),
		f.job(inQueue("other"), inState(hoppertype.JobStateScheduled), runAt(at(10*time.Minute))),
	)
	next := func() time.Time {
		t.Helper()
		ts, err := f.x.JobNextRunAt(f.ctx, &driver.JobNextRunAtParams{Queue: "default"})
		require.NoError(t, err)
		return ts
	}
	requireTime(t, at(time.Hour), next())
	_, err := f.x.JobPromote(f.ctx, &driver.JobPromoteParams{Now: at(time.Hour), Limit: 100})
	require.NoError(t, err)
	requireTime(t, at(2*time.Hour), next())
	// Due jobs count too: NextRunAt is not only about the future.
	f.insertOne(t, inState(hoppertype.JobStateScheduled), runAt(at(-3*time.Hour)))
	requireTime(t, at(-3*time.Hour), next())
}

func testHeartbeat(t *testing.T, f *fixture) {
	j1 := f.claimOne(t)
	j2 := f.claimOne(t)
	j3 := f.insertOne(t)
	missing := f.id()
	res, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{
		Leases: []driver.Lease{
			{ID: j1.ID, Token: j1.LeaseToken},
			{ID: j2.ID, Token: j2.LeaseToken + 1000},
			{ID: missing, Token: 1},
			{ID: j3.ID, Token: j3.LeaseToken},
		},
		ExpiresAt: nanos(at(time.Minute)),
	})
	require.NoError(t, err)
	require.Equal(t, []driver.JobHeartbeatResult{
		{ID: j1.ID, Held: true},
		{ID: j2.ID, Held: false},
		{ID: missing, Held: false},
		{ID: j3.ID, Held: false},
	}, res)
	got1 := f.requireState(t, j1.ID, hoppertype.JobStateRunning)
	requireTime(t, at(time.Minute), got1.LeaseExpiresAt, "held lease extended (and truncated)")
	require.Equal(t, j1.LeaseToken, got1.LeaseToken)
	requireTime(t, j2.LeaseExpiresAt, f.get(t, j2.ID).LeaseExpiresAt, "a wrong token extends nothing")
	requireJob(t, j3, f.get(t, j3.ID))
}

func testHeartbeatAfterFinish(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, EndedAt: at(time.Second)})
	res, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{
		Leases: []driver.Lease{{ID: j.ID, Token: j.LeaseToken}}, ExpiresAt: at(time.Minute),
	})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.False(t, res[0].Held, "a finished job's lease is not held")
	got := f.requireState(t, j.ID, hoppertype.JobStateSucceeded)
	require.True(t, got.LeaseExpiresAt.IsZero())
}

func testHeartbeatCancel(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	beat := func() driver.JobHeartbeatResult {
		t.Helper()
		res, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{
			Leases: []driver.Lease{{ID: j.ID, Token: j.LeaseToken}}, ExpiresAt: at(time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, res, 1)
		return res[0]
	}
	require.Equal(t, driver.JobHeartbeatResult{ID: j.ID, Held: true, CancelRequested: false}, beat())
	_, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: at(time.Second)})
	require.NoError(t, err)
	require.Equal(t, driver.JobHeartbeatResult{ID: j.ID, Held: true, CancelRequested: true}, beat())
}

func testListExpiredLeases(t *testing.T, f *fixture) {
	lease := func(d time.Duration) *hoppertype.JobRow {
		t.Helper()
		q := "q-" + f.id()
		f.insertOne(t, inQueue(q))
		rows, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
			Queue: q, Limit: 1, Now: base, LeaseExpiresAt: at(d), Worker: "w",
		})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		return rows[0]
	}
	a := lease(10 * time.Second)
	b := lease(5 * time.Second)
	c := lease(20 * time.Second)
	lease(time.Hour)
	f.insertOne(t, inState(hoppertype.JobStateDead), func(r *hoppertype.JobRow) { r.LeaseExpiresAt = at(time.Second) })
	f.insertOne(t, func(r *hoppertype.JobRow) { r.LeaseExpiresAt = at(time.Second) })

	expired := func(now time.Time, limit int) []string {
		t.Helper()
		rows, err := f.x.JobListExpiredLeases(f.ctx, &driver.JobListExpiredLeasesParams{Now: now, Limit: limit})
		require.NoError(t, err)
		for _, r := range rows {
			require.Equal(t, hoppertype.JobStateRunning, r.State)
		}
		return ids(rows)
	}
	require.Equal(t, []string{b.ID, a.ID, c.ID}, expired(at(30*time.Second), 10), "oldest expiry first")
	require.Equal(t, []string{b.ID, a.ID}, expired(at(30*time.Second), 2))
	require.Equal(t, []string{b.ID}, expired(at(6*time.Second), 10))
	require.Empty(t, expired(base, 10))

	_, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{
		Leases: []driver.Lease{{ID: a.ID, Token: a.LeaseToken}}, ExpiresAt: at(time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, []string{b.ID, c.ID}, expired(at(30*time.Second), 10), "a heartbeat renews the lease")
}

// testListDeadWorkersLeases: Workers adds the running jobs of those
// workers, whatever their leases, each once, in the listing's order and
// within its limit.
func testListDeadWorkersLeases(t *testing.T, f *fixture) {
	dead, alive := "dead-"+f.id(), "alive-"+f.id()
	lease := func(worker string, d time.Duration) *hoppertype.JobRow {
		t.Helper()
		q := "q-" + f.id()
		f.insertOne(t, inQueue(q))
		rows, err := f.x.JobClaim(f.ctx, &driver.JobClaimParams{
			Queue: q, Limit: 1, Now: base, LeaseExpiresAt: at(d), Worker: worker,
		})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		return rows[0]
	}
	a := lease(dead, time.Hour)
	b := lease(dead, 5*time.Second) // expired and dead: listed once
	c := lease(alive, time.Hour)
	d := lease(dead, 2*time.Hour)
	list := func(workers []string, limit int) []string {
		t.Helper()
		rows, err := f.x.JobListExpiredLeases(f.ctx, &driver.JobListExpiredLeasesParams{Now: at(time.Minute), Limit: limit, Workers: workers})
		require.NoError(t, err)
		var out []string
		for _, r := range rows {
			if r.ID == a.ID || r.ID == b.ID || r.ID == c.ID || r.ID == d.ID {
				out = append(out, r.ID)
			}
		}
		return out
	}
	require.Equal(t, []string{b.ID}, list(nil, 100), "without workers: the expired only")
	require.Equal(t, []string{b.ID, a.ID, d.ID}, list([]string{dead}, 100), "the dead worker's jobs, each once, by lease expiry")
	require.Equal(t, []string{b.ID, a.ID, c.ID, d.ID}, list([]string{dead, alive}, 100))
	rows, err := f.x.JobListExpiredLeases(f.ctx, &driver.JobListExpiredLeasesParams{Now: at(time.Minute), Limit: 1, Workers: []string{dead}})
	require.NoError(t, err)
	require.Len(t, rows, 1, "within the limit")
}
