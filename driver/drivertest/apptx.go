package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// appTxCases cover TxJoin and TxBegin, for drivers that implement
// driver.TxJoiner: hopper's operations through an application's own
// transaction, committing with it. The suite stands for the application
// with a transaction TxBegin opens, whose Tx it joins again with TxJoin as
// an application's handler would.
func appTxCases() []testCase {
	return []testCase{
		{"BeginCommitApplies", testAppTxCommit},
		{"BeginRollbackUndoes", testAppTxRollback},
		{"JoinedWritesCommitWithTheApplication", testAppTxJoined},
		{"JoinedRollbackUndoes", testAppTxJoinedRollback},
		{"FinishIsFencedByTheLease", testAppTxFenced},
		{"NestedScopeRollsBackAlone", testAppTxNested},
		{"HistoryAppendIsFencedByTheLease", testAppTxAppend},
		{"NotifyAfterCommit", testAppTxNotify},
		{"NotifyDroppedOnRollback", testAppTxNotifyRollback},
		{"DriverWritesWaitForTheTransaction", testAppTxWriterWaits},
		{"BoundWritesFailInsteadOfWaiting", testAppTxBound},
		{"JoinRefusesOtherTypes", testAppTxJoinType},
	}
}

// joiner returns the store's TxJoiner, skipping (and saying so) when it has
// none.
func (f *fixture) joiner(t *testing.T) driver.TxJoiner {
	t.Helper()
	j, ok := f.d.(driver.TxJoiner)
	if !ok {
		t.Skipf("%s does not implement driver.TxJoiner", f.d.Name())
	}
	return j
}

// appBegin begins an application transaction; the test ends it (a
// cleanup rolls back one left open).
func (f *fixture) appBegin(t *testing.T) *driver.AppTx {
	t.Helper()
	atx, err := f.joiner(t).TxBegin(f.ctx, &driver.TxBeginParams{})
	require.NoError(t, err)
	require.NotNil(t, atx.Tx)
	require.NotNil(t, atx.Executor)
	t.Cleanup(func() { _ = atx.Rollback(context.WithoutCancel(f.ctx)) })
	return atx
}

// appJoin joins the application transaction tx.
func (f *fixture) appJoin(t *testing.T, tx any) *driver.AppTx {
	t.Helper()
	atx, err := f.joiner(t).TxJoin(f.ctx, tx, &driver.TxJoinParams{})
	require.NoError(t, err)
	require.Equal(t, tx, atx.Tx)
	return atx
}

// succeed is the finish of j as succeeded at base+1s.
func succeed(j *hoppertype.JobRow) driver.JobFinishParams {
	return driver.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: j.Attempt,
		RunAt: j.RunAt, Result: []byte(`"done"`), EndedAt: at(time.Second)}
}

func testAppTxCommit(t *testing.T, f *fixture) {
	atx := f.appBegin(t)
	j := f.job()
	_, err := atx.Executor.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	require.NoError(t, err)
	got, err := atx.Executor.JobGet(f.ctx, &driver.JobGetParams{ID: j.ID})
	require.NoError(t, err, "the transaction reads its own writes")
	requireJob(t, j, got)
	f.requireMissing(t, j.ID)
	require.NoError(t, atx.Commit(f.ctx))
	requireJob(t, j, f.get(t, j.ID), "committed")
}

func testAppTxRollback(t *testing.T, f *fixture) {
	atx := f.appBegin(t)
	j := f.job()
	_, err := atx.Executor.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	require.NoError(t, err)
	require.NoError(t, atx.Rollback(f.ctx))
	f.requireMissing(t, j.ID)
	// The store goes on: its own writes are not held up.
	f.insert(t, f.job())
}

