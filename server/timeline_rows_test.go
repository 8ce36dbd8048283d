package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
	"github.com/stretchr/testify/require"
)

// TestAPIRunTimelineHookAndChild: a child run is a row linking to the
// child, closed when the child ends; a hook wait is an open row while the
// run waits and a closed one, "resumed", once the hook is resumed.
func TestAPIRunTimelineHookAndChild(t *testing.T) {
	t.Parallel()
	leaf := hopper.Workflow("leaf", func(hopper.WorkflowContext, int) (int, error) { return 7, nil }, nil)
	parent := hopper.Workflow("gated", func(wf hopper.WorkflowContext, _ int) (int, error) {
		n, err := hopper.Child(wf, leaf, 1, nil)
		if err != nil {
			return 0, err
		}
		if _, err := hopper.WaitHook[json.RawMessage](wf, "approve", nil); err != nil {
			return 0, err
		}
		return n, nil
	}, nil)
	e := setupTypes(t, leaf, parent)
	_, err := parent.Start(context.Background(), e.c, 1, &hopper.StartOpts{ID: "gated-1"})
	require.NoError(t, err)

	rows := func() map[string]server.TimelineRowJSON {
		var tl server.TimelineJSON
		require.Equal(t, 200, e.do("GET", "/v1/runs/gated-1/timeline", "", &tl))
		out := map[string]server.TimelineRowJSON{}
		for _, r := range tl.Rows {
			if r.Kind == "hook" || r.Kind == "child" {
				out[r.Kind] = r
			}
		}
		return out
	}
	var tok string
	e.await(t, "the hook", func() bool {
		var r server.RunJSON
		require.Equal(t, 200, e.do("GET", "/v1/runs/gated-1", "", &r))
		if len(r.Hooks) == 1 && r.Status == "waiting" {
			tok = r.Hooks[0].Token
		}
		return tok != ""
	})
	waiting := rows()
	child := waiting["child"]
	require.Equal(t, "child", child.Kind)
	require.Regexp(t, `^/runs/gated-1\.`, child.Link, "the child's row links to the child run")
	require.Len(t, child.Bars, 1)
	require.False(t, child.Bars[0].Open, "the child ended before the hook")
	require.Equal(t, "ok", child.Bars[0].Class)
	hook := waiting["hook"]
	require.Equal(t, "hook approve", hook.Label)
	require.Equal(t, "waiting", hook.Note)
	require.Len(t, hook.Bars, 1)
	require.True(t, hook.Bars[0].Open, "the run still waits on its hook")

	require.Equal(t, 200, e.do("POST", "/v1/hooks/"+tok, `{}`, nil))
	require.Equal(t, "completed", waitRun(t, e, "gated-1").Status)
	hook = rows()["hook"]
	require.Equal(t, "resumed", hook.Note)
	require.False(t, hook.Bars[0].Open)
	require.False(t, hook.Bars[0].End.Before(hook.Bars[0].Start))
}
