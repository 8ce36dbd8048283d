package sqlitedriver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// planRows is how many jobs the plan test stores, so the planner's choices
// reflect a real table (sqlite_stat1 is filled by ANALYZE).
const planRows = 10000

// TestQueryPlans checks that the hot queries use their indexes and never
// scan the jobs table.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// Fill the table in one statement: the plans are under test, not the
	// insert path (which is slow under the race detector).
	fill := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1),
	s(k, state) AS (VALUES (0, 'pending'), (1, 'scheduled'), (2, 'running'), (3, 'retrying'), (4, 'succeeded'), (5, 'dead'))
	INSERT INTO jobs (id, type, queue, state, priority, group_id, unique_key, retry, queued_at, run_at, lease_expires_at, ended_at)
	SELECT printf('job-%06d', i), 'type-' || (i % 5), 'q' || (i % 4), s.state, i % 3, 'g-' || (i % 100),
		CASE WHEN i % 10 = 0 THEN 'u-' || i END, '{}', ?2, ?2 + i * 1000000,
		CASE WHEN s.state = 'running' THEN ?2 + i * 1000000 END,
		CASE WHEN s.state IN ('succeeded', 'dead') THEN ?2 + i * 1000000 END
	FROM n JOIN s ON s.k = n.i % 6`
	if _, err := d.wdb.ExecContext(ctx, fill, planRows, base.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if n := countJobs(t, d); n != planRows {
		t.Fatalf("%d rows, want %d", n, planRows)
	}
	now := base.Add(time.Hour).UnixMicro()
	cases := []planCase{
		{"claim", claimSQLAny, []any{int64(0), now, "w", now, "q1", 100}, "jobs_claim"},
		{"claim with types", claimSQLTypes, []any{int64(0), now, "w", now, "q1", 100, `["type-1","type-2"]`}, "jobs_claim"},
		{"promote queue", promoteQueueSQL, []any{"q1", now, 1000}, "jobs_due"},
		{"promote all", promoteAllSQL, []any{now, 1000}, "jobs_due_all"},
		{"next run at", nextRunAtSQL, []any{"q1"}, "jobs_due"},
		{"expired leases", expiredLeasesSQL, []any{now, 100}, "jobs_lease"},
		{"unique holder", uniqueHolderSQL, []any{"type-0", "u-10"}, "jobs_unique"},
		{"get", getJobSQL, []any{"job-000001"}, "sqlite_autoindex_jobs_1"},
		{"get many", getManySQL, []any{`["job-000001","job-000002"]`}, "sqlite_autoindex_jobs_1"},
		{"finish", finishSQL, []any{"job-000002", 1, "succeeded", 1, now, nil, nil, now, nil, nil, zeroMicros}, "sqlite_autoindex_jobs_1"},
		{"finish batch", finishJobsSQLs[2], []any{"job-000002", 1, "succeeded", 1, now, nil, nil, now, nil, nil,
			"job-000008", 1, "succeeded", 1, now, nil, nil, now, nil, nil}, "sqlite_autoindex_jobs_1"},
		{"heartbeat", heartbeatSQL, []any{"job-000002", 1, now}, "sqlite_autoindex_jobs_1"},
		{"retention", deleteFinishedSQL([]string{"'succeeded'", "'dead'"}), []any{now, 1000}, "jobs_retention"},
	}
	// Without statistics (the driver never runs ANALYZE itself) and with them.
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := d.wdb.ExecContext(ctx, "ANALYZE"); err != nil {
				t.Fatal(err)
			}
		}
		checkPlans(t, d, analyzed, cases)
	}
}

type planCase struct {
	name, query string
	args        []any
	index       string
}

func checkPlans(t *testing.T, d *Driver, analyzed bool, cases []planCase) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cases {
		rows, err := d.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "\n")
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN jobs") {
				t.Errorf("%s (analyzed %v) scans the jobs table:\n%s", c.name, analyzed, all)
			}
			if strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s (analyzed %v) sorts:\n%s", c.name, analyzed, all)
			}
		}
		if !strings.Contains(all, "INDEX "+c.index+" ") {
			t.Errorf("%s (analyzed %v) does not use index %s:\n%s", c.name, analyzed, c.index, all)
		}
	}
}
