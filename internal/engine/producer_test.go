package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
