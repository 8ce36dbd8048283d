package pgdriver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestExplainUsesIndexes loads 200,000 jobs (pending, scheduled, running and
// succeeded, over several queues, some with unique keys) and 50,000
// workflow runs with their events, hooks and streams, analyzes the tables
// and checks that no hot-path query plans a sequential scan, and that the
// listings an index orders (runs newest first, a run's events, hooks and
// stream) do not sort.
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
			if i%4 == 1 {
				j.GroupID = fmt.Sprintf("g-%d", i%1000)
			}
			jobs[k] = j
		}
		insert(t, d.Executor(), jobs...)
	}
	// Workflow rows: 50,000 runs (every fifth a child of one of 10
	// parents) over 20 workflows and every status, each with four events
	// of two attempts, a hook and four stream chunks.
	s := d.q.schema
	for _, load := range []string{
		`INSERT INTO ` + s + `.runs (id, workflow, status, parent_id, code_version, created_at, updated_at)
SELECT format('explain-%s', lpad(i::text, 7, '0')), 'wf-' || (i % 20),
	(ARRAY['pending', 'running', 'waiting', 'completed', 'failed', 'compensating', 'compensated',
		'cancelled', 'quarantined', 'stuck'])[i % 10 + 1],
	CASE WHEN i % 5 = 0 THEN 'parent-' || (i % 10) END, 'v1',
	$1::timestamptz - i * interval '1 second', $1::timestamptz
FROM generate_series(0, 49999) i`,
		`INSERT INTO ` + s + `.run_events (run_id, attempt, seq, kind, name, at, data)
SELECT format('explain-%s', lpad(i::text, 7, '0')), 1 + k / 2, 1 + k % 2, 'step', 's', $1::timestamptz, '{}'
FROM generate_series(0, 49999) i, generate_series(0, 3) k`,
		`INSERT INTO ` + s + `.hooks (token, run_id, name, state, created_at)
SELECT 'hook-' || i, format('explain-%s', lpad(i::text, 7, '0')), 'h', 'waiting', $1::timestamptz
FROM generate_series(0, 49999) i`,
		`INSERT INTO ` + s + `.stream_chunks (run_id, "offset", at, data)
SELECT format('explain-%s', lpad(i::text, 7, '0')), k, $1::timestamptz, 'chunk'
FROM generate_series(0, 49999) i, generate_series(0, 3) k`,
	} {
		_, err := pool.Exec(ctx, load, testBase)
		require.NoError(t, err)
	}
	// Change sets (schema 23): 20,000 statements' transitions of 10 jobs.
	_, err := pool.Exec(ctx, `INSERT INTO `+s+`.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
	attempts, workers, fields, errors, due_ats)
SELECT pg_current_xact_id(), nextval(pg_get_serial_sequence('`+s+`.changes', 'position')), $1::timestamptz,
	array_agg(format('explain-%s', lpad((g * 10 + k)::text, 7, '0'))), array_agg('type-' || (k % 7)), array_agg('q' || (k % 5)),
	array_agg('running'::text), array_agg('succeeded'::text), array_agg(1), array_agg(''::text), array_agg('ended_at'::text),
	array_agg(NULL::text), array_agg(NULL::timestamptz)
FROM generate_series(0, 19999) g, generate_series(0, 9) k GROUP BY g`, testBase)
	require.NoError(t, err)
	// Chained sets (schema 29): as many again, the claims of the same
	// jobs, each job's row holding its set's position.
	_, err = pool.Exec(ctx, `INSERT INTO `+s+`.change_sets (tx, position, at, entity_ids, types, queues, prev_states, states,
	attempts, workers, fields, errors, due_ats, prev_positions)
SELECT pg_current_xact_id(), nextval(pg_get_serial_sequence('`+s+`.changes', 'position')), $1::timestamptz,
	array_agg(format('explain-%s', lpad((g * 10 + k)::text, 7, '0'))), array_agg('type-' || (k % 7)), array_agg('q' || (k % 5)),
	array_agg('pending'::text), array_agg('running'::text), array_agg(1), array_agg('w'::text), array_agg('attempt'::text),
	array_agg(NULL::text), array_agg(NULL::timestamptz), array_agg(NULL::bigint)
FROM generate_series(0, 19999) g, generate_series(0, 9) k GROUP BY g`, testBase)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE `+s+`.jobs j SET set_position = c.position FROM `+s+`.change_sets c
WHERE c.prev_positions IS NOT NULL AND j.id = c.entity_ids[1]`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE `+s+`.jobs, `+s+`.runs, `+s+`.run_events, `+s+`.hooks, `+s+`.stream_chunks, `+s+`.changes, `+s+`.change_sets`)
	require.NoError(t, err)
	// A cursor in the middle of the feed (the inserts above wrote a change
	// for each job and run).
	var feedTx, lastTx, lastPos int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT tx::text::bigint FROM `+s+`.changes ORDER BY tx, position OFFSET 150000 LIMIT 1`).Scan(&feedTx))
	require.NoError(t, pool.QueryRow(ctx, `SELECT tx::text::bigint, position FROM `+s+`.changes ORDER BY tx, position OFFSET 150500 LIMIT 1`).Scan(&lastTx, &lastPos))
	runList := func(p driver.RunListParams) (string, []any) { return d.q.runList(&p) }
	listAll, listAllArgs := runList(driver.RunListParams{Limit: 50})
	listPage, listPageArgs := runList(driver.RunListParams{Limit: 50, Offset: 100})
	listStatus, listStatusArgs := runList(driver.RunListParams{Statuses: []hoppertype.RunStatus{hoppertype.RunWaiting}, Limit: 50})
	listStatuses, listStatusesArgs := runList(driver.RunListParams{
		Statuses: []hoppertype.RunStatus{hoppertype.RunWaiting, hoppertype.RunFailed}, Limit: 50})
	listWorkflow, listWorkflowArgs := runList(driver.RunListParams{Workflow: "wf-3", Limit: 50})
	listParent, listParentArgs := runList(driver.RunListParams{ParentID: "parent-5", Limit: 50})
	listRange, listRangeArgs := runList(driver.RunListParams{CreatedAfter: testBase.Add(-time.Hour), CreatedBefore: testBase, Limit: 50})
	run := "explain-0012345"
	jobsByGroup, jobsByGroupArgs := d.q.jobList(&driver.JobListParams{GroupID: "g-7", Limit: 50})

	now, lease := testBase, testBase.Add(time.Minute)
	queries := []struct {
		name string
		sql  string
		args []any
		// sorted is set for queries whose order an index must give.
		sorted bool
	}{
		{"claim", d.q.claim, []any{"q1", 100, lease, "w", now}, false},
		{"claim with types", d.q.claimTypes, []any{"q1", 100, lease, "w", now, []string{"type-1", "type-2"}}, false},
		{"promote queue", d.q.promoteQueue, []any{"q1", now}, false},
		{"promote all", d.q.promoteAll, []any{now, 1000}, false},
		{"next run at", d.q.nextRunAt, []any{"q1"}, false},
		{"expired leases", d.q.expiredLease, []any{now, 100}, false},
		{"unique lookup", d.q.holders, []any{[]string{"type-3", "type-5"}, []string{"key-3", "key-13"}}, false},
		{"heartbeat", d.q.heartbeat, []any{[]string{"explain-0000005"}, []int64{5}, lease, []string{"running"}}, false},
		{"heartbeat with a message", d.q.heartbeatNote, []any{[]string{"explain-0000005"}, []int64{5}, lease, "half way", []string{"running"}}, false},
		{"retention", d.q.deleteFinished, []any{[]string{"succeeded"}, now, 1000}, false},
		{"wake", d.q.wake, []any{[]string{"explain-0000001", "explain-0000006"}, now}, false},
		// The members come in index order; the root, one row by its key,
		// is sorted into them.
		{"jobs of a group", jobsByGroup, jobsByGroupArgs, false},
		{"run get", d.q.runGet, []any{run}, false},
		{"run update", d.q.runUpdate, []any{run, "completed", nil, now, now, []string{"running"}, false}, false},
		{"run list newest first", listAll, listAllArgs, true},
		{"run list page", listPage, listPageArgs, true},
		{"run list by status", listStatus, listStatusArgs, true},
		{"run list by statuses", listStatuses, listStatusesArgs, false},
		{"run list by workflow", listWorkflow, listWorkflowArgs, true},
		{"run list by parent", listParent, listParentArgs, true},
		{"run list by time", listRange, listRangeArgs, true},
		{"event append", d.q.eventAppend, []any{run, int64(5), []int32{3}, []int32{1}, []string{"step"}, []string{"s"}, []time.Time{now}, [][]byte{nil}, "running", now, nil}, false},
		{"event append in tx", d.q.eventAppendTx, []any{run, int64(5), []int32{3}, []int32{1}, []string{"step"}, []string{"s"}, []time.Time{now}, [][]byte{nil}, nil, now, nil}, false},
		{"event append without a status", d.q.eventAppendOnly, []any{run, int64(5), []int32{3}, []int32{1}, []string{"step"}, []string{"s"}, []time.Time{now}, [][]byte{nil}}, false},
		{"event append without a status in tx", d.q.eventAppendOnlyTx, []any{run, int64(5), []int32{3}, []int32{1}, []string{"step"}, []string{"s"}, []time.Time{now}, [][]byte{nil}}, false},
		{"event append many", d.q.eventAppendMany, []any{[]string{run, "explain-0012346"}, []int64{5, 6}, []*string{nil, nil},
			[]time.Time{now, now}, []*time.Time{nil, nil}, []string{run, "explain-0012346"}, []int32{3, 3}, []int32{1, 1},
			[]string{"step", "step"}, []string{"s", "s"}, []time.Time{now, now}, [][]byte{nil, nil}}, false},
		{"event append many without a status", d.q.eventAppendManyOnly, []any{[]string{run, "explain-0012346"}, []int64{5, 6}, []*string{nil, nil},
			[]time.Time{now, now}, []*time.Time{nil, nil}, []string{run, "explain-0012346"}, []int32{3, 3}, []int32{1, 1},
			[]string{"step", "step"}, []string{"s", "s"}, []time.Time{now, now}, [][]byte{nil, nil}}, false},
		{"run load", d.q.runLoad, []any{run}, false},
		{"event list by run", d.q.eventList, []any{run}, true},
		{"event list by attempt", d.q.eventListAttempt, []any{run, 2}, true},
		{"hook by token", d.q.hookGet, []any{"hook-12345"}, false},
		{"hook resume", d.q.hookResume, []any{"hook-12345", []byte("{}"), now, nil}, false},
		{"hooks by run", d.q.hookByRun, []any{run}, true},
		{"stream append", d.q.streamAppend, []any{run, [][]byte{[]byte("x")}, now}, false},
		{"stream read", d.q.streamRead, []any{run, int64(1), 100}, true},
		{"change feed from the start", d.q.changeFeed, []any{int64(0), 500, int64(0)}, true},
		{"change feed from a cursor", d.q.changeFeed, []any{int64(150_000), 500, feedTx}, true},
		// An entity's sets come from its row's chain and the GIN index, a
		// few per job, sorted.
		{"changes of an entity", d.q.changeEntity, []any{int64(0), 100, "explain-0000005"}, false},
		{"change tail", d.q.changeTail, nil, false},
		{"change feed backwards from a cursor", d.q.changeBefore, []any{lastTx, lastPos, 500}, true},
		{"change scan: the page's last", d.q.changeScanLast, []any{int64(150_000), 500, feedTx}, false},
		{"change scan: stuck only", d.q.changeScanStuck, []any{int64(0), int64(0), lastTx, lastPos, nil, nil, 500}, true},
		{"change scan: the range", d.q.changeScanRange, []any{feedTx, int64(150_000), lastTx, lastPos, nil, nil, []string{"stuck"}, 500}, true},
	}
	for _, q := range queries {
		root, plan := explain(t, pool, q.name, q.sql, q.args...)
		for _, table := range []string{"jobs", "runs", "run_events", "hooks", "stream_chunks", "changes", "change_sets"} {
			if root.find("Seq Scan", table) {
				t.Errorf("%s plans a sequential scan of %s:\n%s", q.name, table, plan)
			}
		}
		if q.sorted && !root.sortsOnlyPages() {
			t.Errorf("%s sorts instead of reading an index in order:\n%s", q.name, plan)
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
	// An entity's listing reads its rows and its unchained sets by their
	// entity indexes, and walks its chain by position.
	root, plan := explain(t, pool, "changes of an entity", d.q.changeEntity, int64(0), 100, "explain-0000010")
	for _, index := range []string{"changes_entity", "change_sets_entities", "change_sets_chained"} {
		if !root.usesIndex(index) {
			t.Errorf("changes of an entity does not read %s:\n%s", index, plan)
		}
	}
}

// usesIndex reports whether the plan reads index.
func (n planNode) usesIndex(index string) bool {
	if n.IndexName == index {
		return true
	}
	for _, c := range n.Plans {
		if c.usesIndex(index) {
			return true
		}
	}
	return false
}

// TestExplainFinishFindsJobsByKey checks that heartbeats and finishes look
// their jobs up by key when the statistics show few running jobs (as they
// do after a burst of inserts) while many are running, with the leases
// index full of dead entries. They once hashed all of jobs_lease instead,
// and large finishes cost 200 µs a job.
func TestExplainFinishFindsJobsByKey(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	const total, running, batch = 20_000, 3_000, 300
	jobs := make([]*hoppertype.JobRow, total)
	for i := range jobs {
		jobs[i] = newJob("q")
		jobs[i].ID = fmt.Sprintf("bykey-%06d", i)
	}
	insert(t, d.Executor(), jobs...)
	s := d.q.schema
	_, err := pool.Exec(ctx, `ANALYZE `+s+`.jobs`)
	require.NoError(t, err)
	// Run and finish some attempts (dead entries in jobs_lease), then
	// leave 3,000 running; the statistics still show none.
	for _, sql := range []string{
		`UPDATE ` + s + `.jobs SET state = 'running', lease_token = 7, lease_expires_at = $1 WHERE id < 'bykey-010000'`,
		`UPDATE ` + s + `.jobs SET state = 'succeeded', lease_expires_at = NULL WHERE id < 'bykey-010000' AND $1::timestamptz IS NOT NULL`,
		`UPDATE ` + s + `.jobs SET state = 'running', lease_token = 7, lease_expires_at = $1 WHERE id >= 'bykey-010000' AND id < 'bykey-013000'`,
	} {
		_, err := pool.Exec(ctx, sql, testBase)
		require.NoError(t, err)
	}
	ids, tokens, states, idx := make([]string, batch), make([]int64, batch), make([]string, batch), make([]int32, batch)
	times, texts, results := make([]time.Time, batch), make([]*string, batch), make([][]byte, batch)
	for i := range ids {
		ids[i], tokens[i], states[i], idx[i], times[i] = fmt.Sprintf("bykey-%06d", 10_000+i*running/batch), 7, "running", int32(i), testBase
	}
	queries := []struct {
		name string
		sql  string
		args []any
	}{
		{"heartbeat", d.q.heartbeat, []any{ids, tokens, testBase, states}},
		{"heartbeat with a message", d.q.heartbeatNote, []any{ids, tokens, testBase, "half way", states}},
		{"finish", d.q.finish, []any{idx, ids, tokens, states, idx, times, results, texts, times, texts, make([]*time.Time, batch), states}},
		{"finish one", d.q.finishOwnOne, []any{int32(0), ids[0], tokens[0], "succeeded", int32(1), testBase, []byte(nil), nil, testBase, nil, nil, "running", ""}},
		{"finish writing its set", d.q.finishOwn, []any{ids, tokens, states, idx, times, results, texts, times, make([]string, batch), "running"}},
	}
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for _, q := range queries {
		root, plan := explain(t, pool, q.name, q.sql, q.args...)
		if q.sql == d.q.finish || q.sql == d.q.finishOwn { // they run on their generic plans
			root, plan = explainGeneric(t, tx, q.name, q.sql, len(q.args))
		}
		scans := root.scans("jobs")
		if len(scans) == 0 {
			t.Errorf("%s: no scan of jobs in the plan:\n%s", q.name, plan)
		}
		for _, n := range scans {
			// A finish reads its jobs by key as it locks them, then
			// updates the locked versions by ctid.
			if n.IndexName != "jobs_pkey" && n.NodeType != "Tid Scan" {
				t.Errorf("%s reads jobs by %s %q, not by key:\n%s", q.name, n.NodeType, n.IndexName, plan)
			}
		}
	}
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// explain returns the plan of sql with args, as a tree and as the JSON
// PostgreSQL wrote (for messages), planned on q: a pool, or a transaction
// with its own settings.
func explain(t *testing.T, q rowQuerier, name, sql string, args ...any) (planNode, []byte) {
	t.Helper()
	var plan []byte
	require.NoError(t, q.QueryRow(t.Context(), `EXPLAIN (FORMAT JSON) `+sql, args...).Scan(&plan), name)
	return parsePlan(t, name, plan), plan
}

// parsePlan reads the JSON of EXPLAIN (FORMAT JSON).
func parsePlan(t *testing.T, name string, plan []byte) planNode {
	t.Helper()
	var doc []struct{ Plan planNode }
	require.NoError(t, json.Unmarshal(plan, &doc), name)
	require.Len(t, doc, 1, name)
	return doc[0].Plan
}

// explainGeneric returns the generic plan of sql (of nargs arguments), the
// one a prepared statement keeps for every call, in tx (whose settings it
// plans with): EXPLAIN of a statement with arguments plans for their values
// instead.
func explainGeneric(t *testing.T, tx pgx.Tx, name, sql string, nargs int) (planNode, []byte) {
	t.Helper()
	ctx := t.Context()
	_, err := tx.Exec(ctx, `SAVEPOINT explain_generic`)
	require.NoError(t, err)
	defer func() {
		_, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT explain_generic`)
		require.NoError(t, err)
	}()
	_, err = tx.Exec(ctx, `PREPARE hopper_explain AS `+sql)
	require.NoError(t, err, name)
	_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	// A generic plan is made without the arguments' values: NULLs do.
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", nargs), ", ")
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE hopper_explain(`+nulls+`)`).Scan(&plan), name)
	_, err = tx.Exec(ctx, `DEALLOCATE hopper_explain`)
	require.NoError(t, err)
	return parsePlan(t, name, plan), plan
}

// needPlanCounts skips a test on a server older than PostgreSQL 14, whose
// pg_prepared_statements has no plan counts (the driver runs on 13).
func needPlanCounts(t *testing.T, q rowQuerier) {
	t.Helper()
	var num int
	require.NoError(t, q.QueryRow(t.Context(), `SELECT current_setting('server_version_num')::int`).Scan(&num))
	if num < 140000 {
		t.Skipf("PostgreSQL %d keeps no plan counts (14 and newer do)", num)
	}
}

// planNode is a node of an EXPLAIN (FORMAT JSON) plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	Plans        []planNode `json:"Plans"`
}

// scans returns the plan's nodes that read relation.
func (n planNode) scans(relation string) []planNode {
	var out []planNode
	if n.RelationName == relation && n.NodeType != "ModifyTable" {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, c.scans(relation)...)
	}
	return out
}

// sortsOnlyPages reports whether every sort in the plan orders pages that
// were read in index order: each read of a table below a Sort is below a
// Limit with no Sort under it (the feed's queries merge a page of rows and
// a page of change sets, each read from its index in order, and expand the
// sets; their final sort orders those pages alone). Scans of functions
// (the sets' expansion) are not reads of a table.
func (n planNode) sortsOnlyPages() bool {
	if n.NodeType == "Sort" {
		for _, c := range n.Plans {
			if !c.pagedReads() {
				return false
			}
		}
		return true
	}
	for _, c := range n.Plans {
		if !c.sortsOnlyPages() {
			return false
		}
	}
	return true
}

// pagedReads reports whether every read of a table in the plan is below a
// Limit with no Sort under it.
func (n planNode) pagedReads() bool {
	if n.NodeType == "Limit" {
		return !n.find("Sort", "")
	}
	if n.RelationName != "" {
		return false
	}
	for _, c := range n.Plans {
		if !c.pagedReads() {
			return false
		}
	}
	return true
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

// TestHotStatementsKeepAGenericPlan: the claim (with its limit in the text),
// the one-job insert and a run's start are planned once per connection, not
// at every call.
// A LIMIT given as an argument, or unnest's arrays, made PostgreSQL plan
// each call anew (its generic plan always looked dearer), which cost about
// half a millisecond a call. The test runs each statement on one connection
// more often than PostgreSQL's five custom plans and reads the counts it
// keeps; it also checks the generic plans a claim's transaction runs: the
// claim walks jobs_claim, the promotion and the expired-lease listing their
// indexes, none sorts or scans the table.
func TestHotStatementsKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	needPlanCounts(t, pool)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	jobs := make([]*hoppertype.JobRow, 8_000)
	for i := range jobs {
		jobs[i] = newJob(fmt.Sprintf("q%d", i%3))
		if i >= 5_000 { // due later, in every queue
			jobs[i].State, jobs[i].RunAt = hoppertype.JobStateScheduled, testBase.Add(time.Duration(i)*time.Second)
		}
	}
	insert(t, d.Executor(), jobs...)
	_, err := pool.Exec(ctx, `ANALYZE `+d.q.schema+`.jobs`)
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx) // rolled back: the statements' effects go
	require.NoError(t, err)
	defer tx.Rollback(ctx)

	now := testBase
	claim, withLimit := d.q.claimStmt(false, 10, false)
	require.False(t, withLimit, "a claim of 10 takes its limit in the text")
	claimTyped, _ := d.q.claimStmt(true, 10, false)
	claimAfter, _ := d.q.claimStmt(false, 10, true)
	claimTypedAfter, _ := d.q.claimStmt(true, 10, true)
	cases := []struct {
		name string
		sql  string
		args func(i int) []any
	}{
		{"claim", claim, func(int) []any { return []any{"q0", now.Add(time.Minute), "w", now} }},
		{"claim with types", claimTyped, func(int) []any { return []any{"q1", now.Add(time.Minute), "w", now, []string{"t"}} }},
		{"claim after a cursor", claimAfter, func(int) []any { return []any{"q0", now.Add(time.Minute), "w", now, int32(0), now, "m"} }},
		{"claim with types after a cursor", claimTypedAfter, func(int) []any {
			return []any{"q1", now.Add(time.Minute), "w", now, []string{"t"}, int32(0), now, "m"}
		}},
		{"finish one job", d.q.finishOwnOne, func(int) []any {
			return []any{int32(0), "no-such-job", int64(1), "succeeded", int32(1), now, []byte(nil), nil, now, nil, nil, "running", ""}
		}},
		{"insert one job", d.q.insertOne, func(i int) []any {
			a, err := newJobArrays([]*hoppertype.JobRow{newJob("q2")})
			require.NoError(t, err)
			return a.row(0)
		}},
		{"start a run", d.q.runStart, func(i int) []any {
			job := newJob("q2")
			a, err := newJobArrays([]*hoppertype.JobRow{job})
			require.NoError(t, err)
			return append(a.row(0), job.ID, "wf", "pending", nil, "v1", nil, now, now, nil, nil)
		}},
	}
	for _, c := range cases {
		for i := range 10 {
			rows, err := tx.Query(ctx, c.sql, c.args(i)...)
			require.NoError(t, err, c.name)
			rows.Close()
			require.NoError(t, rows.Err(), c.name)
		}
		var generic, custom int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
			c.sql).Scan(&generic, &custom), c.name)
		if generic < 5 {
			t.Errorf("%s: %d generic and %d custom plans in 10 calls: it is planned at every call", c.name, generic, custom)
		}
	}

	// The generic claim, planned with the claim's settings, reads the claim
	// index, in order.
	_, err = tx.Exec(ctx, sqlClaimPlan)
	require.NoError(t, err)
	// So do the promotion and the expired-lease listing, which run on
	// their generic plans with the same settings. (The promotion may walk
	// jobs_due, every queue's due jobs in order, filtering by queue: when
	// due times follow the table's physical order, the planner finds that
	// cheaper than jobs_due_queue's scattered reads.)
	for _, c := range []struct {
		name, sql string
		index     []string
		args      int
	}{
		{"claim", claim, []string{"jobs_claim"}, 4},
		{"claim after a cursor", claimAfter, []string{"jobs_claim"}, 7},
		{"promotion", d.q.promoteQueue, []string{"jobs_due_queue", "jobs_due"}, 2},
		{"expired leases", d.q.expiredLease, []string{"jobs_lease"}, 2},
	} {
		root, plan := explainGeneric(t, tx, "generic "+c.name, c.sql, c.args)
		if root.find("Seq Scan", "jobs") || root.find("Sort", "") {
			t.Errorf("the generic %s scans or sorts jobs:\n%s", c.name, plan)
		}
		found := false
		for _, n := range root.scans("jobs") {
			found = found || slices.Contains(c.index, n.IndexName)
		}
		if !found {
			t.Errorf("the generic %s does not read %s:\n%s", c.name, strings.Join(c.index, " or "), plan)
		}
	}
	// After a cursor both walks (the higher priorities, then the cursor's
	// after its key) read the claim index in order, from their bounds.
	root, plan := explainGeneric(t, tx, "generic claim after a cursor", claimAfter, 7)
	walks, bounded := 0, 0
	for _, n := range root.scans("jobs") {
		if n.IndexName == "jobs_claim" {
			walks++
			if strings.Contains(n.IndexCond, "ROW(run_at, id) >") {
				bounded++
			}
		}
	}
	if walks != 2 || bounded != 1 {
		t.Errorf("the generic claim after a cursor reads jobs_claim %d times, %d of them from the cursor's key, want 2 and 1:\n%s", walks, bounded, plan)
	}
}

// TestDriverStatementsKeepTheirGenericPlans runs the driver's claims (of
// several sizes: one statement each), batch finishes and expired-lease
// listings on one connection and reads PostgreSQL's plan counts: none of
// them may be planned for its arguments. PostgreSQL plans a prepared
// statement anew at each of its first five runs on a connection, and keeps
// planning a statement of arrays at every run.
func TestDriverStatementsKeepTheirGenericPlans(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 1)
	needPlanCounts(t, pool)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	jobs := make([]*hoppertype.JobRow, 200)
	for i := range jobs {
		jobs[i] = newJob("plans")
	}
	insert(t, d.Executor(), jobs...)

	hot := map[string]string{d.q.promoteQueue: "promotion", d.q.finish: "finish", d.q.expiredLease: "expired leases"}
	var claimed []*hoppertype.JobRow
	for limit := 1; limit <= 6; limit++ {
		sql, _ := d.q.claimStmt(false, limit, false)
		hot[sql] = fmt.Sprintf("claim of %d", limit)
		// The first claim of each size looks from the head; the second
		// and third follow a full one: they start after its cursor.
		d.cursors.drop("plans")
		sql, _ = d.q.claimStmt(false, limit, true)
		hot[sql] = fmt.Sprintf("claim of %d after a cursor", limit)
		for range 3 {
			rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "plans", Limit: limit, Now: testBase,
				LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
			require.NoError(t, err)
			require.Len(t, rows, limit)
			claimed = append(claimed, rows...)
		}
	}
	for len(claimed) >= 3 {
		items := make([]driver.JobFinishParams, 3)
		for i, j := range claimed[:3] {
			items[i] = driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, Attempt: j.Attempt,
				State: hoppertype.JobStateSucceeded, RunAt: j.RunAt, EndedAt: testBase}
		}
		claimed = claimed[3:]
		res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
	for range 6 {
		_, err := d.Executor().JobListExpiredLeases(ctx, &driver.JobListExpiredLeasesParams{Now: testBase, Limit: 10})
		require.NoError(t, err)
	}
	// A run's history appends, on the pool and in a transaction, one
	// event and two at a time, with a status and without.
	hot[d.q.eventAppend], hot[d.q.eventAppendTx] = "history append", "history append in a transaction"
	hot[d.q.eventAppendOnly], hot[d.q.eventAppendOnlyTx] = "history append without a status", "history append without a status in a transaction"
	start := runStart("plans")
	start.Run.Status = hoppertype.RunRunning
	start.Job.State, start.Job.Attempt, start.Job.LeaseToken = hoppertype.JobStateRunning, 1, 1
	start.Job.Worker, start.Job.StartedAt, start.Job.LeaseExpiresAt = "w", testBase, testBase.Add(time.Hour)
	_, err := d.Executor().RunStart(ctx, start)
	require.NoError(t, err)
	seq := 0
	events := func(n int) []*hoppertype.RunEvent {
		evs := make([]*hoppertype.RunEvent, n)
		for i := range evs {
			seq++
			evs[i] = &hoppertype.RunEvent{RunID: start.Run.ID, Attempt: 1, Seq: seq, Kind: "step", Name: "s", At: testBase}
		}
		return evs
	}
	for i := range 16 {
		// The status is the one the run has: the statement that
		// updates runs is the one that runs, and it moves nothing.
		var status hoppertype.RunStatus
		if i%4 < 2 {
			status = hoppertype.RunRunning
		}
		require.NoError(t, d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: start.Run.ID, LeaseToken: 1,
			Events: events(1 + i%2), RunStatus: status, Now: testBase}))
		require.NoError(t, d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			return tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: start.Run.ID, LeaseToken: 1,
				Events: events(1 + i%2), RunStatus: status, Now: testBase})
		}))
	}
	// Groups of run starts, each one statement of arrays.
	hot[d.q.runStartMany] = "a group of run starts"
	ex := d.Executor().(*executor)
	for range 8 {
		group := make([]*startReq, 3)
		for i := range group {
			group[i] = &startReq{ctx: ctx, p: runStart("plans")}
		}
		inserted, err := ex.startMany(ctx, group)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true}, inserted)
	}
	// The settings of a statement on the pool end with its implicit
	// transaction: the connection (the pool's only one) keeps its own.
	var seqscan, hashjoin, mode string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin'),
	current_setting('plan_cache_mode')`).Scan(&seqscan, &hashjoin, &mode))
	require.Equal(t, []string{"on", "on", "auto"}, []string{seqscan, hashjoin, mode}, "a history append left its plan settings on the connection")

	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	seen := map[string]bool{}
	var sql string
	var generic, custom int64
	_, err = pgx.ForEachRow(rows, []any{&sql, &generic, &custom}, func() error {
		name, ok := hot[sql]
		if !ok {
			return nil
		}
		seen[name] = true
		if custom > 0 {
			t.Errorf("%s: %d custom plans beside %d generic ones: it was planned for its arguments", name, custom, generic)
		}
		return nil
	})
	require.NoError(t, err)
	for _, name := range hot {
		if !seen[name] {
			t.Errorf("%s: not among the connection's prepared statements", name)
		}
	}
}

