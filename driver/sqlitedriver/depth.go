package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/driver"
)

// Queue depths (QueueDepthList) in one statement whose every read of jobs
// is pinned to a partial index (INDEXED BY), so none can become a scan of
// the table:
//
//   - the queues: a loose scan of jobs_claim (the pending jobs) and one of
//     jobs_due (the scheduled and retrying ones), one probe per queue,
//     plus the queues of the running jobs (jobs_lease, as many rows as
//     jobs run) and the stored queue states;
//   - per queue, the due and delayed jobs counted up to ?1 (= Cap+1) on
//     jobs_claim and on jobs_due (split at ?2, the time now);
//   - the earliest due job: the earliest pending job of each priority (a
//     walk of jobs_claim's priorities, at most ?1 of them, two probes
//     each) and the earliest scheduled or retrying one (one probe of
//     jobs_due; it is due when its run_at <= ?2).
//
// The first loose probe asks for a queue at or after the empty string
// (every queue), so it is a search of the index, not a walk from its start.
const queueDepthSQLTemplate = `WITH RECURSIVE
r(queue, n) AS (
	SELECT queue, count(*) FROM jobs INDEXED BY jobs_lease WHERE state = 'running' GROUP BY queue
),
{qs}
SELECT qs.queue,
	(SELECT count(*) FROM (SELECT 1 FROM jobs j INDEXED BY jobs_claim
		WHERE j.queue = qs.queue AND j.state = 'pending' LIMIT ?1)),
	(SELECT count(*) FROM (SELECT 1 FROM jobs j INDEXED BY jobs_due
		WHERE j.queue = qs.queue AND j.state IN ('scheduled', 'retrying') AND j.run_at <= ?2 LIMIT ?1)),
	(SELECT count(*) FROM (SELECT 1 FROM jobs j INDEXED BY jobs_due
		WHERE j.queue = qs.queue AND j.state IN ('scheduled', 'retrying') AND j.run_at > ?2 LIMIT ?1)),
	coalesce((SELECT r.n FROM r WHERE r.queue = qs.queue), 0),
	(WITH RECURSIVE pr(priority, n) AS (
		SELECT (SELECT j.priority FROM jobs j INDEXED BY jobs_claim
			WHERE j.queue = qs.queue AND j.state = 'pending' ORDER BY j.priority DESC LIMIT 1), 1
		UNION ALL
		SELECT (SELECT j.priority FROM jobs j INDEXED BY jobs_claim
			WHERE j.queue = qs.queue AND j.state = 'pending' AND j.priority < pr.priority ORDER BY j.priority DESC LIMIT 1), pr.n + 1
		FROM pr WHERE pr.priority IS NOT NULL AND pr.n < ?1
	)
	SELECT min((SELECT j.run_at FROM jobs j INDEXED BY jobs_claim
		WHERE j.queue = qs.queue AND j.state = 'pending' AND j.priority = pr.priority ORDER BY j.run_at LIMIT 1))
	FROM pr WHERE pr.priority IS NOT NULL),
	(SELECT j.run_at FROM jobs j INDEXED BY jobs_due
		WHERE j.queue = qs.queue AND j.state IN ('scheduled', 'retrying') ORDER BY j.run_at LIMIT 1)
FROM qs ORDER BY qs.queue`

// queueDepthAllQueues lists the queues for queueDepthSQL.
const queueDepthAllQueues = `p(queue) AS (
	SELECT (SELECT queue FROM jobs INDEXED BY jobs_claim WHERE state = 'pending' AND queue >= '' ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM jobs j INDEXED BY jobs_claim WHERE j.state = 'pending' AND j.queue > p.queue ORDER BY j.queue LIMIT 1)
	FROM p WHERE p.queue IS NOT NULL
),
w(queue) AS (
	SELECT (SELECT queue FROM jobs INDEXED BY jobs_due WHERE state IN ('scheduled', 'retrying') AND queue >= '' ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM jobs j INDEXED BY jobs_due WHERE j.state IN ('scheduled', 'retrying') AND j.queue > w.queue ORDER BY j.queue LIMIT 1)
	FROM w WHERE w.queue IS NOT NULL
),
qs(queue) AS (
	SELECT queue FROM p WHERE queue IS NOT NULL
	UNION SELECT queue FROM w WHERE queue IS NOT NULL
	UNION SELECT queue FROM r
	UNION SELECT name FROM queues
)`

var (
	// queueDepthSQL reads every queue: ?1 Cap+1, ?2 now.
	queueDepthSQL = strings.Replace(queueDepthSQLTemplate, "{qs}", queueDepthAllQueues, 1)
	// queueDepthOneSQL reads the queue ?3.
	queueDepthOneSQL = strings.Replace(queueDepthSQLTemplate, "{qs}", "qs(queue) AS (SELECT ?3)", 1)
)

// queueDepthList reads the queues' backlog (see driver.Executor).
func (r *runner) queueDepthList(ctx context.Context, p *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	if p.Cap <= 0 {
		return nil, fmt.Errorf("queue depth: cap must be > 0")
	}
	query, args := queueDepthSQL, []any{p.Cap + 1, trunc(p.Now).UnixMicro()}
	if p.Queue != "" {
		query, args = queueDepthOneSQL, append(args, p.Queue)
	}
	now := trunc(p.Now)
	out := []*driver.QueueDepthRow{}
	err := r.each(ctx, query, func(rows *sql.Rows) error {
		d := &driver.QueueDepthRow{}
		var pending, overdue int
		var oldestPending, firstWaiting sql.NullInt64
		if err := rows.Scan(&d.Queue, &pending, &overdue, &d.Delayed, &d.Running, &oldestPending, &firstWaiting); err != nil {
			return err
		}
		d.Due = min(pending+overdue, p.Cap+1)
		d.OldestDueAt = fromMicros(oldestPending)
		if w := fromMicros(firstWaiting); !w.IsZero() && !w.After(now) && (d.OldestDueAt.IsZero() || w.Before(d.OldestDueAt)) {
			d.OldestDueAt = w
		}
		out = append(out, d)
		return nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	return out, nil
}
