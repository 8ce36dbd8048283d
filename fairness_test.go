package hopper_test

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/stretchr/testify/require"
)

// TestQueueFairness: a backlog on one queue does not starve another queue
// served by the same client. Every worker slot is held by a blocked job of
// the flooded queue; the test then frees one slot at a time and counts how
// many it had to free before the other queue's job started.
func TestQueueFairness(t *testing.T) { forEachDriver(t, testQueueFairness) }

func testQueueFairness(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	const (
		chunk   = 5_000
		workers = 2
		// turns bounds the slots freed before the lone job starts: slots
		// go to the producers in line in turn, a producer stands in line
		// once, and the lone queue's stands in line as soon as its job is
		// enqueued. Two queues have work, so the lone job gets the first
		// or the second slot freed (an idle queue's producer in line
		// passes the slot on at once).
		turns = 2
	)
	ctx := testCtx(t)
	type start struct{ bulk bool }
	starts := make(chan start, 16)
	// release frees one slot: one blocked bulk job returns. done, closed
	// when the test ends, lets every job through so Stop can drain.
	release, done := make(chan struct{}), make(chan struct{})
	started := func(s start) {
		select {
		case starts <- s:
		case <-done:
		}
	}
	bulk := hopper.Define("bulk", func(ctx context.Context, _ int) (int, error) {
		started(start{bulk: true})
		select {
		case <-release:
		case <-done:
		}
		return 0, nil
	}, &hopper.TypeOpts[int]{Queue: "bulk"})
	lone := hopper.Define("lone", func(context.Context, int) (int, error) {
		started(start{})
		return 0, nil
	}, &hopper.TypeOpts[int]{Queue: "lone"})

	d := newDriver(t)
	backlog := 100_000
	if _, mem := d.(*memdriver.Driver); !mem && raceEnabled {
		backlog = 10_000 // SQL inserts under the race detector are slow
	}
	c, err := hopper.New(hopper.Config{Driver: d, MaxWorkers: workers, FetchBatch: workers})
	require.NoError(t, err)
	require.NoError(t, c.Register(bulk, lone))
	ins := make([]int, chunk)
	for n := 0; n < backlog; n += chunk {
		_, err := bulk.EnqueueMany(ctx, c, ins, nil)
		require.NoError(t, err)
	}
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
	t.Cleanup(func() { close(done) }) // runs first: lets Stop drain

	next := func() start {
		t.Helper()
		select {
		case s := <-starts:
			return s
		case <-ctx.Done():
			t.Fatal("no job started")
			return start{}
		}
	}
	for range workers {
		require.True(t, next().bulk)
	}
	_, err = lone.Enqueue(ctx, c, 1, nil)
	require.NoError(t, err)
	for freed := 1; ; freed++ {
		release <- struct{}{}
		if !next().bulk {
			t.Logf("the lone job started after %d freed slots", freed)
			return
		}
		require.Less(t, freed, turns, "the lone queue's job waits behind the backlog")
	}
}
