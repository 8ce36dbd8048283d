package hopper_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/stretchr/testify/require"
)

// errorLog collects what a client reports through OnError.
type errorLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errorLog) hook(err error, phase hopper.ErrorPhase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, string(phase)+": "+err.Error())
}

// list returns a copy of what was reported.
func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

func (l *errorLog) has(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.errs, func(s string) bool { return strings.Contains(s, substr) })
}

// TestBackpressure: while Backpressure returns a pause the producer waits
// it out on the client's clock and asks again, claiming nothing; enqueueing
// goes on. Once it returns 0 the job runs.
// It runs in a synctest bubble: each move of the clock is followed by
// synctest.Wait, so the producer has asked again before the next.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var pause atomic.Int64
		pause.Store(int64(time.Minute))
		var mu sync.Mutex
		asked := map[string]int{}
		var infoOK atomic.Bool
		infoOK.Store(true)
		bp := func(ctx context.Context) time.Duration {
			info, ok := hopper.BackpressureFromContext(ctx)
			if !ok || info.Active < 0 {
				infoOK.Store(false)
			}
			mu.Lock()
			asked[info.Queue]++
			mu.Unlock()
			return time.Duration(pause.Load())
		}
		askedFor := func(q string) int {
			mu.Lock()
			defer mu.Unlock()
			return asked[q]
		}
		c, clk := hoppertest.NewClient(t, hopper.Config{Backpressure: bp, Queues: []string{"other"}})
		add := hopper.Define("add", addHandler, nil)
		require.NoError(t, c.Register(add))
		ctx := testCtx(t)

		h, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, nil)
		require.NoError(t, err, "enqueue is not gated")
		// Each wait ends after a minute on the virtual clock; the producer
		// asks again, is told to wait again, and never claims.
		base := askedFor(hopper.DefaultQueue)
		stepUntil(t, clk, time.Minute, "three more asks, and one for the other queue", func() bool {
			return askedFor(hopper.DefaultQueue) >= base+3 && askedFor("other") > 0
		})
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		require.Equal(t, hopper.StatePending, row.State, "nothing is claimed under backpressure")
		require.Zero(t, row.Attempt)

		pause.Store(0)
		stepUntil(t, clk, time.Minute, "the job to run", func() bool { // a step ends the wait in progress
			row, err := c.JobGet(ctx, h.ID())
			require.NoError(t, err)
			return row.State == hopper.StateSucceeded
		})
		sum, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, sum)
		require.True(t, infoOK.Load(), "every ask carries its BackpressureInfo")
	})
}

// TestBackpressurePanic: a panicking Backpressure is reported and counts as
// no pause.
func TestBackpressurePanic(t *testing.T) {
	t.Parallel()
	errs := &errorLog{}
	c := newClient(t, hopper.Config{
		Backpressure: func(context.Context) time.Duration { panic("gauge broke") },
		OnError:      errs.hook,
	})
	add := hopper.Define("add", addHandler, nil)
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	h, err := add.Enqueue(ctx, c, addIn{A: 2, B: 2}, nil)
	require.NoError(t, err)
	sum, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, sum)
	require.True(t, errs.has("hook: backpressure panicked"), "reported: %v", errs.list())
}

// TestAdaptiveDelayBacksOff: the client feeds an AdaptiveDelay its attempt
// outcomes: a failure makes the next ask return Base, and with nothing
// failing the pause eases back to 0.
// It runs in a synctest bubble: each move of the clock is followed by
// synctest.Wait, so the producer has asked again before the next.
func TestAdaptiveDelayBacksOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ad := hopper.NewAdaptiveDelay(&hopper.AdaptiveDelayOpts{Base: 100 * time.Millisecond, Max: time.Second})
		var mu sync.Mutex
		var pauses []time.Duration
		bp := func(ctx context.Context) time.Duration {
			d := ad.Backpressure(ctx)
			if info, _ := hopper.BackpressureFromContext(ctx); info.Queue == hopper.DefaultQueue {
				mu.Lock()
				pauses = append(pauses, d)
				mu.Unlock()
			}
			return d
		}
		since := func(i int) []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(pauses[min(i, len(pauses)):])
		}
		asks := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(pauses)
		}
		events := newEventLog()
		c, clk := hoppertest.NewClient(t, hopper.Config{Backpressure: bp, OnEvent: events.hook, PollInterval: 10 * time.Millisecond})
		flaky := hopper.Define("flaky", func(_ context.Context, fail bool) (int, error) {
			if fail {
				return 0, errors.New("downstream said no")
			}
			return 1, nil
		}, &hopper.TypeOpts[bool]{Retry: hopper.RetryPolicy{Attempts: 1}})
		require.NoError(t, c.Register(flaky))
		ctx := testCtx(t)

		from := asks()
		for _, d := range since(0) {
			require.Zero(t, d, "no pause before any failure")
		}
		h, err := flaky.Enqueue(ctx, c, true, nil)
		require.NoError(t, err)
		events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventFailed })
		stepUntil(t, clk, 10*time.Millisecond, "a pause of Base after the failure", func() bool {
			return slices.Contains(since(from), 100*time.Millisecond)
		})
		stepUntil(t, clk, 10*time.Millisecond, "the pause to ease back to 0", func() bool {
			got := since(from)
			i := slices.Index(got, 100*time.Millisecond)
			return slices.Contains(got[i+1:], 0)
		})
		require.Equal(t, 100*time.Millisecond, slices.Max(since(from)), "one failure, one step of backoff")

		// Healthy again, jobs run.
		h, err = flaky.Enqueue(ctx, c, false, nil)
		require.NoError(t, err)
		stepUntil(t, clk, 10*time.Millisecond, "the next job to run", func() bool {
			row, err := c.JobGet(ctx, h.ID())
			require.NoError(t, err)
			return row.State == hopper.StateSucceeded
		})
	})
}

