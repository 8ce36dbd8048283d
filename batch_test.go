package hopper_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

// batchLog records the batches a batch function saw.
type batchLog struct {
	mu      sync.Mutex
	batches [][]int
}

func (l *batchLog) add(in []int) {
	l.mu.Lock()
	l.batches = append(l.batches, slices.Clone(in))
	l.mu.Unlock()
}

func (l *batchLog) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, b := range l.batches {
		out = append(out, len(b))
	}
	return out
}

func TestBatchOutputsAreIndexAligned(t *testing.T) { forEachDriver(t, testBatchAligned) }

func testBatchAligned(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var log batchLog
	times10 := hopper.DefineBatch("times10", 4, 20*time.Millisecond, func(ctx context.Context, in []int) ([]int, error) {
		log.add(in)
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 10
		}
		return out, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(times10))
	ctx := testCtx(t)

	ins := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hs, err := times10.EnqueueMany(ctx, c, ins, nil)
	require.NoError(t, err)
	for i, h := range hs {
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, ins[i]*10, v, "each handle gets its own output")
	}
	total := 0
	for _, n := range log.sizes() {
		require.LessOrEqual(t, n, 4, "a batch holds at most size jobs")
		total += n
	}
	require.Equal(t, len(ins), total, "every job ran in exactly one batch")
	require.Less(t, len(log.sizes()), len(ins), "jobs ran together")
}

func TestBatchMaxWaitFlushesPartialBatch(t *testing.T) {
	forEachDriver(t, testBatchMaxWaitFlushesPartialBatch)
}

func testBatchMaxWaitFlushesPartialBatch(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var log batchLog
	// A maxWait no other timer of the engine uses (its call budgets are
	// whole seconds, armed when the jobs are claimed), so the timer the
	// test waits for is the batch's.
	const maxWait = 10*time.Second + 7*time.Millisecond
	b := hopper.DefineBatch("partial", 10, maxWait, func(ctx context.Context, in []int) ([]int, error) {
		log.add(in)
		return in, nil
	}, nil)
	// Leases far longer than the clock moves, so no job is rescued.
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), Visibility: time.Hour})
	require.NoError(t, c.Register(b))
	ctx := testCtx(t)
	start := clk.Now()
	// The batch's size as its jobs join: a job is active, and its started
	// event sent, before its handler joins the batch, so the clock moves
	// only once all three have joined (moved after two, it would run a
	// batch of two and leave the third waiting for a time that never comes).
	joined := make(chan int, 3)
	c.OnBatchJoin(func(name string, n int) {
		if name == "partial" {
			joined <- n
		}
	})
	hs, err := b.EnqueueMany(ctx, c, []int{1, 2, 3}, nil)
	require.NoError(t, err)
	for n := 0; n < 3; {
		select {
		case n = <-joined:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for the three jobs to join the batch (%d joined)", n)
		}
	}
	// The first to join armed the batch's maxWait timer.
	require.NoError(t, clk.WaitArmedAt(ctx, start.Add(maxWait)))
	require.Empty(t, log.sizes(), "a partial batch waits for maxWait")
	clk.Advance(maxWait)
	for i, h := range hs {
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, i+1, v)
	}
	require.Equal(t, []int{3}, log.sizes())
}

func TestBatchWrongOutputCount(t *testing.T) { forEachDriver(t, testBatchWrongOutputCount) }

func testBatchWrongOutputCount(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	b := hopper.DefineBatch("short", 2, time.Second, func(ctx context.Context, in []int) ([]int, error) {
		return in[:1], nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}})
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(b))
	ctx := testCtx(t)
	hs, err := b.EnqueueMany(ctx, c, []int{1, 2}, nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.ErrorContains(t, err, `batch "short" returned 1 outputs for 2 inputs`)
	}
}

func TestBatchFailureRetriesEachItemUnderItsOwnPolicy(t *testing.T) {
	forEachDriver(t, testBatchFailureRetriesEachItemUnderItsOwnPolicy)
}

func testBatchFailureRetriesEachItemUnderItsOwnPolicy(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var calls atomic.Int32
	b := hopper.DefineBatch("flaky-batch", 2, time.Second, func(ctx context.Context, in []int) ([]int, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("the batch failed")
		}
		return in, nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(b))
	ctx := testCtx(t)
	once, err := b.Enqueue(ctx, c, 1, &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: 1}})
	require.NoError(t, err)
	twice, err := b.Enqueue(ctx, c, 2, &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: 3}})
	require.NoError(t, err)

	_, err = once.Result(ctx)
	require.ErrorContains(t, err, "the batch failed", "a job out of attempts is dead")
	v, err := twice.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v, "a job with attempts left is retried and succeeds")
	row, err := c.JobGet(ctx, twice.ID())
	require.NoError(t, err)
	require.Equal(t, 2, row.Attempt)
}

func TestBatchSnoozeDefersEveryItem(t *testing.T) { forEachDriver(t, testBatchSnoozeDefersEveryItem) }

func testBatchSnoozeDefersEveryItem(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var calls atomic.Int32
	events := newEventLog()
	b := hopper.DefineBatch("snoozy", 2, time.Second, func(ctx context.Context, in []int) ([]int, error) {
		if calls.Add(1) == 1 {
			return nil, hopper.Snooze(time.Millisecond)
		}
		return in, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(b))
	ctx := testCtx(t)
	hs, err := b.EnqueueMany(ctx, c, []int{7, 8}, nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		require.Equal(t, 1, row.Attempt, "a snooze uses no attempt")
	}
	deferred := 0
	for _, k := range events.kinds("") {
		if k == hopper.EventDeferred {
			deferred++
		}
	}
	require.Equal(t, 2, deferred, "every job of the snoozed batch is deferred")
}

func TestBatchPanicFailsTheBatch(t *testing.T) {
	t.Parallel()
	b := hopper.DefineBatch("panicky", 1, 0, func(ctx context.Context, in []int) ([]int, error) {
		panic("boom")
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}})
	c := newClient(t, hopper.Config{})
	require.NoError(t, c.Register(b))
	ctx := testCtx(t)
	h, err := b.Enqueue(ctx, c, 1, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrPanic)
}

func TestDefineBatchRefusesBadArguments(t *testing.T) {
	t.Parallel()
	run := func(context.Context, []int) ([]int, error) { return nil, nil }
	require.Panics(t, func() { hopper.DefineBatch("b", 0, time.Second, run, nil) })
	require.Panics(t, func() { hopper.DefineBatch("b", 1, -time.Second, run, nil) })
	require.Panics(t, func() { hopper.DefineBatch[int, int]("b", 1, time.Second, nil, nil) })
}
