package hopper_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// failingTx fails the transactions it is told to fail, and counts them.
type failingTx struct {
	*memdriver.Driver
	fail  atomic.Int32 // how many of the next transactions fail
	tries atomic.Int32 // transactions begun
}

func (d *failingTx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	d.tries.Add(1)
	if d.fail.Add(-1) >= 0 {
		return errors.New("injected: the commit failed")
	}
	return d.Driver.InTx(ctx, fn)
}

// TestCompleterRetryWaitsOnTheClock: when the transaction that records an
// outcome fails, the completer tries again after a pause on the client's
// clock: under a virtual clock, not before the test moves it.
func TestCompleterRetryWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	d := &failingTx{Driver: memdriver.New(memdriver.WithClock(clk.Now))}
	t.Cleanup(func() { _ = d.Close() })
	started, release := make(chan struct{}), make(chan struct{})
	job := hopper.Define("record-retried", func(ctx context.Context, _ hopper.None) (int, error) {
		close(started)
		<-release
		return 1, nil
	}, nil)
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	<-started
	d.fail.Store(1)
	before := d.tries.Load()
	now := clk.Now()
	close(release)
	// The first try failed; the next waits 10ms on the clock.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, clk.WaitArmedAt(wait, now.Add(10*time.Millisecond)), "the retry waits on the client's clock")
	require.Equal(t, before+1, d.tries.Load(), "no second try before the clock moved")
	clk.Advance(10 * time.Millisecond)
	got, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.Equal(t, before+2, d.tries.Load())
}
