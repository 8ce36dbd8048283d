package drivertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// eventCases cover RunEventAppend and RunEventList.
func eventCases() []testCase {
	return []testCase{
		{"AppendListRoundTrip", testEventRoundTrip},
		{"ListOrderAndAttemptFilter", testEventOrder},
		{"RunsDoNotMix", testEventRunsApart},
		{"FencedByLease", testEventFence},
		{"ReclaimFencesOldLease", testEventReclaim},
		{"DuplicateWritesNothing", testEventDuplicate},
		{"DuplicateInsideTxWritesNothing", testEventDuplicateInTx},
		{"FenceSeesClaimInSameTx", testEventClaimInTx},
		{"AppendSetsRunStatus", testEventRunStatus},
		{"AppendManyOutcomesApart", testEventAppendMany},
	}
}

// testEventAppendMany: each append of a RunEventAppendMany call has its own
// fence and outcome; the good ones apply, with their status, the others
// write nothing.
func testEventAppendMany(t *testing.T, f *fixture) {
	a, aj := f.leasedRun(t)
	b, bj := f.leasedRun(t)
	c, cj := f.leasedRun(t)
	d, dj := f.leasedRun(t)
	f.appendEvents(t, c.ID, cj.LeaseToken, event(c.ID, 1, 1, "step"))
	_, err := f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{ID: d.ID, Status: hoppertype.RunWaiting, Now: base})
	require.NoError(t, err)
	params := []*driver.RunEventAppendParams{
		{RunID: a.ID, LeaseToken: aj.LeaseToken, Events: []*hoppertype.RunEvent{event(a.ID, 1, 1, "step"), event(a.ID, 1, 2, "step")}},
		{RunID: b.ID, LeaseToken: bj.LeaseToken + 1000, Events: []*hoppertype.RunEvent{event(b.ID, 1, 1, "step")},
			RunStatus: hoppertype.RunCompleted, Now: at(time.Minute)},
		{RunID: c.ID, LeaseToken: cj.LeaseToken, Events: []*hoppertype.RunEvent{event(c.ID, 1, 1, "step")}},
		{RunID: d.ID, LeaseToken: dj.LeaseToken, Events: []*hoppertype.RunEvent{event(d.ID, 1, 1, "step")},
			RunStatus: hoppertype.RunRunning, Now: at(time.Minute)},
	}
	errs, err := f.x.RunEventAppendMany(f.ctx, &driver.RunEventAppendManyParams{Events: params})
	require.NoError(t, err)
	require.Len(t, errs, 4)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], hoppertype.ErrLeaseLost)
	require.ErrorIs(t, errs[2], hoppertype.ErrDuplicateID)
	require.NoError(t, errs[3])
	require.Equal(t, []string{"1.1", "1.2"}, seqs(f.events(t, a.ID, 0)))
	require.Empty(t, f.events(t, b.ID, 0))
	rb, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: b.ID})
	require.NoError(t, err)
	require.NotEqual(t, hoppertype.RunCompleted, rb.Status, "a fenced-off append leaves the status")
	require.Equal(t, []string{"1.1"}, seqs(f.events(t, c.ID, 0)))
	require.Equal(t, []string{"1.1"}, seqs(f.events(t, d.ID, 0)))
	rd, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: d.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunRunning, rd.Status)

	// Inside a transaction too, and undone with it.
	e, ej := f.leasedRun(t)
	boom := errors.New("boom")
	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		errs, err := tx.RunEventAppendMany(ctx, &driver.RunEventAppendManyParams{Events: []*driver.RunEventAppendParams{
			{RunID: e.ID, LeaseToken: ej.LeaseToken, Events: []*hoppertype.RunEvent{event(e.ID, 1, 1, "step")}},
			{RunID: a.ID, LeaseToken: aj.LeaseToken, Events: []*hoppertype.RunEvent{event(a.ID, 1, 1, "step")}},
		}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], hoppertype.ErrDuplicateID)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, f.events(t, e.ID, 0))

	// Committed with the transaction, outcomes apart, and the transaction
	// goes on after the call.
	g, gj := f.leasedRun(t)
	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		errs, err := tx.RunEventAppendMany(ctx, &driver.RunEventAppendManyParams{Events: []*driver.RunEventAppendParams{
			{RunID: e.ID, LeaseToken: ej.LeaseToken, Events: []*hoppertype.RunEvent{event(e.ID, 1, 1, "step")},
				RunStatus: hoppertype.RunCompleted, Now: at(time.Minute), EndedAt: at(time.Minute)},
			{RunID: g.ID, LeaseToken: gj.LeaseToken + 1000, Events: []*hoppertype.RunEvent{event(g.ID, 1, 1, "step")}},
		}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], hoppertype.ErrLeaseLost)
		_, err = tx.RunGet(ctx, &driver.RunGetParams{ID: g.ID})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, []string{"1.1"}, seqs(f.events(t, e.ID, 0)))
	require.Empty(t, f.events(t, g.ID, 0))
	re, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: e.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunCompleted, re.Status)
	require.False(t, re.EndedAt.IsZero())
}

