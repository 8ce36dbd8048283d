package sqlitedriver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// planRows is how many jobs the plan test stores, so the planner's choices
// reflect a real table (sqlite_stat1 is filled by ANALYZE).
const planRows = 10000

// TestQueryPlans checks that the hot queries use their indexes, never scan
// a table and never sort.
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
		{"claimed rows", claimedRowsSQL, []any{`[1,2,3]`}, "rowid"},
		{"promote queue", promoteQueueSQL, []any{"q1", now, 1000}, "jobs_due"},
		{"promote all", promoteAllSQL, []any{now, 1000}, "jobs_due_all"},
		{"next run at", nextRunAtSQL, []any{"q1"}, "jobs_due"},
		{"expired leases", expiredLeasesSQL, []any{now, 100}, "jobs_lease"},
		{"dead workers' leases", workersLeasesSQL, []any{`["w"]`, 100}, "jobs_lease"},
		{"unique holder", uniqueHolderSQL, []any{"type-0", "u-10"}, "jobs_unique"},
		{"get", getJobSQL, []any{"job-000001"}, "sqlite_autoindex_jobs_1"},
		{"get many", getManySQL, []any{`["job-000001","job-000002"]`}, "sqlite_autoindex_jobs_1"},
		{"finish", finishSQL, []any{"job-000002", 1, "succeeded", 1, now, nil, nil, now, nil, nil, zeroMicros}, "sqlite_autoindex_jobs_1"},
		{"finish batch", finishJobsSQLs[2], []any{"job-000002", 1, "succeeded", 1, now, nil, nil, now, nil, nil,
			"job-000008", 1, "succeeded", 1, now, nil, nil, now, nil, nil}, "sqlite_autoindex_jobs_1"},
		{"heartbeat", heartbeatSQL, []any{"job-000002", 1, now}, "sqlite_autoindex_jobs_1"},
		{"retention", deleteFinishedSQL([]string{"'succeeded'", "'dead'"}), []any{now, 1000}, "jobs_retention"},
		{"a group's counts", countGroupSQL, []any{"job-000001", "", 10000}, "jobs_group"},
		{"retention's groups", deleteEmptyGroupsSQL, []any{`["job-000001","job-000002"]`}, "jobs_group"},
		{"wake", wakeSQL, []any{`["job-000001","job-000003"]`, now}, "sqlite_autoindex_jobs_1"},
	}
	// Listings by state: one state in id order from the index; several
	// states, or the running jobs (few) from their lease index, sorted.
	for _, c := range []struct {
		name   string
		states []hoppertype.JobState
		index  string
		sorts  bool
	}{
		{"list dead jobs", []hoppertype.JobState{hoppertype.JobStateDead}, "jobs_state_id", false},
		{"list pending jobs", []hoppertype.JobState{hoppertype.JobStatePending}, "jobs_state_id", false},
		{"list waiting jobs", []hoppertype.JobState{hoppertype.JobStatePending, hoppertype.JobStateScheduled}, "jobs_state_id", true},
		{"list running jobs", []hoppertype.JobState{hoppertype.JobStateRunning}, "jobs_lease", true},
	} {
		q, args := jobListSQL(&driver.JobListParams{States: c.states, Limit: 50}, jobCols, "")
		cases = append(cases, planCase{c.name, q, args, c.index})
		sortingCases[c.name] = c.sorts
	}
	// A search by a filter no index serves: its window's end, walked from
	// one end of the id index or found by the state's index, then the
	// search up to it by the id index.
	search := driver.JobListParams{ErrorContains: "boom", Limit: 50}
	q, args := jobScanEndSQL(&driver.JobScanParams{JobListParams: search, ScanLimit: 1000})
	cases = append(cases, planCase{"a search's window end", q, args, "sqlite_autoindex_jobs_1"})
	walkingCases["a search's window end"] = true
	dead := search
	dead.States = []hoppertype.JobState{hoppertype.JobStateDead}
	q, args = jobScanEndSQL(&driver.JobScanParams{JobListParams: dead, ScanLimit: 1000})
	cases = append(cases, planCase{"a search's window end, dead jobs", q, args, "jobs_state_id"})
	charges := search
	charges.Types = []string{"type-1"}
	q, args = jobScanEndSQL(&driver.JobScanParams{JobListParams: charges, ScanLimit: 1000})
	cases = append(cases, planCase{"a search's window end, one type", q, args, "jobs_type_id"})
	q, args = jobListSQL(&charges, jobCols, "job-005000")
	cases = append(cases, planCase{"a search of one type up to its window's end", q, args, "jobs_type_id"})
	q, args = jobListSQL(&driver.JobListParams{Queues: []string{"q1"}, Limit: 50}, jobCols, "")
	cases = append(cases, planCase{"list one queue", q, args, "jobs_queue_id"})
	q, args = jobListSQL(&search, jobCols, "job-005000")
	cases = append(cases, planCase{"a search up to its window's end", q, args, "sqlite_autoindex_jobs_1"})
	q, args = jobListSQL(&dead, jobCols, "job-005000")
	cases = append(cases, planCase{"a search of dead jobs up to its window's end", q, args, "jobs_state_id"})
	sortingCases["a group's counts"] = true // groups the (at most Limit) rows it read in id order
	cases = append(cases, workflowPlanCases(t, d, now)...)
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

