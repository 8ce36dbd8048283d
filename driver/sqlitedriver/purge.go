package sqlitedriver

import (
	"context"
	"fmt"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.QueueDeleter = (*Driver)(nil)

// JobDeleteQueue deletes a queue's jobs that are not running, at most
// Limit, in one write; see driver.QueueDeleter.
func (d *Driver) JobDeleteQueue(ctx context.Context, params *driver.JobDeleteQueueParams) (int, error) {
	return call(ctx, d, func(ctx context.Context, t *executor) (int, error) {
		if err := t.check(ctx); err != nil {
			return 0, err
		}
		var n int
		err := t.atomic(ctx, func() error {
			var err error
			n, err = t.r.jobDeleteQueue(ctx, params)
			return err
		})
		return n, err
	})
}

func (r *runner) jobDeleteQueue(ctx context.Context, p *driver.JobDeleteQueueParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	ids, err := column[string](ctx, r, `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs INDEXED BY jobs_queue_id
	WHERE queue = ?1 AND state <> 'running' LIMIT ?2) RETURNING id`, p.Queue, limit)
	if err != nil {
		return 0, fmt.Errorf("delete the jobs of queue %q: %w", p.Queue, err)
	}
	// A deleted job that is a workflow run or a gate takes its rows with
	// it; the changes go by trigger.
	if err := r.deleteRunsOf(ctx, ids); err != nil {
		return 0, fmt.Errorf("delete the jobs of queue %q: workflow rows: %w", p.Queue, err)
	}
	return len(ids), nil
}
