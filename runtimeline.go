package hopper

import (
	"context"
	"fmt"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// RunTimeline is everything a run did, attempt by attempt: what a timeline
// view draws on a time axis.
type RunTimeline struct {
	// Run is the run as RunGet returns it (its latest attempt's history
	// and views).
	Run *RunInfo
	// Attempts are the run's attempts, oldest first: each a generation of
	// its history (see "Retries, attempts and compensation" in
	// docs/concepts.md).
	Attempts []RunAttempt
	// Executions are the executions of the run's job (JobAttempts): each
	// time a worker ran the workflow's code, until it returned, waited or
	// was lost to a crash. Empty once retention deleted the job.
	Executions []Attempt
}

// RunAttempt is one attempt of a run.
type RunAttempt struct {
	// Attempt is its number, from 1 (WorkflowContext.Attempt).
	Attempt int
	// Retried says the attempt failed and the workflow retried it (its
	// compensations ran before the next attempt began); Ended that it
	// ended the run, by a final failure or a cancellation.
	Retried, Ended bool
	// Timeline is the attempt's history with each activity's executions
	// told in place, as RunInfo.Timeline.
	Timeline []*hoppertype.RunEvent
	// Activities are the jobs of the activities the attempt scheduled, as
	// they stand.
	Activities []ActivityInfo
}

// RunTimeline returns a run with every attempt's history and activities
// and its job's executions. An unknown run matches ErrNotFound. It reads
// more than RunGet: the activities of every attempt and their changes.
func (c *Client) RunTimeline(ctx context.Context, id string) (*RunTimeline, error) {
	info, _, all, err := c.loadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &RunTimeline{}
	gens := engine.Generations(all)
	for _, g := range gens {
		acts, err := c.activities(ctx, g.Events)
		if err != nil {
			return nil, fmt.Errorf("hopper: run %s: %w", id, err)
		}
		out.Attempts = append(out.Attempts, RunAttempt{Attempt: g.Attempt, Retried: g.Retried, Ended: g.Ended,
			Timeline: timeline(g.Events, acts), Activities: acts})
	}
	if n := len(out.Attempts); n > 0 && out.Attempts[n-1].Attempt == attemptOf(info.History) {
		info.Activities = out.Attempts[n-1].Activities
	} else if info.Activities, err = c.activities(ctx, info.History); err != nil {
		return nil, fmt.Errorf("hopper: run %s: %w", id, err)
	}
	if err := c.completeRun(ctx, info, gens); err != nil {
		return nil, err
	}
	out.Run = info
	chs, err := c.changesOf(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("hopper: run %s: %w", id, err)
	}
	out.Executions, _ = AttemptsOf(chs)
	return out, nil
}

// attemptOf is the attempt a history belongs to (0 for none).
func attemptOf(history []*hoppertype.RunEvent) int {
	if len(history) == 0 {
		return 0
	}
	return history[0].Attempt
}
