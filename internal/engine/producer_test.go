package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver/memdriver"
)

// TestProducerSleepsUntilTheEarliestHint: wake-ups for later due times
// keep the earliest; the producer's next sleep ends then (not at its poll),
// and forgets the hint; a wake-up during the sleep ends it at once.
func TestProducerSleepsUntilTheEarliestHint(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e, _, clk := maintenanceFixture(t, start, func(c *Config) { c.PollInterval = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := newProducer(&session{e: e, ctx: ctx}, "q")

	for _, d := range []time.Duration{2 * time.Minute, time.Minute, 3 * time.Minute} {
		p.wake(start.Add(d))
	}
	<-p.wakeC // the hints' signal, for a producer that was sleeping
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		p.sleep(start.Add(time.Hour)) // its poll
	}()
	require.NoError(t, clk.WaitArmedAt(ctx, start.Add(time.Minute)), "the sleep ends at the earliest hint")
	clk.Set(start.Add(time.Minute))
	<-slept
	p.mu.Lock()
	require.True(t, p.nextAt.IsZero(), "the hint is used up")
	p.mu.Unlock()

	slept = make(chan struct{})
	go func() {
		defer close(slept)
		p.sleep(start.Add(time.Hour))
	}()
	require.NoError(t, clk.WaitArmedAt(ctx, start.Add(time.Hour)), "without a hint, until the poll")
	p.signal()
	<-slept
}

// TestSettleWaitsOnlyForShortBatches: between full rounds the producer
// waits for the jobs it just started only when, by its means, they return
// in under half a claim's time and the next claim could take more than the
// slots free now; the wait ends when the batch does, or after half a
// claim's time, or with the session. (With claims ahead, on by default,
// short jobs are not waited for: the next claim takes the slots they
// free; see TestClaimsAhead.)
func TestSettleWaitsOnlyForShortBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memdriver.New()
		defer mem.Close()
		cfg := testConfig(mem) // FetchBatch 500
		cfg.NoClaimAhead = true
		e := New(cfg)
		defer e.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &session{e: e, ctx: ctx, slots: NewSlots(10)}
		p := newProducer(s, "q")
		const claim = 10 * time.Millisecond
		// settleFor runs settle over a batch of one job that returns
		// after d (never, if d < 0) and reports how long settle waited.
		settleFor := func(claimMean, batchMean, d time.Duration) time.Duration {
			t.Helper()
			p.claimTime.Store(int64(claimMean) + 1)
			p.batchTime.Store(int64(batchMean) + 1)
			b := newRoundBatch(p, 1)
			if d >= 0 {
				go func() {
					time.Sleep(d)
					b.attemptDone()
				}()
			}
			begin := time.Now()
			p.settle(b)
			waited := time.Since(begin)
			synctest.Wait()
			return waited
		}
		require.Equal(t, 10, s.slots.TryAcquire(&p.slot, 10), "every slot in use")

		require.Equal(t, time.Millisecond, settleFor(claim, time.Millisecond, time.Millisecond), "short jobs: until the batch returns")
		require.Equal(t, claim/2, settleFor(claim, time.Millisecond, -1), "a batch that outlasts its mean: half a claim at most")
		require.Zero(t, settleFor(claim, claim/2+time.Microsecond, time.Millisecond), "jobs of half a claim or more are not waited for")
		require.Zero(t, settleFor(-1, time.Millisecond, time.Millisecond), "no claim measured yet")

		s.slots.Release(10)
		s.slots.SetMax(600)
		require.Zero(t, settleFor(claim, time.Millisecond, time.Millisecond), "a full FetchBatch free already")
		s.slots.SetMax(Unlimited)
		require.Zero(t, settleFor(claim, time.Millisecond, time.Millisecond), "no cap on slots")

		s.slots.SetMax(10)
		require.Equal(t, 10, s.slots.TryAcquire(&p.slot, 10))
		p.settle(nil) // a round that started nothing
		go func() {
			time.Sleep(time.Millisecond)
			cancel()
		}()
		require.Equal(t, time.Millisecond, settleFor(claim, time.Millisecond, -1), "the session's end ends the wait")
	})
}