// workflowPlanCases fills the workflow tables (schema version 2) and
// returns the cases of their hot queries.
func workflowPlanCases(t *testing.T, d *Driver, now int64) []planCase {
	t.Helper()
	ctx := context.Background()
	fills := []string{
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
		INSERT INTO runs (id, workflow, status, parent_id, created_at)
		SELECT printf('run-%06d', i), 'wf-' || (i % 7),
			CASE i % 5 WHEN 0 THEN 'pending' WHEN 1 THEN 'running' WHEN 2 THEN 'waiting' WHEN 3 THEN 'completed' ELSE 'failed' END,
			CASE WHEN i % 10 = 0 THEN printf('run-%06d', i / 10) END, ?2 + i * 1000000 FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
		INSERT INTO run_events (run_id, attempt, seq, kind, name, data, at)
		SELECT printf('run-%06d', i / 5), 1 + (i % 5) / 3, i % 5 + 1, 'step', 's', '{}', ?2 FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
		INSERT INTO hooks (token, run_id, name, state, created_at)
		SELECT printf('hook-%06d', i), printf('run-%06d', i / 3), 'h', 'waiting', ?2 + i FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
		INSERT INTO stream_chunks (run_id, "offset", data, at)
		SELECT printf('run-%06d', i / 10), i % 10, x'00', ?2 FROM n`,
	}
	for _, q := range fills {
		if _, err := d.wdb.ExecContext(ctx, q, planRows, now); err != nil {
			t.Fatal(err)
		}
	}
	list := func(p driver.RunListParams) (string, []any) {
		p.Limit = 50
		return runListSQL(&p)
	}
	cases := []planCase{
		{"lease fence", leaseHeldSQL, []any{"job-000002", 1}, "sqlite_autoindex_jobs_1"},
		{"append events", insertEventsSQLs[2], []any{"run-000001", 9, 1, "step", "", nil, now,
			"run-000001", 9, 2, "step", "", nil, now, "job-000002", 1}, "sqlite_autoindex_jobs_1"},
		{"list events", listEventsSQL, []any{"run-000001"}, "PRIMARY KEY"},
		{"list events of an attempt", listEventsAttemptSQL, []any{"run-000001", 2}, "PRIMARY KEY"},
		{"get hook", getHookSQL, []any{"hook-000001"}, "sqlite_autoindex_hooks_1"},
		{"resume hook", resumeHookSQL, []any{"hook-000001", nil, now, nil}, "sqlite_autoindex_hooks_1"},
		{"hooks of a run", listHooksSQL, []any{"run-000001"}, "hooks_run"},
		{"stream tail", streamTailSQL, []any{"run-000001"}, "PRIMARY KEY"},
		{"read stream", streamReadSQL, []any{"run-000001", 3, 100}, "PRIMARY KEY"},
		{"get run", getRunSQL, []any{"run-000001"}, "sqlite_autoindex_runs_1"},
		{"update run", updateRunSQL, []any{"run-000001", "running", nil, nil, now, `["pending"]`, false}, "sqlite_autoindex_runs_1"},
		{"delete run rows", deleteRunsSQLs[0], []any{`["run-000001"]`}, "sqlite_autoindex_runs_1"},
		{"delete run events", deleteRunsSQLs[1], []any{`["run-000001"]`}, "PRIMARY KEY"},
		{"delete run hooks", deleteRunsSQLs[2], []any{`["run-000001"]`}, "hooks_run"},
		{"delete run chunks", deleteRunsSQLs[3], []any{`["run-000001"]`}, "PRIMARY KEY"},
	}
	for _, c := range []struct {
		name  string
		p     driver.RunListParams
		index string
	}{
		{"list runs", driver.RunListParams{Offset: 100}, "runs_created"},
		{"list runs by status", driver.RunListParams{Statuses: []hoppertype.RunStatus{hoppertype.RunWaiting}}, "runs_status"},
		{"list runs by workflow", driver.RunListParams{Workflow: "wf-3"}, "runs_workflow"},
		{"list runs by parent", driver.RunListParams{ParentID: "run-000001"}, "runs_parent"},
	} {
		q, args := list(c.p)
		cases = append(cases, planCase{c.name, q, args, c.index})
	}
	return cases
}

// walkIndexes are the indexes meant to be walked in order from one end
// (a list with no filter, paged by LIMIT and OFFSET): "SCAN t USING INDEX
// i" is their plan, not a table scan.
// A walk of jobs_lease, which holds the running jobs alone, reads only
// them.
var walkIndexes = map[string]bool{"runs_created": true, "jobs_lease": true}

// walkingCases are the cases allowed to walk their index from one end
// (a bounded window, read up to its OFFSET).
var walkingCases = map[string]bool{}

type planCase struct {
	name, query string
	args        []any
	index       string
}

// sortingCases are the cases allowed to sort what their index found (a
// listing of several states, or of the few running jobs).
var sortingCases = map[string]bool{}

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
			for _, table := range []string{"jobs", "runs", "run_events", "hooks", "stream_chunks"} {
				if walkIndexes[c.index] && line == "SCAN "+table+" USING INDEX "+c.index {
					continue
				}
				if walkingCases[c.name] && line == "SCAN "+table+" USING COVERING INDEX "+c.index {
					continue
				}
				if line == "SCAN "+table || strings.HasPrefix(line, "SCAN "+table+" ") {
					t.Errorf("%s (analyzed %v) scans the %s table:\n%s", c.name, analyzed, table, all)
				}
			}
			if strings.Contains(line, "TEMP B-TREE") && !sortingCases[c.name] {
				t.Errorf("%s (analyzed %v) sorts:\n%s", c.name, analyzed, all)
			}
		}
		use := "INDEX " + c.index + " "
		switch c.index {
		case "PRIMARY KEY": // of a WITHOUT ROWID table
			use = "USING PRIMARY KEY ("
		case "rowid":
			use = "USING INTEGER PRIMARY KEY ("
		}
		// A line may end with the index name.
		if !strings.Contains(strings.ReplaceAll(all, "\n", " \n")+" ", use) {
			t.Errorf("%s (analyzed %v) does not use index %s:\n%s", c.name, analyzed, c.index, all)
		}
	}
}
