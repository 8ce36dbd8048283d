package hopper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// BulkAction is what JobBulk or RunBulk does to each job or run it selects.
type BulkAction string

// Bulk actions. Each applies to the jobs (runs) in the states it can
// change, and a selection is narrowed to those states: a redrive of "every
// job of type x" is a redrive of its dead jobs.
const (
	// BulkCancel cancels waiting and stuck jobs and asks running ones to
	// stop, as JobCancel does; for runs, RunCancel on the runs not finished.
	BulkCancel BulkAction = "cancel"
	// BulkRetry moves dead, expired, cancelled and stuck jobs back to
	// pending, as JobRetry does; for runs, RunRetry on the runs that ended
	// without completing, and stuck ones.
	BulkRetry BulkAction = "retry"
	// BulkRedrive moves dead jobs back to pending, as JobRedrive does
	// (jobs only).
	BulkRedrive BulkAction = "redrive"
	// BulkDelete deletes finished jobs (succeeded, dead, expired,
	// cancelled) with what is kept beside them, as retention does (jobs
	// only).
	BulkDelete BulkAction = "delete"
)

// BulkPage is how many jobs a bulk action changes per transaction: a
// large action is many short transactions, never one that holds the
// store's locks for long.
const BulkPage = 500

// MaxBulkIDs is the most ids one bulk call takes; larger selections go by
// filter.
const MaxBulkIDs = MaxListLimit

// BulkParams select the jobs of JobBulk: by IDs or by Filter, not both.
type BulkParams struct {
	Action BulkAction
	// IDs names the jobs, at most MaxBulkIDs.
	IDs []string
	// Filter selects every job matching it (its Cursor, Limit, Ascending
	// and ScanLimit are not used).
	Filter *ListParams
	// DryRun counts the jobs the action would select and changes nothing.
	DryRun bool
	// Max caps how many jobs an action by Filter selects, and must be set
	// for one: it is the count the person or program confirmed (a dry
	// run's Matched), so that an action never reaches further than what
	// was confirmed, whatever arrived meanwhile. Jobs past it are left as
	// they are and reported in More. It is not used with IDs or DryRun.
	Max int
}

// BulkResult is what a bulk action did.
type BulkResult struct {
	Action BulkAction
	DryRun bool
	// Matched counts the jobs (runs) selected: matching the filter or
	// named, in a state the action applies to.
	Matched int
	// Changed counts those the action changed; Skipped the others (their
	// state changed meanwhile, or, for a retry, another live job holds
	// their unique key).
	Changed int
	Skipped int
	// More is set when more jobs matched than Max allowed.
	More bool
}

// bulkStates are the job states each action applies to.
func bulkStates(a BulkAction) ([]JobState, error) {
	switch a {
	case BulkCancel:
		return []JobState{StatePending, StateScheduled, StateRunning, StateRetrying, StateStuck}, nil
	case BulkRetry:
		return []JobState{StateDead, StateExpired, StateCancelled, StateStuck}, nil
	case BulkRedrive:
		return []JobState{StateDead}, nil
	case BulkDelete:
		return []JobState{StateSucceeded, StateDead, StateExpired, StateCancelled}, nil
	}
	return nil, fmt.Errorf("%w: unknown bulk action %q (cancel, retry, redrive or delete)", ErrInvalidInput, a)
}

// narrow keeps the states of want that the filter allows (all of want
// when it names none).
func narrow[S comparable](want, filter []S) []S {
	if len(filter) == 0 {
		return want
	}
	var out []S
	for _, s := range want {
		if slices.Contains(filter, s) {
			out = append(out, s)
		}
	}
	return out
}

// checkBulk refuses a selection that is neither or both of ids and a
// filter, too many ids, or a filter action without its confirmed Max.
func checkBulk(ids int, filter, dryRun bool, max int) error {
	switch {
	case ids > 0 && filter:
		return fmt.Errorf("%w: a bulk action takes ids or a filter, not both", ErrInvalidInput)
	case ids == 0 && !filter:
		return fmt.Errorf("%w: a bulk action needs ids or a filter", ErrInvalidInput)
	case ids > MaxBulkIDs:
		return fmt.Errorf("%w: %d ids in one bulk action (at most %d; select more by filter)", ErrInvalidInput, ids, MaxBulkIDs)
	case max < 0:
		return fmt.Errorf("%w: negative max", ErrInvalidInput)
	case filter && !dryRun && max == 0:
		return fmt.Errorf("%w: a bulk action by filter needs max, the number of jobs confirmed (a dry run counts them)", ErrInvalidInput)
	}
	return nil
}

