package hopper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
)

// lockedBuffer is a buffer the logger writes to from the engine's
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestHandlerLoggers: a handler's logger carries its job's attributes, a
// workflow's its run's.
func TestHandlerLoggers(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	job := hopper.Define("logged", func(ctx context.Context, _ int) (int, error) {
		hopper.LoggerFromContext(ctx).Info("from a job")
		return 1, nil
	}, nil)
	act := hopper.Define("logged-activity", func(ctx context.Context, _ int) (int, error) {
		hopper.LoggerFromContext(ctx).Info("from an activity")
		return 3, nil
	}, nil)
	flow := hopper.Workflow("logged-flow", func(wf hopper.WorkflowContext, _ int) (int, error) {
		_, err := hopper.Step(wf, "s", func(context.Context) (int, error) { return 2, nil }, nil)
		wf.Logger().Info("from a run")
		if err != nil {
			return 0, err
		}
		return hopper.Activity(wf, act, 0, nil)
	}, nil)
	c := newClient(t, hopper.Config{Logger: log})
	require.NoError(t, c.Register(job, act, flow))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 0, &hopper.InsertOpts{ID: "logged-1"})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	run, err := flow.Start(ctx, c, 0, &hopper.StartOpts{ID: "logged-run"})
	require.NoError(t, err)
	_, err = run.Result(ctx)
	require.NoError(t, err)

	lines := buf.lines(t, "from a job")
	require.Len(t, lines, 1)
	require.Equal(t, "worker", lines[0]["category"])
	require.Equal(t, "logged-1", lines[0]["job_id"])
	require.Equal(t, "logged", lines[0]["type"])
	require.EqualValues(t, 1, lines[0]["attempt"])
	lines = buf.lines(t, "from a run")
	require.NotEmpty(t, lines)
	require.Equal(t, "workflow", lines[0]["category"])
	require.Equal(t, "logged-run", lines[0]["run_id"])
	require.Equal(t, "logged-flow", lines[0]["workflow"])
	lines = buf.lines(t, "from an activity")
	require.Len(t, lines, 1)
	require.Equal(t, "activity", lines[0]["category"])
	require.Equal(t, "logged-run", lines[0]["run_id"], "an activity's lines name its run")
	require.Same(t, slog.Default(), hopper.LoggerFromContext(context.Background()), "outside a handler: the default logger")
}

// TestEngineLogCategory: the engine's own lines carry category "system".
func TestEngineLogCategory(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	job := hopper.Define("logged-engine", func(context.Context, int) (int, error) { return 1, nil }, nil)
	c := newClient(t, hopper.Config{Logger: log, OnEvent: func(e hopper.Event) {
		if e.Kind == hopper.EventQueued {
			panic("a hook that breaks")
		}
	}})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	lines := buf.lines(t, "hopper: engine error")
	require.NotEmpty(t, lines, "the panicking hook is reported")
	require.Equal(t, "system", lines[0]["category"])
}
