package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// changeCases cover the change feed (ChangeList, ChangeMark) and feed
// cursors (CursorLease, CursorAdvance, CursorList).
func changeCases() []testCase {
	return []testCase{
		{"JobTransitions", testChangesOfJob},
		{"AttemptsAreChanges", testChangesCountAttempts},
		{"GatesAndRuns", testChangesOfGatesAndRuns},
		{"WorkersAndSchedules", testChangesOfWorkersAndSchedules},
		{"NoStateNoChange", testChangesOnlyOnState},
		{"HeartbeatMessage", testChangesHeartbeatMessage},
		{"RollbackWritesNone", testChangesRollback},
		{"OwnChanges", testChangesOwn},
		{"FeedPaging", testChangesPaging},
		{"FeedBackwards", testChangesBefore},
		{"Scan", testChangesScan},
		{"ScanStuck", testChangesScanStuck},
		{"Tail", testChangesTail},
		{"DeletedWithJob", testChangesDeleted},
		{"CursorLease", testCursorLease},
	}
}

// entityChanges returns an entity's changes, which must be listed.
func (f *fixture) entityChanges(t *testing.T, id string) []*hoppertype.Change {
	t.Helper()
	chs, err := f.x.ChangeList(f.ctx, &driver.ChangeListParams{EntityID: id, Limit: 100})
	require.NoError(t, err)
	return chs
}

// feed returns the whole final feed once it holds at least n changes. A
// committed change becomes final when every transaction that could still
// commit one before it has ended (at once on a store with one writer, soon
// on one with concurrent writers).
func (f *fixture) feed(t *testing.T, n int) []*hoppertype.Change {
	t.Helper()
	deadline := time.Now().Add(finalWait)
	for {
		chs, err := f.x.ChangeList(f.ctx, &driver.ChangeListParams{Limit: 1000})
		require.NoError(t, err)
		if len(chs) >= n || time.Now().After(deadline) {
			return chs
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func transitions(chs []*hoppertype.Change) []string {
	out := make([]string, len(chs))
	for i, ch := range chs {
		out[i] = ch.Prev + ">" + ch.State
	}
	return out
}

func testChangesOfJob(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded,
		Attempt: j.Attempt, RunAt: j.RunAt, Result: []byte(`"ok"`), EndedAt: at(time.Second)})

	chs := f.entityChanges(t, j.ID)
	require.Equal(t, []string{">pending", "pending>running", "running>succeeded"}, transitions(chs))
	for i, ch := range chs {
		require.Equal(t, hoppertype.ChangeJob, ch.Kind)
		require.Equal(t, j.ID, ch.EntityID)
		require.Equal(t, "test-job", ch.Type)
		require.Equal(t, j.Queue, ch.Queue)
		require.False(t, ch.At.IsZero(), "a change has a time")
		if i > 0 {
			require.Greater(t, ch.Position, chs[i-1].Position, "positions increase")
		}
	}
	require.Empty(t, chs[0].Fields, "an insert names no changed fields")
	require.Equal(t, 1, chs[1].Attempt)
	require.Equal(t, "worker-1", chs[1].Worker)
	require.Equal(t, []string{"attempt", "started_at", "worker"}, chs[1].Fields)
	require.True(t, chs[1].DueAt.Equal(j.RunAt), "a start records when the job was due: %v, want %v", chs[1].DueAt, j.RunAt)
	require.True(t, chs[0].DueAt.IsZero(), "only a start records a due time")
	require.True(t, chs[2].DueAt.IsZero(), "only a start records a due time")
	require.Equal(t, 1, chs[2].Attempt)
	require.Equal(t, []string{"ended_at", "worker", "result"}, chs[2].Fields)

	// The feed holds the same changes, final once committed, in order.
	feed := f.feed(t, 3)
	require.Len(t, feed, 3)
	for i := range feed {
		require.Equal(t, chs[i].Position, feed[i].Position)
		require.Equal(t, chs[i].State, feed[i].State)
		if i > 0 {
			require.True(t, hoppertype.CursorOf(feed[i-1]).Before(feed[i]), "feed is in delivery order")
		}
	}
}

// The attempt count is the count of changes into running since the job was
// last moved back to a fresh start: no counter apart from the changes.
func testChangesCountAttempts(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	retryAt := at(time.Minute)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateRetrying, Attempt: j.Attempt,
		RunAt: retryAt, Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "boom", Attempt: 1, At: base}})
	rows := f.claim(t, j.Queue, retryAt, 1)
	require.Len(t, rows, 1)
	retryable := true
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: rows[0].LeaseToken, State: hoppertype.JobStateStuck, Attempt: rows[0].Attempt,
		RunAt: retryAt, Stuck: &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure, Retryable: &retryable, Detail: "lost", ObservedAt: retryAt}})
	f.retry(t, driver.JobRetryParams{IDs: []string{j.ID}, States: []hoppertype.JobState{hoppertype.JobStateStuck}, Now: at(2 * time.Minute)})

	chs := f.entityChanges(t, j.ID)
	require.Equal(t, []string{">pending", "pending>running", "running>retrying", "retrying>pending", "pending>running",
		"running>stuck", "stuck>pending"}, transitions(chs))
	starts := 0
	for _, ch := range chs[:6] {
		if ch.State == string(hoppertype.JobStateRunning) {
			starts++
			require.Equal(t, starts, ch.Attempt, "each start carries its attempt number")
		}
	}
	require.Equal(t, rows[0].Attempt, starts)
	require.Equal(t, "boom", chs[2].Error.Message, "the failure rides with its change")
	require.Contains(t, chs[2].Fields, "error")
	require.Contains(t, chs[2].Fields, "run_at")
	stuck := chs[5].Stuck
	require.NotNil(t, stuck)
	require.Equal(t, hoppertype.StuckEngineFailure, stuck.Cause)
	require.NotNil(t, stuck.Retryable)
	require.True(t, *stuck.Retryable)
	require.Contains(t, chs[5].Fields, "stuck")
	require.Equal(t, 0, chs[6].Attempt, "a retry starts the attempts afresh")
	require.Nil(t, chs[6].Stuck, "and clears the stuck slot")
}