// testEventRunStatus: an append's RunStatus applies with its events, and
// not at all when the append does not.
func testEventRunStatus(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	getStatus := func() hoppertype.RunStatus {
		t.Helper()
		row, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: r.ID})
		require.NoError(t, err)
		return row.Status
	}
	_, err := f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunWaiting, Now: base})
	require.NoError(t, err)
	before := getStatus()
	require.Equal(t, hoppertype.RunWaiting, before)

	// Lost lease, duplicate key: neither events nor status.
	err = f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken + 1000,
		Events: []*hoppertype.RunEvent{event(r.ID, 1, 1, "step")}, RunStatus: hoppertype.RunRunning, Now: at(time.Second)})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost)
	require.Equal(t, before, getStatus(), "a fenced-off append leaves the status")

	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"))
	require.Equal(t, before, getStatus(), "an append without RunStatus leaves the status")
	err = f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken,
		Events: []*hoppertype.RunEvent{event(r.ID, 1, 1, "step")}, RunStatus: hoppertype.RunRunning, Now: at(time.Second)})
	require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
	require.Equal(t, before, getStatus(), "a duplicate append leaves the status")

	err = f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken,
		Events: []*hoppertype.RunEvent{event(r.ID, 1, 2, "step")}, RunStatus: hoppertype.RunRunning, Now: at(time.Minute)})
	require.NoError(t, err)
	row, err := f.x.RunGet(f.ctx, &driver.RunGetParams{ID: r.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunRunning, row.Status)
	require.True(t, row.UpdatedAt.Equal(at(time.Minute)), "UpdatedAt is Now: %v", row.UpdatedAt)
	require.True(t, row.EndedAt.IsZero(), "no EndedAt given, none stored")
	require.Equal(t, []string{"1.1", "1.2"}, seqs(f.events(t, r.ID, 0)))

	// The run's last record may end it.
	err = f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken,
		Events: []*hoppertype.RunEvent{event(r.ID, 1, 3, "workflow_completed")}, RunStatus: hoppertype.RunCompleted,
		Now: at(2 * time.Minute), EndedAt: at(2 * time.Minute)})
	require.NoError(t, err)
	row, err = f.x.RunGet(f.ctx, &driver.RunGetParams{ID: r.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunCompleted, row.Status)
	require.True(t, row.EndedAt.Equal(at(2*time.Minute)), "EndedAt: %v", row.EndedAt)
}

// event builds a history event of run runID; its Data and At derive from
// attempt and seq.
func event(runID string, attempt, seq int, kind string) *hoppertype.RunEvent {
	return &hoppertype.RunEvent{
		RunID:   runID,
		Attempt: attempt,
		Seq:     seq,
		Kind:    kind,
		Name:    fmt.Sprintf("%s-%d-%d", kind, attempt, seq),
		Data:    fmt.Appendf(nil, `{"attempt":%d,"seq":%d}`, attempt, seq),
		At:      at(time.Duration(attempt)*time.Minute + time.Duration(seq)*time.Second),
	}
}

// appendEvents appends events under the lease and requires it to apply.
func (f *fixture) appendEvents(t *testing.T, runID string, token int64, evs ...*hoppertype.RunEvent) {
	t.Helper()
	require.NoError(t, f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: runID, LeaseToken: token, Events: evs}))
}

