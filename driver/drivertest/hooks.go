package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// hookCases cover HookInsert, HookGet, HookResume and HookListByRun.
func hookCases() []testCase {
	return []testCase{
		{"InsertGetRoundTrip", testHookRoundTrip},
		{"InsertDuplicate", testHookDuplicate},
		{"NotFound", testHookNotFound},
		{"ResumeOnce", testHookResume},
		{"ResumeRaceOneWinner", testHookResumeRace},
		{"ListByRun", testHookList},
	}
}

// hookRow builds a waiting hook of run runID named "approval", created at
// base, with a fresh token; mods adjust it.
func (f *fixture) hookRow(runID string, mods ...func(*hoppertype.HookRow)) *hoppertype.HookRow {
	h := &hoppertype.HookRow{
		Token:     "h-" + f.id(),
		RunID:     runID,
		Name:      "approval",
		State:     hoppertype.HookWaiting,
		CreatedAt: base,
	}
	for _, m := range mods {
		m(h)
	}
	return h
}

// insertHook inserts a hook built from mods and returns what was inserted.
func (f *fixture) insertHook(t *testing.T, runID string, mods ...func(*hoppertype.HookRow)) *hoppertype.HookRow {
	t.Helper()
	h := f.hookRow(runID, mods...)
	require.NoError(t, f.x.HookInsert(f.ctx, &driver.HookInsertParams{Row: h}))
	return h
}

// hookGet returns a hook that must exist.
func (f *fixture) hookGet(t *testing.T, token string) *hoppertype.HookRow {
	t.Helper()
	h, err := f.x.HookGet(f.ctx, &driver.HookGetParams{Token: token})
	require.NoError(t, err, "get hook %s", token)
	require.NotNil(t, h)
	return h
}

// resumeHook resumes a hook, requires it to apply, and returns it.
func (f *fixture) resumeHook(t *testing.T, token string, payload []byte, now time.Time) *hoppertype.HookRow {
	t.Helper()
	h, err := f.x.HookResume(f.ctx, &driver.HookResumeParams{Token: token, Payload: payload, Now: now})
	require.NoError(t, err)
	require.NotNil(t, h)
	requireHook(t, h, f.hookGet(t, token), "HookResume returns the stored hook")
	return h
}

// hooksOf lists a run's hooks.
func (f *fixture) hooksOf(t *testing.T, runID string) []*hoppertype.HookRow {
	t.Helper()
	hooks, err := f.x.HookListByRun(f.ctx, &driver.HookListByRunParams{RunID: runID})
	require.NoError(t, err)
	return hooks
}

// requireHook requires two hooks to be equal, comparing times as instants.
// Payload is compared strictly: nil and non-nil differ.
func requireHook(t *testing.T, want, got *hoppertype.HookRow, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	norm := func(h *hoppertype.HookRow) hoppertype.HookRow {
		c := *h
		c.CreatedAt = normTime(c.CreatedAt)
		c.ResumedAt = normTime(c.ResumedAt)
		return c
	}
	require.Equal(t, norm(want), norm(got), msgAndArgs...)
}

func tokens(hooks []*hoppertype.HookRow) []string {
	out := make([]string, len(hooks))
	for i, h := range hooks {
		out[i] = h.Token
	}
	return out
}

func testHookRoundTrip(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	in := f.hookRow(r.ID, func(h *hoppertype.HookRow) {
		h.Name = "shipping-confirmed"
		h.CreatedAt = nanos(at(time.Second))
	})
	require.NoError(t, f.x.HookInsert(f.ctx, &driver.HookInsertParams{Row: in}))
	want := *in
	want.CreatedAt = at(time.Second)
	got := f.hookGet(t, in.Token)
	requireHook(t, &want, got, "times are stored with microsecond precision")
	require.Nil(t, got.Payload, "a waiting hook has no payload")
	require.True(t, got.ResumedAt.IsZero())

	resumed := f.resumeHook(t, in.Token, []byte(`{"ok":true}`), at(time.Minute))
	resumed.Payload[0] = 'X'
	got = f.hookGet(t, in.Token)
	require.Equal(t, []byte(`{"ok":true}`), got.Payload, "hooks are copied out")
	got.Payload[1] = 'Y'
	require.Equal(t, []byte(`{"ok":true}`), f.hookGet(t, in.Token).Payload, "hooks are copied out")
}

func testHookDuplicate(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	h := f.insertHook(t, r.ID)
	other := f.insertRun(t)
	err := f.x.HookInsert(f.ctx, &driver.HookInsertParams{Row: f.hookRow(other.ID, func(d *hoppertype.HookRow) {
		d.Token = h.Token
		d.Name = "other"
		d.CreatedAt = at(time.Hour)
	})})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	requireHook(t, h, f.hookGet(t, h.Token), "the existing hook is unchanged")
	require.Empty(t, f.hooksOf(t, other.ID))
}

