package drivertest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// txCases cover InTx, Notify, Listen and Close.
func txCases() []testCase {
	return []testCase{
		{"CommitAppliesWrites", testTxCommit},
		{"ReadsOwnWrites", testTxReadOwnWrites},
		{"ErrorRollsBackEveryWrite", testTxRollback},
		{"RolledBackClaimIsClaimableAgain", testTxRollbackClaim},
		{"NestedErrorRollsBackOnlyNested", testTxNestedRollback},
		{"NestedCommitThenOuterError", testTxNestedThenOuterRollback},
		{"NestedCommitIsKept", testTxNestedCommit},
		{"NotifyOutsideTx", testNotify},
		{"NotifyInTxAfterCommit", testNotifyAfterCommit},
		{"NotifyDroppedOnRollback", testNotifyRollback},
		{"NotifyDroppedOnNestedRollback", testNotifyNestedRollback},
		{"ListenEndsWithContext", testListenContext},
		{"SubscriptionClose", testSubscriptionClose},
		{"CloseRefusesOperations", testClose},
	}
}

var errBoom = errors.New("drivertest: boom")

func testTxCommit(t *testing.T, f *fixture) {
	j := f.job()
	gid := "g-" + f.id()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
		require.NoError(t, err)
		require.NoError(t, tx.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: gid, Open: 1, State: hoppertype.GroupOpen, CreatedAt: base}}))
		ok, err := tx.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "k", Now: base})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, tx.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "q", Paused: true, Now: base}))
		_, err = tx.LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: "l", Owner: "a", Now: base, TTL: time.Minute})
		require.NoError(t, err)
		return nil
	})
	require.NoError(t, err)
	requireJob(t, j, f.get(t, j.ID))
	require.Equal(t, 1, f.groupGet(t, gid).Open)
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: "k", Now: base}))
	queues, err := f.x.QueueList(f.ctx, &driver.QueueListParams{})
	require.NoError(t, err)
	require.Len(t, queues, 1)
	require.True(t, queues[0].Paused)
	require.Equal(t, "a", f.attempt(t, "l", "b", at(time.Second)).Owner)
}

func testTxReadOwnWrites(t *testing.T, f *fixture) {
	j := f.job()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
		require.NoError(t, err)
		got, err := tx.JobGet(ctx, &driver.JobGetParams{ID: j.ID})
		require.NoError(t, err)
		requireJob(t, j, got)
		rows, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: j.Queue, Limit: 1, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{j.ID}, ids(rows))
		got, err = tx.JobGet(ctx, &driver.JobGetParams{ID: j.ID})
		require.NoError(t, err)
		require.Equal(t, hoppertype.JobStateRunning, got.State)
		return nil
	})
	require.NoError(t, err)
	f.requireState(t, j.ID, hoppertype.JobStateRunning)
}