// TestExplainExpiredLeasesWalkTheIndex: the rescuer's listing of expired
// leases, under the planner settings the driver gives it, walks jobs_lease
// in order. On a table the statistics have not caught up with (here: never
// analyzed), with the dead entries every finished attempt leaves in the
// index, the planner otherwise reads it with a bitmap scan and sorts, and
// revisits every dead entry on every scan; an index scan marks the dead
// entries it passes, so the next scan skips them.
func TestExplainExpiredLeasesWalkTheIndex(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	jobs := make([]*hoppertype.JobRow, 20_000)
	for i := range jobs {
		jobs[i] = newJob("q")
		jobs[i].ID = fmt.Sprintf("lease-%06d", i)
	}
	insert(t, d.Executor(), jobs...)
	s := d.q.schema
	for _, sql := range []string{
		`UPDATE ` + s + `.jobs SET state = 'running', lease_token = 7, lease_expires_at = $1`,
		`UPDATE ` + s + `.jobs SET state = 'succeeded', lease_expires_at = NULL WHERE id < 'lease-019990' AND $1::timestamptz IS NOT NULL`,
	} {
		_, err := pool.Exec(ctx, sql, testBase)
		require.NoError(t, err)
	}
	now := testBase.Add(time.Hour)
	if root, _ := explain(t, pool, "expired leases, planner defaults", d.q.expiredLease, now, 100); root.find("Bitmap Heap Scan", "jobs") {
		t.Log("with the planner's defaults: a bitmap scan of jobs_lease and a sort")
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, sqlClaimPlan)
	require.NoError(t, err)
	root, plan := explain(t, tx, "expired leases", d.q.expiredLease, now, 100)
	scans := root.scans("jobs")
	if len(scans) != 1 || scans[0].NodeType != "Index Scan" || scans[0].IndexName != "jobs_lease" || root.find("Sort", "") {
		t.Errorf("the expired-lease listing does not walk jobs_lease in order:\n%s", plan)
	}

	// And the driver's listing finds the ten running jobs.
	got, err := d.Executor().JobListExpiredLeases(ctx, &driver.JobListExpiredLeasesParams{Now: now, Limit: 100})
	require.NoError(t, err)
	require.Len(t, got, 10)
}

