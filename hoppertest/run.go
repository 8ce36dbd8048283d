package hoppertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// RunOpts bound RunUntilIdle and RunUntilComplete. The zero value is
// usable.
type RunOpts struct {
	// Limit is how far the virtual clock may move (default 366 days): work
	// still scheduled beyond it is an error naming it.
	Limit time.Duration
	// Quiet is how long (wall time) work in flight may go without an
	// attempt starting or ending before the clock moves to its next timer
	// (default 20ms): a step's retry backoff, a rate limit or Retry inside
	// a handler wait on the clock while their attempt runs.
	Quiet time.Duration
	// Stall is how long (wall time) the client may make no progress, the
	// clock having no timer to move to, before the run fails naming what
	// is running and due (default 10s).
	Stall time.Duration
}

func (o *RunOpts) withDefaults() RunOpts {
	out := RunOpts{Limit: 366 * 24 * time.Hour, Quiet: 20 * time.Millisecond, Stall: 10 * time.Second}
	if o != nil {
		if o.Limit > 0 {
			out.Limit = o.Limit
		}
		if o.Quiet > 0 {
			out.Quiet = o.Quiet
		}
		if o.Stall > 0 {
			out.Stall = o.Stall
		}
	}
	return out
}

// outside is when a job waits for an event from outside (a hook's
// payload with no timeout): hopper schedules such waits in the year 9999.
var outside = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrLimit is returned (wrapped) by RunUntilIdle and RunUntilComplete when
// work is still scheduled past RunOpts.Limit.
var ErrLimit = errors.New("hoppertest: work is still scheduled past the limit")

// ErrStalled is returned (wrapped) when the client makes no progress and
// the clock has no timer to move to.
var ErrStalled = errors.New("hoppertest: the client makes no progress")

// ErrWaitingOutside is returned (wrapped) by RunUntilComplete when the run
// waits on an event only the test can give (a hook's payload, a paused
// queue's resume) and nothing else is left to do.
var ErrWaitingOutside = errors.New("hoppertest: the run waits on an outside event")

// RunUntilIdle runs c until nothing is left to do: it lets everything due
// run, then moves clk to the next thing due (a delay, a retry's backoff, a
// workflow's durable sleep, a hook's timeout, a schedule's occurrence,
// while jobs remain), and again, until every job is finished or waits on an
// event from outside (a hook with no timeout). The clock moves only when c
// has settled (Client.Settle), so attempts in flight keep their leases;
// while an attempt waits on the clock itself (a step's backoff), the clock
// moves to its next timer. A day-long sleep takes milliseconds.
//
// It returns an error wrapping ErrLimit when work remains past
// opts.Limit, and ErrStalled when the client stops making progress.
func RunUntilIdle(ctx context.Context, c *hopper.Client, clk *Clock, opts *RunOpts) error {
	return runUntil(ctx, c, clk, opts.withDefaults(), nil)
}

// RunUntilComplete runs c as RunUntilIdle does until the run of h is
// finished, and returns its result (h.Result). A run that waits on an
// event from outside with nothing else left to do is an error wrapping
// ErrWaitingOutside that names what it waits for (its hooks' tokens).
func RunUntilComplete[O any](ctx context.Context, c *hopper.Client, clk *Clock, h *hopper.RunHandle[O], opts *RunOpts) (O, error) {
	var zero O
	done := func(ctx context.Context) (bool, error) {
		run, err := c.RunGet(ctx, h.ID())
		if err != nil {
			return false, err
		}
		return run.Status.Terminal(), nil
	}
	if err := runUntil(ctx, c, clk, opts.withDefaults(), done); err != nil {
		if errors.Is(err, errIdle) {
			return zero, waitingOutside(ctx, c, h.ID())
		}
		return zero, err
	}
	return h.Result(ctx)
}

// errIdle ends runUntil with a target not done and nothing left to do.
var errIdle = errors.New("idle")

// runUntil is the loop of RunUntilIdle and RunUntilComplete: done, when
// set, ends it early (true) and makes an idle end errIdle.
func runUntil(ctx context.Context, c *hopper.Client, clk *Clock, o RunOpts, done func(context.Context) (bool, error)) error {
	horizon := clk.Now().Add(o.Limit)
	lastProgress := time.Now()
	var last hopper.Settled
	for {
		if done != nil {
			ok, err := done(ctx)
			if err != nil || ok {
				return err
			}
		}
		st, err := c.Settle(ctx, o.Quiet)
		if err != nil {
			return err
		}
		if st != last {
			lastProgress, last = time.Now(), st
		}
		now := clk.Now()
		if st.Idle {
			next := st.Next
			if next.IsZero() || !next.Before(outside) {
				if done != nil {
					if ok, err := done(ctx); err != nil || ok {
						return err
					}
					return errIdle
				}
				return nil // finished, or waiting on the outside
			}
			// Schedules fire only while jobs remain: a schedule alone
			// would keep the loop going for ever.
			if !st.NextSchedule.IsZero() && st.NextSchedule.Before(next) {
				next = st.NextSchedule
			}
			if next.After(horizon) {
				return fmt.Errorf("%w: the next job is due at %s, past %s", ErrLimit, next.Format(time.RFC3339), horizon.Format(time.RFC3339))
			}
			// Everything at once: nothing runs, so nothing needs the
			// instants in between.
			clk.Jump(next)
			lastProgress = time.Now()
			continue
		}
		// Work in flight or due made no progress for Quiet: it waits on
		// the clock (a step's backoff, a rate limit, a hold), or on
		// something only the test can give.
		if time.Since(lastProgress) > o.Stall {
			return fmt.Errorf("%w for %s: %d jobs running, %d due at %s (a paused queue, a type no client registered, a handler that blocks?)",
				ErrStalled, o.Stall, st.Running, st.Due, now.Format(time.RFC3339))
		}
		if t, ok := clk.NextTimer(); ok && t.After(now) && !t.After(horizon) {
			clk.AdvanceTo(t)
		}
	}
}

// waitingOutside describes what the run waits on.
func waitingOutside(ctx context.Context, c *hopper.Client, id string) error {
	run, err := c.RunGet(ctx, id)
	if err != nil {
		return err
	}
	var waits []string
	for _, h := range run.Hooks {
		if h.State == hoppertype.HookWaiting {
			waits = append(waits, fmt.Sprintf("hook %q (token %s)", h.Name, h.Token))
		}
	}
	what := "nothing hoppertest can move"
	if len(waits) > 0 {
		what = strings.Join(waits, ", ")
	}
	return fmt.Errorf("%w: run %s (%s) is %s, waiting on %s; resume it (Client.HookResume) and run again", ErrWaitingOutside, id, run.Workflow, run.Status, what)
}

// AutoAdvance runs RunUntilIdle in the background each time c does
// something (an enqueue, an attempt's start or end), so a test can wait on
// handles (Result, Wait) as it would against a real clock while virtual
// time jumps over delays, backoffs and sleeps (seed 004's autoProgress).
// stop ends it and returns RunUntilIdle's last error.
func AutoAdvance(c *hopper.Client, clk *Clock, opts *RunOpts) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	unsubscribe := c.Subscribe(func(hopper.Event) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	done := make(chan error, 1)
	go func() {
		var last error
		defer func() { done <- last }()
		for {
			if err := RunUntilIdle(ctx, c, clk, opts); err != nil && ctx.Err() == nil {
				last = err
			}
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
		}
	}()
	return func() error {
		unsubscribe()
		cancel()
		return <-done
	}
}
