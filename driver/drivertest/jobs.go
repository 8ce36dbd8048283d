package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// jobCases cover JobInsertMany, JobGet, JobGetMany and JobCountByState.
func jobCases() []testCase {
	return []testCase{
		{"InsertRoundTripsEveryField", testInsertRoundTrip},
		{"InsertRoundTripsEmptyFields", testInsertEmptyFields},
		{"InsertTruncatesToMicroseconds", testInsertTruncates},
		{"InsertResultsInOrder", testInsertOrder},
		{"InsertDoesNotAlias", testInsertNoAlias},
		{"UniqueKeyReturnsExisting", testUniqueExisting},
		{"UniqueKeyHeldOnlyByNonTerminal", testUniqueByState},
		{"UniqueKeyReleasedByCancel", testUniqueReleasedByCancel},
		{"UniqueKeyScopedByType", testUniquePerType},
		{"UniqueKeyWithinOneCall", testUniqueWithinCall},
		{"EmptyUniqueKeyIsNotUnique", testEmptyUniqueKey},
		{"DuplicateIDInsertsNothing", testDuplicateID},
		{"DuplicateIDWithinOneCall", testDuplicateIDWithinCall},
		{"DuplicateIDInsideTxInsertsNothing", testDuplicateIDInTx},
		{"GetNotFound", testGetNotFound},
		{"GetManyOrderAndMissing", testGetMany},
		{"CountByState", testCountByState},
		{"CountByGroup", testCountByGroup},
	}
}

// fullJob is a job with every field set.
func (f *fixture) fullJob() *hoppertype.JobRow {
	retryable := true
	return f.job(func(r *hoppertype.JobRow) {
		r.Type = "full-job"
		r.Queue = "q-full"
		r.State = hoppertype.JobStateScheduled
		r.Priority = 7
		r.Attempt = 2
		r.Input = []byte(`{"to":"a@b.c","n":42}`)
		r.Result = []byte(`{"ok":true}`)
		r.Error = &hoppertype.ErrorInfo{
			Kind: hoppertype.ErrorKindHandler, Message: "boom", Stack: "main.go:1", Attempt: 2, At: at(-time.Minute),
		}
		r.GroupID = "group-" + r.ID
		r.ParentID = "parent-" + r.ID
		r.Dependents = []string{"dep-1", "dep-2"}
		r.FairKey = "tenant-1"
		r.UniqueKey = "unique-" + r.ID
		r.Metadata = map[string]string{"trace": "abc", "k": "v"}
		r.Retry = hoppertype.RetryPolicy{
			Attempts: 5, Backoff: "linear", Base: 2 * time.Second, Factor: 1.5, Max: time.Minute, Jitter: 0.25,
		}
		r.AttemptTimeout = 90 * time.Second
		r.Deadline = at(24 * time.Hour)
		r.QueuedAt = at(-time.Hour)
		r.RunAt = at(time.Hour)
		r.StartedAt = at(-2 * time.Minute)
		r.EndedAt = at(-time.Minute)
		r.LeaseToken = 42
		r.LeaseExpiresAt = at(-90 * time.Second)
		r.Worker = "worker-old"
		r.CancelRequested = true
		r.Stuck = &hoppertype.StuckInfo{
			Cause: hoppertype.StuckEngineFailure, Retryable: &retryable, BlockerIDs: []string{"b-1"},
			Detail: "leases lost", ObservedAt: at(-30 * time.Second),
		}
	})
}