// events lists a run's history (one attempt's when attempt > 0).
func (f *fixture) events(t *testing.T, runID string, attempt int) []*hoppertype.RunEvent {
	t.Helper()
	evs, err := f.x.RunEventList(f.ctx, &driver.RunEventListParams{RunID: runID, Attempt: attempt})
	require.NoError(t, err)
	return evs
}

// requireEvents requires two histories to be equal event by event,
// comparing times as instants. Data is compared strictly: nil and non-nil
// differ.
func requireEvents(t *testing.T, want, got []*hoppertype.RunEvent, msgAndArgs ...any) {
	t.Helper()
	norm := func(evs []*hoppertype.RunEvent) []hoppertype.RunEvent {
		out := make([]hoppertype.RunEvent, len(evs))
		for i, e := range evs {
			require.NotNil(t, e, msgAndArgs...)
			out[i] = *e
			out[i].At = normTime(e.At)
		}
		return out
	}
	require.Equal(t, norm(want), norm(got), msgAndArgs...)
}

// seqs returns the (attempt, seq) pairs of a history as "attempt.seq".
func seqs(evs []*hoppertype.RunEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d.%d", e.Attempt, e.Seq)
	}
	return out
}

func testEventRoundTrip(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	e1 := event(r.ID, 1, 1, "step")
	e1.At = nanos(at(time.Second))
	e2 := event(r.ID, 1, 2, "sleep")
	e2.Data = nil
	e2.Name = ""
	e3 := event(r.ID, 1, 3, "hook")
	f.appendEvents(t, r.ID, j.LeaseToken, e1)
	f.appendEvents(t, r.ID, j.LeaseToken, e2, e3)

	w1 := *e1
	w1.At = at(time.Second)
	w1.Data = []byte(`{"attempt":1,"seq":1}`)
	w2, w3 := *e2, *e3
	want := []*hoppertype.RunEvent{&w1, &w2, &w3}
	got := f.events(t, r.ID, 0)
	requireEvents(t, want, got, "every field, times with microsecond precision")
	require.Nil(t, got[1].Data, "nil Data stays nil")

	e1.Data[0] = 'X'
	got[0].Data[1] = 'Y'
	got[2].Kind = "changed"
	requireEvents(t, want, f.events(t, r.ID, 0), "events are copied in and out")

	// An empty batch under the lease is harmless.
	f.appendEvents(t, r.ID, j.LeaseToken)
	require.Len(t, f.events(t, r.ID, 0), 3)
}

func testEventOrder(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	ev := func(attempt, seq int) *hoppertype.RunEvent { return event(r.ID, attempt, seq, "step") }
	// Calls out of history order, and events out of order within a call.
	f.appendEvents(t, r.ID, j.LeaseToken, ev(2, 1), ev(2, 2))
	f.appendEvents(t, r.ID, j.LeaseToken, ev(1, 10), ev(1, 1), ev(1, 9))
	f.appendEvents(t, r.ID, j.LeaseToken, ev(10, 1), ev(1, 2))
	all := f.events(t, r.ID, 0)
	require.Equal(t, []string{"1.1", "1.2", "1.9", "1.10", "2.1", "2.2", "10.1"}, seqs(all), "(Attempt, Seq) order, numerically")
	requireEvents(t, []*hoppertype.RunEvent{ev(1, 1), ev(1, 2), ev(1, 9), ev(1, 10), ev(2, 1), ev(2, 2), ev(10, 1)}, all)

	require.Equal(t, []string{"1.1", "1.2", "1.9", "1.10"}, seqs(f.events(t, r.ID, 1)))
	require.Equal(t, []string{"2.1", "2.2"}, seqs(f.events(t, r.ID, 2)))
	requireEvents(t, []*hoppertype.RunEvent{ev(10, 1)}, f.events(t, r.ID, 10))
	require.Empty(t, f.events(t, r.ID, 3), "an attempt without events")
}

