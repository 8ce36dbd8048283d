package hopper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// driverCase opens a fresh, empty store for a test.
type driverCase struct {
	name string
	open func(t testing.TB) driver.Driver
}

// testDrivers are the stores every engine test runs on.
func testDrivers() []driverCase {
	cases := []driverCase{
		{"memory", func(t testing.TB) driver.Driver {
			d := memdriver.New()
			t.Cleanup(func() { _ = d.Close() })
			return d
		}},
		{"sqlite", func(t testing.TB) driver.Driver {
			// NORMAL: these tests are about the engine; the SQLite
			// driver's own tests cover durability with FULL.
			d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "hopper.db"), &sqlitedriver.Options{Synchronous: "NORMAL"})
			if err != nil {
				t.Fatalf("open sqlite: %v", err)
			}
			t.Cleanup(func() { _ = d.Close() })
			return d
		}},
	}
	if url := os.Getenv("HOPPER_TEST_POSTGRES_URL"); url != "" {
		cases = append(cases, driverCase{"postgres", func(t testing.TB) driver.Driver { return openPostgres(t, url) }})
	}
	return cases
}

// openPostgres opens the driver on a fresh schema of the test database,
// dropped when the test ends.
func openPostgres(t testing.TB, url string) driver.Driver {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return openPostgresSchema(t, url, "hopper_engine_"+hex.EncodeToString(b))
}

// openPostgresSchema opens the driver on the named schema of the test
// database, dropped when the test ends.
func openPostgresSchema(t testing.TB, url, schema string) driver.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := pgdriver.Open(ctx, url, &pgdriver.Options{Schema: schema})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return d
}

// forEachDriver runs an engine test once per driver, in parallel.
func forEachDriver(t *testing.T, test func(t *testing.T, newDriver func(*testing.T) driver.Driver)) {
	t.Parallel()
	for _, dc := range testDrivers() {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			test(t, func(t *testing.T) driver.Driver { return dc.open(t) })
		})
	}
}

// baseExec is a driver's Executor embedded in a test's spy: a spy embeds
// the driver (for Name, Listen, Close) and its executor under this name,
// overrides the operations it watches, and is its own Executor:
//
//	type spy struct {
//		driver.Driver
//		baseExec
//	}
//	func (s *spy) Executor() driver.Executor { return s }
//
// made with &spy{Driver: d, baseExec: d.Executor()}.
type baseExec = driver.Executor
