package pgdriver

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestChangeFeedFinality holds a transaction open after it wrote a change
// and commits a later one beside it: neither is listed while the first
// transaction runs (a reader that moved past the later change would skip the
// earlier one for good), and both are, in (tx, position) order, once it
// ends.
func TestChangeFeedFinality(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	slow, fast := newJob("q"), newJob("q")

	wrote, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	end := sync.OnceFunc(func() { close(release) })
	t.Cleanup(end)   // a failed assertion must not leave the transaction open
	var slowTx int64 // the open transaction's id, read in it
	go func() {
		done <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{slow}}); err != nil {
				return err
			}
			own, err := tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, Limit: 10})
			if err != nil {
				return err
			}
			if len(own) != 1 {
				return fmt.Errorf("the transaction lists %d changes of its own, want 1", len(own))
			}
			slowTx = own[0].Tx
			close(wrote)
			<-release
			return nil
		})
	}()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("the open transaction ended early: %v", err)
	}
	insert(t, d.Executor(), fast)

	list := func() []*hoppertype.Change {
		chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{Limit: 10})
		require.NoError(t, err)
		return chs
	}
	// The committed change was written by a later transaction than the
	// open one: that alone must hold it back, whatever the transactions of
	// other tests sharing the cluster do (they can only hold back more).
	own, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: fast.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, own, 1, "the committed change exists all the same")
	require.Greater(t, own[0].Tx, slowTx, "written after the open transaction began")
	require.Empty(t, list(), "nothing is final while an older transaction runs")

	end()
	require.NoError(t, <-done)
	var chs []*hoppertype.Change
	require.Eventually(t, func() bool { chs = list(); return len(chs) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, slow.ID, chs[0].EntityID, "the older transaction's change comes first")
	require.Equal(t, fast.ID, chs[1].EntityID)
	require.Less(t, chs[0].Tx, chs[1].Tx)
}

// TestChangeFeedEntityOrder: a transaction that began (took its id) before
// others changes a job after them; the feed still delivers the job's
// changes in the order they were made.
func TestChangeFeedEntityOrder(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	j := newJob("q-order")
	j.State, j.RunAt = hoppertype.JobStateScheduled, testBase.Add(time.Hour)
	insert(t, d.Executor(), j)

	began, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			// Take a transaction id first, with another job.
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q-other")}}); err != nil {
				return err
			}
			close(began)
			<-release
			if _, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{j.ID}, Now: testBase.Add(2 * time.Minute)}); err != nil {
				return err
			}
			// The transaction's own changes (what its InCommit observers
			// read) include the one whose key was raised past the others'.
			own, err := tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, Limit: 10})
			if err != nil {
				return err
			}
			var got []string
			for _, ch := range own {
				got = append(got, ch.EntityID+" "+ch.Prev+">"+ch.State)
			}
			if want := []string{j.ID + " scheduled>pending"}; len(got) != 2 || got[1] != want[0] {
				return fmt.Errorf("own changes %q, want the other job's insert and %q", got, want)
			}
			return nil
		})
	}()
	<-began
	// Meanwhile: woken, claimed and snoozed by later transactions.
	_, err := d.Executor().JobWake(ctx, &driver.JobWakeParams{IDs: []string{j.ID}, Now: testBase})
	require.NoError(t, err)
	rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "q-order", Limit: 1, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: j.ID, LeaseToken: rows[0].LeaseToken,
		State: hoppertype.JobStateScheduled, Attempt: 0, RunAt: testBase.Add(time.Hour)}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	close(release)
	require.NoError(t, <-done)

	want := []string{">scheduled", "scheduled>pending", "pending>running", "running>scheduled", "scheduled>pending"}
	require.Equal(t, want, finalTransitions(t, d, j.ID, len(want)), "the feed gives a job's changes in the order they were made")
	row, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStatePending, row.State)
	chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: j.ID, Limit: 100})
	require.NoError(t, err)
	require.Len(t, chs, len(want))
	require.Equal(t, "scheduled>pending", chs[len(chs)-1].Prev+">"+chs[len(chs)-1].State, "so does the entity listing")
}

// TestChangeFeedEntityOrderAfterALockWait: a transaction that began first
// changes a job while a later one holds it, waits for that one to commit,
// and then changes it. Its statement began before the other committed, so
// the key that keeps the job's order must be taken after the wait, not
// with the statement.
func TestChangeFeedEntityOrderAfterALockWait(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	j := newJob("q-lock-order")
	j.State, j.RunAt = hoppertype.JobStateScheduled, testBase.Add(time.Hour)
	insert(t, d.Executor(), j)

	pid := func(tx driver.Executor) (int32, error) {
		var p int32
		return p, tx.(*executor).q.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p)
	}
	// The later transaction wakes the job and holds it.
	var holder int32
	held, commit, heldDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	// The earlier one takes its id first, then cancels the job: it waits.
	var waiter int32
	began, cancelled := make(chan struct{}), make(chan error, 1)
	go func() {
		cancelled <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q-lock-other")}}); err != nil {
				return err
			}
			var err error
			if waiter, err = pid(tx); err != nil {
				return err
			}
			close(began)
			<-held
			row, err := tx.JobCancel(ctx, &driver.JobCancelParams{ID: j.ID, Now: testBase.Add(3 * time.Minute)})
			if err == nil && row.State != hoppertype.JobStateCancelled {
				err = fmt.Errorf("cancel left the job %s", row.State)
			}
			return err
		})
	}()
	<-began
	go func() {
		heldDone <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{j.ID}, Now: testBase}); err != nil {
				return err
			}
			var err error
			if holder, err = pid(tx); err != nil {
				return err
			}
			close(held)
			<-commit
			return nil
		})
	}()
	// Commit the holder once the cancel waits on it.
	<-held
	awaitBlocked(t, pool, "the cancel", cancelled, `SELECT $2::int4 = ANY(pg_blocking_pids($1))`, waiter, holder)
	close(commit)
	require.NoError(t, <-heldDone)
	require.NoError(t, <-cancelled)

	want := []string{">scheduled", "scheduled>pending", "pending>cancelled"}
	require.Equal(t, want, finalTransitions(t, d, j.ID, len(want)), "the feed gives the job's changes in the order they were made")
}

// finalTransitions waits until the feed lists n changes of entity id as
// final and returns them in feed order as "prev>state". Finality waits on
// every transaction in the cluster (other tests' too), which announce
// nothing: the feed is read again until they have ended.
func finalTransitions(t *testing.T, d *Driver, id string, n int) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		chs, err := d.Executor().ChangeList(t.Context(), &driver.ChangeListParams{Limit: 1000})
		require.NoError(t, err)
		got = got[:0]
		for _, ch := range chs {
			if ch.EntityID == id {
				got = append(got, ch.Prev+">"+ch.State)
			}
		}
		return len(got) == n
	}, 10*time.Second, 10*time.Millisecond)
	return got
}

// awaitBlocked returns once blocked, a query of one boolean, holds: a
// backend waits on a lock another holds. It fails the test if waiter (what
// waits) ends first, or the test's context does.
func awaitBlocked(t *testing.T, pool *pgxpool.Pool, waiter string, ended <-chan error, blocked string, args ...any) {
	t.Helper()
	ctx := t.Context()
	for {
		var yes bool
		require.NoError(t, pool.QueryRow(ctx, blocked, args...).Scan(&yes))
		if yes {
			return
		}
		select {
		case err := <-ended:
			t.Fatalf("%s did not wait for the lock's holder: %v", waiter, err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		default:
			runtime.Gosched()
		}
	}
}