func testInsertRoundTrip(t *testing.T, f *fixture) {
	in := f.fullJob()
	want := in.Clone()
	stored := f.insert(t, in)
	requireJob(t, want, stored[0], "insert result")
	requireJob(t, want, f.get(t, in.ID), "JobGet")
	many, err := f.x.JobGetMany(f.ctx, &driver.JobGetManyParams{IDs: []string{in.ID}})
	require.NoError(t, err)
	require.Len(t, many, 1)
	requireJob(t, want, many[0], "JobGetMany")
	list, err := f.x.JobList(f.ctx, &driver.JobListParams{IDs: []string{in.ID}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	requireJob(t, want, list[0], "JobList")
}

func testInsertEmptyFields(t *testing.T, f *fixture) {
	in := f.job()
	want := in.Clone()
	f.insert(t, in)
	got := f.get(t, in.ID)
	requireJob(t, want, got)
	require.Nil(t, got.Result, "nil Result must stay nil")
	require.Nil(t, got.Error)
	require.Nil(t, got.Stuck)
	require.True(t, got.Deadline.IsZero(), "zero Deadline must stay zero")
	require.True(t, got.StartedAt.IsZero())
	require.True(t, got.EndedAt.IsZero())
	require.True(t, got.LeaseExpiresAt.IsZero())
	require.Zero(t, got.AttemptTimeout)
	require.Zero(t, got.LeaseToken)
	require.False(t, got.CancelRequested)
}

func testInsertTruncates(t *testing.T, f *fixture) {
	zone := time.FixedZone("UTC+3", 3*3600)
	in := f.job(func(r *hoppertype.JobRow) {
		r.QueuedAt = nanos(at(time.Second)).In(zone)
		r.RunAt = nanos(at(2 * time.Second))
		r.StartedAt = nanos(at(3 * time.Second))
		r.EndedAt = nanos(at(4 * time.Second))
		r.Deadline = nanos(at(5 * time.Second))
		r.LeaseExpiresAt = nanos(at(6 * time.Second))
	})
	for _, got := range []*hoppertype.JobRow{f.insert(t, in)[0], f.get(t, in.ID)} {
		requireTime(t, at(time.Second), got.QueuedAt, "QueuedAt")
		requireTime(t, at(2*time.Second), got.RunAt, "RunAt")
		requireTime(t, at(3*time.Second), got.StartedAt, "StartedAt")
		requireTime(t, at(4*time.Second), got.EndedAt, "EndedAt")
		requireTime(t, at(5*time.Second), got.Deadline, "Deadline")
		requireTime(t, at(6*time.Second), got.LeaseExpiresAt, "LeaseExpiresAt")
	}
}

func testInsertOrder(t *testing.T, f *fixture) {
	rows := []*hoppertype.JobRow{f.job(), f.job(), f.job()}
	// Insert in reverse id order: results follow the input, not the ids.
	rows[0], rows[2] = rows[2], rows[0]
	stored := f.insert(t, rows...)
	require.Equal(t, ids(rows), ids(stored))
}

func testInsertNoAlias(t *testing.T, f *fixture) {
	in := f.job(func(r *hoppertype.JobRow) { r.Metadata = map[string]string{"k": "v"} })
	want := in.Clone()
	stored := f.insert(t, in)[0]
	in.Input[0] = 'X'
	in.Metadata["k"] = "changed"
	stored.Input[0] = 'Y'
	stored.Metadata["k"] = "changed too"
	got := f.get(t, in.ID)
	requireJob(t, want, got, "writes to the inserted or returned row must not reach the store")
	got.Input[0] = 'Z'
	got.Metadata["extra"] = "x"
	requireJob(t, want, f.get(t, in.ID), "writes to a read row must not reach the store")
}

func testUniqueExisting(t *testing.T, f *fixture) {
	first := f.insertOne(t, uniqueBy("k"))
	second := f.job(uniqueBy("k"), func(r *hoppertype.JobRow) { r.Input = []byte(`{"n":2}`) })
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{second}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.True(t, res[0].Existing)
	requireJob(t, first, res[0].Job, "Existing must return the job holding the key")
	f.requireMissing(t, second.ID)
}

func testUniqueByState(t *testing.T, f *fixture) {
	for _, s := range hoppertype.JobStates() {
		key := "k-" + string(s)
		holder := f.insertOne(t, uniqueBy(key), inState(s))
		next := f.job(uniqueBy(key))
		res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{next}})
		require.NoError(t, err)
		require.Len(t, res, 1)
		if s.Terminal() {
			require.False(t, res[0].Existing, "a %s job must not hold its unique key", s)
			require.Equal(t, next.ID, res[0].Job.ID)
			f.requireState(t, next.ID, hoppertype.JobStatePending)
		} else {
			require.True(t, res[0].Existing, "a %s job must hold its unique key", s)
			require.Equal(t, holder.ID, res[0].Job.ID)
			require.Equal(t, s, res[0].Job.State)
			f.requireMissing(t, next.ID)
		}
	}
}

