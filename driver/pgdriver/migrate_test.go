package pgdriver

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
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
	require.Equal(t, []string{"change_sets", "changes", "concurrency_keys", "feed_cursors", "gate_queues", "gate_waits", "gates", "groups", "hooks", "hopper_migrations", "jobs", "keys", "leaders", "queues",
		"run_events", "runs", "schedules", "stream_chunks", "workers"}, tables)
	require.Equal(t, "postgres", d.Name())
}

func TestMigrateIdempotentReopen(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	j := newJob("q")
	insert(t, d.Executor(), j)

	again, err := New(pool, &Options{Schema: d.schema})
	require.NoError(t, err, "reopening a migrated schema")
	defer again.Close()
	require.NoError(t, again.Migrate(ctx), "migrating again")
	got, err := again.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
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
	stored, known, err := d.SchemaVersion(t.Context())
	require.NoError(t, err, "the version of a schema not made yet")
	require.Equal(t, 0, stored)
	require.Equal(t, SchemaVersion(), known)
	require.NoError(t, d.Migrate(t.Context()))
	stored, _, err = d.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, SchemaVersion(), stored, "the version after migrating")
	insert(t, d.Executor(), newJob("q"))
}

// TestMustExist: with MustExist, a schema without hopper's tables is
// refused and not created; an existing one opens.
func TestMustExist(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	_, err := New(pool, &Options{Schema: schema, MustExist: true})
	require.ErrorIs(t, err, driver.ErrNoDatabase)
	require.Contains(t, err.Error(), schema, "the error names the schema")
	var exists bool
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists))
	require.False(t, exists, "MustExist creates nothing")
	d, err := New(pool, &Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	d, err = New(pool, &Options{Schema: schema, MustExist: true})
	require.NoError(t, err, "an existing schema opens")
	require.NoError(t, d.Close())
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
	insert(t, d.Executor(), newJob("q"))
	pool := d.Pool()
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "closing twice is harmless")
	require.Error(t, pool.Ping(ctx), "Close closes the pool Open made")
	_, err = d.Executor().JobGet(ctx, &driver.JobGetParams{ID: "x"})
	require.ErrorIs(t, err, driver.ErrClosed)
	require.True(t, errors.Is(d.Migrate(ctx), driver.ErrClosed))

	if strings.HasPrefix(url, "postgres://") {
		d, err = Open(ctx, "postgresql://"+strings.TrimPrefix(url, "postgres://"), &Options{Schema: schema})
		require.NoError(t, err, "postgresql:// works too")
		d.Close()
	}
}

// TestMigrateFromVersion1 makes a schema at version 1 with a job in it,
// then checks that the driver upgrades it in place and that the workflow
// tables work.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	ctx := t.Context()
	old, err := New(pool, &Options{Schema: schema, NoMigrate: true})
	require.NoError(t, err)
	defer old.Close()
	require.NoError(t, old.migrate(ctx, 1))
	version := func() int {
		var v int
		require.NoError(t, pool.QueryRow(ctx, `SELECT max(version) FROM `+quoteIdent(schema)+`.hopper_migrations`).Scan(&v))
		return v
	}
	require.Equal(t, 1, version())
	var runs bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, quoteIdent(schema)+".runs").Scan(&runs))
	require.False(t, runs, "version 1 has no workflow tables")
	// A job as version 1 stores it (today's insert names later columns).
	j := newJob("q")
	_, err = pool.Exec(ctx, `INSERT INTO `+quoteIdent(schema)+`.jobs (id, type, queue, state, queued_at, run_at, retry, group_id, input)
		VALUES ($1, 't', 'q', 'pending', $2, $2, '{"attempts":3,"backoff":"exponential","base":1000000000,"factor":2}', $1, '{}')`, j.ID, testBase)
	require.NoError(t, err)

	d, err := New(pool, &Options{Schema: schema})
	require.NoError(t, err, "upgrading a version 1 schema")
	defer d.Close()
	require.Equal(t, SchemaVersion(), version())
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+quoteIdent(schema)+`.hopper_migrations`).Scan(&n))
	require.Equal(t, SchemaVersion(), n, "each version is recorded once")
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err, "jobs survive the upgrade")
	require.Equal(t, j.ID, got.ID)

	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: 1, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: j.ID, Workflow: "wf", Status: hoppertype.RunRunning, CreatedAt: testBase}}))
	require.NoError(t, d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: j.ID, LeaseToken: claimed[0].LeaseToken,
		Events: []*hoppertype.RunEvent{{Attempt: 1, Seq: 1, Kind: "start", At: testBase}}}))
	require.NoError(t, d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: "t", RunID: j.ID, CreatedAt: testBase}}))
	chunks, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: j.ID, Chunks: [][]byte{[]byte("x")}, Now: testBase})
	require.NoError(t, err)
	require.Equal(t, int64(0), chunks[0].Offset)
	runs2, err := d.Executor().RunList(ctx, &driver.RunListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, runs2, 1)

	// The binary that knew only version 1 would now be refused; the
	// current one reopens the upgraded schema without change.
	again, err := New(pool, &Options{Schema: schema})
	require.NoError(t, err)
	again.Close()
	require.Equal(t, SchemaVersion(), version())
}

