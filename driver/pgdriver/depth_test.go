package pgdriver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// analyzedNode is a node of an EXPLAIN (ANALYZE, FORMAT JSON) plan.
type analyzedNode struct {
	NodeType      string         `json:"Node Type"`
	RelationName  string         `json:"Relation Name"`
	IndexName     string         `json:"Index Name"`
	ActualRows    float64        `json:"Actual Rows"`
	ActualLoops   float64        `json:"Actual Loops"`
	RemovedFilter float64        `json:"Rows Removed by Filter"`
	Plans         []analyzedNode `json:"Plans"`
}

func (n analyzedNode) walk(fn func(n, parent analyzedNode)) {
	for _, c := range n.Plans {
		fn(c, n)
		c.walk(fn)
	}
}

// TestQueueDepthReadsAtMostTheCap runs QueueDepthList's statements, as
// the driver runs them (its planner settings), under EXPLAIN ANALYZE on a
// backlog of 100,000 jobs of four queues (BenchmarkQueueDepth's, their
// rows in run_at order rather than by queue), with a cap of 100, on the
// table analyzed but not yet vacuumed and then vacuumed. It checks what
// each read of jobs did: a probe or a walk of jobs_claim, jobs_due_queue
// or jobs_lease, never more than the cap's 101 rows a loop and no row
// filtered out (the running jobs' index excepted: it is read whole, and
// holds the 100 running jobs), no bitmap or sequential scan, and nothing
// sorted. Its generic plan reads jobs by index too. (Planned freely, the
// counts of waiting jobs read jobs_due, every queue's, and filtered them.)
func TestQueueDepthReadsAtMostTheCap(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 rows")
	}
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	s := d.q.schema
	const n, limit, running = 100_000, 101, 100
	fillBacklog(t, pool, s, n)
	for _, sql := range []string{`ALTER TABLE ` + s + `.jobs SET (autovacuum_enabled = false)`, `ANALYZE ` + s + `.jobs`} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	for _, vacuumed := range []bool{false, true} {
		if vacuumed {
			_, err := pool.Exec(ctx, `VACUUM (ANALYZE) `+s+`.jobs`)
			require.NoError(t, err)
		}
		for _, c := range []struct {
			name string
			sql  string
			args []any
		}{
			{fmt.Sprintf("every queue (vacuumed %v)", vacuumed), d.q.queueDepth, []any{limit, testBase}},
			{fmt.Sprintf("one queue (vacuumed %v)", vacuumed), d.q.queueDepthOne, []any{limit, testBase, "q2"}},
		} {
			checkDepthPlan(t, pool, c.name, c.sql, c.args, limit, running)
		}
	}
}

// checkDepthPlan explains sql with args as QueueDepthList runs it; see
// TestQueueDepthReadsAtMostTheCap.
func checkDepthPlan(t *testing.T, pool *pgxpool.Pool, name, sql string, args []any, limit, running float64) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a read
	_, err = tx.Exec(ctx, sqlDepthPlan)
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&raw), name)
	generic, plan := explainGeneric(t, tx, name, sql, len(args))
	for _, n := range generic.scans("jobs") {
		if !strings.HasPrefix(n.NodeType, "Index") || n.IndexName == "jobs_due" {
			t.Errorf("%s: the generic plan reads jobs with a %s of %q:\n%s", name, n.NodeType, n.IndexName, plan)
		}
	}
	var doc []struct{ Plan analyzedNode }
	require.NoError(t, json.Unmarshal(raw, &doc), name)
	require.Len(t, doc, 1)
	reads := 0
	root := analyzedNode{Plans: []analyzedNode{doc[0].Plan}}
	root.walk(func(n, parent analyzedNode) {
		if n.RelationName != "jobs" {
			return
		}
		reads++
		switch {
		case n.NodeType != "Index Scan" && n.NodeType != "Index Only Scan":
			t.Errorf("%s: a %s of jobs:\n%s", name, n.NodeType, raw)
		case n.IndexName == "jobs_lease":
			if n.ActualRows+n.RemovedFilter > running {
				t.Errorf("%s: %v rows of jobs_lease, with %v jobs running", name, n.ActualRows+n.RemovedFilter, running)
			}
			return
		case n.IndexName != "jobs_claim" && n.IndexName != "jobs_due_queue":
			t.Errorf("%s: jobs read by %s:\n%s", name, n.IndexName, raw)
		case n.ActualRows > limit:
			t.Errorf("%s: %v rows a loop of %s, past the cap:\n%s", name, n.ActualRows, n.IndexName, raw)
		}
		if n.RemovedFilter > 0 {
			t.Errorf("%s: %v rows of %s filtered out:\n%s", name, n.RemovedFilter, n.IndexName, raw)
		}
		if parent.NodeType == "Sort" {
			t.Errorf("%s: the rows of %s sorted:\n%s", name, n.IndexName, raw)
		}
	})
	require.Positive(t, reads, "%s: no read of jobs in the plan", name)
	require.NotContains(t, strings.ToLower(string(raw)), `"jit"`, "%s: JIT compiled the statement", name)
}
