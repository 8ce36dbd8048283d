package sqlitedriver

import (
	"testing"

	"github.com/hopper-go/hopper/driver/drivertest"
)

// BenchmarkQueueDepth reads a backlog of $HOPPER_BENCH_BACKLOG jobs (10,000
// unless set; docs/BENCHMARKS.md uses 1,000,000) two ways: the count of
// every job by queue and state, and QueueDepthList (see
// drivertest.BenchQueueDepth). The jobs are inserted in one statement, as
// drivertest.BacklogState lays them out, and the log checkpointed; the
// database is not analyzed (the driver never runs ANALYZE).
func BenchmarkQueueDepth(b *testing.B) {
	n := drivertest.BenchBacklog(b)
	d := openTemp(b, &Options{Synchronous: "NORMAL"})
	ctx := b.Context()
	const second, minute = int64(1e6), int64(60e6)
	now := testBase.UnixMicro()
	_, err := d.wdb.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1),
	b(i, k) AS (SELECT i, (i / 4) % 1000 FROM n)
	INSERT INTO jobs (id, type, queue, state, priority, queued_at, run_at, retry, lease_expires_at, ended_at, input)
	SELECT printf('backlog-%08d', i), 'bench', 'q' || (i % 4),
		CASE WHEN i < ?5 THEN 'running' WHEN k < 880 THEN 'pending' WHEN k < 940 THEN 'scheduled'
			WHEN k < 970 THEN 'retrying' ELSE 'succeeded' END,
		i % 3, ?2 - 60 * ?4,
		CASE WHEN k < 880 THEN ?2 - (i % 100000 + 1) * 1000
			WHEN k < 940 THEN ?2 + (k - 879) * ?4
			WHEN k < 955 THEN ?2 - (k - 939) * ?3
			WHEN k < 970 THEN ?2 + (k - 954) * ?3
			ELSE ?2 - ?4 END,
		'{}', CASE WHEN i < ?5 THEN ?2 + ?4 END, CASE WHEN i >= ?5 AND k >= 970 THEN ?2 END, CAST('{"n":42}' AS BLOB)
	FROM b`, n, now, second, minute, drivertest.BacklogRunning)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.wdb.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	drivertest.BenchQueueDepth(b, d, n, testBase)
}