func testEventRunsApart(t *testing.T, f *fixture) {
	a, ja := f.leasedRun(t)
	b, jb := f.leasedRun(t)
	empty, _ := f.leasedRun(t)
	// The same (Attempt, Seq) in two runs is no duplicate.
	f.appendEvents(t, a.ID, ja.LeaseToken, event(a.ID, 1, 1, "a"), event(a.ID, 1, 2, "a"))
	f.appendEvents(t, b.ID, jb.LeaseToken, event(b.ID, 1, 1, "b"))
	f.appendEvents(t, a.ID, ja.LeaseToken, event(a.ID, 1, 3, "a"))
	requireEvents(t, []*hoppertype.RunEvent{event(a.ID, 1, 1, "a"), event(a.ID, 1, 2, "a"), event(a.ID, 1, 3, "a")}, f.events(t, a.ID, 0))
	requireEvents(t, []*hoppertype.RunEvent{event(b.ID, 1, 1, "b")}, f.events(t, b.ID, 0))
	requireEvents(t, []*hoppertype.RunEvent{event(b.ID, 1, 1, "b")}, f.events(t, b.ID, 1))
	require.Empty(t, f.events(t, empty.ID, 0))
	require.Empty(t, f.events(t, f.id(), 0), "a run that does not exist has no history")
}

// requireLost requires an append to fail with ErrLeaseLost.
func (f *fixture) requireLost(t *testing.T, runID string, token int64, msg string) {
	t.Helper()
	err := f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{
		RunID: runID, LeaseToken: token, Events: []*hoppertype.RunEvent{event(runID, 1, 1, "step"), event(runID, 1, 2, "step")},
	})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost, msg)
	require.Empty(t, f.events(t, runID, 0), "%s: nothing is written", msg)
}

func testEventFence(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	f.requireLost(t, r.ID, j.LeaseToken+1000, "wrong token")
	f.requireLost(t, r.ID, 0, "zero token")

	// A job that waits (never claimed, token 0) holds no lease.
	pending := f.insertOne(t)
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: f.runRow(func(r *hoppertype.RunRow) { r.ID = pending.ID })}))
	f.requireLost(t, pending.ID, pending.LeaseToken, "job not running")

	// A finished job keeps its token but no longer holds the lease.
	done, dj := f.leasedRun(t)
	f.finishOK(t, driver.JobFinishParams{ID: dj.ID, LeaseToken: dj.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Second)})
	f.requireLost(t, done.ID, dj.LeaseToken, "job finished")

	// A job waiting again (a workflow run suspended until a wake-up).
	sleeping, sj := f.leasedRun(t)
	f.finishOK(t, driver.JobFinishParams{ID: sj.ID, LeaseToken: sj.LeaseToken, State: hoppertype.JobStateScheduled, Attempt: 1, RunAt: at(time.Hour)})
	f.requireLost(t, sleeping.ID, sj.LeaseToken, "job scheduled")

	// A run row without a job.
	orphan := f.insertRun(t)
	f.requireLost(t, orphan.ID, 1, "no such job")
	f.requireLost(t, orphan.ID, 0, "no such job, zero token")

	// The lease still works for the one who holds it.
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"))
	require.Equal(t, []string{"1.1"}, seqs(f.events(t, r.ID, 0)))
}

func testEventReclaim(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "step"))
	// The rescuer takes the lease; the job runs again under a new one.
	f.finishOK(t, driver.JobFinishParams{
		ID: j.ID, LeaseToken: j.LeaseToken, RequireLeaseExpiredBefore: at(time.Minute),
		State: hoppertype.JobStateRetrying, Attempt: 1, RunAt: at(time.Minute),
	})
	err := f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 2, "step")}})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost, "rescued")
	again := f.claim(t, j.Queue, at(time.Minute), 1)
	require.Len(t, again, 1)
	err = f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 2, "step")}})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost, "the old worker is fenced off after the re-claim")
	f.appendEvents(t, r.ID, again[0].LeaseToken, event(r.ID, 2, 1, "step"))
	require.Equal(t, []string{"1.1", "2.1"}, seqs(f.events(t, r.ID, 0)))
}

