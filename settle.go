package hopper

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-go/hopper/internal/engine"
)

// Settled is what Client.Settle found at the client's clock's now.
type Settled struct {
	// Idle says nothing is left to do now: no job running or due in the
	// client's queues (paused ones left out), no claim under way or asked
	// for, no outcome being recorded, no worker slot in use, no schedule
	// occurrence due and not yet stored.
	Idle bool
	// Running counts the jobs running (claimed) in the store.
	Running int
	// Due counts the jobs due now in the client's queues.
	Due int
	// Next is when the earliest job scheduled later in the client's queues
	// is due (a delay, a retry's backoff, a workflow's sleep or hook
	// timeout); zero when there is none.
	Next time.Time
	// NextSchedule is the next occurrence the client's running schedules
	// wait for; zero when there is none.
	NextSchedule time.Time
}

// ErrNotStarted is returned by Settle before Start or after Stop.
var ErrNotStarted = engine.ErrNotStarted

// Settle waits until the started client has nothing left to do at its
// clock's now, and reports what is due later. When work is in flight but
// no attempt starts or ends and nothing is recorded for quiet (wall time),
// it returns what it found, not idle: that work waits on the clock (a
// step's backoff, a rate limit, Retry) or on something outside.
//
// It is for test harnesses that drive a virtual clock (see
// hoppertest.RunUntilIdle): they move the clock only once the client
// settled, so no lease lapses under a running attempt and everything due
// at one instant runs before the next.
func (c *Client) Settle(ctx context.Context, quiet time.Duration) (Settled, error) {
	if quiet <= 0 {
		return Settled{}, errors.New("hopper: Settle needs a positive quiet time")
	}
	st, err := c.eng.Settle(ctx, quiet)
	return Settled{Idle: st.Idle, Running: st.Running, Due: st.Due, Next: st.Next, NextSchedule: st.NextSchedule}, err
}

// HoldLeases renews the leases of the attempts running in the started
// client to last Config.Visibility past until, as its heartbeats would
// have by then.
//
// It is for test harnesses that jump a virtual clock to until while
// attempts wait on that clock (a step's backoff, Retry): called before the
// jump, the rescuer the jump wakes finds those attempts' leases held
// (hoppertest.RunUntilIdle does so).
func (c *Client) HoldLeases(ctx context.Context, until time.Time) error {
	return c.eng.HoldLeases(ctx, until)
}
