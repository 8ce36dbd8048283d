package hopper_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// claimSpy counts the claims made through it that found nothing.
// Executor is the spy itself.
func (s *claimSpy) Executor() driver.Executor { return s }

type claimSpy struct {
	driver.Driver
	baseExec
	empty atomic.Int64
}

func (s *claimSpy) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	rows, err := s.baseExec.JobClaim(ctx, p)
	if err == nil && len(rows) == 0 {
		s.empty.Add(1)
	}
	return rows, err
}

// TestEnqueueWakesItsWorkersOnce: an enqueue wakes its own client's workers
// directly, and then announces the queue to every listener, itself
// included. Its own session skips that echo: heard, it only made the
// producer claim again and find nothing, once per job (and on SQLite the
// empty claim held the writer while the next enqueue waited).
func TestEnqueueWakesItsWorkersOnce(t *testing.T) { forEachDriver(t, testEnqueueWakesItsWorkersOnce) }

func testEnqueueWakesItsWorkersOnce(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	base := newDriver(t)
	spy := &claimSpy{Driver: base, baseExec: base.Executor()}
	started := make(chan struct{}, 1)
	job := hopper.Define("wake-once", func(context.Context, int) (hopper.None, error) {
		started <- struct{}{}
		return hopper.None{}, nil
	}, nil)
	// No fallback polls during the test: every claim follows a wake-up.
	c := newClient(t, hopper.Config{Driver: spy, MaxWorkers: 10, PollInterval: time.Hour})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	run := func() {
		_, err := job.Enqueue(ctx, c, 1, nil)
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the job never started")
		}
	}
	run() // the producer settles into its wait
	before := spy.empty.Load()
	const n = 40
	for range n {
		run()
	}
	run() // the last job's echo, if any, has been heard by now
	if empty := spy.empty.Load() - before; empty > n/4 {
		t.Fatalf("%d jobs, enqueued one at a time, took %d claims that found nothing", n, empty)
	}
}
