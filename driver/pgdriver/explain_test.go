package pgdriver

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/hoppertype"
)

// TestExplainUsesIndexes loads 200,000 jobs (pending, scheduled, running and
// succeeded, over several queues, some with unique keys), analyzes the
// table and checks that no hot-path query plans a sequential scan of jobs.
func TestExplainUsesIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 200,000 rows")
	}
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()

	const total, batch = 200_000, 5_000
	states := []hoppertype.JobState{
		hoppertype.JobStatePending, hoppertype.JobStateScheduled, hoppertype.JobStateSucceeded,
		hoppertype.JobStateSucceeded, hoppertype.JobStatePending, hoppertype.JobStateRunning,
		hoppertype.JobStateRetrying, hoppertype.JobStateSucceeded, hoppertype.JobStateDead, hoppertype.JobStateSucceeded,
	}
	for start := 0; start < total; start += batch {
		jobs := make([]*hoppertype.JobRow, batch)
		for k := range jobs {
			i := start + k
			j := newJob(fmt.Sprintf("q%d", i%5))
			j.ID = fmt.Sprintf("explain-%07d", i)
			j.Type = fmt.Sprintf("type-%d", i%7)
			j.State = states[i%len(states)]
			j.Priority = i % 4
			j.RunAt = testBase.Add(time.Duration(i%1000-500) * time.Second)
			switch j.State {
			case hoppertype.JobStateRunning:
				j.LeaseExpiresAt = testBase.Add(time.Duration(i%600-300) * time.Second)
				j.LeaseToken = int64(i)
			case hoppertype.JobStateSucceeded, hoppertype.JobStateDead:
				j.EndedAt = testBase.Add(-time.Duration(i%3600) * time.Second)
			}
			if i%10 == 3 {
				j.UniqueKey = fmt.Sprintf("key-%d", i)
			}
			jobs[k] = j
		}
		insert(t, d, jobs...)
	}
	_, err := pool.Exec(ctx, `ANALYZE `+d.q.schema+`.jobs`)
	require.NoError(t, err)

	now, lease := testBase, testBase.Add(time.Minute)
	queries := []struct {
		name string
		sql  string
		args []any
	}{
		{"claim", d.q.claim, []any{"q1", 100, lease, "w", now}},
		{"claim with types", d.q.claimTypes, []any{"q1", 100, lease, "w", now, []string{"type-1", "type-2"}}},
		{"promote queue", d.q.promoteQueue, []any{"q1", now, promoteBatch}},
		{"promote all", d.q.promoteAll, []any{now, 1000}},
		{"next run at", d.q.nextRunAt, []any{"q1"}},
		{"expired leases", d.q.expiredLease, []any{now, 100}},
		{"unique lookup", d.q.holders, []any{[]string{"type-3", "type-5"}, []string{"key-3", "key-13"}}},
		{"heartbeat", d.q.heartbeat, []any{[]string{"explain-0000005"}, []int64{5}, lease}},
		{"retention", d.q.deleteFinished, []any{[]string{"succeeded"}, now, 1000}},
	}
	for _, q := range queries {
		var plan []byte
		require.NoError(t, pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q.sql, q.args...).Scan(&plan), q.name)
		var doc []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal(plan, &doc), q.name)
		require.Len(t, doc, 1)
		if scan := doc[0].Plan.find("Seq Scan", "jobs"); scan {
			t.Errorf("%s plans a sequential scan of jobs:\n%s", q.name, plan)
		}
		if testing.Verbose() {
			rows, err := pool.Query(ctx, `EXPLAIN `+q.sql, q.args...)
			require.NoError(t, err)
			var text string
			var line string
			for rows.Next() {
				require.NoError(t, rows.Scan(&line))
				text += "\n  " + line
			}
			require.NoError(t, rows.Err())
			t.Logf("%s:%s", q.name, text)
		}
	}
}

// planNode is a node of an EXPLAIN (FORMAT JSON) plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	Plans        []planNode `json:"Plans"`
}

// find reports whether the plan has a node of type on relation.
func (n planNode) find(nodeType, relation string) bool {
	if n.NodeType == nodeType && n.RelationName == relation {
		return true
	}
	for _, c := range n.Plans {
		if c.find(nodeType, relation) {
			return true
		}
	}
	return false
}