func testUniqueReleasedByCancel(t *testing.T, f *fixture) {
	first := f.insertOne(t, uniqueBy("k"))
	_, err := f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: first.ID, Now: at(time.Second)})
	require.NoError(t, err)
	second := f.insertOne(t, uniqueBy("k"))
	f.requireState(t, second.ID, hoppertype.JobStatePending)
	third := f.job(uniqueBy("k"))
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{third}})
	require.NoError(t, err)
	require.True(t, res[0].Existing)
	require.Equal(t, second.ID, res[0].Job.ID, "the new job holds the key now")
}

func testUniquePerType(t *testing.T, f *fixture) {
	a := f.job(ofType("type-a"), uniqueBy("k"))
	b := f.job(ofType("type-b"), uniqueBy("k"))
	f.insert(t, a, b)
	f.get(t, a.ID)
	f.get(t, b.ID)
}

func testUniqueWithinCall(t *testing.T, f *fixture) {
	a := f.job(uniqueBy("k"))
	b := f.job(uniqueBy("k"))
	c := f.job()
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a, b, c}})
	require.NoError(t, err)
	require.Len(t, res, 3)
	require.False(t, res[0].Existing)
	require.Equal(t, a.ID, res[0].Job.ID)
	require.True(t, res[1].Existing, "a job later in the call with the same key is not inserted")
	require.Equal(t, a.ID, res[1].Job.ID)
	require.False(t, res[2].Existing)
	require.Equal(t, c.ID, res[2].Job.ID)
	f.requireMissing(t, b.ID)
	f.get(t, a.ID)
	f.get(t, c.ID)
}

func testEmptyUniqueKey(t *testing.T, f *fixture) {
	a, b := f.job(), f.job()
	f.insert(t, a, b)
	f.get(t, a.ID)
	f.get(t, b.ID)
}

func testDuplicateID(t *testing.T, f *fixture) {
	orig := f.insertOne(t)
	before := f.job()
	dup := f.job(func(r *hoppertype.JobRow) { r.ID = orig.ID; r.Input = []byte(`{"n":99}`) })
	after := f.job()
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{before, dup, after}})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	require.Empty(t, res)
	f.requireMissing(t, before.ID)
	f.requireMissing(t, after.ID)
	requireJob(t, orig, f.get(t, orig.ID), "the existing job must be unchanged")
}

func testDuplicateIDWithinCall(t *testing.T, f *fixture) {
	a := f.job()
	b := f.job(func(r *hoppertype.JobRow) { r.ID = a.ID })
	_, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a, b}})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	f.requireMissing(t, a.ID)
}

func testGetNotFound(t *testing.T, f *fixture) {
	f.insertOne(t)
	f.requireMissing(t, f.id())
}

func testGetMany(t *testing.T, f *fixture) {
	a, b, c := f.job(), f.job(), f.job()
	f.insert(t, a, b, c)
	got, err := f.x.JobGetMany(f.ctx, &driver.JobGetManyParams{IDs: []string{c.ID, f.id(), a.ID}})
	require.NoError(t, err)
	require.Equal(t, []string{c.ID, a.ID}, ids(got))
	requireJob(t, c, got[0])
	requireJob(t, a, got[1])
	got, err = f.x.JobGetMany(f.ctx, &driver.JobGetManyParams{IDs: nil})
	require.NoError(t, err)
	require.Empty(t, got)
}

