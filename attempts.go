package hopper

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Attempt is one execution of a job (the seeds' rig), read from the job's
// changes in the change feed: a change into running starts it, the next
// change of the job ends it. A job keeps its id across attempts, and its
// attempt count is the count of these records: there is no counter apart
// from them to drift.
type Attempt struct {
	// Generation is the job's life the attempt belongs to: 1 until the job
	// is first moved back from a stop (retried, redriven, reopened by an
	// observer), then 2, and so on. Attempt numbers restart with each.
	Generation int
	// Number is the attempt's number within its generation.
	Number int
	Worker string
	// StartedAt and EndedAt are the store's times of the changes that
	// started and ended the attempt; EndedAt is zero while it runs.
	StartedAt time.Time
	EndedAt   time.Time
	// Outcome is the state the attempt left the job in (a retrying,
	// terminal or stuck state; scheduled for a snooze or a waiting
	// workflow; pending when it was handed back unused); empty while it
	// runs.
	Outcome JobState
	// Error is the failure the attempt ended with, if any; Stuck is the
	// stuck slot it set.
	Error *ErrorInfo
	Stuck *StuckInfo
	// Heartbeats are the messages the attempt's handler recorded with
	// JobContext.HeartbeatMessage, in order.
	Heartbeats []Heartbeat
}

// Heartbeat is a message a running attempt recorded (the seeds'
// activity_heartbeat), with the store's time.
type Heartbeat struct {
	At      time.Time
	Message string
}

// JobAttempts returns a job's attempts in order, or an error matching
// ErrNotFound when the store holds neither the job nor any change of it.
func (c *Client) JobAttempts(ctx context.Context, id string) ([]Attempt, error) {
	chs, err := c.changesOf(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("hopper: attempts of %s: %w", id, err)
	}
	if len(chs) == 0 {
		if _, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: id}); err != nil {
			return nil, fmt.Errorf("hopper: attempts of %s: %w", id, err)
		}
	}
	attempts, _ := AttemptsOf(chs)
	return attempts, nil
}

// JobGenerations returns how many lives a job has had: 1, plus one for each
// time it was moved back from a stop (see Attempt.Generation).
func (c *Client) JobGenerations(ctx context.Context, id string) (int, error) {
	chs, err := c.changesOf(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("hopper: generations of %s: %w", id, err)
	}
	_, gens := AttemptsOf(chs)
	return gens, nil
}

// JobChanges returns every change the store holds of a job (or run, or
// gate) with this id, in order.
func (c *Client) JobChanges(ctx context.Context, id string) ([]*Change, error) {
	chs, err := c.changesOf(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("hopper: changes of %s: %w", id, err)
	}
	return chs, nil
}

// changesOf reads every change of an entity, in order.
func (c *Client) changesOf(ctx context.Context, id string) ([]*Change, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	var out []*Change
	var after int64
	for {
		page, err := c.store().ChangeList(ctx, &driver.ChangeListParams{EntityID: id, After: ChangeCursor{Position: after}, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Position
	}
}

// stopped reports whether a job in state s has stopped: terminal or stuck.
// A change out of a stop into a waiting state begins a new generation.
func stopped(s string) bool {
	st := hoppertype.JobState(s)
	return st.Terminal() || st == hoppertype.JobStateStuck
}

// AttemptsOf folds a job's changes, in order (JobChanges), into its
// attempts and counts its generations (0 when there are no job changes).
// Run changes among them are skipped.
func AttemptsOf(chs []*Change) ([]Attempt, int) {
	var out []Attempt
	gen := 0
	for _, ch := range chs {
		if ch.Kind == hoppertype.ChangeRun {
			continue
		}
		if gen == 0 {
			gen = 1
		}
		if ch.IsHeartbeat() {
			if len(out) > 0 && out[len(out)-1].Outcome == "" {
				a := &out[len(out)-1]
				a.Heartbeats = append(a.Heartbeats, Heartbeat{At: ch.At, Message: ch.Detail})
			}
			continue
		}
		if stopped(ch.Prev) && !stopped(ch.State) {
			gen++
		}
		if ch.Prev == string(hoppertype.JobStateRunning) && len(out) > 0 && out[len(out)-1].Outcome == "" {
			a := &out[len(out)-1]
			a.EndedAt, a.Outcome = ch.At, hoppertype.JobState(ch.State)
			switch a.Outcome {
			case hoppertype.JobStateSucceeded, hoppertype.JobStateScheduled, hoppertype.JobStatePending:
			default:
				a.Error = ch.Error
			}
			a.Stuck = ch.Stuck
		}
		if ch.State == string(hoppertype.JobStateRunning) {
			out = append(out, Attempt{Generation: gen, Number: ch.Attempt, Worker: ch.Worker, StartedAt: ch.At})
		}
	}
	return out, gen
}
