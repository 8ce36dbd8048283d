package hopper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
)

// TestGroupCount: a settled fan-out's jobs, its root among them, counted
// by state; a limit stops the count and says so; bad input is refused.
func TestGroupCount(t *testing.T) { forEachDriver(t, testGroupCount) }

func testGroupCount(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	fan := fanoutType("count-fan", summing, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(fan, summing))
	ctx := testCtx(t)
	h, err := fan.Enqueue(ctx, c, fanIn{N: 6}, nil)
	require.NoError(t, err)
	_, err = h.Group(ctx)
	require.NoError(t, err)

	all, err := c.GroupCount(ctx, h.ID(), 0)
	require.NoError(t, err)
	require.Equal(t, &hopper.GroupCounts{ByState: map[hopper.JobState]int{hopper.StateSucceeded: 7}, Counted: 7}, all, "the root and its six children")
	capped, err := c.GroupCount(ctx, h.ID(), 4)
	require.NoError(t, err)
	require.Equal(t, &hopper.GroupCounts{ByState: map[hopper.JobState]int{hopper.StateSucceeded: 4}, Counted: 4, Capped: true}, capped)
	exact, err := c.GroupCount(ctx, h.ID(), 7)
	require.NoError(t, err)
	require.Equal(t, 7, exact.Counted)
	none, err := c.GroupCount(ctx, "no-such-group", 10)
	require.NoError(t, err)
	require.Zero(t, none.Counted)
	_, err = c.GroupCount(ctx, "bad\x00id", 10)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}
