package pgdriver

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	hmigrations "github.com/hopper-go/hopper/internal/migrations"
)

// DefaultSchema is the schema the driver uses when Options.Schema is empty.
const DefaultSchema = "hopper"

// ErrSchemaTooNew is wrapped by the error returned for a database whose
// hopper schema is newer than this binary knows.
var ErrSchemaTooNew = errors.New("pgdriver: database schema is newer than this binary")

// schemaName is what a schema name must look like: an unquoted-style
// identifier of at most 48 bytes (so schema-prefixed notification channels
// fit PostgreSQL's 63-byte names), not in the reserved pg_ namespace.
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// validateSchema refuses a schema name the driver cannot use safely.
func validateSchema(name string) error {
	if !schemaName.MatchString(name) {
		return fmt.Errorf("pgdriver: invalid schema name %q: use 1 to 48 letters, digits and underscores, not starting with a digit", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "pg_") {
		return fmt.Errorf("pgdriver: invalid schema name %q: the pg_ prefix is reserved by PostgreSQL", name)
	}
	return nil
}

// migrationFS holds the schema migrations, one file per version, named
// NNNN_description.sql and applied in version order.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are the embedded migrations in version order.
var migrations = hmigrations.MustLoad(migrationFS, "migrations", "pgdriver")

// SchemaVersion is the newest schema version this binary knows and migrates
// to.
func SchemaVersion() int { return len(migrations) }

// migrateLockKey is the advisory lock that serialises migrations of one
// schema across processes.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hopper/pgdriver/migrate:" + schema))
	return int64(h.Sum64())
}

// Migrate brings the driver's schema up to SchemaVersion: it creates the
// schema if needed and applies the embedded migrations it lacks, all in one
// transaction under an advisory lock, so processes starting together do not
// race. A schema newer than this binary knows is refused with an error
// wrapping ErrSchemaTooNew. Migrating an up-to-date schema changes nothing.
func (d *Driver) Migrate(ctx context.Context) error {
	return d.migrate(ctx, SchemaVersion())
}

// MinServerVersion is the oldest PostgreSQL the driver runs on, as
// server_version_num: 13, for xid8 and pg_current_xact_id (the change
// feed's ordering keys).
const MinServerVersion = 130000

// checkServerVersion refuses a server older than MinServerVersion, whose
// first migration would otherwise fail on a missing function.
func checkServerVersion(num int) error {
	if num >= MinServerVersion {
		return nil
	}
	version := fmt.Sprintf("%d.%d", num/10000, num%10000)
	if num < 100000 { // before 10: major.minor.patch
		version = fmt.Sprintf("%d.%d.%d", num/10000, num/100%100, num%100)
	}
	return fmt.Errorf("pgdriver: PostgreSQL %s is too old: hopper needs PostgreSQL 13 or newer", version)
}

// migrate applies the embedded migrations the schema lacks up to version
// upTo (tests stop short of the newest to check upgrades in place).
func (d *Driver) migrate(ctx context.Context, upTo int) error {
	if d.closed.Load() {
		return driverClosed("migrate")
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("pgdriver: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var server int
	if err := tx.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&server); err != nil {
		return fmt.Errorf("pgdriver: migrate: server version: %w", err)
	}
	if err := checkServerVersion(server); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey(d.schema)); err != nil {
		return fmt.Errorf("pgdriver: migrate: lock: %w", err)
	}
	q := d.q.schema
	// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the database
	// even when the schema exists, so a schema an operator made is left be.
	var haveSchema bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, d.schema).Scan(&haveSchema); err != nil {
		return fmt.Errorf("pgdriver: migrate: look up schema %s: %w", q, err)
	}
	if !haveSchema {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+q); err != nil {
			return fmt.Errorf("pgdriver: migrate: create schema %s: %w", q, err)
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.hopper_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("pgdriver: migrate: create version table: %w", err)
	}
	cur, err := storedVersion(ctx, tx, q)
	if err != nil {
		return err
	}
	if err := checkNotNewer(d.schema, cur); err != nil {
		return err
	}
	for _, m := range migrations[min(cur, upTo):upTo] {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.SQL, "{schema}", q)); err != nil {
			return fmt.Errorf("pgdriver: migrate schema %s to version %d (%s): %w", q, m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+q+`.hopper_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("pgdriver: migrate: record version %d: %w", m.Version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgdriver: migrate: commit: %w", err)
	}
	return nil
}

// checkVersion refuses a schema newer than this binary knows without
// changing anything; a missing or older schema passes (Migrate brings it
// up). It serves Options.NoMigrate.
func (d *Driver) checkVersion(ctx context.Context) error {
	var exists bool
	err := d.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, d.q.schema+".hopper_migrations").Scan(&exists)
	if err != nil {
		return fmt.Errorf("pgdriver: check schema version: %w", err)
	}
	if !exists {
		return nil
	}
	cur, err := storedVersion(ctx, d.pool, d.q.schema)
	if err != nil {
		return err
	}
	return checkNotNewer(d.schema, cur)
}

// storedVersion returns the highest applied migration of a schema.
func storedVersion(ctx context.Context, q querier, schema string) (int, error) {
	var cur int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+schema+`.hopper_migrations`).Scan(&cur); err != nil {
		return 0, fmt.Errorf("pgdriver: read schema version: %w", err)
	}
	return cur, nil
}

// SchemaVersion returns the version of the schema stored in the database (0
// when the schema or its version table does not exist yet) and the latest
// version this binary knows.
func (d *Driver) SchemaVersion(ctx context.Context) (stored, known int, err error) {
	if d.closed.Load() {
		return 0, 0, driverClosed("schema version")
	}
	var exists bool
	if err := d.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, d.q.schema+`.hopper_migrations`).Scan(&exists); err != nil {
		return 0, 0, fmt.Errorf("pgdriver: read schema version: %w", err)
	}
	if !exists {
		return 0, SchemaVersion(), nil
	}
	v, err := storedVersion(ctx, d.pool, d.q.schema)
	return v, SchemaVersion(), err
}

// checkNotNewer refuses a stored schema version this binary does not know.
func checkNotNewer(schema string, v int) error {
	if v > SchemaVersion() {
		return fmt.Errorf("%w: schema %q is at version %d but this binary knows versions up to %d; upgrade hopper",
			ErrSchemaTooNew, schema, v, SchemaVersion())
	}
	return nil
}