func testTxRollback(t *testing.T, f *fixture) {
	running := f.claimOne(t)
	beating := f.claimOne(t)
	group := f.group(t, 2)
	keyed := f.insertOne(t, uniqueBy("k"), inQueue("keyed"))
	sched := f.insertOne(t, inState(hoppertype.JobStateScheduled), runAt(at(-time.Minute)), inQueue("sched"))
	done := f.insertOne(t, inState(hoppertype.JobStateSucceeded), endedAt(at(-time.Hour)))
	dead := f.finished(t, hoppertype.JobStateDead)
	f.attempt(t, "leader", "a", base)
	require.NoError(t, f.x.QueueSetPaused(f.ctx, &driver.QueueSetPausedParams{Name: "paused", Paused: true, Now: base}))

	fresh := f.job()
	keyed2 := f.job(uniqueBy("k"))
	gid2 := "g-" + f.id()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{fresh}})
		require.NoError(t, err)
		res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
			ID: running.ID, LeaseToken: running.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Second),
		}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		hb, err := tx.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Leases: []driver.Lease{{ID: beating.ID, Token: beating.LeaseToken}}, ExpiresAt: at(time.Hour)})
		require.NoError(t, err)
		require.True(t, hb[0].Held)
		gr, err := tx.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: group.ID, OpenDelta: -2, Contribute: true, Value: []byte("v"), Final: true, Now: base})
		require.NoError(t, err)
		require.True(t, gr.Settled)
		require.NoError(t, tx.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: gid2, Open: 1, State: hoppertype.GroupOpen, CreatedAt: base}}))
		ok, err := tx.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "key", Now: base})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, tx.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "paused", Paused: false, Now: at(time.Second)}))
		require.NoError(t, tx.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "new", Paused: true, Now: at(time.Second)}))
		require.NoError(t, tx.LeaderResign(ctx, &driver.LeaderResignParams{Name: "leader", Owner: "a"}))
		_, err = tx.LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: "leader2", Owner: "b", Now: base, TTL: time.Minute})
		require.NoError(t, err)
		_, err = tx.JobCancel(ctx, &driver.JobCancelParams{ID: keyed.ID, Now: base})
		require.NoError(t, err)
		ins, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{keyed2}})
		require.NoError(t, err)
		require.False(t, ins[0].Existing)
		claimed, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "sched", Limit: 5, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{sched.ID}, ids(claimed))
		n, err := tx.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: base, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		retried, err := tx.JobRetry(ctx, &driver.JobRetryParams{IDs: []string{dead.ID}, States: []hoppertype.JobState{hoppertype.JobStateDead}, Now: base})
		require.NoError(t, err)
		require.Len(t, retried, 1)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom, "InTx returns fn's error")

	f.requireMissing(t, fresh.ID)
	requireJob(t, running, f.get(t, running.ID), "finish rolled back")
	requireJob(t, beating, f.get(t, beating.ID), "heartbeat rolled back")
	requireGroup(t, group, f.groupGet(t, group.ID), "group update rolled back")
	_, err = f.x.GroupGet(f.ctx, &driver.GroupGetParams{ID: gid2})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "group insert rolled back")
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: "key", Now: base}), "key rolled back")
	queues, err := f.x.QueueList(f.ctx, &driver.QueueListParams{})
	require.NoError(t, err)
	require.Len(t, queues, 1, "queue writes rolled back")
	require.Equal(t, "paused", queues[0].Name)
	require.True(t, queues[0].Paused)
	requireLeader(t, "a", 1, at(leaderTTL), f.attempt(t, "leader", "c", at(time.Second)), "resign rolled back")
	requireLeader(t, "c", 1, at(time.Second+leaderTTL), f.attempt(t, "leader2", "c", at(time.Second)), "attempt rolled back")
	requireJob(t, keyed, f.get(t, keyed.ID), "cancel rolled back")
	f.requireMissing(t, keyed2.ID)
	res, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job(uniqueBy("k"))}})
	require.NoError(t, err)
	require.True(t, res[0].Existing, "the unique key is held again by the job whose cancel rolled back")
	require.Equal(t, keyed.ID, res[0].Job.ID)
	requireJob(t, sched, f.get(t, sched.ID), "claim and promotion rolled back")
	requireJob(t, done, f.get(t, done.ID), "delete rolled back")
	requireJob(t, dead, f.get(t, dead.ID), "retry rolled back")

	// The rolled-back rows still work: claim, finish and heartbeat as before.
	require.Equal(t, []string{sched.ID}, ids(f.claim(t, "sched", base, 5)))
	f.finishOK(t, driver.JobFinishParams{ID: running.ID, LeaseToken: running.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: base, EndedAt: at(time.Second)})
}

func testTxRollbackClaim(t *testing.T, f *fixture) {
	a := f.job(ofType("a"), withPriority(2))
	b := f.job(ofType("b"), withPriority(1))
	c := f.job(ofType("a"), withPriority(0))
	f.insert(t, a, b, c)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		rows, err := tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Limit: 1, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{a.ID}, ids(rows))
		rows, err = tx.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Types: []string{"b"}, Limit: 5, Now: base, LeaseExpiresAt: at(time.Minute), Worker: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{b.ID}, ids(rows))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	for _, r := range []*hoppertype.JobRow{a, b, c} {
		requireJob(t, r, f.get(t, r.ID))
	}
	require.Equal(t, []string{a.ID, b.ID, c.ID}, ids(f.claim(t, "default", base, 10)))
}

func testTxNestedRollback(t *testing.T, f *fixture) {
	group := f.group(t, 1)
	a, b, c := f.job(), f.job(), f.job()
	errInner := errors.New("inner")
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}})
		require.NoError(t, err)
		err = tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{b}})
			require.NoError(t, err)
			_, err = tx.JobCancel(ctx, &driver.JobCancelParams{ID: a.ID, Now: base})
			require.NoError(t, err)
			_, err = tx.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: group.ID, OpenDelta: -1, Now: base})
			require.NoError(t, err)
			return errInner
		})
		require.ErrorIs(t, err, errInner, "the nested InTx returns its fn's error")
		_, err = tx.JobGet(ctx, &driver.JobGetParams{ID: b.ID})
		require.ErrorIs(t, err, hoppertype.ErrNotFound, "nested insert rolled back")
		got, err := tx.JobGet(ctx, &driver.JobGetParams{ID: a.ID})
		require.NoError(t, err, "the outer insert survives the nested rollback")
		require.Equal(t, hoppertype.JobStatePending, got.State, "nested cancel rolled back")
		_, err = tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{c}})
		require.NoError(t, err)
		return nil
	})
	require.NoError(t, err)
	requireJob(t, a, f.get(t, a.ID))
	f.requireMissing(t, b.ID)
	requireJob(t, c, f.get(t, c.ID))
	requireGroup(t, group, f.groupGet(t, group.ID))
}