func testChangesOfGatesAndRuns(t *testing.T, f *fixture) {
	g := f.insertOne(t, ofType(hoppertype.GateType), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
	chs := f.entityChanges(t, g.ID)
	require.Len(t, chs, 1)
	require.Equal(t, hoppertype.ChangeGate, chs[0].Kind)
	require.Equal(t, string(hoppertype.JobStateScheduled), chs[0].State)

	r := f.insertRun(t, func(r *hoppertype.RunRow) { r.Status = hoppertype.RunPending })
	f.runUpdate(t, driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunFailed, EndedAt: at(time.Second),
		Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "no", At: at(time.Second)}, Now: at(time.Second)})
	// Same status again: not a transition.
	f.runUpdate(t, driver.RunUpdateParams{ID: r.ID, Status: hoppertype.RunFailed, Now: at(2 * time.Second)})
	chs = f.entityChanges(t, r.ID)
	require.Equal(t, []string{">pending", "pending>failed"}, transitions(chs))
	require.Equal(t, hoppertype.ChangeRun, chs[1].Kind)
	require.Equal(t, "wf", chs[1].Type)
	require.Equal(t, "no", chs[1].Error.Message)
	require.Equal(t, []string{"ended_at", "error"}, chs[1].Fields)
	require.Zero(t, chs[1].Seq, "a run with no history")

	// A run's change records where its history stood: the attempt and
	// place of its last entry, written in the change's transaction or
	// before it.
	lr, lj := f.leasedRun(t)
	f.appendEvents(t, lr.ID, lj.LeaseToken, event(lr.ID, 1, 1, "step"), event(lr.ID, 1, 2, "step"))
	f.runUpdate(t, driver.RunUpdateParams{ID: lr.ID, Status: hoppertype.RunWaiting, Now: at(time.Second)})
	require.NoError(t, f.x.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: lr.ID, LeaseToken: lj.LeaseToken,
		Events:    []*hoppertype.RunEvent{event(lr.ID, 2, 1, "step"), event(lr.ID, 2, 2, "step"), event(lr.ID, 2, 3, "step")},
		RunStatus: hoppertype.RunCompleted, EndedAt: at(2 * time.Second), Now: at(2 * time.Second)}))
	chs = nil
	for _, ch := range f.entityChanges(t, lr.ID) {
		if ch.Kind == hoppertype.ChangeRun { // not its job's
			chs = append(chs, ch)
		}
	}
	require.Len(t, chs, 3, "%v", transitions(chs))
	waiting, done := chs[1], chs[2]
	require.Equal(t, string(hoppertype.RunWaiting), waiting.State)
	require.Equal(t, [2]int{1, 2}, [2]int{waiting.Attempt, waiting.Seq}, "the history up to the suspension")
	require.Equal(t, string(hoppertype.RunCompleted), done.State)
	require.Equal(t, [2]int{2, 3}, [2]int{done.Attempt, done.Seq}, "the entries appended with the status count")
}

