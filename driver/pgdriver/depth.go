package pgdriver

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
)

// queueDepthSQL is QueueDepthList's statement ($1 Cap+1, $2 now; with one,
// $3 the queue). Every read of jobs is a probe or a bounded walk of the
// partial indexes the claim reads:
//
//   - the queues: a loose scan of jobs_claim (the pending jobs) and one of
//     jobs_due_queue (the scheduled and retrying ones), one probe per
//     queue (PostgreSQL has no skip scan before version 18, and SELECT
//     DISTINCT queue would read every entry), plus the queues of the
//     running jobs (jobs_lease, as many rows as jobs run) and the stored
//     queue states;
//   - per queue, the due and delayed jobs counted up to $1 in index order
//     (jobs_claim; jobs_due_queue split at $2);
//   - the earliest due job: the earliest pending job of each priority (a
//     walk of jobs_claim's priorities, one probe each, at most $1 of them)
//     and the earliest scheduled or retrying job (one probe of
//     jobs_due_queue; it is due when its run_at <= $2).
//
// The reads of jobs_due_queue bound their range with row comparisons of
// (queue, run_at), which jobs_due (run_at) cannot bound: written as
// queue = … AND run_at <= …, the planner may read jobs_due instead and
// fetch each row to filter out the other queues' jobs, a read as long as
// every queue's waiting jobs. QueueDepthList runs the statement with the
// planner settings of sqlDepthPlan.
func queueDepthSQL(one bool) string {
	qs := `qs(queue) AS (SELECT $3::text)`
	if !one {
		qs = `p(queue) AS (
	(SELECT queue FROM {s}.jobs WHERE state = 'pending' ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM {s}.jobs j WHERE j.state = 'pending' AND j.queue > p.queue ORDER BY j.queue LIMIT 1)
	FROM p WHERE p.queue IS NOT NULL
),
w(queue) AS (
	(SELECT queue FROM {s}.jobs WHERE state IN {due} ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM {s}.jobs j WHERE j.state IN {due} AND j.queue > w.queue ORDER BY j.queue LIMIT 1)
	FROM w WHERE w.queue IS NOT NULL
),
qs(queue) AS (
	SELECT queue FROM p WHERE queue IS NOT NULL
	UNION SELECT queue FROM w WHERE queue IS NOT NULL
	UNION SELECT queue FROM r
	UNION SELECT name FROM {s}.queues
)`
	}
	return strings.Replace(`WITH RECURSIVE
r(queue, n) AS (SELECT queue, count(*) FROM {s}.jobs WHERE state = 'running' GROUP BY queue),
{qs}
SELECT qs.queue,
	(SELECT count(*) FROM (SELECT 1 FROM {s}.jobs j WHERE j.queue = qs.queue AND j.state = 'pending'
		ORDER BY j.priority DESC, j.run_at LIMIT $1) c),
	(SELECT count(*) FROM (SELECT 1 FROM {s}.jobs j WHERE j.state IN {due}
		AND (j.queue, j.run_at) >= (qs.queue, '-infinity') AND (j.queue, j.run_at) <= (qs.queue, $2)
		ORDER BY j.queue, j.run_at LIMIT $1) c),
	(SELECT count(*) FROM (SELECT 1 FROM {s}.jobs j WHERE j.state IN {due}
		AND (j.queue, j.run_at) > (qs.queue, $2) AND (j.queue, j.run_at) <= (qs.queue, 'infinity')
		ORDER BY j.queue, j.run_at LIMIT $1) c),
	coalesce((SELECT r.n FROM r WHERE r.queue = qs.queue), 0),
	(WITH RECURSIVE pr(priority, run_at, n) AS (
		(SELECT j.priority, j.run_at, 1 FROM {s}.jobs j WHERE j.queue = qs.queue AND j.state = 'pending'
			ORDER BY j.priority DESC, j.run_at LIMIT 1)
		UNION ALL
		SELECT x.priority, x.run_at, pr.n + 1 FROM pr, LATERAL (
			SELECT j.priority, j.run_at FROM {s}.jobs j
			WHERE j.queue = qs.queue AND j.state = 'pending' AND j.priority < pr.priority
			ORDER BY j.priority DESC, j.run_at LIMIT 1) x
		WHERE pr.n < $1
	) SELECT min(run_at) FROM pr),
	(SELECT j.run_at FROM {s}.jobs j WHERE j.state IN {due}
		AND (j.queue, j.run_at) >= (qs.queue, '-infinity') AND (j.queue, j.run_at) <= (qs.queue, 'infinity')
		ORDER BY j.queue, j.run_at LIMIT 1)
FROM qs
ORDER BY qs.queue`, "{qs}", qs, 1)
}

// sqlDepthPlan holds QueueDepthList's reads to their indexes, for its own
// transaction. With a queue's jobs fewer than the cap in the statistics,
// the planner would rather read a count's whole range with a bitmap scan
// and sort it, or scan the table. Before a vacuum, when an index-only scan
// still visits the table, it would rather read jobs_due, whose order
// follows the table's, than jobs_due_queue, whose order does not: random
// reads cost as much as sequential ones here (the reads are few, and
// cached), so the index that reads fewer rows wins. And the statement's
// estimated cost (a subplan per queue, each up to the cap) would set off
// JIT compilation, which takes longer than the statement.
const sqlDepthPlan = "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), " +
	"set_config('random_page_cost', current_setting('seq_page_cost'), true), set_config('jit', 'off', true)"

// QueueDepthList reads the queues' backlog in one statement; see
// driver.Executor. In a caller's transaction it leaves the transaction's
// planner settings alone.
func (e *executor) QueueDepthList(ctx context.Context, p *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	if err := e.check(ctx, "queue depth"); err != nil {
		return nil, err
	}
	if p.Cap <= 0 {
		return nil, errors.New("pgdriver: queue depth: cap must be > 0")
	}
	now := p.Now.Truncate(time.Microsecond)
	b := &pgx.Batch{}
	planned := e.tx == nil
	if planned {
		b.Queue(sqlDepthPlan)
	}
	if p.Queue == "" {
		b.Queue(e.d.q.queueDepth, p.Cap+1, now)
	} else {
		b.Queue(e.d.q.queueDepthOne, p.Cap+1, now, p.Queue)
	}
	out := []*driver.QueueDepthRow{}
	err := e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
		if planned {
			if err := skip(br, 1); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var d driver.QueueDepthRow
		var pending, overdue int
		var oldestPending, firstWaiting pgtype.Timestamptz
		_, err = pgx.ForEachRow(rows, []any{&d.Queue, &pending, &overdue, &d.Delayed, &d.Running, &oldestPending, &firstWaiting}, func() error {
			row := &driver.QueueDepthRow{Queue: d.Queue, Due: min(pending+overdue, p.Cap+1), Delayed: d.Delayed, Running: d.Running,
				OldestDueAt: fromTS(oldestPending)}
			if w := fromTS(firstWaiting); !w.IsZero() && !w.After(now) && (row.OldestDueAt.IsZero() || w.Before(row.OldestDueAt)) {
				row.OldestDueAt = w
			}
			out = append(out, row)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, e.d.fail("queue depth", err)
	}
	return out, nil
}