func testTxNestedThenOuterRollback(t *testing.T, f *fixture) {
	a, b := f.job(), f.job()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}})
		require.NoError(t, err)
		require.NoError(t, tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{b}})
			return err
		}))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	f.requireMissing(t, a.ID)
	f.requireMissing(t, b.ID)
}

func testTxNestedCommit(t *testing.T, f *fixture) {
	a := f.job()
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}})
			return err
		}))
		got, err := tx.JobGet(ctx, &driver.JobGetParams{ID: a.ID})
		require.NoError(t, err)
		require.Equal(t, a.ID, got.ID)
		return nil
	})
	require.NoError(t, err)
	requireJob(t, a, f.get(t, a.ID))
}

// listen subscribes to topic for the rest of the test.
func (f *fixture) listen(t *testing.T, topic string) driver.Subscription {
	t.Helper()
	sub, err := f.d.Listen(f.ctx, topic)
	require.NoError(t, err)
	require.NotNil(t, sub)
	t.Cleanup(sub.Close)
	return sub
}

// recv waits for the next payload on sub.
func recv(t *testing.T, sub driver.Subscription) string {
	t.Helper()
	timer := time.NewTimer(notifyWait)
	defer timer.Stop()
	select {
	case p, ok := <-sub.C():
		require.True(t, ok, "subscription ended while waiting for a notification")
		return p
	case <-timer.C:
		require.FailNow(t, "no notification within the wait")
		return ""
	}
}

// requireNothingYet requires that sub has no payload waiting.
func requireNothingYet(t *testing.T, sub driver.Subscription, msgAndArgs ...any) {
	t.Helper()
	select {
	case p := <-sub.C():
		require.Fail(t, "unexpected notification "+p, msgAndArgs...)
	default:
	}
}

// requireEnded waits for sub's channel to close.
func requireEnded(t *testing.T, sub driver.Subscription) {
	t.Helper()
	timer := time.NewTimer(notifyWait)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-sub.C():
			if !ok {
				return
			}
		case <-timer.C:
			require.FailNow(t, "subscription channel not closed")
		}
	}
}

func testNotify(t *testing.T, f *fixture) {
	topicA, topicB := "a-"+f.id(), "b-"+f.id()
	subA := f.listen(t, topicA)
	subA2 := f.listen(t, topicA)
	subB := f.listen(t, topicB)
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topicB, Payload: "for b"}))
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topicA, Payload: "for a"}))
	require.Equal(t, "for a", recv(t, subA), "a subscriber gets its own topic only")
	require.Equal(t, "for a", recv(t, subA2), "every subscriber of a topic gets it")
	require.Equal(t, "for b", recv(t, subB))
}

func testNotifyAfterCommit(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub := f.listen(t, topic)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: "committed"}))
		requireNothingYet(t, sub, "a notification inside a transaction waits for the commit")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "committed", recv(t, sub))
}

func testNotifyRollback(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub := f.listen(t, topic)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: "rolled back"}))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "after"}))
	require.Equal(t, "after", recv(t, sub), "a rolled-back notification is never delivered")
}

func testNotifyNestedRollback(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub := f.listen(t, topic)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		err := tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: "nested, rolled back"}))
			return errBoom
		})
		require.ErrorIs(t, err, errBoom)
		return tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: "outer"})
	})
	require.NoError(t, err)
	require.Equal(t, "outer", recv(t, sub))
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "end"}))
	require.Equal(t, "end", recv(t, sub), "a notification of a rolled-back scope is never delivered")
}

func testListenContext(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	sub, err := f.d.Listen(ctx, "t-"+f.id())
	require.NoError(t, err)
	cancel()
	requireEnded(t, sub)
	sub.Close() // closing an ended subscription is harmless
}

func testSubscriptionClose(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub, err := f.d.Listen(f.ctx, topic)
	require.NoError(t, err)
	other := f.listen(t, topic)
	sub.Close()
	requireEnded(t, sub)
	sub.Close() // closing twice is harmless
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "still here"}))
	require.Equal(t, "still here", recv(t, other), "closing one subscription leaves the others")
}