func testChangesOnlyOnState(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	_, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{Leases: []driver.Lease{{ID: j.ID, Token: j.LeaseToken}}, ExpiresAt: at(time.Hour)})
	require.NoError(t, err)
	_, err = f.x.JobCancel(f.ctx, &driver.JobCancelParams{ID: j.ID, Now: at(time.Second)})
	require.NoError(t, err, "a running job gets a cancel request, not a new state")
	require.Equal(t, []string{">pending", "pending>running"}, transitions(f.entityChanges(t, j.ID)))
}

// A heartbeat with a message records it as a change that leaves the job
// running, for held leases only, in the order of the job's changes.
func testChangesHeartbeatMessage(t *testing.T, f *fixture) {
	j := f.claimOne(t)
	lease := []driver.Lease{{ID: j.ID, Token: j.LeaseToken}}
	res, err := f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{Leases: lease, ExpiresAt: at(time.Hour), Message: "half way"})
	require.NoError(t, err)
	require.True(t, res[0].Held)
	_, err = f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{Leases: lease, ExpiresAt: at(time.Hour)})
	require.NoError(t, err)
	stale := []driver.Lease{{ID: j.ID, Token: j.LeaseToken + 1000}}
	res, err = f.x.JobHeartbeat(f.ctx, &driver.JobHeartbeatParams{Leases: stale, ExpiresAt: at(time.Hour), Message: "not mine"})
	require.NoError(t, err)
	require.False(t, res[0].Held)
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded,
		Attempt: j.Attempt, RunAt: j.RunAt, EndedAt: at(time.Second)})

	chs := f.entityChanges(t, j.ID)
	require.Equal(t, []string{">pending", "pending>running", "running>running", "running>succeeded"}, transitions(chs),
		"one change for the heartbeat with a message, none without one or without the lease")
	beat := chs[2]
	require.True(t, beat.IsHeartbeat())
	require.Equal(t, "half way", beat.Detail)
	require.Equal(t, []string{hoppertype.ChangeFieldHeartbeat}, beat.Fields)
	require.Equal(t, j.Attempt, beat.Attempt)
	require.Equal(t, "worker-1", beat.Worker)
	require.Equal(t, hoppertype.ChangeJob, beat.Kind)
	for _, ch := range []*hoppertype.Change{chs[0], chs[1], chs[3]} {
		require.False(t, ch.IsHeartbeat())
		require.Empty(t, ch.Detail)
	}
	feed := f.feed(t, 4)
	require.Len(t, feed, 4)
	require.Equal(t, "half way", feed[2].Detail, "the feed carries the message")
}

