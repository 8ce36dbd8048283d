package sqlitedriver

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	hmigrations "github.com/hopper-go/hopper/internal/migrations"
)

func TestMigrateFreshAndReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stored, known, err := d.SchemaVersion(ctx)
	if err != nil || stored != known || known != latestVersion() {
		t.Fatalf("SchemaVersion = %d, %d, %v; want %d, %d", stored, known, err, latestVersion(), latestVersion())
	}
	for _, table := range []string{"jobs", "groups", "keys", "leaders", "queues", "hopper_meta", "hopper_migrations",
		"runs", "run_events", "hooks", "stream_chunks"} {
		var n int
		if err := d.rdb.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", table, n, err)
		}
	}
	insert(t, d.Executor(), newJob("q"))
	d.Close()

	// Reopening is a no-op: same version, one row per migration, data kept.
	d = openAt(t, path, nil)
	var rows int
	if err := d.rdb.QueryRow(`SELECT count(*) FROM hopper_migrations`).Scan(&rows); err != nil || rows != latestVersion() {
		t.Fatalf("hopper_migrations has %d rows (%v), want %d", rows, err, latestVersion())
	}
	if n := countJobs(t, d); n != 1 {
		t.Fatalf("reopened database has %d jobs, want 1", n)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on a current schema: %v", err)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	future := latestVersion() + 7
	if _, err := d.wdb.Exec(`INSERT INTO hopper_migrations (version, name, applied_at) VALUES (?, 'from-the-future', 0)`, future); err != nil {
		t.Fatal(err)
	}
	d.Close()
	for _, opts := range []*Options{nil, {NoMigrate: true}} {
		d, err := Open(path, opts)
		if err == nil {
			d.Close()
			t.Fatalf("Open(%+v) accepted a schema from the future", opts)
		}
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Errorf("error does not wrap ErrSchemaTooNew: %v", err)
		}
		for _, v := range []int{future, latestVersion()} {
			if !strings.Contains(err.Error(), strconv.Itoa(v)) {
				t.Errorf("error does not name version %d: %v", v, err)
			}
		}
	}
}

func TestNoMigrateOnEmptyFile(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{NoMigrate: true})
	ctx := context.Background()
	_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: nil})
	if err == nil || !strings.Contains(err.Error(), "version 0") || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("insert on an unmigrated database: %v; want a clear schema error", err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: "x"}); err == nil || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("read on an unmigrated database: %v; want a clear schema error", err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	insert(t, d.Executor(), newJob("q"))
	if n := countJobs(t, d); n != 1 {
		t.Fatalf("%d jobs after migrate and insert, want 1", n)
	}
}

// TestMigrateUpgradesInPlace adds a migration the binary "learns" later and
// checks that an existing database moves forward keeping its data. It
// replaces the package's migration list, so it does not run in parallel.
func TestMigrateUpgradesInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hopper.db")
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, d.Executor(), newJob("q"))
	d.Close()

	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(append([]hmigrations.Migration(nil), saved...), hmigrations.Migration{
		Version: len(saved) + 1, Name: "test_upgrade", SQL: `CREATE TABLE upgrade_marker (x INTEGER)`,
	})

	d = openAt(t, path, nil)
	stored, _, err := d.SchemaVersion(context.Background())
	if err != nil || stored != len(saved)+1 {
		t.Fatalf("after upgrade the schema is at %d (%v), want %d", stored, err, len(saved)+1)
	}
	if _, err := d.rdb.Exec(`SELECT count(*) FROM upgrade_marker`); err != nil {
		t.Fatalf("upgrade did not run: %v", err)
	}
	if n := countJobs(t, d); n != 1 {
		t.Fatalf("upgrade lost data: %d jobs", n)
	}
}

func TestOpenURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		url, path string
		opts      Options
	}{
		{"sqlite:///abs/path.db", "/abs/path.db", Options{}},
		{"sqlite://rel/path.db", "rel/path.db", Options{}},
		{"sqlite:path.db", "path.db", Options{}},
		{"plain/path.db", "plain/path.db", Options{}},
		{"sqlite:///x.db?synchronous=NORMAL&busy_timeout=2s&read_conns=2&no_migrate=true", "/x.db",
			Options{Synchronous: "NORMAL", BusyTimeout: 2e9, ReadConns: 2, NoMigrate: true}},
	}
	for _, c := range cases {
		path, opts, err := parseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		var got Options
		if opts != nil {
			got = *opts
		}
		if path != c.path || got != c.opts {
			t.Errorf("%s: got %q %+v, want %q %+v", c.url, path, got, c.path, c.opts)
		}
	}
	for _, bad := range []string{"sqlite://", "sqlite:///x.db?nope=1", "sqlite:///x.db?synchronous=OFF", ""} {
		if d, err := OpenURL(bad); err == nil {
			d.Close()
			t.Errorf("OpenURL(%q) accepted", bad)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustOpen did not panic on an empty path")
			}
		}()
		MustOpen("", nil)
	}()
	d, err := OpenURL("sqlite://" + filepath.Join(dir, "u.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Name() != "sqlite" || d.Path() != filepath.Join(dir, "u.db") {
		t.Fatalf("Name %q Path %q", d.Name(), d.Path())
	}
	var mode, sync string
	if err := d.wdb.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if err := d.wdb.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != "2" {
		t.Fatalf("synchronous %q (want 2 = FULL), %v", sync, err)
	}
}