// TestKeyStatementsPlanByKeyOnANewSchema: the statements that look their
// rows up by key from arrays (finishes, heartbeats, history appends) are
// planned, on a new schema whose tables are small and never analyzed, to
// read each row by its key. PostgreSQL keeps a connection's generic plan
// until the statistics change; one made on the small tables hashed the
// whole table after a sequential scan, and kept doing so as it grew: a
// run of 30,000 workflows read run_events in full at every history append
// and slowed as it went.
func TestKeyStatementsPlanByKeyOnANewSchema(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	// A few rows, as a new schema's first minutes hold: no statistics.
	jobs := make([]*hoppertype.JobRow, 50)
	for i := range jobs {
		jobs[i] = newJob("q")
	}
	insert(t, d.Executor(), jobs...)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for _, sql := range []string{sqlGenericOn, sqlGenericOn2} {
		_, err := tx.Exec(ctx, sql)
		require.NoError(t, err)
	}
	keys := map[string]string{"jobs": "jobs_pkey", "run_events": "run_events_pkey", "runs": "runs_pkey"}
	for _, c := range []struct {
		name, sql string
		args      int
		reads     []string
	}{
		{"finish", d.q.finish, 12, []string{"jobs"}},
		{"finish of claimed jobs", d.q.finishClaimed, 12, []string{"jobs"}},
		{"heartbeat", d.q.heartbeat, 4, []string{"jobs"}},
		{"heartbeat with a message", d.q.heartbeatNote, 5, []string{"jobs"}},
		{"history append", d.q.eventAppendMany, 12, []string{"jobs", "run_events", "runs"}},
		{"history append without a status", d.q.eventAppendManyOnly, 12, []string{"jobs", "run_events"}},
		// One run's append reads its run's events through a bitmap of the
		// key's first column, by key all the same; its job was read
		// through jobs_lease, every running job's entry.
		{"one run's history append", d.q.eventAppend, 11, []string{"jobs", "runs"}},
		{"one run's history append in a transaction", d.q.eventAppendTx, 11, []string{"jobs", "runs"}},
		{"one run's history append without a status", d.q.eventAppendOnly, 8, []string{"jobs"}},
		{"one run's history append without a status in a transaction", d.q.eventAppendOnlyTx, 8, []string{"jobs"}},
	} {
		root, plan := explainGeneric(t, tx, c.name, c.sql, c.args)
		for _, rel := range c.reads {
			scans := root.scans(rel)
			if len(scans) == 0 {
				t.Errorf("%s: no read of %s in the plan:\n%s", c.name, rel, plan)
			}
			for _, n := range scans {
				// A finish reads its jobs by key as it locks them, then
				// updates the locked versions by ctid.
				if n.IndexName != keys[rel] && n.NodeType != "Tid Scan" {
					t.Errorf("%s reads %s by %s %q, not by its key:\n%s", c.name, rel, n.NodeType, n.IndexName, plan)
				}
			}
		}
	}
	// The wrapper gives the transaction its own settings back.
	_, err = tx.Exec(ctx, sqlGenericOff)
	require.NoError(t, err)
	var seq, hash, merge, mode string
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin'),
	current_setting('enable_mergejoin'), current_setting('plan_cache_mode')`).Scan(&seq, &hash, &merge, &mode))
	require.Equal(t, []string{"on", "on", "on", "auto"}, []string{seq, hash, merge, mode})
}

// TestChangeTriggers: no update trigger on jobs reads transition tables
// (schema 28), and the runs' update trigger joins a statement's old and new
// rows by hash whatever the statement's own settings. The history appends
// run with hash joins off (sqlGenericOn), and the trigger runs inside them;
// without its own enable_hashjoin (schema 18) its join, with nested loops
// off as well, became a nested loop over both transition tables. A
// migration that replaces the function (CREATE OR REPLACE resets its
// settings) must give them back.
func TestChangeTriggers(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 1)
	d := newTestDriver(t, pool)
	var config []string
	// No trigger on jobs' updates keeps transition tables (schema 28): one
	// makes every update copy each old and new row into them, whether it
	// writes anything or not. The statements record their changes.
	var transitions int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'jobs' AND (t.tgtype & 16) <> 0
  AND (t.tgoldtable IS NOT NULL OR t.tgnewtable IS NOT NULL)`, strings.Trim(d.q.schema, `"`)).Scan(&transitions))
	require.Zero(t, transitions, "an update trigger on jobs with transition tables")

	// The runs' trigger too, and it fires once per statement: a batch of
	// history appends or completions moves many runs in one statement.
	var forEachRow bool
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT coalesce(p.proconfig, '{}'), (t.tgtype & 1) = 1 FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_trigger t ON t.tgfoid = p.oid
WHERE n.nspname = $1 AND p.proname = 'runs_change_update'`, strings.Trim(d.q.schema, `"`)).Scan(&config, &forEachRow))
	require.Contains(t, config, "enable_hashjoin=on")
	require.NotContains(t, config, "enable_nestloop=off", "its history look-up is a nested loop: disabled, its cost would bring JIT in")
	require.False(t, forEachRow, "one call per statement")
}