func testChangesRollback(t *testing.T, f *fixture) {
	kept, dropped, inner := f.job(), f.job(), f.job()
	boom := errors.New("boom")
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{dropped}}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	err = f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{kept}}); err != nil {
			return err
		}
		err := tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{inner}}); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		return nil
	})
	require.NoError(t, err)
	feed := f.feed(t, 1)
	require.Len(t, feed, 1, "only the committed insert wrote a change")
	require.Equal(t, kept.ID, feed[0].EntityID)
	require.Empty(t, f.entityChanges(t, dropped.ID))
	require.Empty(t, f.entityChanges(t, inner.ID))
}

func testChangesOwn(t *testing.T, f *fixture) {
	f.insertOne(t)
	a, b := f.job(), f.job()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		mark, err := tx.ChangeMark(ctx, &driver.ChangeMarkParams{})
		require.NoError(t, err)
		own, err := tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: hoppertype.ChangeCursor{Position: mark}, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, own, "nothing written yet")
		if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}}); err != nil {
			return err
		}
		own, err = tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: hoppertype.ChangeCursor{Position: mark}, Limit: 10})
		require.NoError(t, err)
		require.Len(t, own, 1)
		require.Equal(t, a.ID, own[0].EntityID)
		last := own[0].Position
		if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{b}}); err != nil {
			return err
		}
		own, err = tx.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: hoppertype.ChangeCursor{Position: last}, Limit: 10})
		require.NoError(t, err)
		require.Len(t, own, 1, "only what came after the last one seen")
		require.Equal(t, b.ID, own[0].EntityID)
		return nil
	})
	require.NoError(t, err)
	own, err := f.x.ChangeList(f.ctx, &driver.ChangeListParams{Own: true, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, own, "outside a transaction nothing is one's own")
}

func testChangesPaging(t *testing.T, f *fixture) {
	for range 5 {
		f.insertOne(t)
	}
	all := f.feed(t, 5)
	require.Len(t, all, 5)
	var got []*hoppertype.Change
	var cur hoppertype.ChangeCursor
	for {
		page, err := f.x.ChangeList(f.ctx, &driver.ChangeListParams{After: cur, Limit: 2})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		cur = hoppertype.CursorOf(page[len(page)-1])
	}
	require.Len(t, got, 5)
	for i := range all {
		require.Equal(t, all[i].Position, got[i].Position)
	}
	_, err := f.x.ChangeList(f.ctx, &driver.ChangeListParams{})
	require.Error(t, err, "a limit is required")
}

// ChangeListBefore walks the feed back from a cursor, newest first, page
// by page, to its oldest change; its pages are the forward feed reversed.
func testChangesBefore(t *testing.T, f *fixture) {
	for range 5 {
		f.insertOne(t)
	}
	all := f.feed(t, 5)
	require.Len(t, all, 5)
	none, err := f.x.ChangeListBefore(f.ctx, &driver.ChangeListBeforeParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, none, "nothing comes before the zero cursor")
	cur := hoppertype.CursorOf(all[4])
	var got []*hoppertype.Change
	for range len(all) + 1 { // a page that never shrinks fails, not hangs
		page, err := f.x.ChangeListBefore(f.ctx, &driver.ChangeListBeforeParams{Before: cur, Limit: 2})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		cur = hoppertype.CursorOf(page[len(page)-1])
	}
	require.Len(t, got, 4, "the changes before the last one")
	for i, ch := range got {
		require.Equal(t, hoppertype.CursorOf(all[3-i]), hoppertype.CursorOf(ch), "change %d", i)
		require.Equal(t, all[3-i].EntityID, ch.EntityID)
		require.Equal(t, all[3-i].At, ch.At)
	}
	_, err = f.x.ChangeListBefore(f.ctx, &driver.ChangeListBeforeParams{Before: cur})
	require.Error(t, err, "a limit is required")
}

func testChangesDeleted(t *testing.T, f *fixture) {
	gone := f.finished(t, hoppertype.JobStateSucceeded, endedAt(at(-time.Hour)))
	kept := f.insertOne(t)
	n, err := f.x.JobDeleteFinished(f.ctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: base, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, f.entityChanges(t, gone.ID), "a job's changes go with it")
	require.Len(t, f.entityChanges(t, kept.ID), 1)
}

