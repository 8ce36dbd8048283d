package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestOutcomeCounts: the counts Backpressure reads add up the attempts that
// ended, succeeded or failed, in all and by type; other events are not
// attempts' ends, and a type named twice counts once.
func TestOutcomeCounts(t *testing.T) {
	t.Parallel()
	var o OutcomeCounts
	for _, ev := range []hoppertype.Event{
		{Kind: hoppertype.EventSucceeded, Type: "a"},
		{Kind: hoppertype.EventSucceeded, Type: "a"},
		{Kind: hoppertype.EventFailed, Type: "a"},
		{Kind: hoppertype.EventFailed, Type: "b"},
		{Kind: hoppertype.EventQueued, Type: "a"},
		{Kind: hoppertype.EventDeferred, Type: "b"},
	} {
		o.Observe(ev)
	}
	for _, tc := range []struct {
		types        []string
		succ, failed uint64
	}{
		{nil, 2, 2},
		{[]string{"a"}, 2, 1},
		{[]string{"b"}, 0, 1},
		{[]string{"a", "b", "a"}, 2, 2},
		{[]string{"c"}, 0, 0},
	} {
		s, f := o.Sum(tc.types)
		require.Equal(t, [2]uint64{tc.succ, tc.failed}, [2]uint64{s, f}, "types %v", tc.types)
	}
}

var errHookBug = errors.New("hook bug")

// TestProducerHooksThatPanic: a Backpressure hook that panics counts as no
// wait, an Accept hook that panics accepts the job; both are reported, the
// panic's error kept as the cause.
func TestProducerHooksThatPanic(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	cfg := testConfig(d)
	var reported []error
	cfg.Hooks.OnError = func(err error, phase hoppertype.ErrorPhase) {
		require.Equal(t, hoppertype.PhaseHook, phase)
		reported = append(reported, err)
	}
	cfg.Hooks.Backpressure = func(context.Context, string, int) time.Duration { panic(errHookBug) }
	e := New(cfg)
	t.Cleanup(e.Close)
	p := newProducer(&session{e: e, ctx: context.Background()}, "q")

	require.Zero(t, p.backpressure(), "no wait")
	accept := func(*hoppertype.JobRow) bool { panic(errHookBug) }
	require.True(t, p.accepts(accept, &hoppertype.JobRow{ID: "j"}), "accepted")
	require.False(t, p.accepts(func(*hoppertype.JobRow) bool { return false }, &hoppertype.JobRow{ID: "k"}), "a hook that answers is obeyed")
	require.Len(t, reported, 2)
	for _, err := range reported {
		require.ErrorIs(t, err, errHookBug)
	}
}
