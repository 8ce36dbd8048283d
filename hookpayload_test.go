package hopper_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestHookRefusesUndecodablePayload: HookResume refuses, naming where, a
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
	awaitRunStatus(t, c, h.ID(), hopper.RunWaiting)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, info.Hooks, 1)
	token := info.Hooks[0].Token

	for _, cl := range []*hopper.Client{c, outside} {
		err = cl.HookResume(ctx, token, []byte(`{"approved":"yes","by":"ada"}`))
		require.ErrorIs(t, err, hopper.ErrInvalidInput)
		var pe *hopper.HookPayloadError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, "decision", pe.Hook)
		require.Contains(t, pe.Reason, ".approved: want true or false")
	}
	info, err = c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hoppertype.HookWaiting, info.Hooks[0].State, "the hook is still unused")

	require.NoError(t, outside.HookResume(ctx, token, []byte(`{"approved":true,"by":"ada"}`)))
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, approvalPayload{Approved: true, By: "ada"}, out)
}

// TestHookRequest: the request that resumed a hook through its webhook
// reaches the workflow beside the payload — method, headers, query —
// without credentials; a hook resumed from Go has none.
func TestHookRequest(t *testing.T) { forEachDriver(t, testHookRequest) }

type seen struct {
	Method    string `json:"method"`
	Signature string `json:"signature"`
	Auth      string `json:"auth"`
	Cookie    string `json:"cookie"`
	Query     string `json:"query"`
	None      bool   `json:"none"`
}

func testHookRequest(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("webhooked", func(wf hopper.WorkflowContext, _ hopper.None) (seen, error) {
		h, err := hopper.NewHook[approvalPayload](wf, "callback")
		if err != nil {
			return seen{}, err
		}
		if _, err := h.Wait(nil); err != nil {
			return seen{}, err
		}
		r := h.Request()
		if r == nil {
			return seen{None: true}, nil
		}
		return seen{Method: r.Method, Signature: r.Header.Get("X-Signature"), Auth: r.Header.Get("Authorization"),
			Cookie: r.Header.Get("Cookie"), Query: r.Query.Get("order")}, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	token := func(id string) string {
		awaitRunStatus(t, c, id, hopper.RunWaiting)
		info, err := c.RunGet(ctx, id)
		require.NoError(t, err)
		return info.Hooks[0].Token
	}

	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	req := &hopper.HookRequest{Method: "POST",
		Header: map[string][]string{"X-Signature": {"sha256=abc"}, "Authorization": {"Bearer secret"}, "Cookie": {"s=1"}},
		Query:  map[string][]string{"order": {"o-7"}}}
	require.NoError(t, c.HookResumeRequest(ctx, token(h.ID()), []byte(`{"approved":true}`), req))
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, seen{Method: "POST", Signature: "sha256=abc", Query: "o-7"}, out, "no credentials kept")

	h, err = wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	require.NoError(t, c.HookResume(ctx, token(h.ID()), []byte(`{"approved":true}`)))
	out, err = h.Result(ctx)
	require.NoError(t, err)
	require.True(t, out.None, "resumed from Go: no request")
}
