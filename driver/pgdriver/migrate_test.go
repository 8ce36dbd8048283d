package pgdriver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

func TestMigrateFresh(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()

	var version int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(version) FROM `+quoteIdent(d.schema)+`.hopper_migrations`).Scan(&version))
	require.Equal(t, SchemaVersion(), version)
	var tables []string
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, d.schema)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"groups", "hopper_migrations", "jobs", "keys", "leaders", "queues"}, tables)
	require.Equal(t, "postgres", d.Name())
}

func TestMigrateIdempotentReopen(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	j := newJob("q")
	insert(t, d, j)

	again, err := New(pool, &Options{Schema: d.schema})
	require.NoError(t, err, "reopening a migrated schema")
	defer again.Close()
	require.NoError(t, again.Migrate(ctx), "migrating again")
	got, err := again.JobGet(ctx, j.ID)
	require.NoError(t, err, "data survives a reopen")
	require.Equal(t, j.ID, got.ID)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+quoteIdent(d.schema)+`.hopper_migrations`).Scan(&n))
	require.Equal(t, SchemaVersion(), n, "each version is recorded once")
}

func TestMigrateConcurrentStarters(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 8)
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	const starters = 6
	var wg sync.WaitGroup
	errs := make([]error, starters)
	start := make(chan struct{})
	for i := range starters {
		wg.Go(func() {
			<-start
			d, err := New(pool, &Options{Schema: schema})
			if err == nil {
				d.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "starter %d", i)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	future := SchemaVersion() + 7
	_, err := pool.Exec(ctx, `INSERT INTO `+quoteIdent(d.schema)+`.hopper_migrations (version, name) VALUES ($1, 'from the future')`, future)
	require.NoError(t, err)

	for _, opts := range []*Options{{Schema: d.schema}, {Schema: d.schema, NoMigrate: true}} {
		_, err = New(pool, opts)
		require.ErrorIs(t, err, ErrSchemaTooNew, "NoMigrate=%v", opts.NoMigrate)
		require.Contains(t, err.Error(), fmt.Sprintf("version %d", future), "the error names the stored version")
		require.Contains(t, err.Error(), fmt.Sprintf("up to %d", SchemaVersion()), "the error names the known version")
	}
	require.ErrorIs(t, d.Migrate(ctx), ErrSchemaTooNew)
}

func TestNoMigrate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	d, err := New(pool, &Options{Schema: schema, NoMigrate: true})
	require.NoError(t, err, "a missing schema is fine without migrating")
	defer d.Close()
	var exists bool
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists))
	require.False(t, exists, "NoMigrate creates nothing")
	require.NoError(t, d.Migrate(t.Context()))
	insert(t, d, newJob("q"))
}

func TestSchemaNameValidation(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	for _, name := range []string{"bad-name", `a"b`, "1abc", "pg_mine", "with space", strings.Repeat("x", 49)} {
		_, err := New(pool, &Options{Schema: name})
		require.Error(t, err, "schema %q", name)
		require.Contains(t, err.Error(), "invalid schema name")
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	ctx := t.Context()
	_, err := Open(ctx, "mysql://u:secret@host/db", nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret", "the password is not echoed")

	schema := randomSchema()
	cleanup := newPool(t, 1)
	dropSchemaLater(t, cleanup, schema)
	d, err := Open(ctx, url, &Options{Schema: schema})
	require.NoError(t, err)
	insert(t, d, newJob("q"))
	pool := d.Pool()
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "closing twice is harmless")
	require.Error(t, pool.Ping(ctx), "Close closes the pool Open made")
	_, err = d.JobGet(ctx, "x")
	require.ErrorIs(t, err, driver.ErrClosed)
	require.True(t, errors.Is(d.Migrate(ctx), driver.ErrClosed))

	if strings.HasPrefix(url, "postgres://") {
		d, err = Open(ctx, "postgresql://"+strings.TrimPrefix(url, "postgres://"), &Options{Schema: schema})
		require.NoError(t, err, "postgresql:// works too")
		d.Close()
	}
}
