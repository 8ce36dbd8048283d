package sqlitedriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/hopper-go/hopper/driver"
	hmigrations "github.com/hopper-go/hopper/internal/migrations"
)

// migrationFS holds the schema migrations, one file per version, named
// NNNN_description.sql and applied in version order.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are the embedded migrations in version order.
var migrations = hmigrations.MustLoad(migrationFS, "migrations", "sqlitedriver")

// latestVersion is the schema version this binary knows.
func latestVersion() int { return len(migrations) }

// createVersionTable creates the table that records applied migrations.
const createVersionTable = `CREATE TABLE IF NOT EXISTS hopper_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at INTEGER NOT NULL
)`

// ErrSchemaTooNew is wrapped by the error returned for a database whose
// schema is newer than this binary knows.
var ErrSchemaTooNew = errors.New("sqlitedriver: database schema is newer than this binary")

// checkExists refuses, with an error wrapping driver.ErrNoDatabase, a path
// where no file exists or a file without hopper's schema (Options.MustExist).
// It reads the file through a read-only connection, so it writes nothing to
// a file that is not hopper's.
func checkExists(abs string) error {
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", driver.ErrNoDatabase, abs)
	}
	if err != nil {
		return fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	if st.IsDir() {
		return fmt.Errorf("sqlitedriver: open %s: is a directory", abs)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=ro")
	if err != nil {
		return fmt.Errorf("sqlitedriver: open %s: %w", abs, err)
	}
	defer db.Close()
	v, err := readVersion(context.Background(), db)
	if err != nil {
		return fmt.Errorf("sqlitedriver: read %s: %w", abs, err)
	}
	if v == 0 {
		return fmt.Errorf("%w: %s holds no hopper schema", driver.ErrNoDatabase, abs)
	}
	return nil
}

// checkNotNewer refuses a stored schema version this binary does not know.
func checkNotNewer(v int) error {
	if v > latestVersion() {
		return fmt.Errorf("%w: the database is at schema version %d but this binary knows versions up to %d; upgrade hopper",
			ErrSchemaTooNew, v, latestVersion())
	}
	return nil
}

// readVersion returns the highest applied migration, 0 for a database with
// no hopper schema.
func readVersion(ctx context.Context, q querier) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'hopper_migrations'`)
	if err != nil {
		return 0, err
	}
	var n int
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, err
		}
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	rows, err = q.QueryContext(ctx, `SELECT coalesce(max(version), 0) FROM hopper_migrations`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var v int
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
	}
	return v, rows.Close()
}

// migrate applies the missing migrations through q, which must be a write
// transaction (so concurrent migrators serialise). A newer schema is refused.
func migrate(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, createVersionTable); err != nil {
		return fmt.Errorf("sqlitedriver: migrate: %w", err)
	}
	v, err := readVersion(ctx, q)
	if err != nil {
		return fmt.Errorf("sqlitedriver: migrate: read version: %w", err)
	}
	if err := checkNotNewer(v); err != nil {
		return err
	}
	for _, m := range migrations[v:] {
		if _, err := q.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("sqlitedriver: migrate to version %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO hopper_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("sqlitedriver: migrate to version %d: record: %w", m.Version, err)
		}
	}
	return nil
}
