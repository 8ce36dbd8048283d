package pgdriver

import (
	"context"
	"fmt"
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

// TestStatementsOfATransactionEachWriteTheirChanges: each statement that
// changes jobs writes its own changes (no trigger writes them since schema
// 28), whatever came before it in the transaction (a claim of three, a
// finish of one, a claim that found nothing, a finish of two): none is
// missing, none is written twice.
func TestStatementsOfATransactionEachWriteTheirChanges(t *testing.T) {
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

// TestClaimOfAGateRecordsItApart: a gate's change is a row of its own, not
// a set's entry, so a claim that takes a gate hands its changes to
// record_job_changes, which writes the gate's as a row and the job's beside
// it in a set; neither is written twice.
func TestClaimOfAGateRecordsItApart(t *testing.T) {
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

// TestFinishWritesItsChanges: a finish whose items pass the rows they
// claimed writes its changes without reading the jobs' old rows (the
// caller computes the fields that changed), and they must be what a finish
// that reads the old rows as it locks them writes for the same outcomes (a
// success with a value, a retry, a dead letter, a job handed back, a
// cancel), after a first attempt or after one that failed, in one
// statement (a set) and each alone (a row).
func TestFinishWritesItsChanges(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	boom := &hoppertype.ErrorInfo{Kind: "error", Message: "boom", Attempt: 1, At: testBase}
	outcomes := []func(j *hoppertype.JobRow) driver.JobFinishParams{
		func(j *hoppertype.JobRow) driver.JobFinishParams {
			return driver.JobFinishParams{State: hoppertype.JobStateSucceeded, Attempt: j.Attempt, RunAt: j.RunAt, Error: j.Error,
				EndedAt: testBase.Add(time.Second), Result: []byte(`"ok"`)}
		},
		func(j *hoppertype.JobRow) driver.JobFinishParams {
			return driver.JobFinishParams{State: hoppertype.JobStateRetrying, Attempt: j.Attempt, RunAt: testBase.Add(time.Minute),
				Error: &hoppertype.ErrorInfo{Kind: "error", Message: "again", Attempt: j.Attempt, At: testBase.Add(time.Second)}}
		},
		func(j *hoppertype.JobRow) driver.JobFinishParams {
			return driver.JobFinishParams{State: hoppertype.JobStateDead, Attempt: j.Attempt, RunAt: j.RunAt, EndedAt: testBase.Add(time.Second),
				Error: &hoppertype.ErrorInfo{Kind: "error", Message: "dead", Attempt: j.Attempt, At: testBase.Add(time.Second)}}
		},
		func(j *hoppertype.JobRow) driver.JobFinishParams {
			return driver.JobFinishParams{State: hoppertype.JobStatePending, Attempt: j.Attempt - 1, RunAt: testBase.Add(time.Second), Error: j.Error}
		},
		func(j *hoppertype.JobRow) driver.JobFinishParams {
			return driver.JobFinishParams{State: hoppertype.JobStateCancelled, Attempt: j.Attempt, RunAt: j.RunAt, EndedAt: testBase.Add(time.Second),
				Error: &hoppertype.ErrorInfo{Kind: "cancelled", Message: "cancelled", Attempt: j.Attempt, At: testBase.Add(time.Second)}}
		},
	}
	// claimed claims a queue's jobs, each after a first attempt that
	// failed when retried is set.
	claimed := func(queue string, retried bool) []*hoppertype.JobRow {
		jobs := make([]*hoppertype.JobRow, len(outcomes))
		for i := range jobs {
			jobs[i] = newJob(queue)
		}
		insert(t, x, jobs...)
		claim := func() []*hoppertype.JobRow {
			rows, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Limit: len(jobs), Now: testBase,
				LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
			require.NoError(t, err)
			require.Len(t, rows, len(jobs))
			return rows
		}
		rows := claim()
		if retried {
			var items []driver.JobFinishParams
			for _, j := range rows {
				items = append(items, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateRetrying,
					Attempt: j.Attempt, RunAt: testBase, Error: boom, Claimed: j})
			}
			_, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
			require.NoError(t, err)
			rows = claim()
		}
		return rows
	}
	finish := func(rows []*hoppertype.JobRow, withClaimed, alone bool) {
		items := make([]driver.JobFinishParams, len(rows))
		for i, j := range rows {
			items[i] = outcomes[i](j)
			items[i].ID, items[i].LeaseToken = j.ID, j.LeaseToken
			if withClaimed {
				items[i].Claimed = j
				_, plain := finishFields(&items[i])
				require.True(t, plain, "outcome %d is written without reading the old row", i)
			}
		}
		batches := [][]driver.JobFinishParams{items}
		if alone {
			batches = nil
			for i := range items {
				batches = append(batches, items[i:i+1])
			}
		}
		for _, b := range batches {
			res, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: b})
			require.NoError(t, err)
			for _, r := range res {
				require.NoError(t, r.Err)
				require.NotNil(t, r.Job)
			}
		}
	}
	last := func(id string) *hoppertype.Change {
		chs := entityChanges(t, x, id)
		return chs[len(chs)-1]
	}
	for _, alone := range []bool{false, true} {
		for _, retried := range []bool{false, true} {
			own, read := claimed("own-finish", retried), claimed("read-finish", retried)
			finish(own, true, alone)
			finish(read, false, alone)
			for i := range outcomes {
				o, g := last(own[i].ID), last(read[i].ID)
				at := fmt.Sprintf("outcome %d (retried %v, alone %v)", i, retried, alone)
				require.Equal(t, g.Prev+">"+g.State, o.Prev+">"+o.State, at)
				require.Equal(t, "running", o.Prev, at)
				require.Equal(t, g.Fields, o.Fields, "%s: the fields changed", at)
				require.Equal(t, g.Attempt, o.Attempt, at)
				require.Equal(t, g.Worker, o.Worker, at)
				require.Equal(t, g.Type, o.Type, at)
				require.Equal(t, own[i].Queue, o.Queue, at)
				require.Equal(t, g.Error, o.Error, at)
				require.Equal(t, g.DueAt, o.DueAt, at)
				require.NotEmpty(t, o.Fields, at)
			}
		}
	}
}

