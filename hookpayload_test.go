package hopper_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestHookRefusesUndecodablePayload: ResumeHook refuses, naming where, a
// payload that would not decode into the hook's type, in any process (a
// client that does not run the workflow included), and the hook stays
// unused; a payload that fits resumes it.
func TestHookRefusesUndecodablePayload(t *testing.T) {
	forEachDriver(t, testHookRefusesUndecodablePayload)
}

func testHookRefusesUndecodablePayload(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("approve", func(wf hopper.WorkflowContext, _ hopper.None) (approvalPayload, error) {
		h, err := hopper.NewHook[approvalPayload](wf, "decision")
		if err != nil {
			return approvalPayload{}, err
		}
		return h.Wait(nil)
	}, nil)
	d := newDriver(t)
	c := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(wf))
	outside, err := hopper.New(hopper.Config{Driver: d}) // runs nothing, knows no workflow
	require.NoError(t, err)
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	waitRunStatus(t, c, h.ID(), hopper.RunWaiting)
	info, err := c.GetRun(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, info.Hooks, 1)
	token := info.Hooks[0].Token

	for _, cl := range []*hopper.Client{c, outside} {
		err = cl.ResumeHook(ctx, token, []byte(`{"approved":"yes","by":"ada"}`))
		require.ErrorIs(t, err, hopper.ErrInvalidInput)
		var pe *hopper.HookPayloadError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, "decision", pe.Hook)
		require.Contains(t, pe.Reason, ".approved: want true or false")
	}
	info, err = c.GetRun(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hoppertype.HookWaiting, info.Hooks[0].State, "the hook is still unused")

	require.NoError(t, outside.ResumeHook(ctx, token, []byte(`{"approved":true,"by":"ada"}`)))
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, approvalPayload{Approved: true, By: "ada"}, out)
}