func testAppTxJoined(t *testing.T, f *fixture) {
	running := f.claimOne(t)
	app := f.appBegin(t)
	joined := f.appJoin(t, app.Tx)
	res, err := joined.Executor.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{succeed(running)}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, hoppertype.JobStateSucceeded, res[0].Job.State)
	fresh := f.job()
	_, err = joined.Executor.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{fresh}})
	require.NoError(t, err)
	f.requireState(t, running.ID, hoppertype.JobStateRunning)
	// The application commits its transaction itself.
	require.NoError(t, app.Commit(f.ctx))
	got := f.requireState(t, running.ID, hoppertype.JobStateSucceeded)
	require.Equal(t, []byte(`"done"`), got.Result)
	requireJob(t, fresh, f.get(t, fresh.ID))
	var states []string
	for _, ch := range f.entityChanges(t, running.ID) {
		states = append(states, ch.State)
	}
	require.Equal(t, []string{"pending", "running", "succeeded"}, states, "the change rows commit with the transaction")
}

func testAppTxJoinedRollback(t *testing.T, f *fixture) {
	running := f.claimOne(t)
	app := f.appBegin(t)
	joined := f.appJoin(t, app.Tx)
	res, err := joined.Executor.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{succeed(running)}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, app.Rollback(f.ctx))
	requireJob(t, running, f.get(t, running.ID), "rolled back with the application's transaction")
	f.finishOK(t, succeed(running))
}

func testAppTxFenced(t *testing.T, f *fixture) {
	running := f.claimOne(t)
	app := f.appBegin(t)
	joined := f.appJoin(t, app.Tx)
	stale := succeed(running)
	stale.LeaseToken++
	res, err := joined.Executor.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{stale}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, hoppertype.ErrLeaseLost, "another lease's finish")
	require.Nil(t, res[0].Job)
	require.NoError(t, app.Commit(f.ctx))
	requireJob(t, running, f.get(t, running.ID), "a lost finish changes nothing")

	// Rescued (its lease gone), the job refuses its old worker's finish.
	f.finishOK(t, driver.JobFinishParams{ID: running.ID, LeaseToken: running.LeaseToken, State: hoppertype.JobStateRetrying,
		Attempt: running.Attempt, RunAt: at(time.Minute), EndedAt: at(time.Second)})
	app = f.appBegin(t)
	joined = f.appJoin(t, app.Tx)
	res, err = joined.Executor.JobFinishMany(f.ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{succeed(running)}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, hoppertype.ErrLeaseLost, "the rescued job's old worker")
	require.NoError(t, app.Rollback(f.ctx))
	f.requireState(t, running.ID, hoppertype.JobStateRetrying)
}

func testAppTxNested(t *testing.T, f *fixture) {
	a, b := f.job(), f.job()
	app := f.appBegin(t)
	joined := f.appJoin(t, app.Tx)
	_, err := joined.Executor.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}})
	require.NoError(t, err)
	err = joined.Executor.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{b}})
		require.NoError(t, err)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.NoError(t, app.Commit(f.ctx))
	requireJob(t, a, f.get(t, a.ID))
	f.requireMissing(t, b.ID)
}

func testAppTxAppend(t *testing.T, f *fixture) {
	run := f.runRow()
	job := f.job(func(j *hoppertype.JobRow) {
		j.ID, j.GroupID, j.Queue, j.Type = run.ID, run.ID, "q-"+run.ID, "workflow:wf"
	})
	_, err := f.x.RunStart(f.ctx, &driver.RunStartParams{Run: run, Job: job})
	require.NoError(t, err)
	claimed := f.claim(t, job.Queue, base, 1)
	require.Len(t, claimed, 1)
	token := claimed[0].LeaseToken
	ev1, ev2 := event(run.ID, 1, 1, "step"), event(run.ID, 1, 2, "step")

	// Rolled back: no event.
	app := f.appBegin(t)
	require.NoError(t, app.Executor.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: token, Events: []*hoppertype.RunEvent{ev1}}))
	require.NoError(t, app.Rollback(f.ctx))
	require.Empty(t, f.events(t, run.ID, 0))

	// Committed: the event.
	app = f.appBegin(t)
	require.NoError(t, app.Executor.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: token, Events: []*hoppertype.RunEvent{ev1}}))
	require.NoError(t, app.Commit(f.ctx))
	requireEvents(t, []*hoppertype.RunEvent{ev1}, f.events(t, run.ID, 0))

	// Under another lease: nothing.
	app = f.appBegin(t)
	err = app.Executor.RunEventAppend(f.ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: token + 1, Events: []*hoppertype.RunEvent{ev2}})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost)
	require.NoError(t, app.Rollback(f.ctx))
	requireEvents(t, []*hoppertype.RunEvent{ev1}, f.events(t, run.ID, 0))
}

