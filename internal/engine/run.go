package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// applyRunEffects records, in the transaction of a run's job transition,
// what the transition means for the run: its status, and waking its parent
// when it ends.
func (e *Engine) applyRunEffects(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow, eff *RunEffect) error {
	now := e.now()
	if eff != nil && eff.ended && job.State == hoppertype.JobStateSucceeded {
		// The run's end was stored with its last record.
		if job.ParentID != "" {
			return e.wake(ctx, tx, job.ParentID, now)
		}
		return nil
	}
	p := &driver.RunUpdateParams{ID: job.ID, Now: now}
	switch job.State {
	case hoppertype.JobStateSucceeded:
		p.Status = hoppertype.RunCompleted
	case hoppertype.JobStatePending, hoppertype.JobStateScheduled:
		p.Status = hoppertype.RunWaiting
	case hoppertype.JobStateRetrying:
		p.Status = hoppertype.RunPending
	case hoppertype.JobStateDead, hoppertype.JobStateExpired:
		p.Status = hoppertype.RunFailed
		if eff != nil && eff.Final != "" {
			p.Status = eff.Final
		}
		p.Error = job.Error
	case hoppertype.JobStateCancelled:
		p.Status = hoppertype.RunCancelled
	case hoppertype.JobStateStuck:
		p.Status = hoppertype.RunStuck
		p.Error = job.Error
	default:
		return nil
	}
	if job.State.Terminal() {
		p.EndedAt = now
	}
	run, err := tx.RunUpdate(ctx, p)
	if err != nil {
		if errors.Is(err, hoppertype.ErrNotFound) {
			return nil
		}
		return err
	}
	if job.State.Terminal() && run.ParentID != "" {
		return e.wake(ctx, tx, run.ParentID, now)
	}
	return nil
}

// wake makes a waiting run (or any waiting job) due now.
func (e *Engine) wake(ctx context.Context, tx driver.Executor, id string, now time.Time) error {
	woken, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{id}, Now: now})
	if err != nil {
		return err
	}
	for _, j := range woken {
		if err := tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: j.Queue}); err != nil {
			return err
		}
	}
	return nil
}

func isRunJob(job *hoppertype.JobRow) bool { return strings.HasPrefix(job.Type, WorkflowTypePrefix) }

// WakeKey is the metadata key of a job whose end wakes a run (an
// activity's job names its run).
const WakeKey = "hopper.wake"

// RunEffect is what a run's execution asks of the transaction that records
// its job's outcome.
type RunEffect struct {
	// Final is the run status a final failure ends in (compensated,
	// quarantined …); empty means the default for the job's state.
	Final hoppertype.RunStatus
	// Recheck, for a suspended run, reports after the suspension committed
	// whether what it waits for already happened (closing the lost-wake
	// race); the run is then woken at once.
	Recheck func(ctx context.Context) bool
	// Events are appended to the run's history in the transaction that
	// records the job's outcome, under the same lease (the run's end).
	Events []*hoppertype.RunEvent
	// ended says the append of Events also stored the run's end (status
	// completed), so the outcome's run update is not needed.
	ended bool
	// unstarted says no record of the execution marked the run running
	// (its operations were all stored with its end): the append of Events
	// marks it running, and the outcome's run update ends it, so the run's
	// changes read pending, running, then its end, as every execution's do.
	unstarted bool
}

// SuspendError carries a run's suspension from its execution to the
// outcome: the job waits until Until without using an attempt.
type SuspendError struct{ Until time.Time }

func (e *SuspendError) Error() string {
	return "workflow waiting until " + e.Until.Format(time.RFC3339)
}

// Unwrap makes a suspension match *hoppertype.SnoozeError, the public
// marker of a job deferred without using an attempt: work middleware
// (which see the execution's error) tell a run that waits from one that
// failed without knowing this type.
func (e *SuspendError) Unwrap() error { return &hoppertype.SnoozeError{RunAt: e.Until} }