// TestServerVersionCheck: a server older than PostgreSQL 13 is refused by
// name (the schema needs xid8 and pg_current_xact_id), newer ones pass, and
// the test server passes the check Migrate makes.
func TestServerVersionCheck(t *testing.T) {
	for num, ok := range map[int]int{120017: 0, 90624: 0, 130000: 1, 150020: 1, 170002: 1} {
		err := checkServerVersion(num)
		if ok == 1 && err != nil {
			t.Errorf("%d refused: %v", num, err)
		}
		if ok == 0 && (err == nil || !strings.Contains(err.Error(), "PostgreSQL 13 or newer")) {
			t.Errorf("%d: got %v, want a refusal naming PostgreSQL 13", num, err)
		}
	}
	for num, name := range map[int]string{120017: "12.17", 90624: "9.6.24"} {
		if err := checkServerVersion(num); err == nil || !strings.Contains(err.Error(), "PostgreSQL "+name+" is too old") {
			t.Errorf("%s: %v", name, err)
		}
	}
	pool := newPool(t, 1)
	d := newTestDriver(t, pool)
	require.NoError(t, d.Migrate(t.Context()))
}

// xid8MaxRe finds max() or min() over a change key (an xid8 column named
// tx): PostgreSQL has those aggregates for xid8 only from version 15, and
// the driver runs on 13.
var xid8MaxRe = regexp.MustCompile(`(?i)\b(max|min)\(\s*(\w+\.)?tx\s*\)`)

// TestNoXid8Aggregates keeps the change keys' look-ups runnable on
// PostgreSQL 13 and 14: no trigger function of the schema and no statement
// of the driver aggregates an xid8 key.
func TestNoXid8Aggregates(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	rows, err := pool.Query(t.Context(), `SELECT p.proname, p.prosrc FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, d.schema)
	require.NoError(t, err)
	var name, src string
	funcs := 0
	_, err = pgx.ForEachRow(rows, []any{&name, &src}, func() error {
		funcs++
		require.False(t, xid8MaxRe.MatchString(src), "function %s aggregates an xid8 key", name)
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, funcs, "the schema's trigger functions were read")

	statements := 0
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.String:
			statements++
			require.False(t, xid8MaxRe.MatchString(v.String()), "statement %s aggregates an xid8 key", path)
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	}
	walk(reflect.ValueOf(d.q).Elem(), "queries")
	require.Greater(t, statements, 50, "the driver's statements were read")
}

// TestMigrateScheduleFirstSeen: version 13 gives the schedules stored
// before it the earliest time they are known to have been seen, and none
// to a name that was only paused.
func TestMigrateScheduleFirstSeen(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	ctx := t.Context()
	old, err := New(pool, &Options{Schema: schema, NoMigrate: true})
	require.NoError(t, err)
	defer old.Close()
	require.NoError(t, old.migrate(ctx, 12))
	at := func(h int) time.Time { return testBase.Add(time.Duration(h) * time.Hour) }
	_, err = pool.Exec(ctx, `INSERT INTO `+quoteIdent(schema)+`.schedules
		(name, spec, paused, occurrences, last_at, next_at, updated_at, def_kind, def_at) VALUES
		('fired', '@hourly', false, 3, $2, $3, $4, '', NULL),
		('registered', '@hourly', false, 0, NULL, $3, $4, '', NULL),
		('defined', '@hourly', false, 0, NULL, $3, $4, 'job', $1),
		('paused', '', true, 0, NULL, NULL, $4, '', NULL)`, at(1), at(2), at(3), at(4))
	require.NoError(t, err)

	d, err := New(pool, &Options{Schema: schema})
	require.NoError(t, err)
	defer d.Close()
	rows, err := d.Executor().ScheduleList(ctx, &driver.ScheduleListParams{})
	require.NoError(t, err)
	got := map[string]time.Time{}
	for _, r := range rows {
		got[r.Name] = r.FirstSeenAt
	}
	require.True(t, got["fired"].Equal(at(2)), "its latest occurrence: %s", got["fired"])
	require.True(t, got["registered"].Equal(at(4)), "its last update: %s", got["registered"])
	require.True(t, got["defined"].Equal(at(1)), "its definition: %s", got["defined"])
	require.True(t, got["paused"].IsZero(), "only paused: %s", got["paused"])
}
