package pgdriver

import (
	"context"
	"fmt"

	"github.com/hopper-go/hopper/driver"
)

var _ driver.QueueDeleter = (*Driver)(nil)

// deleteQueueSQL deletes a queue's jobs that are not running ($1 queue,
// $2 limit or NULL) with the rows kept beside them, as deleteFinished does
// for finished ones, and returns how many jobs it deleted.
const deleteQueueSQL = `WITH victims AS MATERIALIZED (
	SELECT id FROM {s}.jobs
	WHERE queue = $1 AND state <> 'running'
	ORDER BY id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), del AS (
	DELETE FROM {s}.jobs j USING victims v WHERE j.id = v.id
	RETURNING j.id
), gone AS MATERIALIZED (
	SELECT array_agg(id) AS ids FROM del
), del_runs AS (
	DELETE FROM {s}.runs WHERE id = ANY((SELECT ids FROM gone)::text[])
), del_events AS (
	DELETE FROM {s}.run_events WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_hooks AS (
	DELETE FROM {s}.hooks WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_chunks AS (
	DELETE FROM {s}.stream_chunks WHERE run_id = ANY((SELECT ids FROM gone)::text[])
), del_gates AS (
	DELETE FROM {s}.gates WHERE id = ANY((SELECT ids FROM gone)::text[])
), del_waits AS (
	DELETE FROM {s}.gate_waits WHERE gate_id = ANY((SELECT ids FROM gone)::text[])
), del_queued AS (
	DELETE FROM {s}.gate_queues WHERE gate_id = ANY((SELECT ids FROM gone)::text[])
)
SELECT coalesce(cardinality(ids), 0) FROM gone`

// JobDeleteQueue deletes a queue's jobs that are not running, at most
// Limit, in one statement; see driver.QueueDeleter.
func (d *Driver) JobDeleteQueue(ctx context.Context, params *driver.JobDeleteQueueParams) (int, error) {
	if err := d.root.check(ctx, "delete the jobs of a queue"); err != nil {
		return 0, err
	}
	var n int
	if err := d.pool.QueryRow(ctx, d.q.r.Replace(deleteQueueSQL), params.Queue, limitArg(params.Limit)).Scan(&n); err != nil {
		return 0, d.fail(fmt.Sprintf("delete the jobs of queue %q", params.Queue), err)
	}
	return n, nil
}