// TestAppendWithoutStatusFiresNoRunTrigger: a run's history append that
// moves no status does not update runs at all. A statement trigger fires
// for a statement that updates no row, and the runs' change trigger (a
// PL/pgSQL call and an INSERT over empty transition tables) cost about as
// much as the append, at every step of every run. A statement trigger of
// the test's own counts the updates of runs.
func TestAppendWithoutStatusFiresNoRunTrigger(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	s := d.q.schema
	for _, sql := range []string{
		`CREATE TABLE ` + s + `.run_updates (n int)`,
		`CREATE FUNCTION ` + s + `.count_run_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ` + s + `.run_updates VALUES (1); RETURN NULL; END $$`,
		`CREATE TRIGGER count_run_updates AFTER UPDATE ON ` + s + `.runs FOR EACH STATEMENT EXECUTE FUNCTION ` + s + `.count_run_updates()`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	updates := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.run_updates`).Scan(&n))
		return n
	}
	start := runStart("q")
	start.Job.State, start.Job.Attempt, start.Job.LeaseToken = hoppertype.JobStateRunning, 1, 1
	start.Job.Worker, start.Job.StartedAt, start.Job.LeaseExpiresAt = "w", testBase, testBase.Add(time.Hour)
	_, err := d.Executor().RunStart(ctx, start)
	require.NoError(t, err)
	ev := func(seq int) []*hoppertype.RunEvent {
		return []*hoppertype.RunEvent{{RunID: start.Run.ID, Attempt: 1, Seq: seq, Kind: "step", Name: "s", At: testBase}}
	}
	require.NoError(t, d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: start.Run.ID, LeaseToken: 1, Events: ev(1), Now: testBase}))
	require.NoError(t, d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: start.Run.ID, LeaseToken: 1, Events: ev(2), Now: testBase})
	}))
	require.Equal(t, 0, updates(), "an append without a status updated runs")
	errs, err := d.Executor().RunEventAppendMany(ctx, &driver.RunEventAppendManyParams{Events: []*driver.RunEventAppendParams{
		{RunID: start.Run.ID, LeaseToken: 1, Events: ev(10), Now: testBase}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, 0, updates(), "a batch of appends without a status updated runs")

	// With a status, the run moves (and the trigger fires once).
	require.NoError(t, d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: start.Run.ID, LeaseToken: 1, Events: ev(3),
		RunStatus: hoppertype.RunRunning, Now: testBase}))
	require.Equal(t, 1, updates())
	run, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: start.Run.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunRunning, run.Status)
	events, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: start.Run.ID})
	require.NoError(t, err)
	require.Len(t, events, 4)
}
