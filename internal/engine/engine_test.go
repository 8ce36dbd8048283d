package engine

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/internal/hclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testIDs atomic.Int64

// testConfig is a configuration with every default set, over drv.
func testConfig(drv driver.Driver) Config {
	return Config{
		Driver:   drv,
		Clock:    hclock.Real{},
		Logger:   slog.New(slog.DiscardHandler),
		WorkerID: "test-worker",
		IDGenerator: func() string {
			return time.Now().UTC().Format("20060102T150405.000000000") + "-" + string(rune('a'+testIDs.Add(1)%26))
		},
		MaxWorkers:        100,
		FetchBatch:        500,
		Visibility:        30 * time.Second,
		HeartbeatInterval: 10 * time.Second,
		PollInterval:      time.Second,
		RescueInterval:    5 * time.Second,
		WaitPollInterval:  250 * time.Millisecond,
		LeaderTTL:         15 * time.Second,
		GateRecheck:       time.Minute,
		Retention:         Retention{Succeeded: 24 * time.Hour, Dead: 24 * time.Hour, Expired: 24 * time.Hour, Cancelled: 24 * time.Hour},
		DefaultQueue:      "default",
	}
}

// newTestEngine returns an engine over drv with the defaults, closed at
// the end of the test.
func newTestEngine(t *testing.T, drv driver.Driver) *Engine {
	t.Helper()
	e := New(testConfig(drv))
	t.Cleanup(func() {
		_ = e.Stop(context.Background())
		e.Close()
	})
	return e
}