// TestRefusesNetworkFilesystem replaces the filesystem probe, so it does not
// run in parallel.
func TestRefusesNetworkFilesystem(t *testing.T) {
	saved := fsType
	t.Cleanup(func() { fsType = saved })
	fsType = func(string) (uint32, error) { return 0x6969, nil }
	d, err := Open(filepath.Join(t.TempDir(), "hopper.db"), nil)
	if err == nil {
		d.Close()
		t.Fatal("Open accepted a database on NFS")
	}
	if !strings.Contains(err.Error(), "network filesystem") || !strings.Contains(err.Error(), "NFS") {
		t.Fatalf("unclear error: %v", err)
	}
}

func TestClosedDriver(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil)
	d.Close()
	ctx := context.Background()
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: "x"}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("JobGet after Close: %v", err)
	}
	if err := d.Executor().InTx(ctx, func(context.Context, driver.Executor) error { return nil }); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("InTx after Close: %v", err)
	}
	var tx *sql.Tx
	if _, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{}); !errors.Is(err, driver.ErrTxType) {
		t.Errorf("JobInsertManyTx with a nil *sql.Tx: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestMustExist: with MustExist, Open refuses a missing file and a file
// without hopper's schema, and leaves both as they were; a hopper database
// opens.
func TestMustExist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if d, err := Open(missing, &Options{MustExist: true}); !errors.Is(err, driver.ErrNoDatabase) || !strings.Contains(err.Error(), missing) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("missing file: %v; want driver.ErrNoDatabase naming the path", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MustExist created %s: %v", missing, err)
	}

	// A SQLite file of someone else's, in rollback-journal mode.
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Open(foreign, &Options{MustExist: true}); !errors.Is(err, driver.ErrNoDatabase) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("a file without hopper's schema: %v; want driver.ErrNoDatabase", err)
	}
	if after, err := os.ReadFile(foreign); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("MustExist changed a file that is not hopper's (%v)", err)
	}
	if _, err := os.Stat(foreign + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MustExist put a foreign file in WAL mode: %v", err)
	}

	ok := filepath.Join(dir, "ok.db")
	d, err := Open(ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, err = Open(ok, &Options{MustExist: true})
	if err != nil {
		t.Fatalf("a hopper database: %v", err)
	}
	d.Close()
}

// TestMigrateScheduleFirstSeen: version 10 gives the schedules stored
// before it the earliest time they are known to have been seen, and none
// to a name that was only paused. It replaces the package's migration
// list, so it does not run in parallel.
func TestMigrateScheduleFirstSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hopper.db")
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = saved[:9]
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, time.March, 14, 15, 0, 0, 0, time.UTC)
	at := func(h int) int64 { return base.Add(time.Duration(h) * time.Hour).UnixMicro() }
	if _, err := d.wdb.Exec(`INSERT INTO schedules (name, spec, paused, occurrences, last_at, next_at, updated_at, def_kind, def_at) VALUES
		('fired', '@hourly', 0, 3, ?2, ?3, ?4, '', NULL),
		('registered', '@hourly', 0, 0, NULL, ?3, ?4, '', NULL),
		('defined', '@hourly', 0, 0, NULL, ?3, ?4, 'job', ?1),
		('paused', '', 1, 0, NULL, NULL, ?4, '', NULL)`, at(1), at(2), at(3), at(4)); err != nil {
		t.Fatal(err)
	}
	d.Close()
	migrations = saved

	d = openAt(t, path, nil)
	rows, err := d.Executor().ScheduleList(context.Background(), &driver.ScheduleListParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		if !r.FirstSeenAt.IsZero() {
			got[r.Name] = r.FirstSeenAt.UnixMicro()
		}
	}
	want := map[string]int64{"fired": at(2), "registered": at(4), "defined": at(1)}
	if len(got) != len(want) || got["fired"] != want["fired"] || got["registered"] != want["registered"] || got["defined"] != want["defined"] {
		t.Fatalf("first seen after the upgrade: %v, want %v", got, want)
	}
}
