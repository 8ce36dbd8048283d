// Package hoppertest helps test code that uses hopper: a virtual clock that
// moves only when told, and a client on the in-memory driver wired to it, so
// backoff, delays, deadlines and leases are tested without waiting.
//
//	c, clk := hoppertest.NewClient(t, hopper.Config{})
//	_ = c.Register(sendEmail)
//	h, _ := sendEmail.Enqueue(ctx, c, Email{To: "a@b.c"}, &hopper.InsertOpts{Delay: time.Hour})
//	clk.Advance(time.Hour)
//	receipt, err := h.Result(ctx)
//
// Everything that waits reads this clock: job retry backoff, delays,
// leases, workflow durable sleeps and hook timeouts, hopper.Retry inside a
// handler or a step, and also the backoff between the tries of a workflow
// step, which runs inside the run's worker. The memory store stamps its
// change feed with it, so attempts' times compare with jobs' times.
// Moving the clock by hand, a step that fails and retries waits, holding
// its worker, until the test advances the clock past its backoff.
//
// Rather than move the clock by hand, let the harness do it:
// RunUntilIdle runs everything due and jumps the clock to the next thing
// due until nothing is left — also straight to the end of a backoff that
// an attempt in flight waits on (a step's retry, Retry in a handler), over
// the client's polls and heartbeats; RunUntilComplete does so until a
// workflow run ends (a run waiting on a hook is an error naming it);
// AutoAdvance does it in the background. When work is left past the limit
// or stops moving, the error names the jobs and runs still waiting and
// what on. Work runs one attempt of a job through the engine
// and reports what it did (state, output, children, Claim calls and
// heartbeats, with or without a message).
// StubType and StubWorkflow stand in for a workflow's activities and
// children, StubStep for a step's function.
// RequireEnqueued, RequireNotEnqueued, RequireRunCompleted, RequireHistory
// and RequireReplay check what jobs and workflows did.
//
// A workflow runs on the test's client, through the engine's real
// suspension and replay: on the memory store and the virtual clock that
// costs little. StubStep, StubType and StubWorkflow decide what a step, an
// activity or a child returns, and record their calls. To put a run at a
// given point (past a sleep, waiting on a hook, after a failed step), start
// it and drive it there with RunUntilComplete, HookResume or the clock,
// then check it with RequireHistory; to check new code against the history
// of a real run, RequireReplay. To run a workflow inline against a history
// written by hand — every step, activity, child and hook answered by it, no
// client at all — hopper.ReplayOutput returns what the code makes of it.
package hoppertest

import (
	"context"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/internal/hclock"
)

// Clock is a virtual clock: time stands still until Advance or Set moves
// it, and timers fire, in order, as it passes them. Jump moves it at once,
// as a process waking from a suspension sees time.
type Clock struct {
	*hclock.Virtual
}

// Epoch returns the time a new Clock starts at: 2030-01-01T00:00:00Z.
func Epoch() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }

// NewClock returns a virtual clock at start (Epoch when zero).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = Epoch()
	}
	return &Clock{hclock.NewVirtual(start)}
}

// AdvanceTo moves the clock to t, firing the timers it passes.
func (c *Clock) AdvanceTo(t time.Time) { c.Set(t) }

// T is the part of testing.TB that NewClient and Work use: *testing.T,
// *testing.B and *testing.F satisfy it, and so can a harness of one's own
// (an example's, say).
type T interface {
	TB
	Errorf(format string, args ...any)
	// Cleanup registers a function to run when the test ends.
	Cleanup(func())
}

// NewClient returns a started client on a fresh in-memory store with a
// virtual clock (cfg.Driver and cfg.Clock are filled in unless set). The
// client is stopped when the test ends.
func NewClient(t T, cfg hopper.Config) (*hopper.Client, *Clock) {
	t.Helper()
	clk, _ := cfg.Clock.(*Clock)
	if cfg.Clock == nil {
		clk = NewClock(time.Time{})
		cfg.Clock = clk
	}
	if cfg.Driver == nil {
		// The store stamps its changes (the attempts read from them) on
		// the test's clock too.
		d := memdriver.New(memdriver.WithClock(cfg.Clock.Now))
		cfg.Driver = d
		t.Cleanup(func() { _ = d.Close() })
	}
	c, err := hopper.New(cfg)
	if err != nil {
		t.Fatalf("hoppertest: new client: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("hoppertest: start client: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("hoppertest: stop client: %v", err)
		}
	})
	return c, clk
}
