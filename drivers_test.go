package hopper_test

import (
	"path/filepath"
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// driverCase opens a fresh, empty store for a test.
type driverCase struct {
	name string
	open func(t *testing.T) driver.Driver
}

// testDrivers are the stores every engine test runs on.
func testDrivers() []driverCase {
	return []driverCase{
		{"memory", func(t *testing.T) driver.Driver {
			d := memdriver.New()
			t.Cleanup(func() { _ = d.Close() })
			return d
		}},
		{"sqlite", func(t *testing.T) driver.Driver {
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
}

// forEachDriver runs an engine test once per driver, in parallel.
func forEachDriver(t *testing.T, test func(t *testing.T, newDriver func(*testing.T) driver.Driver)) {
	t.Parallel()
	for _, dc := range testDrivers() {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			test(t, dc.open)
		})
	}
}
