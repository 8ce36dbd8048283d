package pgdriver

import (
	"encoding/json"
	"strings"
	"testing"

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
// the driver runs them (its planner settings), under EXPLAIN ANALYZE on
// 40,000 jobs of four queues, with a cap of 100, and checks what each read
// of jobs did: a probe or a walk of jobs_claim, jobs_due_queue or
// jobs_lease, never more than the cap's 101 rows a loop and no row
// filtered out (the running jobs' index excepted: it is read whole, and
// holds the 4,000 running jobs), no bitmap or sequential scan, and nothing
// sorted. Its generic plan reads jobs by index too.
func TestQueueDepthReadsAtMostTheCap(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	s := d.q.schema
	// Per ten jobs: six pending, a scheduled, a retrying (due before or
	// after testBase), a running and a succeeded one; three priorities.
	_, err := pool.Exec(ctx, `INSERT INTO `+s+`.jobs (id, type, queue, state, priority, queued_at, run_at, retry, lease_expires_at, ended_at)
SELECT format('depth-%s', lpad(i::text, 6, '0')), 't', 'q' || (i / 10 % 4),
	(ARRAY['pending', 'pending', 'pending', 'pending', 'pending', 'pending', 'scheduled', 'retrying', 'running', 'succeeded'])[i % 10 + 1],
	i % 3, $1::timestamptz, $1::timestamptz + (i % 1000 - 500) * interval '1 second', '{}',
	CASE WHEN i % 10 = 8 THEN $1::timestamptz + interval '1 minute' END,
	CASE WHEN i % 10 = 9 THEN $1::timestamptz END
FROM generate_series(0, 39999) i`, testBase)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE `+s+`.jobs`)
	require.NoError(t, err)

	const limit, running = 101, 4000
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"every queue", d.q.queueDepth, []any{limit, testBase}},
		{"one queue", d.q.queueDepthOne, []any{limit, testBase, "q2"}},
	} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sqlDepthPlan)
		require.NoError(t, err)
		var raw []byte
		require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+c.sql, c.args...).Scan(&raw), c.name)
		// The generic plan, which a prepared statement may keep, reads the
		// same indexes.
		generic, plan := explainGeneric(t, tx, c.name, c.sql, len(c.args))
		for _, n := range generic.scans("jobs") {
			if !strings.HasPrefix(n.NodeType, "Index") {
				t.Errorf("%s: the generic plan reads jobs with a %s:\n%s", c.name, n.NodeType, plan)
			}
		}
		require.NoError(t, tx.Rollback(ctx))
		var doc []struct{ Plan analyzedNode }
		require.NoError(t, json.Unmarshal(raw, &doc), c.name)
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
				t.Errorf("%s: a %s of jobs:\n%s", c.name, n.NodeType, raw)
			case n.IndexName == "jobs_lease":
				if n.ActualRows+n.RemovedFilter > running {
					t.Errorf("%s: %v rows of jobs_lease, with %d jobs running", c.name, n.ActualRows+n.RemovedFilter, running)
				}
				return
			case n.IndexName != "jobs_claim" && n.IndexName != "jobs_due_queue":
				t.Errorf("%s: jobs read by %s:\n%s", c.name, n.IndexName, raw)
			case n.ActualRows > limit:
				t.Errorf("%s: %v rows a loop of %s, past the cap:\n%s", c.name, n.ActualRows, n.IndexName, raw)
			}
			if n.RemovedFilter > 0 {
				t.Errorf("%s: %v rows of %s filtered out:\n%s", c.name, n.RemovedFilter, n.IndexName, raw)
			}
			if parent.NodeType == "Sort" {
				t.Errorf("%s: the rows of %s sorted:\n%s", c.name, n.IndexName, raw)
			}
		})
		require.Positive(t, reads, "%s: no read of jobs in the plan", c.name)
		require.NotContains(t, strings.ToLower(string(raw)), `"jit"`, "%s: JIT compiled the statement", c.name)
	}
}
