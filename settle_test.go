package hopper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestSettle: Settle reports the client's work at its clock's now. A job
// delayed is Next, not Due; a job due in a paused queue is left out; a job
// whose handler waits on something outside the clock is Running and keeps
// the client from settling, so Settle returns it after its quiet time; a
// client not started answers ErrNotStarted, and a quiet time that is not
// positive is refused.
func TestSettle(t *testing.T) { forEachDriver(t, testSettle) }

func testSettle(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	idle, err := hopper.New(hopper.Config{Driver: newDriver(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = idle.Close(context.WithoutCancel(ctx)) })
	_, err = idle.Settle(ctx, time.Millisecond)
	require.ErrorIs(t, err, hopper.ErrNotStarted)

	release := make(chan struct{})
	started := make(chan struct{}, 1)
	block := hopper.Define("block", func(ctx context.Context, in int) (int, error) {
		started <- struct{}{}
		select {
		case <-release:
			return in, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, nil)
	add := hopper.Define("add", addHandler, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), Queues: []string{"held"}})
	require.NoError(t, c.Register(block))
	require.NoError(t, c.Register(add))
	_, err = c.Settle(ctx, 0)
	require.Error(t, err, "a quiet time of zero")

	// A quiet time longer than any work here takes: Settle returns once
	// idle (a claim round under way ends first), not after it.
	const quiet = time.Minute
	st, err := c.Settle(ctx, quiet)
	require.NoError(t, err)
	require.Equal(t, hopper.Settled{Idle: true}, st, "nothing stored")

	// Due later, and due now in a paused queue: idle, with the later one
	// next.
	later := clk.Now().Add(time.Hour)
	_, err = add.Enqueue(ctx, c, addIn{A: 1}, &hopper.InsertOpts{RunAt: later})
	require.NoError(t, err)
	require.NoError(t, c.QueuePause(ctx, "held", nil))
	held, err := add.Enqueue(ctx, c, addIn{A: 2}, &hopper.InsertOpts{Queue: "held"})
	require.NoError(t, err)
	st, err = c.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "a paused queue's job and a later job leave the client idle: %+v", st)
	require.Zero(t, st.Due, "a paused queue's job is not due for the client")
	require.True(t, st.Next.Equal(later), "the later job is next: %v, want %v", st.Next, later)

	// Resumed, the held job is due and runs before Settle returns idle.
	require.NoError(t, c.QueueResume(ctx, "held"))
	st, err = c.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "the resumed queue's job ran: %+v", st)
	row, err := c.JobGet(ctx, held.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)

	// A handler waiting on the test: running, not idle, after the quiet.
	h, err := block.Enqueue(ctx, c, 7, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the blocking job did not start")
	}
	st, err = c.Settle(ctx, 20*time.Millisecond)
	require.NoError(t, err)
	require.False(t, st.Idle, "a running job keeps the client busy")
	require.Equal(t, 1, st.Running)
	close(release)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	st, err = c.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "%+v", st)
	require.True(t, st.Next.Equal(later), "the later job is still next")
}
