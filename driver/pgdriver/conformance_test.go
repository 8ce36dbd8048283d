package pgdriver

import (
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
)

// TestConformance runs the driver suite with a fresh schema per subtest, on
// one shared pool so the connection count stays low.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 12)
	drivertest.Run(t, func(t *testing.T) driver.Driver { return newTestDriver(t, pool) })
}