func testHookNotFound(t *testing.T, f *fixture) {
	h, err := f.x.HookGet(f.ctx, &driver.HookGetParams{Token: "h-" + f.id()})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, h)
	h, err = f.x.HookResume(f.ctx, &driver.HookResumeParams{Token: "h-" + f.id(), Payload: []byte(`1`), Now: base})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Nil(t, h)
}

func testHookResume(t *testing.T, f *fixture) {
	r := f.insertRun(t)
	h := f.insertHook(t, r.ID)
	other := f.insertHook(t, r.ID)
	payload := []byte(`{"approved":true}`)
	got := f.resumeHook(t, h.Token, payload, nanos(at(time.Minute)))
	want := *h
	want.State = hoppertype.HookResumed
	want.Payload = []byte(`{"approved":true}`)
	want.ResumedAt = at(time.Minute)
	requireHook(t, &want, got, "resumed with the payload at Now")
	payload[0] = 'X'
	requireHook(t, &want, f.hookGet(t, h.Token), "the payload is copied in")
	requireHook(t, other, f.hookGet(t, other.Token), "another hook of the run is untouched")

	again, err := f.x.HookResume(f.ctx, &driver.HookResumeParams{Token: h.Token, Payload: []byte(`{"approved":false}`), Now: at(time.Hour)})
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	requireHook(t, &want, again, "a second resume returns the hook unchanged")
	requireHook(t, &want, f.hookGet(t, h.Token), "a second resume changes nothing")

	// The request that resumed a hook through its webhook is kept beside
	// the payload; a hook resumed without one has none.
	req := []byte(`{"method":"POST","header":{"X-Signature":["abc"]}}`)
	got, err = f.x.HookResume(f.ctx, &driver.HookResumeParams{Token: other.Token, Payload: []byte(`2`), Request: req, Now: at(time.Minute)})
	require.NoError(t, err)
	require.JSONEq(t, string(req), string(got.Request))
	require.JSONEq(t, string(req), string(f.hookGet(t, other.Token).Request))
	require.Nil(t, f.hookGet(t, h.Token).Request)
	listed, err := f.x.HookListByRun(f.ctx, &driver.HookListByRunParams{RunID: r.ID})
	require.NoError(t, err)
	for _, l := range listed {
		if l.Token == other.Token {
			require.JSONEq(t, string(req), string(l.Request))
		}
	}
}

func testHookResumeRace(t *testing.T, f *fixture) {
	const n = 20
	r := f.insertRun(t)
	h := f.insertHook(t, r.ID)
	results := make([]*hoppertype.HookRow, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.x.HookResume(f.ctx, &driver.HookResumeParams{
				Token: h.Token, Payload: fmt.Append(nil, i), Now: at(time.Duration(i+1) * time.Second),
			})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil {
			require.Equal(t, -1, winner, "two resumes of one hook both applied")
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "no resume applied")
	stored := f.hookGet(t, h.Token)
	require.Equal(t, hoppertype.HookResumed, stored.State)
	require.Equal(t, fmt.Append(nil, winner), stored.Payload, "the stored payload is the winner's")
	requireTime(t, at(time.Duration(winner+1)*time.Second), stored.ResumedAt)
	for i := range n {
		if i != winner {
			require.ErrorIs(t, errs[i], hoppertype.ErrStateConflict)
			requireHook(t, stored, results[i], "a losing resume returns the winner's hook")
		}
	}
}

func testHookList(t *testing.T, f *fixture) {
	a := f.insertRun(t)
	b := f.insertRun(t)
	none := f.insertRun(t)
	// Tokens are chosen against creation order, so ordering by token alone
	// or by insertion is wrong.
	tok := func(s string) func(*hoppertype.HookRow) {
		return func(h *hoppertype.HookRow) { h.Token = f.prefix + "-" + s }
	}
	created := func(d time.Duration) func(*hoppertype.HookRow) {
		return func(h *hoppertype.HookRow) { h.CreatedAt = at(d) }
	}
	a3 := f.insertHook(t, a.ID, tok("a"), created(2*time.Second))
	b1 := f.insertHook(t, b.ID, tok("b"), created(0))
	a1 := f.insertHook(t, a.ID, tok("z"), created(0))
	a2y := f.insertHook(t, a.ID, tok("y"), created(time.Second))
	a2x := f.insertHook(t, a.ID, tok("x"), created(time.Second))
	f.resumeHook(t, a2y.Token, []byte(`"r"`), at(time.Minute))

	got := f.hooksOf(t, a.ID)
	require.Equal(t, []string{a1.Token, a2x.Token, a2y.Token, a3.Token}, tokens(got), "by CreatedAt, then token; resumed hooks included")
	requireHook(t, a1, got[0])
	require.Equal(t, hoppertype.HookResumed, got[2].State)
	require.Equal(t, []byte(`"r"`), got[2].Payload)
	requireHook(t, f.hookGet(t, a2y.Token), got[2])
	require.Equal(t, []string{b1.Token}, tokens(f.hooksOf(t, b.ID)))
	require.Empty(t, f.hooksOf(t, none.ID))
	require.Empty(t, f.hooksOf(t, f.id()), "a run that does not exist has no hooks")
}