// TestAcceptShardsTypes: two processes over one store, each accepting one
// of two types that both register; every job runs once, on the process
// that accepts its type, and declining never uses up an attempt.
func TestAcceptShardsTypes(t *testing.T) { forEachDriver(t, testAcceptShardsTypes) }

func testAcceptShardsTypes(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	one := &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}}
	ping := hopper.Define("ping", func(_ context.Context, n int) (int, error) { return n, nil }, one)
	pong := hopper.Define("pong", func(_ context.Context, n int) (int, error) { return -n, nil }, one)
	worker := func(name, accepts string) *eventLog {
		log := newEventLog()
		c := newClient(t, hopper.Config{
			Driver: d, WorkerID: name, PollInterval: 20 * time.Millisecond, OnEvent: log.hook,
			Accept: func(i hopper.AcceptInfo) bool { return i.Type == accepts },
		})
		require.NoError(t, c.Register(ping, pong))
		return log
	}
	pings, pongs := worker("pinger", "ping"), worker("ponger", "pong")
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	ctx := testCtx(t)

	const n = 20
	var specs []*hopper.JobSpec
	for i := range n {
		specs = append(specs, ping.Job(i, nil), pong.Job(i, nil))
	}
	hs, err := c.EnqueueMany(ctx, specs...)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		require.Equal(t, 1, row.Attempt, "declines do not use attempts")
	}
	for log, typ := range map[*eventLog]string{pings: "ping", pongs: "pong"} {
		log.mu.Lock()
		started := 0
		for _, e := range log.events {
			if e.Kind == hopper.EventStarted {
				require.Equal(t, typ, e.Type, "a job ran on a process that declines it")
				started++
			}
		}
		log.mu.Unlock()
		require.Equal(t, n, started)
	}
}

// TestAcceptDeclineAll: a process that declines everything hands the job
// back at once, its attempt unused, and claims from that queue again only
// after PollInterval on its clock: no busy loop.
// It runs in a synctest bubble: each move of the clock is followed by
// synctest.Wait, so a claim due by then has been made.
func TestAcceptDeclineAll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const poll = time.Second
		type call struct {
			info hopper.AcceptInfo
			at   time.Time
		}
		calls := make(chan call, 64)
		clk := hoppertest.NewClock(time.Time{})
		c, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk, PollInterval: poll, Accept: func(i hopper.AcceptInfo) bool {
			calls <- call{i, clk.Now()}
			return false
		}})
		add := hopper.Define("add", addHandler, nil)
		require.NoError(t, c.Register(add))
		ctx := testCtx(t)
		h, err := add.Enqueue(ctx, c, addIn{A: 1, B: 1}, &hopper.InsertOpts{Priority: 3, Metadata: map[string]string{"shard": "7"}})
		require.NoError(t, err)

		next := func() call {
			t.Helper()
			select {
			case cl := <-calls:
				return cl
			case <-ctx.Done():
				t.Fatal("Accept not called")
				return call{}
			}
		}
		prev := next()
		info := prev.info
		require.Equal(t, []any{h.ID(), "add", hopper.DefaultQueue, 1, 3, "7"},
			[]any{info.ID, info.Type, info.Queue, info.Attempt, info.Priority, info.Metadata["shard"]})
		for range 3 {
			var cl call
			got := false
			stepUntil(t, clk, poll/4, "the next claim", func() bool {
				select {
				case cl = <-calls:
					got = true
				default:
				}
				return got
			})
			require.Equal(t, h.ID(), cl.info.ID)
			require.Equal(t, 1, cl.info.Attempt, "the declined attempt was not used")
			require.GreaterOrEqual(t, cl.at.Sub(prev.at), poll, "claimed again within PollInterval")
			prev = cl
		}
		synctest.Wait() // the last decline is recorded
		row, err := c.JobGet(ctx, h.ID())
		require.NoError(t, err)
		require.Equal(t, hopper.StatePending, row.State)
		require.Zero(t, row.Attempt, "declines do not use attempts")
	})
}

// TestAcceptPanic: a panicking Accept is reported and accepts the job.
func TestAcceptPanic(t *testing.T) {
	t.Parallel()
	errs := &errorLog{}
	c := newClient(t, hopper.Config{Accept: func(hopper.AcceptInfo) bool { panic("no idea") }, OnError: errs.hook})
	add := hopper.Define("add", addHandler, nil)
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	h, err := add.Enqueue(ctx, c, addIn{A: 3, B: 4}, nil)
	require.NoError(t, err)
	sum, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, sum)
	require.True(t, errs.has("hook: accept panicked for job "+h.ID()), "reported: %v", errs.list())
}

// TestAcceptSkipsBuiltinTypes: Accept is not offered hopper's own jobs, so
// a process that accepts only its own types still fires the gates between
// them.
func TestAcceptSkipsBuiltinTypes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	c := newClient(t, hopper.Config{Accept: func(i hopper.AcceptInfo) bool {
		mu.Lock()
		seen[i.Type] = true
		mu.Unlock()
		return i.Type == "add"
	}})
	add := hopper.Define("add", addHandler, nil)
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	first, next := add.Job(addIn{A: 1, B: 1}, nil), add.Job(addIn{A: 2, B: 2}, nil)
	hs, err := c.EnqueueMany(ctx, first, hopper.Gate([]string{first.ID()}, []*hopper.JobSpec{next}, hopper.AllSuccess(), time.Hour))
	require.NoError(t, err)
	_, err = hs[1].Result(ctx) // the gate fired
	require.NoError(t, err)
	row, err := c.JobWait(ctx, next.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]bool{"add": true}, seen)
}