func testCursorLease(t *testing.T, f *fixture) {
	name := "obs-" + f.id()
	ttl := 10 * time.Second
	c, err := f.x.CursorLease(f.ctx, &driver.CursorLeaseParams{Name: name, Owner: "a", Now: base, TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, "a", c.Owner)
	require.Equal(t, hoppertype.ChangeCursor{}, c.At, "a new cursor starts at the start of the feed")
	requireTime(t, at(ttl), c.ExpiresAt)

	c, err = f.x.CursorLease(f.ctx, &driver.CursorLeaseParams{Name: name, Owner: "b", Now: at(time.Second), TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, "a", c.Owner, "held by a until it expires")
	err = f.x.CursorAdvance(f.ctx, &driver.CursorAdvanceParams{Name: name, Owner: "b", At: hoppertype.ChangeCursor{Tx: 5, Position: 5}, Now: at(time.Second), TTL: ttl})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost)

	require.NoError(t, f.x.CursorAdvance(f.ctx, &driver.CursorAdvanceParams{Name: name, Owner: "a", At: hoppertype.ChangeCursor{Tx: 7, Position: 9}, Now: at(2 * time.Second), TTL: ttl}))
	require.NoError(t, f.x.CursorAdvance(f.ctx, &driver.CursorAdvanceParams{Name: name, Owner: "a", At: hoppertype.ChangeCursor{Tx: 7, Position: 3}, Now: at(3 * time.Second), TTL: ttl}))
	list, err := f.x.CursorList(f.ctx, &driver.CursorListParams{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, hoppertype.ChangeCursor{Tx: 7, Position: 9}, list[0].At, "a cursor never moves back")
	requireTime(t, at(13*time.Second), list[0].ExpiresAt, "advancing renews the lease")

	// Expired: b takes it over where a left it; a has lost it.
	c, err = f.x.CursorLease(f.ctx, &driver.CursorLeaseParams{Name: name, Owner: "b", Now: at(13 * time.Second), TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, "b", c.Owner)
	require.Equal(t, hoppertype.ChangeCursor{Tx: 7, Position: 9}, c.At)
	err = f.x.CursorAdvance(f.ctx, &driver.CursorAdvanceParams{Name: name, Owner: "a", At: hoppertype.ChangeCursor{Tx: 8, Position: 10}, Now: at(14 * time.Second), TTL: ttl})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost)
	c, err = f.x.CursorLease(f.ctx, &driver.CursorLeaseParams{Name: name, Owner: "b", Now: at(15 * time.Second), TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, "b", c.Owner, "the holder renews")
	requireTime(t, at(25*time.Second), c.ExpiresAt)
}

func testChangesScan(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	for range 6 {
		f.insertOne(t, inQueue(q))
	}
	claimed := f.claim(t, q, base, 2)
	require.Len(t, claimed, 2)
	f.insertOne(t, ofType(hoppertype.GateType), inState(hoppertype.JobStateScheduled), runAt(at(time.Hour)))
	all := f.feed(t, 9)
	require.Len(t, all, 9)

	scanAll := func(p driver.ChangeScanParams) []*hoppertype.Change {
		t.Helper()
		var got []*hoppertype.Change
		p.Limit = 2
		for range 20 {
			res, err := f.x.ChangeScan(f.ctx, &p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(res.Changes), 2)
			if res.Next == p.After {
				require.Empty(t, res.Changes, "nothing past the end")
				return got
			}
			require.True(t, p.After.Before(&hoppertype.Change{Tx: res.Next.Tx, Position: res.Next.Position}), "the scan moves on")
			got = append(got, res.Changes...)
			p.After = res.Next
		}
		t.Fatal("the scan did not end")
		return nil
	}
	positions := func(chs []*hoppertype.Change) []int64 {
		out := make([]int64, len(chs))
		for i, ch := range chs {
			out[i] = ch.Position
		}
		return out
	}
	require.Equal(t, positions(all), positions(scanAll(driver.ChangeScanParams{})), "no filter: every change")
	running := scanAll(driver.ChangeScanParams{States: []string{"running"}})
	require.Len(t, running, 2, "only the changes into running, though the scan read them all")
	for _, ch := range running {
		require.Equal(t, "running", ch.State)
		require.Equal(t, "pending", ch.Prev)
	}
	gates := scanAll(driver.ChangeScanParams{Kinds: []hoppertype.ChangeKind{hoppertype.ChangeGate}})
	require.Len(t, gates, 1)
	require.Equal(t, hoppertype.GateType, gates[0].Type)
	require.Empty(t, scanAll(driver.ChangeScanParams{Types: []string{"no-such-type"}}))
	_, err := f.x.ChangeScan(f.ctx, &driver.ChangeScanParams{})
	require.Error(t, err, "a limit is required")
}

// testChangesScanStuck scans for stuck changes only (the retry observer's
// filter), which a driver may serve by skipping every other change: each
// stuck change comes once and in order, the scan ends, and a stuck change
// made after the end comes from the cursor the scan ended at.
func testChangesScanStuck(t *testing.T, f *fixture) {
	q := "q-" + f.id()
	scan := func(p driver.ChangeScanParams, limit int) ([]*hoppertype.Change, hoppertype.ChangeCursor) {
		t.Helper()
		var got []*hoppertype.Change
		p.Limit = limit
		for range 50 {
			res, err := f.x.ChangeScan(f.ctx, &p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(res.Changes), limit)
			if res.Next == p.After {
				require.Empty(t, res.Changes, "nothing past the end")
				return got, p.After
			}
			require.True(t, p.After.Before(&hoppertype.Change{Tx: res.Next.Tx, Position: res.Next.Position}), "the scan moves on")
			for _, ch := range res.Changes {
				require.True(t, p.After.Before(ch), "a change after the cursor")
				require.False(t, res.Next.Before(ch), "a change up to Next")
			}
			got = append(got, res.Changes...)
			p.After = res.Next
		}
		t.Fatal("the scan did not end")
		return nil, hoppertype.ChangeCursor{}
	}
	start, err := f.x.ChangeTail(f.ctx, &driver.ChangeTailParams{})
	require.NoError(t, err)
	for range 4 {
		f.insertOne(t, inQueue(q))
	}
	born := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateStuck)) // a change into stuck at its insert
	claimed := f.claim(t, q, base, 1)
	require.Len(t, claimed, 1)
	j := claimed[0]
	f.finishOK(t, driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateStuck, Attempt: j.Attempt,
		RunAt: j.RunAt, Stuck: &hoppertype.StuckInfo{Cause: hoppertype.StuckEngineFailure}})
	for range 3 {
		f.insertOne(t, inQueue(q))
	}
	all := f.feed(t, 10) // waits until the ten are final
	require.Len(t, all, 10)

	stuck := driver.ChangeScanParams{After: start, States: []string{string(hoppertype.JobStateStuck)}}
	for _, limit := range []int{1, 2, 100} {
		got, end := scan(stuck, limit)
		require.Len(t, got, 2, "limit %d", limit)
		require.Equal(t, born.ID, got[0].EntityID)
		require.Equal(t, j.ID, got[1].EntityID)
		require.Equal(t, "running", got[1].Prev)
		require.NotNil(t, got[1].Stuck)
		require.Equal(t, hoppertype.StuckEngineFailure, got[1].Stuck.Cause)
		require.Equal(t, hoppertype.CursorOf(all[len(all)-1]), end, "limit %d: the scan ends at the last change", limit)
	}
	gates := stuck
	gates.Kinds = []hoppertype.ChangeKind{hoppertype.ChangeGate}
	got, _ := scan(gates, 2)
	require.Empty(t, got, "stuck and of another kind")
	typed := stuck
	typed.Types = []string{"no-such-type"}
	got, _ = scan(typed, 2)
	require.Empty(t, got, "stuck and of another type")

	// From where a scan ended, the next stuck change.
	_, end := scan(stuck, 100)
	later := f.insertOne(t, inQueue(q), inState(hoppertype.JobStateStuck))
	f.feed(t, 11)
	stuck.After = end
	got, _ = scan(stuck, 100)
	require.Len(t, got, 1)
	require.Equal(t, later.ID, got[0].EntityID)
}

