package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// updateHistories rewrites testdata/histories from fresh runs:
//
//	go test -run TestReplayHistories -update-histories .
var updateHistories = flag.Bool("update-histories", false, "record testdata/histories anew from real runs")

type replayOrder struct {
	ID   string `json:"id"`
	Fail bool   `json:"fail,omitempty"`
}

type replayApproval struct {
	By string `json:"by"`
}

var replayEmail = hopper.Define("replay-email", func(ctx context.Context, to string) (string, error) {
	return "sent to " + to, nil
}, nil)

var replayShip = hopper.Workflow("replay-ship", func(wf hopper.WorkflowContext, id string) (string, error) {
	return hopper.Step(wf, "label", func(ctx context.Context) (string, error) { return "label-" + id, nil }, nil)
}, nil)

// replayOrderV1 is the workflow whose recorded histories the replay tests
// check; it uses every kind of operation a history records.
var replayOrderV1 = hopper.Workflow("replay-order", replayOrderCode(nil), &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})

// replayOrderCode is replay-order's code; between, when set, runs after the
// charge step (to model a code change).
func replayOrderCode(between func(wf hopper.WorkflowContext) error) hopper.WorkflowFunc[replayOrder, string] {
	return func(wf hopper.WorkflowContext, in replayOrder) (string, error) {
		stamp := wf.Now()
		_ = wf.Random()
		ref := wf.NewID()
		if _, err := hopper.Step(wf, "reserve", func(ctx context.Context) (int, error) { return 3, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("release", func(ctx context.Context) error { return nil })
		if _, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) { return "pay-" + in.ID, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("refund", func(ctx context.Context) error { return nil })
		if between != nil {
			if err := between(wf); err != nil {
				return "", err
			}
		}
		if err := wf.Stream().Write(map[string]string{"stage": "charged"}); err != nil {
			return "", err
		}
		if err := wf.Sleep(time.Millisecond); err != nil {
			return "", err
		}
		label, err := hopper.Child(wf, replayShip, in.ID, nil)
		if err != nil {
			return "", err
		}
		if _, err := hopper.Activity(wf, replayEmail, in.ID+"@example.com", nil); err != nil {
			return "", err
		}
		approval, err := hopper.WaitHook[replayApproval](wf, "approval", nil)
		if err != nil {
			return "", err
		}
		if in.Fail {
			if _, err := hopper.Step(wf, "ship", func(ctx context.Context) (string, error) {
				return "", hopper.Fatal(errors.New("carrier refused"))
			}, nil); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%s %s %s by %s at %d", ref, label, in.ID, approval.By, stamp.Year()), nil
	}
}

const historiesDir = "testdata/histories"

// TestReplayHistories replays every recorded history in testdata/histories
// against the current workflow code (all must pass) and every deliberately
// broken one in testdata/histories/broken (all must fail with a
// non-determinism error naming the event they break).
func TestReplayHistories(t *testing.T) {
	if *updateHistories {
		recordHistories(t)
	}
	ctx := testCtx(t)
	good, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(good), 4, "recorded histories")
	for _, path := range good {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h, err := hopper.ReadHistoryFile(path)
			require.NoError(t, err)
			require.NotEmpty(t, h.Events)
			switch h.Workflow {
			case replayOrderV1.Name():
				require.NoError(t, hopper.ReplayHistory(ctx, replayOrderV1, h))
			case replayShip.Name():
				require.NoError(t, hopper.ReplayHistory(ctx, replayShip, h))
			default:
				t.Fatalf("no workflow %q to replay", h.Workflow)
			}
		})
	}
	for _, bc := range brokenHistories {
		t.Run("broken/"+bc.file, func(t *testing.T) {
			h, err := hopper.ReadHistoryFile(filepath.Join(historiesDir, "broken", bc.file))
			require.NoError(t, err)
			err = hopper.ReplayHistory(ctx, replayOrderV1, h)
			require.ErrorIs(t, err, hopper.ErrNonDeterminism)
			var nd *hopper.NonDeterminismError
			require.ErrorAs(t, err, &nd)
			require.Equal(t, bc.position, nd.Position, err.Error())
			require.Contains(t, err.Error(), bc.mentions)
		})
	}
}

// brokenHistories are made from replay-order-completed.json by one
// deliberate corruption each; replaying them must fail at position.
var brokenHistories = []struct {
	file     string
	mutate   func(h *hopper.History)
	position int
	mentions string
}{
	{"renamed-step.json", func(h *hopper.History) { renameEvent(h, "step", "charge", "charge-card") }, 7, `"charge-card"`},
	{"swapped-steps.json", func(h *hopper.History) {
		i, j := eventIndex(h, "step", "reserve"), eventIndex(h, "step", "charge")
		h.Events[i], h.Events[j] = h.Events[j], h.Events[i]
	}, 5, `"charge"`},
	{"missing-step.json", func(h *hopper.History) { removeEvent(h, "step", "reserve") }, 5, `"release"`},
	{"sleep-became-step.json", func(h *hopper.History) {
		i := eventIndex(h, "sleep", "sleep")
		h.Events[i].Kind = "step"
	}, 10, `sleep "sleep"`},
	{"extra-step.json", func(h *hopper.History) {
		i := eventIndex(h, "workflow_completed", "")
		extra := hopper.HistoryEvent{Kind: "step", Name: "audit", Data: json.RawMessage(`{"output":true}`), At: h.Events[i].At}
		h.Events = slices.Insert(h.Events, i, extra)
	}, 18, "the end of the workflow"},
	{"other-child.json", func(h *hopper.History) { renameEvent(h, "child_started", "replay-ship", "replay-ship-v2") }, 11, `"replay-ship-v2"`},
}

