package server_test

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/stretchr/testify/require"
)

// TestCompensatedSagaShownAsSuch: the job of a saga that undid its work
// ends dead, but every table and its own page read "compensated", not
// "dead"; a job that failed reads dead.
func TestCompensatedSagaShownAsSuch(t *testing.T) {
	t.Parallel()
	broken := hopper.Define("broken", func(context.Context, int) (int, error) {
		return 0, hopper.Abort(errors.New("downstream down"))
	}, nil)
	saga := hopper.Workflow("undo", func(wf hopper.WorkflowContext, _ int) (string, error) {
		if _, err := hopper.Step(wf, "charge", func(context.Context) (string, error) { return "charged", nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("refund", func(context.Context) error { return nil })
		return "", errors.New("card declined")
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})
	e := setupTypes(t, broken, saga)
	ctx := context.Background()
	_, err := saga.Start(ctx, e.c, 1, &hopper.StartOpts{ID: "saga-1"})
	require.NoError(t, err)
	require.Equal(t, "compensated", waitRun(t, e, "saga-1").Status)
	h, err := broken.Enqueue(ctx, e.c, 1, &hopper.InsertOpts{ID: "broken-1"})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)

	row := func(body, id string) string {
		m := regexp.MustCompile(`<tr>(?:(?:[^<]|<[^/]|</[^t]|</t[^r])*?)href="/jobs/` + id + `"(?:[^<]|<[^/]|</[^t]|</t[^r])*</tr>`).FindString(body)
		require.NotEmpty(t, m, "a row for %s in\n%s", id, body)
		return m
	}
	for _, page := range []string{"/", "/jobs", "/jobs?state=dead", "/dead?hide_compensated=false"} {
		code, body := e.page(page)
		require.Equal(t, 200, code, page)
		require.Contains(t, row(body, "saga-1"), `class="state s-compensated"`, page)
		require.NotContains(t, row(body, "saga-1"), `s-dead`, page)
		require.Contains(t, row(body, "broken-1"), `class="state s-dead"`, page)
	}
	code, body := e.page("/dead")
	require.Equal(t, 200, code)
	require.NotContains(t, body, `href="/jobs/saga-1"`, "a compensated saga is no dead letter")
	code, body = e.page("/jobs/saga-1")
	require.Equal(t, 200, code)
	require.Regexp(t, `<h2>Job <span class="mono">saga-1</span> <span class="state s-compensated"`, body)
	code, body = e.page("/jobs/broken-1")
	require.Equal(t, 200, code)
	require.Regexp(t, `<h2>Job <span class="mono">broken-1</span> <span class="state s-dead"`, body)
}