func testEventDuplicate(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	ev := func(attempt, seq int, kind string) *hoppertype.RunEvent { return event(r.ID, attempt, seq, kind) }
	f.appendEvents(t, r.ID, j.LeaseToken, ev(1, 1, "orig"), ev(1, 2, "orig"))
	appendErr := func(evs ...*hoppertype.RunEvent) error {
		return f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: r.ID, LeaseToken: j.LeaseToken, Events: evs})
	}
	want := []*hoppertype.RunEvent{ev(1, 1, "orig"), ev(1, 2, "orig")}

	require.ErrorIs(t, appendErr(ev(1, 1, "dup")), hoppertype.ErrDuplicateID, "a stored (Attempt, Seq)")
	requireEvents(t, want, f.events(t, r.ID, 0), "the stored event is not overwritten")
	require.ErrorIs(t, appendErr(ev(1, 3, "new"), ev(1, 2, "dup")), hoppertype.ErrDuplicateID, "duplicate second in the call")
	requireEvents(t, want, f.events(t, r.ID, 0), "nothing of a failed call is written")
	require.ErrorIs(t, appendErr(ev(1, 3, "new"), ev(1, 4, "new"), ev(1, 3, "dup")), hoppertype.ErrDuplicateID, "duplicate within the call")
	requireEvents(t, want, f.events(t, r.ID, 0), "nothing of a failed call is written")

	// The same Seq in another attempt is no duplicate, and the history
	// continues after failed calls.
	f.appendEvents(t, r.ID, j.LeaseToken, ev(1, 3, "new"), ev(2, 1, "new"), ev(2, 2, "new"))
	requireEvents(t, append(want, ev(1, 3, "new"), ev(2, 1, "new"), ev(2, 2, "new")), f.events(t, r.ID, 0))
}

func testEventDuplicateInTx(t *testing.T, f *fixture) {
	r, j := f.leasedRun(t)
	f.appendEvents(t, r.ID, j.LeaseToken, event(r.ID, 1, 1, "orig"))
	_, err := f.x.RunUpdate(f.ctx, &driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunWaiting, Now: base})
	require.NoError(t, err)
	require.NoError(t, f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		err := tx.RunEventAppend(ctx, &driver.RunEventAppendParams{
			RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 2, "new"), event(r.ID, 1, 1, "dup")},
			RunStatus: hoppertype.RunRunning, Now: at(time.Second),
		})
		require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
		// A key twice in one call.
		err = tx.RunEventAppend(ctx, &driver.RunEventAppendParams{
			RunID: r.ID, LeaseToken: j.LeaseToken, Events: []*hoppertype.RunEvent{event(r.ID, 1, 3, "new"), event(r.ID, 1, 3, "twice")},
			RunStatus: hoppertype.RunRunning, Now: at(time.Second),
		})
		require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
		return nil // the transaction commits what else it did
	}))
	requireEvents(t, []*hoppertype.RunEvent{event(r.ID, 1, 1, "orig")}, f.events(t, r.ID, 0))
	require.Equal(t, hoppertype.RunWaiting, f.runGet(t, r.ID).Status, "nor the status the append carried")
}

func testEventClaimInTx(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	j := f.insertOne(t, inQueue(q))
	require.NoError(t, f.x.RunInsert(f.ctx, &driver.RunInsertParams{Row: f.runRow(func(r *hoppertype.RunRow) { r.ID = j.ID })}))
	var token int64
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		rows, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: q, Limit: 1, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{j.ID}, ids(rows))
		token = rows[0].LeaseToken
		require.NoError(t, tx.RunEventAppend(ctx, &driver.RunEventAppendParams{
			RunID: j.ID, LeaseToken: token, Events: []*hoppertype.RunEvent{event(j.ID, 1, 1, "step")},
		}), "the fence sees a claim made in the same transaction")
		evs, err := tx.RunEventList(ctx, &driver.RunEventListParams{RunID: j.ID})
		require.NoError(t, err)
		require.Equal(t, []string{"1.1"}, seqs(evs))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Empty(t, f.events(t, j.ID, 0), "the append rolled back")
	f.requireState(t, j.ID, hoppertype.JobStatePending)
	f.requireLost(t, j.ID, token, "the claim rolled back")
}
