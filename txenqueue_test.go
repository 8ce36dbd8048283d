package hopper_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// TestEnqueueTxSQLite: a job enqueued through the caller's transaction
// exists if and only if that transaction commits, and then runs.
func TestEnqueueTxSQLite(t *testing.T) {
	t.Parallel()
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "tx.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	add := hopper.Define("add", addHandler, nil)
	c := newClient(t, hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	db := d.DB()
	_, err = db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)`)
	require.NoError(t, err)

	// Rolled back: neither the order nor the job exists.
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (1, 5)`)
	require.NoError(t, err)
	h, err := add.EnqueueTx(ctx, c, tx, addIn{A: 2, B: 3}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	_, err = c.JobGet(ctx, h.ID())
	require.ErrorIs(t, err, hopper.ErrNotFound)

	// Committed: both exist, and the job runs.
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (2, 7)`)
	require.NoError(t, err)
	h, err = add.EnqueueTx(ctx, c, tx, addIn{A: 3, B: 4}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v)

	// A transaction of the wrong kind is refused, storing nothing.
	_, err = add.EnqueueTx(ctx, c, "not a tx", addIn{}, nil)
	require.ErrorIs(t, err, driver.ErrTxType)
	_, err = add.EnqueueTx(ctx, c, nil, addIn{}, nil)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}

func TestEnqueueTxUnsupported(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	add := hopper.Define("add", addHandler, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	_, err = add.EnqueueTx(context.Background(), c, struct{}{}, addIn{}, nil)
	require.ErrorIs(t, err, driver.ErrNotImplemented)
}

// TestEnqueueTxPostgres: on PostgreSQL a job enqueued through the caller's
// pgx.Tx or *sql.Tx (pgx's database/sql driver) exists if and only if that
// transaction commits, and then runs.
func TestEnqueueTxPostgres(t *testing.T) {
	url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL transactional enqueue test")
	}
	t.Parallel()
	d := openPostgres(t, url).(*pgdriver.Driver)
	add := hopper.Define("add", addHandler, nil)
	c := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	pool := d.Pool()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })

	type txn struct {
		name     string
		begin    func() any
		rollback func(any)
		commit   func(any)
	}
	for _, k := range []txn{
		{"pgx.Tx",
			func() any { tx, err := pool.Begin(ctx); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Rollback(ctx)) },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Commit(ctx)) }},
		{"*sql.Tx",
			func() any { tx, err := db.BeginTx(ctx, nil); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Rollback()) },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Commit()) }},
	} {
		tx := k.begin()
		h, err := add.EnqueueTx(ctx, c, tx, addIn{A: 2, B: 3}, nil)
		require.NoError(t, err, k.name)
		k.rollback(tx)
		_, err = c.JobGet(ctx, h.ID())
		require.ErrorIs(t, err, hopper.ErrNotFound, "%s: a rolled-back enqueue leaves no job", k.name)

		tx = k.begin()
		h, err = add.EnqueueTx(ctx, c, tx, addIn{A: 3, B: 4}, nil)
		require.NoError(t, err, k.name)
		k.commit(tx)
		v, err := h.Result(ctx)
		require.NoError(t, err, k.name)
		require.Equal(t, 7, v, k.name)
	}
}
