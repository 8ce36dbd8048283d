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
	// Advances is how many times the clock may move (default 10000): work
	// that waits on the clock again and again (a handler retrying every
	// millisecond for ever) is an error naming it.
	Advances int
	// Quiet is how long (wall time) work in flight may go without an
	// attempt starting or ending before it counts as waiting on the
	// clock, which then jumps to the earliest timer such work waits on
	// (default 20ms): a step's retry backoff, a rate limit or Retry
	// inside a handler wait on the clock while their attempt runs. Raise
	// it for handlers that compute for longer than that between two
	// attempts' starts or ends, or the clock may reach their timeout.
	// Work in flight that waits on no timer (a slow claim or commit, or
	// a notification missed) moves the clock only after ten times Quiet
	// without progress, and then to the next housekeeping timer, a poll.
	Quiet time.Duration
	// Stall is how long (wall time) the client may make no progress, the
	// clock having no timer work waits on to move to, before the run fails
	// naming what is running and due (default 10s).
	Stall time.Duration
}

func (o *RunOpts) withDefaults() RunOpts {
	out := RunOpts{Limit: 366 * 24 * time.Hour, Advances: 10000, Quiet: 20 * time.Millisecond, Stall: 10 * time.Second}
	if o != nil {
		if o.Limit > 0 {
			out.Limit = o.Limit
		}
		if o.Advances > 0 {
			out.Advances = o.Advances
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

// pollAfterQuiets is how many Quiet periods work in flight, with no timer
// it waits on, goes without progress before the clock moves to the next
// housekeeping timer (a poll) to give it a turn.
const pollAfterQuiets = 10

// outside is when a job waits for an event from outside (a hook's
// payload with no timeout): hopper schedules such waits in the year 9999.
var outside = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrLimit is returned (wrapped) by RunUntilIdle and RunUntilComplete when
// work is still scheduled past RunOpts.Limit, or the clock moved
// RunOpts.Advances times.
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
// has settled (Client.Settle), so attempts in flight keep their leases.
// Attempts in flight that wait on the clock themselves (a step's backoff,
// Retry in a handler, a rate limit) make it jump straight to the earliest
// timer such work waits on, over the client's polls and heartbeats, their
// leases held over the jump (Client.HoldLeases). A day-long sleep or an
// hour's backoff takes milliseconds.
//
// It returns an error wrapping ErrLimit when work remains past
// opts.Limit, and ErrStalled when the client stops making progress; both
// name the jobs and runs still waiting and what on.
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
	advances := 0
	// jump moves the clock to t at once, the leases of attempts in
	// flight held over it.
	jump := func(t time.Time) error {
		if advances++; advances > o.Advances {
			return fmt.Errorf("%w: the clock moved %d times (RunOpts.Advances) and work still waits at %s; %s",
				ErrLimit, o.Advances, clk.Now().Format(time.RFC3339), waiting(ctx, c))
		}
		if err := c.HoldLeases(ctx, t); err != nil {
			return err
		}
		clk.Jump(t)
		lastProgress = time.Now()
		return nil
	}
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
			next = earliest(next, st.NextSchedule)
			if next.After(horizon) {
				return fmt.Errorf("%w: the next job is due at %s, past %s; %s", ErrLimit,
					next.Format(time.RFC3339), horizon.Format(time.RFC3339), waiting(ctx, c))
			}
			// Everything at once: nothing runs, so nothing needs the
			// instants in between.
			if err := jump(next); err != nil {
				return err
			}
			continue
		}
		// Work in flight or due made no progress for Quiet: it waits on
		// the clock (a step's backoff, a rate limit, Retry, a deadline),
		// or on something only the test can give. The clock goes straight
		// to the earliest timer work waits on, a job or an occurrence
		// due: polls, heartbeats and maintenance in between have nothing
		// to do but keep the leases, which the jump holds.
		var next time.Time
		if t, ok := clk.NextForegroundTimer(); ok && t.After(now) {
			next = t
		}
		if st.Due == 0 && st.Running == 0 && st.Next.Before(outside) {
			// Jobs due now or running come first: one not yet claimed,
			// or an attempt slow to end (a loaded machine), is not
			// waiting on a later job; what it waits on is a timer.
			next = earliest(next, st.Next)
		}
		next = earliest(next, st.NextSchedule)
		if !next.IsZero() {
			if next.After(horizon) {
				return fmt.Errorf("%w: work in flight waits until %s, past %s; %s", ErrLimit,
					next.Format(time.RFC3339), horizon.Format(time.RFC3339), waiting(ctx, c))
			}
			if err := jump(next); err != nil {
				return err
			}
			continue
		}
		// No timer anything waits on: give the polls their turn, and fail
		// if that does not help.
		if time.Since(lastProgress) > o.Stall {
			return fmt.Errorf("%w for %s: %d jobs running, %d due at %s (a paused queue, a type no client registered, a handler that blocks?); %s",
				ErrStalled, o.Stall, st.Running, st.Due, now.Format(time.RFC3339), waiting(ctx, c))
		}
		if time.Since(lastProgress) < pollAfterQuiets*o.Quiet {
			// Work in flight may only be slow (a loaded machine: a claim
			// or a commit taking longer than Quiet): moving the clock to
			// housekeeping would move it past where the work would have
			// left it. Look again first.
			continue
		}
		if t, ok := clk.NextTimer(); ok && t.After(now) && !t.After(horizon) {
			if err := c.HoldLeases(ctx, t); err != nil {
				return err
			}
			clk.AdvanceTo(t)
		}
	}
}

