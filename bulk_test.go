package hopper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// seedDead stores n dead jobs of type typ straight through the driver, as
// if their handlers had failed for good; every other one carries
// tenant=acme in its metadata. Their ids (prefix-00000, …) sort in the
// order made.
func seedDead(t *testing.T, c *hopper.Client, typ, prefix string, n int, at time.Time) []string {
	t.Helper()
	rows := make([]*hoppertype.JobRow, n)
	ids := make([]string, n)
	for i := range rows {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		ids[i] = id
		meta := map[string]string{"tenant": "globex"}
		if i%2 == 0 {
			meta["tenant"] = "acme"
		}
		rows[i] = &hoppertype.JobRow{ID: id, Type: typ, Queue: "default", State: hoppertype.JobStateDead, Attempt: 3, Input: []byte(`{}`),
			GroupID: id, Metadata: meta, Retry: hoppertype.RetryPolicy{Attempts: 3, Backoff: "constant", Base: time.Second, Factor: 1, Max: time.Second},
			Error:    &hoppertype.ErrorInfo{Kind: "error", Message: fmt.Sprintf("charge %d: card declined", i), Attempt: 3, At: at},
			QueuedAt: at, RunAt: at, StartedAt: at, EndedAt: at}
	}
	for len(rows) > 0 {
		k := min(len(rows), 500)
		_, err := c.Driver().Executor().JobInsertMany(testCtx(t), &driver.JobInsertManyParams{Jobs: rows[:k]})
		require.NoError(t, err)
		rows = rows[k:]
	}
	return ids
}

// countStates counts the jobs of typ in each state.
func countStates(t *testing.T, c *hopper.Client, typ string) map[hopper.JobState]int {
	t.Helper()
	out := map[hopper.JobState]int{}
	p := &hopper.ListParams{Types: []string{typ}, Limit: hopper.MaxListLimit}
	for {
		page, err := c.JobList(testCtx(t), p)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			out[j.State]++
		}
		if page.NextCursor == "" {
			return out
		}
		p.Cursor = page.NextCursor
	}
}

func TestJobBulk(t *testing.T) { forEachDriver(t, testJobBulk) }

func testJobBulk(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	ctx := testCtx(t)
	// More than two pages of dead jobs, and a few that wait (nothing runs
	// them: the client is not started).
	const dead = 2*hopper.BulkPage + 101
	seedDead(t, c, "charge", "charge", dead, clk.Now())
	// Three more, retried one by one: they wait (the type is not registered).
	waiting := seedDead(t, c, "charge", "waiting", 3, clk.Now())
	for _, id := range waiting {
		res, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRetry, IDs: []string{id}})
		require.NoError(t, err)
		require.Equal(t, 1, res.Changed)
	}
	acme := &hopper.ListParams{Types: []string{"charge"}, Metadata: map[string]string{"tenant": "acme"}}

	for name, p := range map[string]*hopper.BulkParams{
		"no selection":        {Action: hopper.BulkRedrive},
		"ids and filter":      {Action: hopper.BulkRedrive, IDs: waiting, Filter: acme, Max: 1},
		"filter without max":  {Action: hopper.BulkRedrive, Filter: acme},
		"unknown action":      {Action: "archive", IDs: waiting},
		"negative max":        {Action: hopper.BulkRedrive, Filter: acme, Max: -1},
		"too many ids":        {Action: hopper.BulkCancel, IDs: make([]string, hopper.MaxBulkIDs+1)},
		"bad filter":          {Action: hopper.BulkCancel, Filter: &hopper.ListParams{States: []hopper.JobState{"sleeping"}}, DryRun: true},
		"bad text in a value": {Action: hopper.BulkCancel, Filter: &hopper.ListParams{Metadata: map[string]string{"k": "a\x00b"}}, DryRun: true},
	} {
		_, err := c.JobBulk(ctx, p)
		require.ErrorIs(t, err, hopper.ErrInvalidInput, name)
	}

	// A dry run counts the jobs the action applies to, and changes nothing.
	res, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: acme, DryRun: true})
	require.NoError(t, err)
	half := (dead + 1) / 2
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkRedrive, DryRun: true, Matched: half}, res, "the waiting jobs are not dead")
	require.Equal(t, map[hopper.JobState]int{hopper.StateDead: dead, hopper.StatePending: 3}, countStates(t, c, "charge"))

	// Confirmed for fewer than match: that many change, the rest are left.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: acme, Max: hopper.BulkPage + 7})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkRedrive, Matched: hopper.BulkPage + 7, Changed: hopper.BulkPage + 7, More: true}, res)
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: acme, Max: half})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkRedrive, Matched: half - hopper.BulkPage - 7, Changed: half - hopper.BulkPage - 7}, res)
	require.Equal(t, map[hopper.JobState]int{hopper.StateDead: dead - half, hopper.StatePending: half + 3}, countStates(t, c, "charge"))

	// By ids: only the ids that exist in a state the action applies to.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkCancel, IDs: append([]string{"charge-00001", "no-such-job"}, waiting...)})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkCancel, Matched: 3, Changed: 3}, res)
	for _, id := range waiting {
		j, err := c.JobGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, hopper.StateCancelled, j.State)
	}

	// Retry by error text: the dead and the cancelled whose error says so.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRetry, Filter: &hopper.ListParams{ErrorContains: "charge 1"}, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, 1+5+50+50, res.Matched, "the odd ones still dead numbered 1, 1x, 1xx and 1xxx")
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRetry, Filter: &hopper.ListParams{ErrorContains: "cancelled"}, Max: 10})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkRetry, Matched: 3, Changed: 3}, res)

	// Delete: finished jobs only, whatever the filter's states say.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkDelete, Filter: &hopper.ListParams{Types: []string{"charge"},
		States: []hopper.JobState{hopper.StateDead, hopper.StatePending}}, Max: dead})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkDelete, Matched: dead - half, Changed: dead - half}, res)
	require.Equal(t, map[hopper.JobState]int{hopper.StatePending: half + 3}, countStates(t, c, "charge"))
	_, err = c.JobGet(ctx, "charge-00001")
	require.ErrorIs(t, err, hopper.ErrNotFound)

	// A filter whose states the action does not apply to selects nothing.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: &hopper.ListParams{States: []hopper.JobState{hopper.StatePending}}, Max: 5})
	require.NoError(t, err)
	require.Zero(t, res.Matched)

	// Cancel every waiting job, by filter.
	res, err = c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkCancel, Filter: &hopper.ListParams{Types: []string{"charge"}}, Max: half + 3})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkCancel, Matched: half + 3, Changed: half + 3}, res)
	require.Equal(t, map[hopper.JobState]int{hopper.StateCancelled: half + 3}, countStates(t, c, "charge"))
}

