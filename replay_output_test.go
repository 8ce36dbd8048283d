package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
)

// TestReplayOutputOfARecordedRun: a completed run's history gives back the
// output the run recorded; the history cut before the end is
// ErrHistoryEnded; a compensated run gives back its own error.
func TestReplayOutputOfARecordedRun(t *testing.T) {
	ctx := context.Background()
	h, err := hopper.ReadHistoryFile("testdata/histories/replay-order-completed.json")
	require.NoError(t, err)
	var recorded struct {
		Output string `json:"output"`
	}
	last := h.Events[len(h.Events)-1]
	require.Equal(t, "workflow_completed", last.Kind)
	require.NoError(t, json.Unmarshal(last.Data, &recorded))
	out, err := hopper.ReplayOutput(ctx, replayOrderV1, h)
	require.NoError(t, err)
	require.Equal(t, recorded.Output, out)

	cut := *h
	cut.Events = h.Events[:len(h.Events)-3] // before the hook is received
	_, err = hopper.ReplayOutput(ctx, replayOrderV1, &cut)
	require.ErrorIs(t, err, hopper.ErrHistoryEnded)
	require.NoError(t, hopper.ReplayHistory(ctx, replayOrderV1, &cut), "the same cut history replays: the code is on its path")

	_, err = hopper.ReplayOutput(ctx, replayShip, h)
	require.ErrorIs(t, err, hopper.ErrHistoryMismatch)
}

// fakeCheckout's result depends on what its steps and its hook answer.
var fakeCheckout = hopper.Workflow("fake-checkout", func(wf hopper.WorkflowContext, cart int) (string, error) {
	price, err := hopper.Step(wf, "price", func(context.Context) (int, error) { return cart * 10, nil }, nil)
	if err != nil {
		return "", err
	}
	ok, err := hopper.WaitHook[bool](wf, "approve", nil)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", hopper.Abort(errors.New("not approved"))
	}
	return fmt.Sprintf("charged %d", price), nil
}, nil)

// fakeHistory is a history written by hand: the step's and the hook's
// answers are the test's, whatever the code would compute.
func fakeHistory(approved bool) *hopper.History {
	return &hopper.History{Version: hopper.HistoryVersion, RunID: "fake-1", Workflow: "fake-checkout", Attempt: 1, Input: json.RawMessage(`3`),
		Events: []hopper.HistoryEvent{
			{Seq: 1, Kind: "workflow_started"},
			{Seq: 2, Kind: "step", Name: "price", Data: json.RawMessage(`{"output": 999}`)},
			{Seq: 3, Kind: "hook_created", Name: "approve", Data: json.RawMessage(`{"token": "t"}`)},
			{Seq: 4, Kind: "hook_wait", Name: "approve", Data: json.RawMessage(`{"until": "9999-01-01T00:00:00Z", "token": "t"}`)},
			{Seq: 5, Kind: "hook_received", Name: "approve", Data: json.RawMessage(fmt.Sprintf(`{"output": %v}`, approved))},
		}}
}

// TestReplayOutputOfAFakeHistory: a workflow run inline against a history
// written by hand takes its step's and hook's answers from it.
func TestReplayOutputOfAFakeHistory(t *testing.T) {
	ctx := context.Background()
	out, err := hopper.ReplayOutput(ctx, fakeCheckout, fakeHistory(true))
	require.NoError(t, err)
	require.Equal(t, "charged 999", out, "the step's answer is the history's, not the code's 30")
	_, err = hopper.ReplayOutput(ctx, fakeCheckout, fakeHistory(false))
	require.ErrorIs(t, err, hopper.ErrAborted, "the workflow's own error")

	diverged := fakeHistory(true)
	diverged.Events[1].Name = "quote"
	_, err = hopper.ReplayOutput(ctx, fakeCheckout, diverged)
	require.ErrorIs(t, err, hopper.ErrNonDeterminism)
}
