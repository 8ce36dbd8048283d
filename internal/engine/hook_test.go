package engine

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// hookFixture is a run whose first attempt created the hook "old", then
// failed and was retried; its second attempt created "typed" (whose
// payload is an object with a bool "ok") and "plain" (no schema), and
// waits: its job is scheduled an hour ahead, the run waiting.
func hookFixture(t *testing.T) *runFixture {
	t.Helper()
	f := newRunFixture(t, 3)
	a := f.claim()
	ctx := context.Background()
	ex := f.d.Executor()
	schema := HookSchema(reflect.TypeFor[struct {
		OK bool `json:"ok"`
	}]())
	created := func(attempt, seq int, token string, schema json.RawMessage) *hoppertype.RunEvent {
		data, err := json.Marshal(EventData{Token: token, Schema: schema})
		require.NoError(t, err)
		return &hoppertype.RunEvent{Attempt: attempt, Seq: seq, Kind: EvHookCreated, Name: token, Data: data, At: f.now}
	}
	for _, token := range []string{"old", "typed", "plain"} {
		require.NoError(t, ex.HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{
			Token: token, RunID: "r", Name: token, State: hoppertype.HookWaiting, CreatedAt: f.now}}))
	}
	require.NoError(t, ex.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: "r", LeaseToken: a.Row().LeaseToken, Now: f.now,
		Events: []*hoppertype.RunEvent{
			created(1, 1, "old", nil),
			{Attempt: 1, Seq: 2, Kind: EvWorkflowFailed, Data: []byte(`{}`), At: f.now}, // retried: no status
			created(2, 1, "typed", schema),
			created(2, 2, "plain", nil),
		}}))
	_, err := ex.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: "r", LeaseToken: a.Row().LeaseToken, State: hoppertype.JobStateScheduled, Attempt: a.Row().Attempt, RunAt: f.now.Add(time.Hour)}}})
	require.NoError(t, err)
	f.setRun(hoppertype.RunWaiting, nil)
	return f
}

// setRun sets the run's status and error, clearing what it had.
func (f *runFixture) setRun(status hoppertype.RunStatus, runErr *hoppertype.ErrorInfo) {
	f.t.Helper()
	ctx := context.Background()
	_, err := f.d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r", Status: status, Reset: true, Now: f.now})
	require.NoError(f.t, err)
	if runErr != nil {
		_, err = f.d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r", Status: status, Error: runErr, Now: f.now})
		require.NoError(f.t, err)
	}
}

// hookState returns a hook's state and payload.
func (f *runFixture) hookState(token string) (hoppertype.HookState, string) {
	f.t.Helper()
	h, err := f.d.Executor().HookGet(context.Background(), &driver.HookGetParams{Token: token})
	require.NoError(f.t, err)
	return h.State, string(h.Payload)
}

// jobState returns the run's job's state.
func (f *runFixture) jobState() hoppertype.JobState {
	f.t.Helper()
	j, err := f.d.Executor().JobGet(context.Background(), &driver.JobGetParams{ID: "r"})
	require.NoError(f.t, err)
	return j.State
}

// TestResumeHook: a payload reaches a waiting hook of a live run's current
// attempt and wakes the run, once; every other case is refused and
// changes nothing — an unknown token, a hook of an attempt that was
// retried, a payload that does not fit the hook's type, a hook already
// resumed, a hook of a finished run or of a run being cancelled.
func TestResumeHook(t *testing.T) {
	t.Parallel()
	f := hookFixture(t)
	ctx := context.Background()
	resume := func(token, payload string) error {
		return f.e.ResumeHook(ctx, HookResume{Token: token, Payload: json.RawMessage(payload)})
	}
	refused := func(err error, want error, token string) {
		t.Helper()
		require.ErrorIs(t, err, want)
		state, payload := f.hookState(token)
		require.Equal(t, hoppertype.HookWaiting, state, "a refused payload leaves the hook waiting")
		require.Empty(t, payload)
		require.Equal(t, hoppertype.JobStateScheduled, f.jobState(), "a refused payload wakes nothing")
	}

	refused(resume("nope", `1`), hoppertype.ErrNotFound, "plain")
	refused(resume("old", `1`), hoppertype.ErrStateConflict, "old")

	err := resume("typed", `{"ok":"yes"}`)
	var pm *HookPayloadMismatch
	require.ErrorAs(t, err, &pm)
	require.Equal(t, "typed", pm.Hook)
	require.Contains(t, pm.Reason, ".ok: want true or false")
	refused(err, hoppertype.ErrInvalidInput, "typed")

	f.setRun(hoppertype.RunCompleted, nil)
	refused(resume("plain", `1`), hoppertype.ErrStateConflict, "plain")
	f.setRun(hoppertype.RunWaiting, &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancel requested", At: f.now})
	refused(resume("plain", `1`), hoppertype.ErrStateConflict, "plain")
	f.setRun(hoppertype.RunWaiting, nil)

	require.NoError(t, f.e.ResumeHook(ctx, HookResume{Token: "typed", Payload: json.RawMessage(`{"ok":true}`), Request: []byte(`{"method":"POST"}`)}))
	h, err := f.d.Executor().HookGet(ctx, &driver.HookGetParams{Token: "typed"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.HookResumed, h.State)
	require.JSONEq(t, `{"ok":true}`, string(h.Payload))
	require.JSONEq(t, `{"method":"POST"}`, string(h.Request))
	require.Equal(t, hoppertype.JobStatePending, f.jobState(), "the run's job is woken")

	err = resume("typed", `{"ok":false}`)
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	require.False(t, errors.Is(err, hoppertype.ErrNotFound))
	_, payload := f.hookState("typed")
	require.JSONEq(t, `{"ok":true}`, payload, "a second payload does not replace the first")

	require.NoError(t, resume("plain", `[1]`), "the run's other hook is still open")
}