// JobBulk cancels, retries, redrives or deletes many jobs at once: those
// named, or every one matching a filter, a page of BulkPage at a time, each
// page in its own transaction, in id order. An action by filter changes at
// most p.Max jobs; a dry run only counts. It returns what it did; an error
// part-way leaves the pages done before it done, and the result says how
// many.
func (c *Client) JobBulk(ctx context.Context, p *BulkParams) (*BulkResult, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil bulk params", ErrInvalidInput)
	}
	states, err := bulkStates(p.Action)
	if err != nil {
		return nil, err
	}
	if err := checkBulk(len(p.IDs), p.Filter != nil, p.DryRun, p.Max); err != nil {
		return nil, err
	}
	if err := checkTexts("job id", p.IDs); err != nil {
		return nil, err
	}
	lp := driver.JobListParams{IDs: p.IDs, Ascending: true}
	if f := p.Filter; f != nil {
		for _, s := range f.States {
			if !s.Valid() {
				return nil, fmt.Errorf("%w: unknown job state %q", ErrInvalidInput, s)
			}
		}
		if err := f.check(); err != nil {
			return nil, err
		}
		lp = f.driverParams()
		lp.Cursor, lp.Ascending = "", true
		states = narrow(states, f.States)
	}
	res := &BulkResult{Action: p.Action, DryRun: p.DryRun}
	if len(states) == 0 {
		return res, nil
	}
	lp.States = states
	max := p.Max
	if p.Filter == nil || p.DryRun {
		max = 0
	}
	for {
		lp.Limit = BulkPage
		if max > 0 {
			lp.Limit = min(BulkPage, max-res.Matched)
		}
		rows, err := c.store().JobList(ctx, &lp)
		if err != nil {
			return res, fmt.Errorf("hopper: bulk %s: list jobs: %w", p.Action, err)
		}
		if len(rows) == 0 {
			return res, nil
		}
		lp.Cursor = rows[len(rows)-1].ID
		res.Matched += len(rows)
		if !p.DryRun {
			n, err := c.bulkPage(ctx, p.Action, states, rows)
			res.Changed += n
			res.Skipped = res.Matched - res.Changed
			if err != nil {
				return res, fmt.Errorf("hopper: bulk %s: %w", p.Action, err)
			}
		}
		if max > 0 && res.Matched >= max {
			lp.Limit = 1
			more, err := c.store().JobList(ctx, &lp)
			if err != nil {
				return res, fmt.Errorf("hopper: bulk %s: list jobs: %w", p.Action, err)
			}
			res.More = len(more) > 0
			return res, nil
		}
		if len(rows) < lp.Limit {
			return res, nil
		}
	}
}

// bulkPage applies action to one page of jobs in one transaction and
// returns how many it changed.
func (c *Client) bulkPage(ctx context.Context, action BulkAction, states []JobState, rows []*JobRow) (int, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	switch action {
	case BulkCancel:
		done, err := c.eng.CancelJobs(ctx, ids)
		return len(done), err
	case BulkRetry, BulkRedrive:
		done, err := c.eng.Redrive(ctx, &driver.JobRetryParams{IDs: ids, States: states})
		return len(done), err
	case BulkDelete:
		n := 0
		err := c.store().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			var err error
			n, err = tx.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{IDs: ids, States: states})
			return err
		})
		return n, err
	}
	return 0, errors.New("unknown action")
}

// RunBulkParams select the runs of RunBulk: by IDs or by Filter, not both.
// DryRun and Max are as in BulkParams.
type RunBulkParams struct {
	// Action is BulkCancel or BulkRetry.
	Action BulkAction
	IDs    []string
	// Filter selects every run matching it (its Limit, Cursor and Offset
	// are not used).
	Filter *RunQuery
	DryRun bool
	Max    int
}

// RunBulk cancels or retries many runs at once: those named, or every one
// matching a filter, newest first, each run as RunCancel or RunRetry does
// it. An action by filter changes at most p.Max runs; a dry run only
// counts.
func (c *Client) RunBulk(ctx context.Context, p *RunBulkParams) (*BulkResult, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil bulk params", ErrInvalidInput)
	}
	var statuses []RunStatus
	switch p.Action {
	case BulkCancel:
		for _, s := range hoppertype.RunStatuses() {
			if !s.Terminal() {
				statuses = append(statuses, s)
			}
		}
	case BulkRetry:
		statuses = runRetryable
	default:
		return nil, fmt.Errorf("%w: unknown bulk action on runs %q (cancel or retry)", ErrInvalidInput, p.Action)
	}
	if err := checkBulk(len(p.IDs), p.Filter != nil, p.DryRun, p.Max); err != nil {
		return nil, err
	}
	if err := checkTexts("run id", p.IDs); err != nil {
		return nil, err
	}
	res := &BulkResult{Action: p.Action, DryRun: p.DryRun}
	act := func(id string) error {
		if p.DryRun {
			return nil
		}
		var err error
		if p.Action == BulkCancel {
			err = c.RunCancel(ctx, id)
		} else {
			err = c.RunRetry(ctx, id)
		}
		switch {
		case err == nil:
			res.Changed++
		case errors.Is(err, ErrStateConflict), errors.Is(err, ErrNotFound):
		default:
			return err
		}
		return nil
	}
	finish := func(err error) (*BulkResult, error) {
		if !p.DryRun {
			res.Skipped = res.Matched - res.Changed
		}
		if err != nil {
			return res, fmt.Errorf("hopper: bulk %s runs: %w", p.Action, err)
		}
		return res, nil
	}
	if p.Filter == nil {
		for _, id := range p.IDs {
			run, err := c.store().RunGet(ctx, &driver.RunGetParams{ID: id})
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return finish(err)
			}
			if !slices.Contains(statuses, run.Status) {
				continue
			}
			res.Matched++
			if err := act(id); err != nil {
				return finish(err)
			}
		}
		return finish(nil)
	}
	q := *p.Filter
	q.Statuses, q.Cursor, q.Offset = narrow(statuses, q.Statuses), "", 0
	if len(q.Statuses) == 0 {
		return finish(nil)
	}
	max := p.Max
	if p.DryRun {
		max = 0
	}
	for {
		q.Limit = MaxListLimit
		page, err := c.RunList(ctx, &q)
		if err != nil {
			return finish(err)
		}
		for _, r := range page.Runs {
			if max > 0 && res.Matched >= max {
				res.More = true
				return finish(nil)
			}
			res.Matched++
			if err := act(r.ID); err != nil {
				return finish(err)
			}
		}
		if page.NextCursor == "" {
			return finish(nil)
		}
		q.Cursor = page.NextCursor
	}
}
