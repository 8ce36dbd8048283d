package pgdriver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// entityChanges lists the changes of one entity, oldest first.
func entityChanges(t *testing.T, x driver.Executor, id string) []*hoppertype.Change {
	t.Helper()
	chs, err := x.ChangeList(t.Context(), &driver.ChangeListParams{EntityID: id, Limit: 20})
	require.NoError(t, err)
	return chs
}

// countOf runs a count query on pool.
func countOf(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// TestClaimWritesItsChanges: a claim statement writes its change set
// itself (schema 27) with what the trigger would record: a first attempt
// and a retried one (whose previous start, worker and error the claim
// reads as it picks the row), in one set, none as a row, none twice.
func TestClaimWritesItsChanges(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	count := func(sql string, args ...any) int { t.Helper(); return countOf(t, pool, sql, args...) }
	sets := `SELECT count(*) FROM ` + d.q.schema + `.change_sets WHERE $1::text = ANY(entity_ids) AND 'running' = ANY(states)`
	rows := `SELECT count(*) FROM ` + d.q.schema + `.changes WHERE entity_id = $1 AND state = 'running'`

	pair := claimPair(t, x, "own")
	a, b := pair[0], pair[1]
	for _, j := range pair {
		chs := entityChanges(t, x, j.ID)
		require.Equal(t, []string{">pending", "pending>running"}, transitions(chs))
		c := chs[1]
		require.Equal(t, []string{"attempt", "started_at", "worker"}, c.Fields)
		require.Equal(t, 1, c.Attempt)
		require.Equal(t, "w", c.Worker)
		require.Equal(t, "t", c.Type)
		require.Equal(t, "own", c.Queue)
		require.Equal(t, hoppertype.ChangeJob, c.Kind)
		require.True(t, c.DueAt.Equal(testBase), "a claim records when its job was due: %v", c.DueAt)
		require.Nil(t, c.Error)
		require.Equal(t, 1, count(sets, j.ID), "the claim is one set's entry")
		require.Zero(t, count(rows, j.ID), "and not a row")
	}

	retryAt := testBase.Add(time.Minute)
	_, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{
		{ID: a.ID, LeaseToken: a.LeaseToken, Attempt: 1, State: hoppertype.JobStateRetrying, RunAt: retryAt,
			Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "boom", Attempt: 1, At: testBase}},
		{ID: b.ID, LeaseToken: b.LeaseToken, Attempt: 1, State: hoppertype.JobStateSucceeded, RunAt: b.RunAt, EndedAt: testBase},
	}})
	require.NoError(t, err)
	c := newJob("own")
	insert(t, x, c)
	claimed, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "own", Limit: 5, Now: retryAt,
		LeaseExpiresAt: retryAt.Add(time.Minute), Worker: "w2"})
	require.NoError(t, err)
	require.Len(t, claimed, 2, "the retried job and the new one")

	chs := entityChanges(t, x, a.ID)
	require.Equal(t, []string{">pending", "pending>running", "running>retrying", "retrying>pending", "pending>running"}, transitions(chs))
	again := chs[4]
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, "w2", again.Worker)
	require.Equal(t, []string{"attempt", "started_at", "worker"}, again.Fields, "a new start and a new worker")
	require.NotNil(t, again.Error, "the job's last error rides with its claim, as the trigger records it")
	require.Equal(t, "boom", again.Error.Message)
	require.True(t, again.DueAt.Equal(retryAt), "due at its retry: %v", again.DueAt)
	require.Equal(t, 2, count(sets, a.ID), "each claim of the job is an entry of its statement's set")
	require.Zero(t, count(rows, a.ID))
	chs = entityChanges(t, x, c.ID)
	require.Equal(t, []string{">pending", "pending>running"}, transitions(chs))
	require.Equal(t, 1, chs[1].Attempt)
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets WHERE $1::text = ANY(entity_ids) AND $2::text = ANY(entity_ids)`,
		a.ID, c.ID), "one statement, one set")

	// The whole feed, in one order: each change once.
	all := feedAll(t, x, 3+2+2+1+2) // inserts, claims, finishes, a promotion, claims
	seen := map[string]int{}
	for _, ch := range all {
		seen[ch.EntityID+" "+ch.Prev+">"+ch.State]++
	}
	require.Equal(t, 2, seen[a.ID+" pending>running"])
	require.Equal(t, 1, seen[c.ID+" pending>running"])
}

// TestClaimChangesFlagStaysInItsStatement: the flag a claim sets for the
// trigger is the claim's alone. Statements after it in the same
// transaction (a finish of one job, a finish of two, after a claim that
// found nothing) write their changes through the trigger; were the flag
// left set, their changes would be missing.
func TestClaimChangesFlagStaysInItsStatement(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	a, b, c := newJob("tx"), newJob("tx"), newJob("tx")
	insert(t, x, a, b, c)
	finish := func(ctx context.Context, tx driver.Executor, jobs ...*hoppertype.JobRow) error {
		items := make([]driver.JobFinishParams, len(jobs))
		for i, j := range jobs {
			items[i] = driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, Attempt: j.Attempt,
				State: hoppertype.JobStateSucceeded, RunAt: j.RunAt, EndedAt: testBase}
		}
		res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
		if err != nil {
			return err
		}
		require.Len(t, res, len(jobs))
		return nil
	}
	require.NoError(t, x.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		claimed, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "tx", Limit: 3, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		if err != nil {
			return err
		}
		require.Len(t, claimed, 3)
		if err := finish(ctx, tx, claimed[0]); err != nil {
			return err
		}
		none, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "empty", Limit: 3, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		if err != nil {
			return err
		}
		require.Empty(t, none)
		return finish(ctx, tx, claimed[1:]...)
	}))
	for _, j := range []*hoppertype.JobRow{a, b, c} {
		require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, transitions(entityChanges(t, x, j.ID)), "job %s", j.ID)
	}
}

// TestClaimOfAGateLeavesItsChangesToTheTrigger: a gate's change is a row
// of its own, not a set's entry, so a claim that takes a gate leaves its
// changes to the trigger, which writes the gate's as a row and the job's
// beside it in a set; neither is written twice.
func TestClaimOfAGateLeavesItsChangesToTheTrigger(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	g, j := newJob("gates"), newJob("gates")
	g.Type = "hopper.gate"
	insert(t, x, g, j)
	claimed, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: "gates", Limit: 5, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	count := func(sql string, args ...any) int { t.Helper(); return countOf(t, pool, sql, args...) }
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.changes WHERE entity_id = $1 AND kind = 'gate' AND state = 'running'`, g.ID),
		"the gate's claim is a row")
	require.Equal(t, 1, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets WHERE $1::text = ANY(entity_ids)`, j.ID),
		"the job's is a set's entry")
	require.Zero(t, count(`SELECT count(*) FROM `+d.q.schema+`.change_sets WHERE $1::text = ANY(entity_ids)`, g.ID))
	for _, e := range []*hoppertype.JobRow{g, j} {
		require.Equal(t, []string{">pending", "pending>running"}, transitions(entityChanges(t, x, e.ID)), "%s", e.Type)
	}
	all := feedAll(t, x, 4)
	require.Len(t, all, 4, "two inserts and two claims, each once")
}

// TestChangeKeyReadsAFreshSnapshot: change_key, which keys the changes a
// claim writes itself, sees a transaction that began while the calling
// statement ran (the claim's own snapshot, taken before it locked its
// rows, would not). A claim keyed by its statement's snapshot could sort
// before the change of a transaction that committed between the claim's
// start and its lock of the same job.
func TestChangeKeyReadsAFreshSnapshot(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 3)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	hold, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer hold.Release()
	const lock = 727_001
	_, err = hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock)
	require.NoError(t, err)

	type keys struct{ before, after uint64 }
	got := make(chan keys, 1)
	errs := make(chan error, 1)
	var pid int
	caller, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer caller.Release()
	require.NoError(t, caller.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	// The caller's transaction has its id before the statement, as a
	// claim's has once it locks its first row: its key must come from the
	// snapshot, not from an id drawn late.
	tx, err := caller.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	var own uint64
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::int8`).Scan(&own))
	go func() {
		// One statement: its snapshot's horizon, then (after the lock,
		// which another transaction's commit precedes) change_key.
		var k keys
		err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8, `+d.q.schema+`.change_key()::text::int8
FROM (SELECT pg_advisory_xact_lock($1)) AS l`, lock).Scan(&k.before, &k.after)
		if err != nil {
			errs <- err
			return
		}
		got <- k
	}()
	// Once the statement waits for the lock, its snapshot is taken.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond)
	var xid uint64
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text::int8`).Scan(&xid))
	_, err = hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock)
	require.NoError(t, err)
	select {
	case err := <-errs:
		t.Fatal(err)
	case k := <-got:
		require.Less(t, own, xid)
		require.LessOrEqual(t, k.before, xid, "the statement's snapshot predates the other transaction")
		require.GreaterOrEqual(t, k.after, xid, "change_key's key is at least the transaction that committed since")
	}
}