func testChangesTail(t *testing.T, f *fixture) {
	tail, err := f.x.ChangeTail(f.ctx, &driver.ChangeTailParams{})
	require.NoError(t, err)
	require.Equal(t, hoppertype.ChangeCursor{}, tail, "an empty feed")
	f.insertOne(t)
	f.insertOne(t)
	all := f.feed(t, 2)
	require.Len(t, all, 2)
	require.Eventually(t, func() bool {
		tail, err = f.x.ChangeTail(f.ctx, &driver.ChangeTailParams{})
		require.NoError(t, err)
		return tail == hoppertype.CursorOf(all[1])
	}, finalWait, 5*time.Millisecond, "the last change")
	later := f.insertOne(t)
	var got []*hoppertype.Change
	require.Eventually(t, func() bool {
		got, err = f.x.ChangeList(f.ctx, &driver.ChangeListParams{After: tail, Limit: 10})
		require.NoError(t, err)
		return len(got) == 1
	}, finalWait, 5*time.Millisecond)
	require.Equal(t, later.ID, got[0].EntityID, "after the tail: only what came since")
}

// Workers joining and leaving, and schedules firing, are changes too;
// retention deletes them by age, and no job's changes with them.
func testChangesOfWorkersAndSchedules(t *testing.T, f *fixture) {
	w := "w-" + f.id()
	for _, seen := range []time.Time{base, at(time.Minute)} { // stored, then refreshed
		require.NoError(t, f.x.WorkerUpsert(f.ctx, &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: w, StartedAt: base, SeenAt: seen}}))
	}
	_, err := f.x.WorkerDelete(f.ctx, &driver.WorkerDeleteParams{ID: w})
	require.NoError(t, err)
	chs := f.entityChanges(t, w)
	require.Equal(t, []string{">joined", "joined>left"}, transitions(chs), "a refresh is no change")
	for _, ch := range chs {
		require.Equal(t, hoppertype.ChangeWorker, ch.Kind)
	}

	name := "sch-" + f.id()
	f.record(t, name, at(time.Hour), at(2*time.Hour), at(time.Hour))
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: name, Paused: true, Now: at(90 * time.Minute)}))
	f.record(t, name, at(2*time.Hour), at(3*time.Hour), at(2*time.Hour)) // paused: not fired
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: name, Paused: false, Now: at(150 * time.Minute)}))
	f.record(t, name, at(3*time.Hour), at(4*time.Hour), at(3*time.Hour))
	chs = f.entityChanges(t, name)
	require.Equal(t, []string{">fired", ">fired"}, transitions(chs), "each occurrence fired, not the paused one")
	for i, ch := range chs {
		require.Equal(t, hoppertype.ChangeSchedule, ch.Kind)
		require.Equal(t, i+1, ch.Attempt, "the occurrences fired so far")
	}
	requireTime(t, at(time.Hour), chs[0].DueAt, "the occurrence")
	requireTime(t, at(3*time.Hour), chs[1].DueAt)
	require.Len(t, f.feed(t, 4), 4, "in the feed")

	// Retention by age: the changes written before ChangesBefore go (the
	// store stamps changes by its own clock), a job's stay.
	j := f.insertOne(t)
	_, err = f.x.WorkerDelete(f.ctx, &driver.WorkerDeleteParams{Before: base.Add(-time.Hour), ChangesBefore: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.Len(t, f.entityChanges(t, name), 2, "written since: kept")
	_, err = f.x.WorkerDelete(f.ctx, &driver.WorkerDeleteParams{Before: base.Add(-time.Hour), ChangesBefore: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, f.entityChanges(t, name))
	require.Empty(t, f.entityChanges(t, w))
	require.Len(t, f.entityChanges(t, j.ID), 1, "a job's changes go with the job, not by age")
}
