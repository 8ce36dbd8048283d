package hopper_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// concurrency tracks how many handlers run at once and the most seen.
type concurrency struct {
	now, peak atomic.Int32
}

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

// concurrencyLatch opens, for good, the first time a concurrency reaches
// its mark.
type concurrencyLatch struct {
	mu   sync.Mutex
	open bool
	seen changes
}

func latch() *concurrencyLatch { return &concurrencyLatch{} }

// wait blocks until c has reached n at once (it counts the caller), or
// until ctx ends. Every caller reports it reached, so the last to enter
// wakes those before it.
func (l *concurrencyLatch) wait(ctx context.Context, c *concurrency, n int32) error {
	for {
		next := l.seen.next()
		l.mu.Lock()
		if !l.open && c.now.Load() >= n {
			l.open = true
			l.seen.notify()
		}
		open := l.open
		l.mu.Unlock()
		if open {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func TestTypeLimitCapsConcurrency(t *testing.T) { forEachDriver(t, testTypeLimit) }

func testTypeLimit(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	// The first jobs of each type wait until as many run at once as the
	// assertions below expect (2 capped, 3 free), so they overlap for
	// certain; the rest run straight through.
	var capped, free concurrency
	cappedFull, freeFull := latch(), latch()
	slow := hopper.Define("capped", func(ctx context.Context, _ int) (hopper.None, error) {
		capped.enter()
		defer capped.leave()
		return hopper.None{}, cappedFull.wait(ctx, &capped, 2)
	}, &hopper.TypeOpts[int]{Limit: hopper.PriorityLimit(2)})
	other := hopper.Define("uncapped", func(ctx context.Context, _ int) (hopper.None, error) {
		free.enter()
		defer free.leave()
		return hopper.None{}, freeFull.wait(ctx, &free, 3)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), MaxWorkers: 20})
	require.NoError(t, c.Register(slow, other))
	ctx := testCtx(t)
	hs, err := slow.EnqueueMany(ctx, c, make([]int, 20), nil)
	require.NoError(t, err)
	hs2, err := other.EnqueueMany(ctx, c, make([]int, 20), nil)
	require.NoError(t, err)
	for _, h := range append(hs, hs2...) {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, capped.peak.Load(), int32(2), "the type's limit caps it")
	require.Equal(t, int32(2), capped.peak.Load(), "and its jobs use the cap")
	require.Greater(t, free.peak.Load(), int32(2), "another type is not held by it")
}

func TestFairLimitSharesAcrossGroups(t *testing.T) { forEachDriver(t, testFairLimitSharesAcrossGroups) }

func testFairLimitSharesAcrossGroups(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	var order []string
	job := hopper.Define("tenant-job", func(ctx context.Context, tenant string) (hopper.None, error) {
		mu.Lock()
		order = append(order, tenant)
		mu.Unlock()
		return hopper.None{}, nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: newDriver(t), Limit: hopper.FairLimit(1)})
	require.NoError(t, err)
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	// Tenant a floods first; tenant b's two jobs come last.
	var hs []*hopper.Handle[hopper.None]
	for range 12 {
		h, err := job.Enqueue(ctx, c, "a", &hopper.InsertOpts{Group: "a"})
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for range 2 {
		h, err := job.Enqueue(ctx, c, "b", &hopper.InsertOpts{Group: "b"})
		require.NoError(t, err)
		hs = append(hs, h)
	}
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 14)
	firstB := -1
	for i, o := range order {
		if o == "b" {
			firstB = i
			break
		}
	}
	require.GreaterOrEqual(t, firstB, 0)
	// Without fairness b would start 13th, after a's flood; with it, among
	// the first few (how few depends on how the first claims interleave
	// with the first attempts on a busy machine).
	require.Less(t, firstB, 6, "tenant b starts among the first jobs, not after a's flood: %v", order)
}

func TestRateLimitSpacesStarts(t *testing.T) { forEachDriver(t, testRateLimitSpacesStarts) }

func testRateLimitSpacesStarts(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var started atomic.Int32
	job := hopper.Define("rated", func(ctx context.Context, _ int) (hopper.None, error) {
		started.Add(1)
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.RateLimit(1, 1)})
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), Visibility: time.Hour})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	// A job waiting for a token is active without an event; the producer
	// that claimed it then arms its next poll on the clock.
	changed := onEvents(t, c)
	_, err := job.EnqueueMany(ctx, c, []int{1, 2, 3}, nil)
	require.NoError(t, err)
	await(t, "one job run, one waiting", func() bool { return started.Load() == 1 && len(c.Active()) == 1 }, changed, clk.TimerArmed)
	require.Equal(t, int32(1), started.Load(), "one token a second")
	require.Len(t, c.Active(), 1, "one job waits for the next token; the limit claims no more than it has room for")
	clk.Advance(time.Second)
	await(t, "the second job", func() bool { return started.Load() == 2 }, changed)
	clk.Advance(time.Second)
	await(t, "the third job", func() bool { return started.Load() == 3 }, changed)
}