// deliverPending sends what a store holds for the commit of a transaction
// the application committed itself, as the engine does.
func (f *fixture) deliverPending(t *testing.T, atx *driver.AppTx) {
	t.Helper()
	if atx.Pending == nil {
		return
	}
	for _, n := range atx.Pending() {
		require.NoError(t, f.x.Notify(f.ctx, &n))
	}
}

func testAppTxNotify(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub := f.listen(t, topic)

	// Begun and committed by the store.
	app := f.appBegin(t)
	require.NoError(t, app.Executor.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "begun"}))
	requireNothingYet(t, sub, "not before the commit")
	require.NoError(t, app.Commit(f.ctx))
	require.Equal(t, "begun", recv(t, sub))

	// Joined, committed by the application: delivered with the commit or
	// held for the committer to send.
	app = f.appBegin(t)
	joined := f.appJoin(t, app.Tx)
	require.NoError(t, joined.Executor.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "joined"}))
	require.NoError(t, app.Commit(f.ctx))
	f.deliverPending(t, joined)
	require.Equal(t, "joined", recv(t, sub))
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "end"}))
	require.Equal(t, "end", recv(t, sub), "delivered once")
}

func testAppTxNotifyRollback(t *testing.T, f *fixture) {
	topic := "t-" + f.id()
	sub := f.listen(t, topic)
	app := f.appBegin(t)
	require.NoError(t, app.Executor.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "rolled back"}))
	err := app.Executor.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: "nested, rolled back"}))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	joined := f.appJoin(t, app.Tx)
	require.NoError(t, joined.Executor.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "joined, rolled back"}))
	require.NoError(t, app.Rollback(f.ctx))
	require.NoError(t, f.x.Notify(f.ctx, &driver.NotifyParams{Topic: topic, Payload: "after"}))
	require.Equal(t, "after", recv(t, sub), "a rolled-back transaction's notifications are never delivered")
}

// testAppTxWriterWaits: the store's own writes made while an application
// transaction is open complete (after it, on a store with one writer),
// without deadlock, and the transaction's writes are not lost to them.
func testAppTxWriterWaits(t *testing.T, f *fixture) {
	app := f.appBegin(t)
	a, b := f.job(), f.job()
	_, err := app.Executor.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := f.x.JobInsertMany(f.ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{b}})
		done <- err
	}()
	require.NoError(t, app.Commit(f.ctx))
	require.NoError(t, <-done)
	requireJob(t, a, f.get(t, a.ID))
	requireJob(t, b, f.get(t, b.ID))
}

// testAppTxBound: a driver whose own writes would wait for an open
// application transaction (AppTx.Bind set) refuses them at once under a
// context bound to it, instead of waiting for ever.
func testAppTxBound(t *testing.T, f *fixture) {
	app := f.appBegin(t)
	if app.Bind == nil {
		t.Skipf("%s's writes do not wait for an application's transaction", f.d.Name())
	}
	ctx := app.Bind(f.ctx)
	_, err := f.x.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{f.job()}})
	require.Error(t, err, "a write that would wait for the transaction it runs in")
	err = f.x.InTx(ctx, func(context.Context, driver.Executor) error { return nil })
	require.Error(t, err)
	require.NoError(t, app.Commit(f.ctx))
	f.insert(t, f.job())
}

func testAppTxJoinType(t *testing.T, f *fixture) {
	j := f.joiner(t)
	for _, tx := range []any{nil, "not a transaction", struct{}{}} {
		_, err := j.TxJoin(f.ctx, tx, &driver.TxJoinParams{})
		require.ErrorIs(t, err, driver.ErrTxType, "%T", tx)
	}
	app := f.appBegin(t)
	require.NoError(t, app.Rollback(f.ctx))
	require.Error(t, app.Commit(f.ctx), "a transaction rolled back cannot commit")
}
