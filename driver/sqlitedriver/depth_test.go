package sqlitedriver

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// jobsAccess matches a plan line that reads jobs (as jobs or as j), and
// depthSearch one that searches jobs_claim or jobs_due.
var (
	jobsAccess  = regexp.MustCompile(`^(SCAN|SEARCH) (jobs|j)( |$)`)
	depthSearch = regexp.MustCompile(`^SEARCH (jobs|j) USING (COVERING )?INDEX (jobs_claim|jobs_due) \(`)
)

// TestQueueDepthPlan checks that QueueDepthList's statements read jobs only
// by searches of jobs_claim and jobs_due (the walk of jobs_lease, the
// running jobs, excepted), without statistics and with them.
func TestQueueDepthPlan(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fill := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1),
	s(k, state) AS (VALUES (0, 'pending'), (1, 'scheduled'), (2, 'running'), (3, 'retrying'), (4, 'succeeded'), (5, 'dead'))
	INSERT INTO jobs (id, type, queue, state, priority, retry, queued_at, run_at, lease_expires_at, ended_at)
	SELECT printf('job-%06d', i), 'type-' || (i % 5), 'q' || (i / 6 % 4), s.state, i % 3, '{}', ?2, ?2 + (i % 1000 - 500) * 1000000,
		CASE WHEN s.state = 'running' THEN ?2 + 60000000 END,
		CASE WHEN s.state IN ('succeeded', 'dead') THEN ?2 END
	FROM n JOIN s ON s.k = n.i % 6`
	if _, err := d.wdb.ExecContext(ctx, fill, planRows, base.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := d.wdb.ExecContext(ctx, "ANALYZE"); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name  string
			query string
			args  []any
		}{
			{"every queue", queueDepthSQL, []any{101, base.UnixMicro()}},
			{"one queue", queueDepthOneSQL, []any{101, base.UnixMicro(), "q2"}},
		} {
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
			reads := 0
			for _, line := range plan {
				if !jobsAccess.MatchString(line) {
					continue
				}
				reads++
				switch {
				case strings.HasSuffix(line, " USING INDEX jobs_lease") && strings.HasPrefix(line, "SCAN "):
				case depthSearch.MatchString(line):
				default:
					t.Errorf("%s (analyzed %v) reads jobs with %q:\n%s", c.name, analyzed, line, all)
				}
			}
			if reads == 0 {
				t.Errorf("%s (analyzed %v): no read of jobs in the plan:\n%s", c.name, analyzed, all)
			}
		}
	}
}