func TestLimitStopHandsWaitingJobsBack(t *testing.T) {
	forEachDriver(t, testLimitStopHandsWaitingJobsBack)
}

func testLimitStopHandsWaitingJobsBack(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	release := make(chan struct{})
	var ran atomic.Int32
	var running changes
	job := hopper.Define("held", func(ctx context.Context, _ int) (hopper.None, error) {
		ran.Add(1)
		running.notify()
		<-release
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.PriorityLimit(1)})
	// A virtual clock, for its timers: a job waiting for its turn in a
	// limiter is active without an event, and the producer that claimed
	// it then arms its next poll.
	clk := hoppertest.NewClock(time.Time{})
	c, err := hopper.New(hopper.Config{Driver: newDriver(t), Clock: clk})
	require.NoError(t, err)
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	changed := onEvents(t, c)
	hs, err := job.EnqueueMany(ctx, c, []int{1, 2}, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	await(t, "one job running, one waiting", func() bool { return ran.Load() == 1 && len(c.Active()) == 2 },
		running.next, clk.TimerArmed)
	stopped := make(chan error)
	go func() { stopped <- c.Stop(ctx) }()
	// Stop hands the waiting job back (an event) before it waits for the
	// running one.
	await(t, "the waiting job handed back", func() bool {
		for _, h := range hs {
			if row, err := c.JobGet(ctx, h.ID()); err == nil && row.State == hopper.StatePending {
				return true
			}
		}
		return false
	}, changed)
	close(release)
	require.NoError(t, <-stopped)
	require.Equal(t, int32(1), ran.Load(), "the waiting job never ran")
	var waiting *hopper.JobRow
	for _, h := range hs {
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		if row.State != hopper.StateSucceeded {
			waiting = row
		}
	}
	require.NotNil(t, waiting)
	require.Equal(t, hopper.StatePending, waiting.State, "handed back")
	require.Equal(t, 0, waiting.Attempt, "its attempt unused")
}

func TestBadLimitIsRefused(t *testing.T) {
	t.Parallel()
	_, err := hopper.New(hopper.Config{Driver: memdriver.New(), Limit: &hopper.Limit{Max: -1}})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	c := newClient(t, hopper.Config{})
	bad := hopper.Define("bad-limit", func(context.Context, int) (int, error) { return 0, nil },
		&hopper.TypeOpts[int]{Limit: &hopper.Limit{Order: "random"}})
	require.ErrorIs(t, c.Register(bad), hopper.ErrInvalidInput)
}

// TestConcurrencyKeyAcrossClients runs jobs of two customers on two
// clients sharing a store: each customer's key caps its jobs fleet-wide.
func TestConcurrencyKeyAcrossClients(t *testing.T) { forEachDriver(t, testConcurrencyKey) }

func testConcurrencyKey(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	now, peak := map[string]int{}, map[string]int{}
	job := hopper.Define("per-customer", func(ctx context.Context, customer string) (hopper.None, error) {
		mu.Lock()
		now[customer]++
		peak[customer] = max(peak[customer], now[customer])
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		mu.Lock()
		now[customer]--
		mu.Unlock()
		return hopper.None{}, nil
	}, &hopper.TypeOpts[string]{Options: func(customer string) *hopper.InsertOpts {
		limit := map[string]int{"a": 2, "b": 1}[customer]
		return &hopper.InsertOpts{ConcurrencyKey: "customer:" + customer, ConcurrencyLimit: limit}
	}})
	d := newDriver(t)
	c1 := newClient(t, hopper.Config{Driver: d, MaxWorkers: 8})
	c2 := newClient(t, hopper.Config{Driver: d, MaxWorkers: 8})
	require.NoError(t, c1.Register(job))
	require.NoError(t, c2.Register(job))
	ctx := testCtx(t)
	var ins []string
	for range 20 {
		ins = append(ins, "a")
	}
	for range 10 {
		ins = append(ins, "b")
	}
	hs, err := job.EnqueueMany(ctx, c1, ins, nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, peak["a"], 2, "customer a: at most 2 at once across both clients")
	require.Equal(t, 1, peak["b"], "customer b: one at a time")
	row, err := c1.JobGet(ctx, hs[0].ID())
	require.NoError(t, err)
	require.Equal(t, "customer:a", row.ConcurrencyKey)
	require.Equal(t, 1, row.Attempt, "a job held back by its key used no attempt")
}

func TestConcurrencyKeyBadInput(t *testing.T) {
	t.Parallel()
	c := newClient(t, hopper.Config{})
	job := hopper.Define("ck-bad", func(context.Context, int) (int, error) { return 0, nil }, nil)
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	for _, o := range []*hopper.InsertOpts{
		{ConcurrencyKey: "k"},
		{ConcurrencyLimit: 2},
		{ConcurrencyKey: "k", ConcurrencyLimit: -1},
	} {
		_, err := job.Enqueue(ctx, c, 1, o)
		require.ErrorIs(t, err, hopper.ErrInvalidInput, "%+v", o)
	}
}

// TestLimitDoesNotHoardSlots: a capped type claims no more than its limit
// has room for, so the other types keep the worker slots and its waiting
// jobs stay free for other processes.
func TestLimitDoesNotHoardSlots(t *testing.T) { forEachDriver(t, testLimitDoesNotHoardSlots) }

func testLimitDoesNotHoardSlots(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	release := make(chan struct{})
	capped := hopper.Define("hoard-capped", func(ctx context.Context, _ int) (hopper.None, error) {
		<-release
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.PriorityLimit(1)})
	other := hopper.Define("hoard-other", func(ctx context.Context, _ int) (hopper.None, error) { return hopper.None{}, nil }, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), MaxWorkers: 10})
	require.NoError(t, c.Register(capped, other))
	ctx := testCtx(t)
	changed := onEvents(t, c)
	_, err := capped.EnqueueMany(ctx, c, make([]int, 30), nil)
	require.NoError(t, err)
	await(t, "a capped job to start", func() bool { return len(c.Active()) >= 1 }, changed)
	hs, err := other.EnqueueMany(ctx, c, make([]int, 20), nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err, "other types run while the capped one waits")
	}
	held := 0
	for _, a := range c.Active() {
		if a.Type == "hoard-capped" {
			held++
		}
	}
	require.LessOrEqual(t, held, 2, "one running and at most one waiting: the rest stay in the store")
	close(release)
}