// earliest returns the earlier of a and b, a zero one left out.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// maxWaiting caps the jobs and the runs waiting names.
const maxWaiting = 10

// waiting describes the jobs not finished and the runs not ended, and what
// each run waits on: `still waiting: run r1 (order, waiting) waits on hook
// "approve"; job j2 (charge, retrying) due 2030-01-01T01:00:00Z`.
func waiting(ctx context.Context, c *hopper.Client) string {
	var out []string
	runs, err := c.RunList(ctx, &hopper.RunQuery{Statuses: []hopper.RunStatus{hoppertype.RunPending, hoppertype.RunRunning, hoppertype.RunWaiting}, Limit: maxWaiting + 1})
	if err != nil {
		return "what waits is unknown: " + err.Error()
	}
	isRun := map[string]bool{}
	for i, r := range runs.Runs {
		isRun[r.ID] = true
		if i == maxWaiting {
			out = append(out, "more runs")
			break
		}
		out = append(out, describeRun(ctx, c, r))
	}
	jobs, err := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{hopper.StatePending, hopper.StateScheduled, hopper.StateRunning, hopper.StateRetrying}, Limit: 100})
	if err != nil {
		return "what waits is unknown: " + err.Error()
	}
	n := 0
	for _, j := range jobs.Jobs {
		if isRun[j.ID] {
			continue // told with its run
		}
		if n++; n > maxWaiting {
			out = append(out, "more jobs")
			break
		}
		d := fmt.Sprintf("job %s (%s, %s)", j.ID, j.Type, j.State)
		if j.State != hopper.StateRunning && !j.RunAt.IsZero() {
			d += " due " + j.RunAt.Format(time.RFC3339)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return "no job or run is waiting"
	}
	return "still waiting: " + strings.Join(out, "; ")
}

// describeRun tells what run r waits on: its hooks, activities and child
// runs not finished, or its job's next time.
func describeRun(ctx context.Context, c *hopper.Client, r *hopper.RunInfo) string {
	d := fmt.Sprintf("run %s (%s, %s)", r.ID, r.Workflow, r.Status)
	info, err := c.RunGet(ctx, r.ID)
	if err != nil {
		return d
	}
	var on []string
	for _, h := range info.Hooks {
		if h.State == hoppertype.HookWaiting {
			on = append(on, fmt.Sprintf("hook %q", h.Name))
		}
	}
	for _, a := range info.Activities {
		if !a.State.Terminal() {
			on = append(on, fmt.Sprintf("activity %s (job %s, %s)", a.Name, a.JobID, a.State))
		}
	}
	if kids, err := c.RunList(ctx, &hopper.RunQuery{ParentID: r.ID, Statuses: []hopper.RunStatus{hoppertype.RunPending, hoppertype.RunRunning, hoppertype.RunWaiting}, Limit: maxWaiting}); err == nil {
		for _, k := range kids.Runs {
			on = append(on, fmt.Sprintf("child run %s (%s)", k.ID, k.Workflow))
		}
	}
	if len(on) > 0 {
		return d + " waits on " + strings.Join(on, ", ")
	}
	if j, err := c.JobGet(ctx, r.ID); err == nil && j.State != hopper.StateRunning && j.RunAt.Before(outside) {
		return d + " waits until " + j.RunAt.Format(time.RFC3339)
	}
	return d
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
