package pgdriver

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

func TestInsertTxRollback(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	j := newJob("tx-queue")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	res, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, j.ID, res[0].Job.ID)
	require.NoError(t, tx.Rollback(ctx))
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a rolled-back enqueue leaves no job")
}

func TestInsertTxCommitNotifies(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	sub, err := d.Listen(ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer sub.Close()

	j := newJob("tx-queue")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE app_data (v int)`)
	require.NoError(t, err, "the caller's own writes share the transaction")
	_, err = d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	require.NoError(t, err)

	// Before the commit, neither the job nor the notification is visible.
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	select {
	case p := <-sub.C():
		t.Fatalf("notification %q before the commit", p)
	default:
	}
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, "tx-queue", recv(t, sub), "workers wake when the caller commits")
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStatePending, got.State)
}

func TestInsertTxUniqueAndDuplicate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	first := newJob("q")
	first.UniqueKey = "k"
	insert(t, d.Executor(), first)

	second := newJob("q")
	second.UniqueKey = "k"
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{second}})
		require.NoError(t, err)
		require.True(t, res[0].Existing)
		require.Equal(t, first.ID, res[0].Job.ID)
		return nil
	})
	require.NoError(t, err)

	dup := newJob("q")
	dup.ID = first.ID
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q"), dup}})
		return err
	})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
}

func TestInsertTxWrongType(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	for _, tx := range []any{nil, "not a tx", (*sql.Tx)(nil), pgx.Tx(nil), pool} {
		_, err := d.JobInsertManyTx(t.Context(), tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q")}})
		require.ErrorIs(t, err, driver.ErrTxType, "%T", tx)
		_, err = d.JobGetTx(t.Context(), tx, &driver.JobGetParams{ID: "x"})
		require.ErrorIs(t, err, driver.ErrTxType, "%T", tx)
	}
}

// TestInsertSQLTx: a *sql.Tx opened through pgx's database/sql driver
// takes the same inserts: gone with a rollback, there (and announced) with
// a commit, unique keys and big batches included.
func TestInsertSQLTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ctx := t.Context()
	sub, err := d.Listen(ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer sub.Close()

	j := newJob("sqltx-queue")
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.False(t, res[0].Existing)
	require.NoError(t, tx.Rollback())
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a rolled-back enqueue leaves no job")

	first := newJob("sqltx-queue")
	first.UniqueKey = "k"
	insert(t, d.Executor(), first)
	keyed := newJob("sqltx-queue")
	keyed.UniqueKey = "k"
	many := []*hoppertype.JobRow{j, keyed}
	for range copyMinRows {
		many = append(many, newJob("sqltx-queue"))
	}
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `CREATE TEMP TABLE app_rows (v int)`)
	require.NoError(t, err, "the caller's own writes share the transaction")
	res, err = d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: many})
	require.NoError(t, err)
	require.Len(t, res, len(many))
	require.True(t, res[1].Existing, "the unique key's holder")
	require.Equal(t, first.ID, res[1].Job.ID)
	require.NoError(t, tx.Commit())
	require.Equal(t, "sqltx-queue", recv(t, sub), "workers wake when the caller commits")
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStatePending, got.State)
	for _, r := range res[2:] {
		_, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: r.Job.ID})
		require.NoError(t, err)
	}

	// A duplicate id fails the call before writing, so the caller's
	// transaction stays usable: JobGetTx reads the stored job through it,
	// and its own job, and it commits.
	dup := newJob("sqltx-queue")
	dup.ID = first.ID
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{dup}})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	got, err = d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: first.ID})
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	own := newJob("sqltx-queue")
	_, err = d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{own}})
	require.NoError(t, err)
	got, err = d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: own.ID})
	require.NoError(t, err)
	require.Equal(t, own.ID, got.ID)
	_, err = d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: "missing"})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.NoError(t, tx.Commit())
}

func TestTwoSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 6)
	a := newTestDriver(t, pool)
	b := newTestDriver(t, pool)
	ctx := t.Context()

	subA, err := a.Listen(ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer subA.Close()
	subB, err := b.Listen(ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer subB.Close()

	j := newJob("shared-name")
	insert(t, a.Executor(), j)
	require.NoError(t, a.Executor().Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: "from-a"}))
	require.NoError(t, b.Executor().Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: "from-b"}))
	require.Equal(t, "from-a", recv(t, subA))
	require.Equal(t, "from-b", recv(t, subB), "b hears its own notification, not a's")
	require.NoError(t, b.Executor().Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: "end"}))
	require.Equal(t, "end", recv(t, subB), "a's notification never reached b")

	_, err = b.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "b does not see a's jobs")
	rows, err := b.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "shared-name", Limit: 10, Now: testBase, LeaseExpiresAt: testBase, Worker: "w"})
	require.NoError(t, err)
	require.Empty(t, rows)
	insert(t, b.Executor(), j) // the same id is free in b
	rows, err = a.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "shared-name", Limit: 10, Now: testBase, LeaseExpiresAt: testBase, Worker: "w"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
}

func TestNotifyDeduplicatedInTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	sub, err := d.Listen(ctx, "dedupe")
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		for range 5 {
			require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: "dedupe", Payload: "q1"}))
		}
		require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: "dedupe", Payload: "q2"}))
		return tx.Notify(ctx, &driver.NotifyParams{Topic: "dedupe", Payload: "q1"})
	}))
	require.NoError(t, d.Executor().Notify(ctx, &driver.NotifyParams{Topic: "dedupe", Payload: "end"}))
	require.Equal(t, []string{"q1", "q2", "end"}, []string{recv(t, sub), recv(t, sub), recv(t, sub)},
		"one notification per distinct payload, in order, before later ones")

	err = d.Executor().Notify(ctx, &driver.NotifyParams{Topic: "dedupe", Payload: strings.Repeat("x", maxPayload)})
	require.Error(t, err, "an oversized payload is refused")
}

func TestLongTopicChannel(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	long := strings.Repeat("topic-", 20)
	require.LessOrEqual(t, len(d.channel(long)), maxChannel)
	require.NotEqual(t, d.channel(long), d.channel(long+"x"))
	sub, err := d.Listen(ctx, long)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, d.Executor().Notify(ctx, &driver.NotifyParams{Topic: long, Payload: "p"}))
	require.Equal(t, "p", recv(t, sub))
}
