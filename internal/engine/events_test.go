package engine

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// hookedType is a job type with an event hook of its own.
type hookedType struct {
	*fakeType
	hook func(hoppertype.Event)
}

func (h hookedType) OnEvent() func(hoppertype.Event) { return h.hook }

// TestEmit: an event goes to the engine's hook, then to each subscriber in
// order, then to its type's own hook; a hook that panics is reported with
// the panic's cause and the others still receive it; an unsubscribed
// subscriber receives no more.
func TestEmit(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	var got []string
	var reported []error
	cfg := testConfig(d)
	cfg.Hooks.OnEvent = func(ev hoppertype.Event) { got = append(got, "engine:"+ev.JobID) }
	cfg.Hooks.OnError = func(err error, phase hoppertype.ErrorPhase) {
		require.Equal(t, hoppertype.PhaseHook, phase)
		reported = append(reported, err)
	}
	e := New(cfg)
	t.Cleanup(e.Close)
	require.NoError(t, e.Register(hookedType{fakeType: &fakeType{name: "t"}, hook: func(ev hoppertype.Event) { got = append(got, "type:"+ev.JobID) }}))
	boom := errors.New("boom")
	unsub1 := e.Subscribe(func(ev hoppertype.Event) { got = append(got, "one:"+ev.JobID) })
	e.Subscribe(func(hoppertype.Event) { panic(boom) })
	e.Subscribe(func(ev hoppertype.Event) { got = append(got, "three:"+ev.JobID) })

	e.Emit(hoppertype.Event{Kind: hoppertype.EventQueued, JobID: "a", Type: "t"})
	require.Equal(t, []string{"engine:a", "one:a", "three:a", "type:a"}, got)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], boom)

	got = nil
	unsub1()
	unsub1() // twice is harmless
	e.Emit(hoppertype.Event{Kind: hoppertype.EventQueued, JobID: "b", Type: "other"})
	require.Equal(t, []string{"engine:b", "three:b"}, got, "no type hook for another type")
}