func testClose(t *testing.T, f *fixture) {
	j := f.insertOne(t)
	require.NoError(t, f.d.Close())
	ctx := f.ctx
	calls := map[string]func() error{
		"InTx": func() error {
			return f.x.InTx(ctx, func(context.Context, driver.Executor) error { return nil })
		},
		"Notify": func() error { return f.x.Notify(ctx, &driver.NotifyParams{Topic: "t", Payload: "p"}) },
		"Listen": func() error { _, err := f.d.Listen(ctx, "t"); return err },
		"JobInsertMany": func() error {
			_, err := f.x.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job()}})
			return err
		},
		"JobGet":     func() error { _, err := f.x.JobGet(ctx, &driver.JobGetParams{ID: j.ID}); return err },
		"JobGetMany": func() error { _, err := f.x.JobGetMany(ctx, &driver.JobGetManyParams{IDs: []string{j.ID}}); return err },
		"JobList":    func() error { _, err := f.x.JobList(ctx, &driver.JobListParams{Limit: 10}); return err },
		"JobScan": func() error {
			_, err := f.x.JobScan(ctx, &driver.JobScanParams{JobListParams: driver.JobListParams{Limit: 10}, ScanLimit: 10})
			return err
		},
		"JobCountByState": func() error {
			_, err := f.x.JobCountByState(ctx, &driver.JobCountParams{})
			return err
		},
		"JobClaim": func() error {
			_, err := f.x.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Limit: 1, Now: base, LeaseExpiresAt: at(time.Minute)})
			return err
		},
		"JobPromote": func() error { _, err := f.x.JobPromote(ctx, &driver.JobPromoteParams{Now: base, Limit: 1}); return err },
		"JobNextRunAt": func() error {
			_, err := f.x.JobNextRunAt(ctx, &driver.JobNextRunAtParams{Queue: "default"})
			return err
		},
		"JobHeartbeat": func() error {
			_, err := f.x.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Leases: []driver.Lease{{ID: j.ID, Token: 1}}, ExpiresAt: base})
			return err
		},
		"JobFinishMany": func() error {
			_, err := f.x.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: j.ID, LeaseToken: 1, State: hoppertype.JobStateSucceeded}}})
			return err
		},
		"JobListExpiredLeases": func() error {
			_, err := f.x.JobListExpiredLeases(ctx, &driver.JobListExpiredLeasesParams{Now: base, Limit: 1})
			return err
		},
		"JobCancel": func() error { _, err := f.x.JobCancel(ctx, &driver.JobCancelParams{ID: j.ID, Now: base}); return err },
		"JobRetry": func() error {
			_, err := f.x.JobRetry(ctx, &driver.JobRetryParams{IDs: []string{j.ID}, States: hoppertype.JobStates(), Now: base})
			return err
		},
		"JobDeleteFinished": func() error {
			_, err := f.x.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{States: []hoppertype.JobState{hoppertype.JobStateSucceeded}, Before: base, Limit: 1})
			return err
		},
		"GroupInsert": func() error {
			return f.x.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: "g", Open: 1, CreatedAt: base}})
		},
		"GroupGet": func() error { _, err := f.x.GroupGet(ctx, &driver.GroupGetParams{ID: "g"}); return err },
		"GroupUpdate": func() error {
			_, err := f.x.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: "g", OpenDelta: -1, Now: base})
			return err
		},
		"KeySetIfAbsent": func() error {
			_, err := f.x.KeySetIfAbsent(ctx, &driver.KeySetIfAbsentParams{Key: "k", Now: base})
			return err
		},
		"LeaderAttempt": func() error {
			_, err := f.x.LeaderAttempt(ctx, &driver.LeaderAttemptParams{Name: "l", Owner: "o", Now: base, TTL: time.Minute})
			return err
		},
		"LeaderResign": func() error { return f.x.LeaderResign(ctx, &driver.LeaderResignParams{Name: "l", Owner: "o"}) },
		"QueueSetPaused": func() error {
			return f.x.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "q", Paused: true, Now: base})
		},
		"QueueList": func() error { _, err := f.x.QueueList(ctx, &driver.QueueListParams{}); return err },
		"QueueDepthList": func() error {
			_, err := f.x.QueueDepthList(ctx, &driver.QueueDepthListParams{Cap: 10, Now: base})
			return err
		},
		"ScheduleUpsert": func() error {
			_, err := f.x.ScheduleUpsert(ctx, &driver.ScheduleUpsertParams{Name: "s", Now: base})
			return err
		},
		"ScheduleRecord": func() error {
			_, err := f.x.ScheduleRecord(ctx, &driver.ScheduleRecordParams{Name: "s", At: base, Now: base})
			return err
		},
		"ScheduleSetPaused": func() error {
			return f.x.ScheduleSetPaused(ctx, &driver.ScheduleSetPausedParams{Name: "s", Paused: true, Now: base})
		},
		"ScheduleDefine": func() error {
			return f.x.ScheduleDefine(ctx, &driver.ScheduleDefineParams{Name: "s", Def: driver.ScheduleDef{Kind: "job", Target: "t"}, Now: base})
		},
		"ScheduleList":   func() error { _, err := f.x.ScheduleList(ctx, &driver.ScheduleListParams{}); return err },
		"ScheduleDelete": func() error { _, err := f.x.ScheduleDelete(ctx, &driver.ScheduleDeleteParams{Name: "s"}); return err },
		"JobWake": func() error {
			_, err := f.x.JobWake(ctx, &driver.JobWakeParams{IDs: []string{j.ID}, Now: base})
			return err
		},
		"RunInsert": func() error { return f.x.RunInsert(ctx, &driver.RunInsertParams{Row: f.runRow()}) },
		"RunGet":    func() error { _, err := f.x.RunGet(ctx, &driver.RunGetParams{ID: j.ID}); return err },
		"RunList":   func() error { _, err := f.x.RunList(ctx, &driver.RunListParams{Limit: 10}); return err },
		"RunUpdate": func() error {
			_, err := f.x.RunUpdate(ctx, &driver.RunUpdateParams{ID: j.ID, Status: hoppertype.RunCompleted, Now: base})
			return err
		},
		"RunEventAppend": func() error {
			return f.x.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: j.ID, LeaseToken: 1, Events: []*hoppertype.RunEvent{event(j.ID, 1, 1, "step")}})
		},
		"RunEventList": func() error {
			_, err := f.x.RunEventList(ctx, &driver.RunEventListParams{RunID: j.ID})
			return err
		},
		"HookInsert": func() error { return f.x.HookInsert(ctx, &driver.HookInsertParams{Row: f.hookRow(j.ID)}) },
		"HookGet":    func() error { _, err := f.x.HookGet(ctx, &driver.HookGetParams{Token: "h"}); return err },
		"HookResume": func() error {
			_, err := f.x.HookResume(ctx, &driver.HookResumeParams{Token: "h", Payload: []byte(`1`), Now: base})
			return err
		},
		"HookListByRun": func() error { _, err := f.x.HookListByRun(ctx, &driver.HookListByRunParams{RunID: j.ID}); return err },
		"StreamAppend": func() error {
			_, err := f.x.StreamAppend(ctx, &driver.StreamAppendParams{RunID: j.ID, Chunks: [][]byte{[]byte("c")}, Now: base})
			return err
		},
		"StreamRead": func() error {
			_, err := f.x.StreamRead(ctx, &driver.StreamReadParams{RunID: j.ID, Limit: 10})
			return err
		},
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), driver.ErrClosed, "%s after Close", name)
	}
	// Every operation, this list or not, with zero params: each is
	// implemented once, on the executor a transaction has too, and must
	// route itself when called outside one (its own transaction, the
	// writer, the read pool); one that forgot would panic or run on a
	// transaction it does not have.
	everyOperation(t, f.x, func(name string, err error) {
		require.ErrorIs(t, err, driver.ErrClosed, "%s after Close, with zero params", name)
	})
}

// everyOperation calls each method of driver.Executor on ex with zero
// params (InTx with a function that does nothing, RunStart with a run and
// its job) and hands check its error. A panic fails the test with the
// method's name.
func everyOperation(t *testing.T, ex driver.Executor, check func(name string, err error)) {
	t.Helper()
	ctx := context.Background()
	it := reflect.TypeFor[driver.Executor]()
	v := reflect.ValueOf(ex)
	for i := range it.NumMethod() {
		m := it.Method(i)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		switch m.Name {
		case "InTx":
			args = append(args, reflect.ValueOf(func(context.Context, driver.Executor) error { return nil }))
		case "RunStart": // refuses a run without its job before reaching the store
			args = append(args, reflect.ValueOf(&driver.RunStartParams{Run: &hoppertype.RunRow{ID: "r"}, Job: &hoppertype.JobRow{ID: "r"}}))
		default:
			args = append(args, reflect.New(m.Type.In(1).Elem()))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s outside a transaction panicked: %v", m.Name, p)
				}
			}()
			out := v.MethodByName(m.Name).Call(args)
			err, _ := out[len(out)-1].Interface().(error)
			check(m.Name, err)
		}()
	}
}