func testCountByState(t *testing.T, f *fixture) {
	f.insert(t,
		f.job(inQueue("q1")), f.job(inQueue("q1")), f.job(inQueue("q1"), inState(hoppertype.JobStateDead)),
		f.job(inQueue("q2")), f.job(inQueue("q2"), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour))),
		f.job(inQueue("q2"), inState(hoppertype.JobStateStuck)),
	)
	count := func(queue string) map[string]int {
		t.Helper()
		res, err := f.x.JobCountByState(f.ctx, &driver.JobCountParams{Queue: queue})
		require.NoError(t, err)
		m := make(map[string]int)
		for _, c := range res {
			if c.Count != 0 {
				key := fmt.Sprintf("%s/%s", c.Queue, c.State)
				require.NotContains(t, m, key, "queue and state reported twice")
				m[key] = c.Count
			}
		}
		return m
	}
	require.Equal(t, map[string]int{
		"q1/pending": 2, "q1/dead": 1, "q2/pending": 1, "q2/scheduled": 1, "q2/stuck": 1,
	}, count(""))
	require.Equal(t, map[string]int{"q1/pending": 2, "q1/dead": 1}, count("q1"))
	require.Empty(t, count("no-such-queue"))

	require.Len(t, f.claim(t, "q1", base, 1), 1)
	require.Equal(t, map[string]int{"q1/pending": 1, "q1/running": 1, "q1/dead": 1}, count("q1"))
}

// testCountByGroup: a group's jobs, its root among them, counted by state,
// in one queue or all, at most Limit of them in id order.
func testCountByGroup(t *testing.T, f *fixture) {
	root := f.job(inQueue("q1"), inState(hoppertype.JobStateSucceeded))
	inGroup := func(r *hoppertype.JobRow) { r.GroupID = root.ID }
	other := f.job(inQueue("q1"))
	f.insert(t, root, other,
		f.job(inGroup, inQueue("q1")), f.job(inGroup, inQueue("q1"), inState(hoppertype.JobStateDead)),
		f.job(inGroup, inQueue("q2")), f.job(inGroup, inQueue("q2"), inState(hoppertype.JobStateDead)),
		f.job(func(r *hoppertype.JobRow) { r.GroupID = other.ID }, inQueue("q1")))
	count := func(p driver.JobCountParams) map[string]int {
		t.Helper()
		res, err := f.x.JobCountByState(f.ctx, &p)
		require.NoError(t, err)
		m := make(map[string]int)
		for _, c := range res {
			m[fmt.Sprintf("%s/%s", c.Queue, c.State)] += c.Count
		}
		return m
	}
	require.Equal(t, map[string]int{"q1/succeeded": 1, "q1/pending": 1, "q1/dead": 1, "q2/pending": 1, "q2/dead": 1},
		count(driver.JobCountParams{GroupID: root.ID}), "the root and its four members")
	require.Equal(t, map[string]int{"q2/pending": 1, "q2/dead": 1}, count(driver.JobCountParams{GroupID: root.ID, Queue: "q2"}))
	require.Equal(t, map[string]int{"q1/pending": 2}, count(driver.JobCountParams{GroupID: other.ID}))
	require.Empty(t, count(driver.JobCountParams{GroupID: "no-such-group"}))
	n := 0
	for _, c := range count(driver.JobCountParams{GroupID: root.ID, Limit: 3}) {
		n += c
	}
	require.Equal(t, 3, n, "a limit counts that many")
}

// testDuplicateIDInTx checks that a failed insert inserts nothing even inside
// a transaction whose fn goes on and returns nil. A driver may refuse the
// commit after the failed statement (as PostgreSQL does); either way the
// jobs of the failed call must not exist afterwards.
func testDuplicateIDInTx(t *testing.T, f *fixture) {
	orig := f.insertOne(t)
	before := f.job()
	dup := f.job(func(r *hoppertype.JobRow) { r.ID = orig.ID })
	_ = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{before, dup}})
		require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
		return nil
	})
	f.requireMissing(t, before.ID)
	requireJob(t, orig, f.get(t, orig.ID))
}
