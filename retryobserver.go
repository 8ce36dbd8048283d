package hopper

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// MaxRetryAttempts is the retry observer's default cap: how many lives
// (generations, see Attempt.Generation) a job may have before a retryable
// engine failure leaves it stuck for good. With 2, a job stuck by a
// retryable engine failure is reopened once.
const MaxRetryAttempts = 2

// RetryObserverName is the name the retry observer is registered under.
const RetryObserverName = "hopper.retry"

// retryObserverGap is the retry observer's least time between two reads
// that commits nudge.
const retryObserverGap = 100 * time.Millisecond

// RetryObserver is the retry policy for stuck jobs, written as an
// AfterCommit observer on the public API — the example to follow for a
// policy of one's own. On a change into stuck whose stuck slot says
// retryable: true (an engine failure the engine believes another try may
// get past, such as leases lost on every attempt), it reopens the job
// (Client.JobReopen: pending, a new generation of attempts) while the job has
// had fewer than MaxAttempts generations, and only while that change is
// still the job's latest (a stuck job cancelled or redriven meanwhile is
// not reopened). It leaves alone stucks that are
// not retryable, that do not say (fail-safe) and dependency stucks
// (failed-blocker, cycle), which a redrive of their blocker un-sticks.
// Every client registers one unless Config.RetryObserverCap is negative.
type RetryObserver struct {
	c   *Client
	max int
}

// MaxAttempts is the observer's cap on generations.
func (r *RetryObserver) MaxAttempts() int { return r.max }

// RetryObserver returns the client's retry observer, or nil when
// Config.RetryObserverCap turned it off.
func (c *Client) RetryObserver() *RetryObserver { return c.retryObs }

// ShouldReopen is the retry observer's decision for a change, given how
// many generations the job has had and the cap: reopen only a change into
// stuck (from another state) whose stuck slot says retryable: true, while
// generations < max.
func ShouldReopen(ch Change, generations, max int) bool {
	if ch.State != string(hoppertype.JobStateStuck) || ch.Prev == string(hoppertype.JobStateStuck) {
		return false
	}
	if ch.Stuck == nil || ch.Stuck.Retryable == nil || !*ch.Stuck.Retryable {
		return false
	}
	return generations < max
}

func newRetryObserver(c *Client, max int) (*RetryObserver, error) {
	r := &RetryObserver{c: c, max: max}
	filter := ChangeFilter{Kinds: []ChangeKind{ChangeJob, ChangeGate}, States: []string{string(hoppertype.JobStateStuck)}}
	// A stuck job waits for the rescuer's lease expiry and backoff anyway:
	// reading the feed at most ten times a second under load is soon
	// enough, and takes a twentieth of the reads.
	if err := c.observe(RetryObserverName, AfterCommit, filter, r.observe, retryObserverGap); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RetryObserver) observe(ctx context.Context, ch Change) error {
	if !ShouldReopen(ch, 0, r.max) {
		return nil // not a retryable stuck: no need to look further
	}
	chs, err := r.c.JobChanges(ctx, ch.EntityID)
	if err != nil {
		return err
	}
	// Act on the job's latest change only: a stuck the job has left since
	// (cancelled, redriven, stuck again) is not this change's to reopen.
	for i := len(chs) - 1; i >= 0; i-- {
		if chs[i].Kind == ChangeRun {
			continue
		}
		if chs[i].Position != ch.Position {
			return nil
		}
		break
	}
	_, gens := AttemptsOf(chs)
	if !ShouldReopen(ch, gens, r.max) {
		return nil
	}
	if _, err := r.c.JobReopen(ctx, ch.EntityID); err != nil && !errors.Is(err, ErrStateConflict) && !errors.Is(err, ErrNotFound) {
		// A conflict means the job left stuck since the check: nothing to do.
		return err
	}
	return nil
}