// TestLimitCancelWaitingJob: a job cancelled while it waits for its turn
// ends cancelled without running.
func TestLimitCancelWaitingJob(t *testing.T) { forEachDriver(t, testLimitCancelWaitingJob) }

func testLimitCancelWaitingJob(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	release := make(chan struct{})
	var ran atomic.Int32
	var first atomic.Int32
	var running changes
	job := hopper.Define("cancel-waiting", func(ctx context.Context, n int) (hopper.None, error) {
		ran.Add(1)
		first.CompareAndSwap(0, int32(n))
		running.notify()
		<-release
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.PriorityLimit(1)})
	// A virtual clock, for its timers: a job waiting for its turn in a
	// limiter is active without an event, and the producer that claimed
	// it then arms its next poll.
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	hs, err := job.EnqueueMany(ctx, c, []int{1, 2}, nil)
	require.NoError(t, err)
	await(t, "one job running, one waiting", func() bool { return ran.Load() == 1 && len(c.Active()) == 2 },
		running.next, clk.TimerArmed)
	waiting := hs[1]
	if first.Load() == 2 {
		waiting = hs[0]
	}
	_, err = c.JobCancel(ctx, waiting.ID())
	require.NoError(t, err)
	_, err = waiting.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	close(release)
	_, err = hs[0].Result(ctx)
	if waiting == hs[0] {
		_, err = hs[1].Result(ctx)
	}
	require.NoError(t, err)
	require.Equal(t, int32(1), ran.Load(), "the cancelled job never ran")
}

// TestActivityLimit: an activity is a job of its type, so the type's Limit
// caps its executions across every run (the seeds' activity limits).
func TestActivityLimit(t *testing.T) { forEachDriver(t, testActivityLimit) }

func testActivityLimit(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var cc concurrency
	charge := hopper.Define("limited-charge", func(ctx context.Context, n int) (int, error) {
		cc.enter()
		defer cc.leave()
		time.Sleep(3 * time.Millisecond)
		return n, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.PriorityLimit(1)})
	wf := hopper.Workflow("limited-activity", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Activity(wf, charge, n, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), MaxWorkers: 20})
	require.NoError(t, c.Register(charge, wf))
	ctx := testCtx(t)
	var hs []*hopper.RunHandle[int]
	for i := range 6 {
		h, err := wf.Start(ctx, c, i, nil)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for i, h := range hs {
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, i, v)
	}
	require.Equal(t, int32(1), cc.peak.Load(), "one charge at a time across six runs")
}