// TestFinishAfterALockWait: a finish that waits for a job's row while
// another transaction changes it (a heartbeat, here) finishes the version
// that transaction committed, which the finish's snapshot does not see.
// The finishes that read the old rows lock them first and then update
// them joined by key: joined by the locked version's ctid, the update
// would leave the job out, and the finish would report its lease lost.
// Both finishes are tried: the one that reads the old rows (no claimed
// row passed) and the one that writes its changes from the claimed rows.
func TestFinishAfterALockWait(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	x := d.Executor()
	for _, withClaimed := range []bool{false, true} {
		j := newJob("q-finish-wait")
		insert(t, x, j)
		rows, err := x.JobClaim(ctx, &driver.JobClaimParams{Queue: j.Queue, Limit: 1, Now: testBase,
			LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		claimed := rows[0]

		var holder int32
		held, commit, heldDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			heldDone <- x.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
				res, err := tx.JobHeartbeat(ctx, &driver.JobHeartbeatParams{ExpiresAt: testBase.Add(2 * time.Minute),
					Leases: []driver.Lease{{ID: claimed.ID, Token: claimed.LeaseToken}}})
				if err != nil {
					return err
				}
				if len(res) != 1 || !res[0].Held {
					return fmt.Errorf("heartbeat: %+v", res)
				}
				if err := tx.(*executor).q.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
					return err
				}
				close(held)
				<-commit
				return nil
			})
		}()
		<-held
		item := driver.JobFinishParams{ID: claimed.ID, LeaseToken: claimed.LeaseToken, Attempt: claimed.Attempt,
			State: hoppertype.JobStateSucceeded, RunAt: claimed.RunAt, EndedAt: testBase.Add(time.Second)}
		if withClaimed {
			item.Claimed = claimed
		}
		finished := make(chan []driver.JobFinishResult, 1)
		finishErr := make(chan error, 1)
		go func() {
			res, err := x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{item}})
			finishErr <- err
			finished <- res
		}()
		// Commit the heartbeat once the finish waits on it.
		awaitBlocked(t, pool, "the finish", finishErr, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE $1::int4 = ANY(pg_blocking_pids(pid)))`, holder)
		close(commit)
		require.NoError(t, <-heldDone)
		require.NoError(t, <-finishErr)
		res := <-finished
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err, "claimed row passed: %v", withClaimed)
		require.NotNil(t, res[0].Job)
		require.Equal(t, hoppertype.JobStateSucceeded, res[0].Job.State)
		require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, transitions(entityChanges(t, x, j.ID)))
	}
}