func TestRunBulk(t *testing.T) { forEachDriver(t, testRunBulk) }

func testRunBulk(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("bulk-wf", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	// Not started until the bulk cancels are in: the runs wait.
	c, err := hopper.New(hopper.Config{Driver: newDriver(t)})
	require.NoError(t, err)
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	var ids []string
	for i := range 5 {
		h, err := wf.Start(ctx, c, i, &hopper.StartOpts{ID: fmt.Sprintf("bulk-run-%d", i)})
		require.NoError(t, err)
		ids = append(ids, h.ID())
	}
	_, err = c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkDelete, IDs: ids})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	_, err = c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkCancel, Filter: &hopper.RunQuery{Workflow: "bulk-wf"}})
	require.ErrorIs(t, err, hopper.ErrInvalidInput, "a filter needs max")

	res, err := c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkCancel, Filter: &hopper.RunQuery{Workflow: "bulk-wf"}, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkCancel, DryRun: true, Matched: 5}, res)

	res, err = c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkCancel, IDs: []string{ids[4], "no-such-run"}})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkCancel, Matched: 1, Changed: 1}, res)
	// Newest first: the cap of 4 leaves the oldest run alone.
	res, err = c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkCancel, Filter: &hopper.RunQuery{Workflow: "bulk-wf"}, Max: 4})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkCancel, Matched: 4, Changed: 4, More: true}, res)

	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(testCtx(t))) })
	wait := func(want ...hopper.RunStatus) {
		t.Helper()
		for i, id := range ids {
			r, err := c.RunWait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, want[i], r.Status, id)
		}
	}
	wait(hopper.RunCompleted, hopper.RunCancelled, hopper.RunCancelled, hopper.RunCancelled, hopper.RunCancelled)

	res, err = c.RunBulk(ctx, &hopper.RunBulkParams{Action: hopper.BulkRetry, Filter: &hopper.RunQuery{Workflow: "bulk-wf"}, Max: 10})
	require.NoError(t, err)
	require.Equal(t, &hopper.BulkResult{Action: hopper.BulkRetry, Matched: 4, Changed: 4}, res)
	wait(hopper.RunCompleted, hopper.RunCompleted, hopper.RunCompleted, hopper.RunCompleted, hopper.RunCompleted)
}