func eventIndex(h *hopper.History, kind, name string) int {
	for i, ev := range h.Events {
		if ev.Kind == kind && ev.Name == name {
			return i
		}
	}
	panic(fmt.Sprintf("history has no %s %q", kind, name))
}

func renameEvent(h *hopper.History, kind, name, to string) {
	h.Events[eventIndex(h, kind, name)].Name = to
}

func removeEvent(h *hopper.History, kind, name string) {
	i := eventIndex(h, kind, name)
	h.Events = slices.Delete(h.Events, i, i+1)
}

// recordHistories runs replay-order to completion, to a compensated
// failure, and to its hook wait, and writes their histories (and the
// broken variants) to testdata/histories.
func recordHistories(t *testing.T) {
	c := newClient(t, hopper.Config{})
	require.NoError(t, c.Register(replayOrderV1))
	require.NoError(t, c.Register(replayShip))
	require.NoError(t, c.Register(replayEmail))
	ctx := testCtx(t)
	require.NoError(t, os.MkdirAll(filepath.Join(historiesDir, "broken"), 0o755))

	write := func(path string, h *hopper.History) {
		b, err := json.MarshalIndent(h, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	export := func(id, file string) *hopper.History {
		h, err := c.RunHistory(ctx, id)
		require.NoError(t, err)
		write(filepath.Join(historiesDir, file), h)
		return h
	}
	resume := func(id string) {
		token := waitHookToken(t, c, id)
		require.NoError(t, c.HookResume(ctx, token, json.RawMessage(`{"by":"ana"}`)))
	}

	h, err := replayOrderV1.Start(ctx, c, replayOrder{ID: "o-1"}, &hopper.StartOpts{ID: "order-completed"})
	require.NoError(t, err)
	resume(h.ID())
	_, err = h.Result(ctx)
	require.NoError(t, err)
	completed := export(h.ID(), "replay-order-completed.json")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	for _, ev := range info.History {
		if ev.Kind == "child_started" {
			var d struct{ Child string }
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			export(d.Child, "replay-ship-completed.json")
		}
	}

	h, err = replayOrderV1.Start(ctx, c, replayOrder{ID: "o-2", Fail: true}, &hopper.StartOpts{ID: "order-compensated"})
	require.NoError(t, err)
	resume(h.ID())
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.Equal(t, hopper.RunCompensated, export(h.ID(), "replay-order-compensated.json").Status)

	h, err = replayOrderV1.Start(ctx, c, replayOrder{ID: "o-3"}, &hopper.StartOpts{ID: "order-waiting"})
	require.NoError(t, err)
	waitHookToken(t, c, h.ID())
	require.Equal(t, hopper.RunWaiting, export(h.ID(), "replay-order-waiting.json").Status)

	for _, bc := range brokenHistories {
		var b hopper.History
		raw, err := json.Marshal(completed)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &b))
		bc.mutate(&b)
		write(filepath.Join(historiesDir, "broken", bc.file), &b)
	}
}

// waitHookToken waits for run id to wait on a hook and returns its token:
// the wait is recorded with the run's suspension, whose event follows.
func waitHookToken(t *testing.T, c *hopper.Client, id string) string {
	t.Helper()
	ctx := testCtx(t)
	var token string
	await(t, "run "+id+" to wait on its hook", func() bool {
		info, err := c.RunGet(ctx, id)
		require.NoError(t, err)
		if len(info.Hooks) > 0 && info.Hooks[0].State == hoppertype.HookWaiting && info.Status == hopper.RunWaiting {
			token = info.Hooks[0].Token
			return true
		}
		return false
	}, onEvents(t, c))
	return token
}

// TestReplayCodeChange checks the recorded histories against changed code:
// a step inserted in the middle breaks them, the same step behind Patch
// does not.
func TestReplayCodeChange(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	h, err := hopper.ReadHistoryFile(filepath.Join(historiesDir, "replay-order-completed.json"))
	require.NoError(t, err)

	audit := func(wf hopper.WorkflowContext) error {
		_, err := hopper.Step(wf, "audit", func(ctx context.Context) (bool, error) { return true, nil }, nil)
		return err
	}
	unpatched := hopper.Workflow("replay-order", replayOrderCode(audit), nil)
	err = hopper.ReplayHistory(ctx, unpatched, h)
	require.ErrorIs(t, err, hopper.ErrNonDeterminism)
	require.Contains(t, err.Error(), `"audit"`)

	patched := hopper.Workflow("replay-order", replayOrderCode(func(wf hopper.WorkflowContext) error {
		if wf.Patch("audit") {
			return audit(wf)
		}
		return nil
	}), nil)
	require.NoError(t, hopper.ReplayHistory(ctx, patched, h))

	// A history of another workflow is refused outright.
	err = hopper.ReplayHistory(ctx, replayShip, h)
	require.ErrorIs(t, err, hopper.ErrHistoryMismatch)

	// A workflow that returns early leaves history unanswered.
	early := hopper.Workflow("replay-order", func(wf hopper.WorkflowContext, in replayOrder) (string, error) {
		return "done", nil
	}, nil)
	err = hopper.ReplayHistory(ctx, early, h)
	require.ErrorIs(t, err, hopper.ErrNonDeterminism)
	require.True(t, strings.Contains(err.Error(), "the end of the workflow"), err.Error())
}
