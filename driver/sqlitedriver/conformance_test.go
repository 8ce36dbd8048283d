package sqlitedriver

import (
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/drivertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		// NORMAL keeps the suite fast; durability is not what it checks.
		return openTemp(t, &Options{Synchronous: "NORMAL"})
	})
}
