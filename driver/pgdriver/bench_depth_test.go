package pgdriver

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hopper-go/hopper/driver/drivertest"
)

// BenchmarkQueueDepth reads a backlog of $HOPPER_BENCH_BACKLOG jobs (10,000
// unless set; docs/BENCHMARKS.md uses 1,000,000) in a fresh schema two
// ways: the count of every job by queue and state, and QueueDepthList (see
// drivertest.BenchQueueDepth). The jobs are inserted in one statement, as
// drivertest.BacklogState lays them out; the reads run on the table
// analyzed but not yet vacuumed, then vacuumed.
func BenchmarkQueueDepth(b *testing.B) {
	n := drivertest.BenchBacklog(b)
	pool := newPool(b, 4)
	d := newTestDriver(b, pool)
	ctx := b.Context()
	s := d.q.schema
	fillBacklog(b, pool, d.q.schema, n)
	// First as a burst of inserts leaves the table (analyzed, not yet
	// vacuumed: an index-only scan still reads each row's page to see it
	// is visible), autovacuum held off; then as autovacuum leaves it.
	for _, sql := range []string{`ALTER TABLE ` + s + `.jobs SET (autovacuum_enabled = false)`, `ANALYZE ` + s + `.jobs`} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("analyzed", func(b *testing.B) { drivertest.BenchQueueDepth(b, d, n, testBase) })
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) `+s+`.jobs`); err != nil {
		b.Fatal(err)
	}
	b.Run("vacuumed", func(b *testing.B) { drivertest.BenchQueueDepth(b, d, n, testBase) })
}

// fillBacklog inserts n jobs into the schema s (quoted) in one statement,
// as drivertest.BacklogState lays them out, ids in order, their run_at
// around testBase.
func fillBacklog(t testing.TB, pool *pgxpool.Pool, s string, n int) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `INSERT INTO `+s+`.jobs (id, type, queue, state, priority, queued_at, run_at, retry, lease_expires_at, ended_at, input)
SELECT format('backlog-%s', lpad(i::text, 8, '0')), 'bench', 'q' || (i % 4),
	CASE WHEN i < $3 THEN 'running' WHEN k < 880 THEN 'pending' WHEN k < 940 THEN 'scheduled'
		WHEN k < 970 THEN 'retrying' ELSE 'succeeded' END,
	i % 3, $1::timestamptz - interval '1 hour',
	CASE WHEN k < 880 THEN $1::timestamptz - (i % 100000 + 1) * interval '1 millisecond'
		WHEN k < 940 THEN $1::timestamptz + (k - 879) * interval '1 minute'
		WHEN k < 955 THEN $1::timestamptz - (k - 939) * interval '1 second'
		WHEN k < 970 THEN $1::timestamptz + (k - 954) * interval '1 second'
		ELSE $1::timestamptz - interval '1 minute' END,
	'{}', CASE WHEN i < $3 THEN $1::timestamptz + interval '1 minute' END,
	CASE WHEN i >= $3 AND k >= 970 THEN $1::timestamptz END, convert_to('{"n":42}', 'UTF8')
FROM generate_series(0, $2::int - 1) i, LATERAL (SELECT (i / 4) % 1000 AS k) x`, testBase, n, drivertest.BacklogRunning)
	if err != nil {
		t.Fatal(err)
	}
}
