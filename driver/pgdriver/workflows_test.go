package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// claimRun inserts a job in a queue of its own, claims it and returns the
// claimed row (its id is the run's id, its token the run's lease).
func claimRun(t *testing.T, d *Driver) *hoppertype.JobRow {
	t.Helper()
	j := newJob("")
	j.Queue = "wf-" + j.ID
	insert(t, d.Executor(), j)
	rows, err := d.Executor().JobClaim(t.Context(), &driver.JobClaimParams{Queue: j.Queue, Limit: 1, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	return rows[0]
}

// events builds events of one attempt with the given seqs.
func events(attempt int, seqs ...int) []*hoppertype.RunEvent {
	out := make([]*hoppertype.RunEvent, len(seqs))
	for i, s := range seqs {
		out[i] = &hoppertype.RunEvent{Attempt: attempt, Seq: s, Kind: "step", Name: fmt.Sprintf("s%d", s),
			Data: []byte(fmt.Sprintf(`{"seq":%d}`, s)), At: testBase.Add(time.Duration(s) * time.Second)}
	}
	return out
}

// seqsOf lists a run's stored (attempt, seq) pairs as "a.s".
func seqsOf(t *testing.T, d driver.Executor, runID string) []string {
	t.Helper()
	evs, err := d.RunEventList(t.Context(), &driver.RunEventListParams{RunID: runID})
	require.NoError(t, err)
	out := []string{}
	for _, e := range evs {
		require.Equal(t, runID, e.RunID)
		out = append(out, fmt.Sprintf("%d.%d", e.Attempt, e.Seq))
	}
	return out
}

func TestRunEventLeaseFence(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	run := claimRun(t, d)
	appendEv := func(token int64, evs ...*hoppertype.RunEvent) error {
		return d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: token, Events: evs})
	}
	require.NoError(t, appendEv(run.LeaseToken, events(1, 1, 2)...))
	require.ErrorIs(t, appendEv(run.LeaseToken+1, events(1, 3)...), hoppertype.ErrLeaseLost, "another token")
	require.ErrorIs(t, appendEv(run.LeaseToken-1), hoppertype.ErrLeaseLost, "no events, still fenced")
	require.NoError(t, appendEv(run.LeaseToken), "no events under the lease")
	err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: "missing", LeaseToken: run.LeaseToken, Events: events(1, 1)})
	require.ErrorIs(t, err, hoppertype.ErrLeaseLost, "a missing job")

	// Once the attempt is over the lease no longer holds, even for a
	// duplicate key: the lease is checked first.
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: run.ID, LeaseToken: run.LeaseToken, State: hoppertype.JobStateScheduled, Attempt: run.Attempt, RunAt: testBase.Add(time.Hour),
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, appendEv(run.LeaseToken, events(1, 3)...), hoppertype.ErrLeaseLost)
	require.ErrorIs(t, appendEv(run.LeaseToken, events(1, 1)...), hoppertype.ErrLeaseLost)
	require.Equal(t, []string{"1.1", "1.2"}, seqsOf(t, d.Executor(), run.ID))

	evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: run.ID})
	require.NoError(t, err)
	want := events(1, 1, 2)
	for i := range want {
		want[i].RunID = run.ID
	}
	require.Equal(t, want, evs, "events round-trip")
}

// TestRunEventLeaseFenceBlocksTransition checks that an append inside a
// transaction holds the lease: a transition of the job waits for the
// transaction, so the events are in the history before the job moves on.
func TestRunEventLeaseFenceBlocksTransition(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	run := claimRun(t, d)
	appended := make(chan struct{})
	release := make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			err := tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: run.LeaseToken, Events: events(1, 1)})
			close(appended)
			<-release
			return err
		})
	}()
	<-appended
	finished := make(chan driver.JobFinishResult, 1)
	go func() {
		res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
			ID: run.ID, LeaseToken: run.LeaseToken, State: hoppertype.JobStateRetrying, Attempt: run.Attempt, RunAt: testBase,
		}}})
		if err != nil {
			res = []driver.JobFinishResult{{Err: err}}
		}
		finished <- res[0]
	}()
	waitForLockWait(t, pool, d.schema)
	select {
	case <-finished:
		t.Fatal("the transition did not wait for the append's transaction")
	default:
	}
	close(release)
	require.NoError(t, <-txDone)
	require.NoError(t, (<-finished).Err)
	require.Equal(t, []string{"1.1"}, seqsOf(t, d.Executor(), run.ID))

	// The appender's own transition, with another one queued behind its
	// lock, goes through without a deadlock; the queued one then finds
	// the lease gone.
	run = claimRun(t, d)
	appended = make(chan struct{})
	release = make(chan struct{})
	go func() {
		txDone <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if err := tx.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: run.LeaseToken, Events: events(1, 1)}); err != nil {
				return err
			}
			close(appended)
			<-release
			res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
				ID: run.ID, LeaseToken: run.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: run.Attempt, RunAt: testBase, EndedAt: testBase,
			}}})
			if err != nil {
				return err
			}
			return res[0].Err
		})
	}()
	<-appended
	beat := make(chan []driver.JobHeartbeatResult, 1)
	go func() {
		res, err := d.Executor().JobHeartbeat(ctx, &driver.JobHeartbeatParams{Leases: []driver.Lease{{ID: run.ID, Token: run.LeaseToken}},
			ExpiresAt: testBase.Add(time.Hour)})
		if err != nil {
			res = nil
		}
		beat <- res
	}()
	waitForLockWait(t, pool, d.schema)
	close(release)
	require.NoError(t, <-txDone)
	res := <-beat
	require.Len(t, res, 1)
	require.False(t, res[0].Held, "the heartbeat ran after the finish")
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: run.ID})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateSucceeded, got.State)
}

// waitForLockWait waits until a statement on schema waits for a lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, quoteIdent(schema)).Scan(&n))
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for a lock within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunEventDuplicate checks that an existing (attempt, seq), or one
// named twice in the call, fails the whole call with ErrDuplicateID, and
// that inside a transaction the transaction goes on and commits.
func TestRunEventDuplicate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	run := claimRun(t, d)
	appendEv := func(x driver.Executor, evs ...*hoppertype.RunEvent) error {
		return x.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: run.LeaseToken, Events: evs})
	}
	require.NoError(t, appendEv(d.Executor(), events(1, 1, 2)...))
	require.ErrorIs(t, appendEv(d.Executor(), events(1, 3, 2)...), hoppertype.ErrDuplicateID, "an existing key")
	require.ErrorIs(t, appendEv(d.Executor(), events(1, 3, 4, 3)...), hoppertype.ErrDuplicateID, "a key twice in the call")
	require.NoError(t, appendEv(d.Executor(), events(2, 1, 2)...), "another attempt has its own seqs")
	require.Equal(t, []string{"1.1", "1.2", "2.1", "2.2"}, seqsOf(t, d.Executor(), run.ID), "the failed calls wrote nothing")

	hook := &hoppertype.HookRow{Token: "tok-" + run.ID, RunID: run.ID, Name: "h", CreatedAt: testBase}
	err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, appendEv(tx, events(1, 3)...))
		require.ErrorIs(t, appendEv(tx, events(1, 4, 1)...), hoppertype.ErrDuplicateID)
		require.ErrorIs(t, appendEv(tx, events(1, 5, 6, 5)...), hoppertype.ErrDuplicateID)
		require.ErrorIs(t, appendEv(tx, events(1, 3)...), hoppertype.ErrDuplicateID, "a key written earlier in the transaction")
		require.Equal(t, []string{"1.1", "1.2", "1.3", "2.1", "2.2"}, seqsOf(t, tx, run.ID))
		require.NoError(t, appendEv(tx, events(1, 4)...), "the transaction goes on")
		return tx.HookInsert(ctx, &driver.HookInsertParams{Row: hook})
	})
	require.NoError(t, err)
	require.Equal(t, []string{"1.1", "1.2", "1.3", "1.4", "2.1", "2.2"}, seqsOf(t, d.Executor(), run.ID))
	_, err = d.Executor().HookGet(ctx, &driver.HookGetParams{Token: hook.Token})
	require.NoError(t, err, "the transaction committed")
}

// TestRunEventDuplicateRace has a key committed by another transaction after
// the append's snapshot: the append, on the pool or in a transaction, fails
// with ErrDuplicateID and writes nothing, and the transaction goes on.
func TestRunEventDuplicateRace(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 6)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	run := claimRun(t, d)
	params := func(evs ...*hoppertype.RunEvent) *driver.RunEventAppendParams {
		return &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: run.LeaseToken, Events: evs}
	}
	for i, inTx := range []bool{false, true} {
		a := 10 * (i + 1)
		// The first transaction writes (a, 2) and holds it uncommitted; the
		// second appends (a, 1) and (a, 2), which waits for the first.
		written := make(chan struct{})
		release := make(chan struct{})
		first := make(chan error, 1)
		go func() {
			first <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
				err := tx.RunEventAppend(ctx, params(events(a, 2)...))
				close(written)
				<-release
				return err
			})
		}()
		<-written
		second := make(chan error, 1)
		go func() {
			if !inTx {
				second <- d.Executor().RunEventAppend(ctx, params(events(a, 1, 2)...))
				return
			}
			second <- d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
				err := tx.RunEventAppend(ctx, params(events(a, 1, 2)...))
				if err == nil {
					return fmt.Errorf("appended a duplicate")
				}
				if !strings.Contains(err.Error(), hoppertype.ErrDuplicateID.Error()) {
					return err
				}
				// The transaction is usable and sees nothing of the call.
				if got := seqsOf(t, tx, run.ID); slices.Contains(got, fmt.Sprintf("%d.1", a)) {
					return fmt.Errorf("the failed call left events: %v", got)
				}
				return tx.RunEventAppend(ctx, params(events(a, 3)...))
			})
		}()
		waitForLockWait(t, pool, d.schema)
		close(release)
		require.NoError(t, <-first)
		err := <-second
		if inTx {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, hoppertype.ErrDuplicateID)
		}
	}
	require.Equal(t, []string{"10.2", "20.2", "20.3"}, seqsOf(t, d.Executor(), run.ID))
}

func TestStreamAppendConcurrent(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 10)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	const writers, appends = 8, 25
	runID := "stream-run"
	var wg sync.WaitGroup
	got := make([][]*hoppertype.StreamChunk, writers)
	errs := make([]error, writers)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range appends {
				chunks := make([][]byte, 1+i%3)
				for k := range chunks {
					chunks[k] = []byte(fmt.Sprintf("w%d-a%d-c%d", w, i, k))
				}
				p := &driver.StreamAppendParams{RunID: runID, Chunks: chunks, Now: testBase}
				var out []*hoppertype.StreamChunk
				var err error
				if w%2 == 0 {
					out, err = d.Executor().StreamAppend(ctx, p)
				} else {
					err = d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
						out, err = tx.StreamAppend(ctx, p)
						return err
					})
				}
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], out...)
			}
		})
	}
	close(start)
	wg.Wait()
	byOffset := make(map[int64]string)
	total := 0
	for w := range writers {
		require.NoError(t, errs[w], "writer %d", w)
		for _, c := range got[w] {
			prev, dup := byOffset[c.Offset]
			require.False(t, dup, "offset %d given to %q and %q", c.Offset, prev, c.Data)
			byOffset[c.Offset] = string(c.Data)
			require.True(t, testBase.Equal(c.At))
			total++
		}
	}
	stored, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: runID, Limit: total + 10})
	require.NoError(t, err)
	require.Len(t, stored, total)
	for i, c := range stored {
		require.Equal(t, int64(i), c.Offset, "offsets are consecutive from 0")
		require.Equal(t, byOffset[c.Offset], string(c.Data), "offset %d", c.Offset)
		require.Equal(t, runID, c.RunID)
	}
	page, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: runID, From: 7, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, stored[7:10], page)

	// A rolled-back append leaves no gap.
	err = d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		_, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: runID, Chunks: [][]byte{[]byte("lost")}, Now: testBase})
		require.NoError(t, err)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	out, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: runID, Chunks: [][]byte{nil, {}}, Now: testBase})
	require.NoError(t, err)
	require.Equal(t, int64(total), out[0].Offset)
	tail, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: runID, From: int64(total), Limit: 5})
	require.NoError(t, err)
	require.Len(t, tail, 2)
	require.Nil(t, tail[0].Data, "a nil chunk stays nil")
	require.NotNil(t, tail[1].Data, "an empty chunk stays empty")
}

var errBoom = errors.New("boom")

func TestJobWake(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	later := testBase.Add(time.Hour)
	mk := func(s hoppertype.JobState) *hoppertype.JobRow {
		j := newJob("wake")
		j.State, j.RunAt = s, later
		if s.Terminal() {
			j.EndedAt = testBase
		}
		return j
	}
	sched, retrying, pending, done := mk(hoppertype.JobStateScheduled), mk(hoppertype.JobStateRetrying),
		mk(hoppertype.JobStatePending), mk(hoppertype.JobStateSucceeded)
	insert(t, d.Executor(), sched, retrying, pending, done)
	now := testBase.Add(time.Minute + 1500*time.Nanosecond)
	woken, err := d.Executor().JobWake(ctx, &driver.JobWakeParams{
		IDs: []string{retrying.ID, "missing", pending.ID, sched.ID, done.ID, retrying.ID}, Now: now,
	})
	require.NoError(t, err)
	require.Len(t, woken, 2)
	require.Equal(t, []string{retrying.ID, sched.ID}, []string{woken[0].ID, woken[1].ID}, "in the order of ids, once each")
	for _, j := range woken {
		require.Equal(t, hoppertype.JobStatePending, j.State)
		require.True(t, j.RunAt.Equal(now.Truncate(time.Microsecond)), "RunAt = Now")
	}
	for _, j := range []*hoppertype.JobRow{pending, done} {
		got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
		require.NoError(t, err)
		require.Equal(t, j.State, got.State, "left as it was")
		require.True(t, got.RunAt.Equal(later))
	}
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "wake", Limit: 10, Now: now, LeaseExpiresAt: later, Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, 3, "the woken jobs are due")
	woken, err = d.Executor().JobWake(ctx, &driver.JobWakeParams{IDs: []string{sched.ID}, Now: now})
	require.NoError(t, err)
	require.NotNil(t, woken)
	require.Empty(t, woken, "a running job is not woken")
}

// TestDeleteFinishedCascade checks that deleting a finished run's job
// deletes its run row, history, hooks and stream, and nothing of other runs.
func TestDeleteFinishedCascade(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	gone, kept := claimRun(t, d), claimRun(t, d)
	for _, run := range []*hoppertype.JobRow{gone, kept} {
		require.NoError(t, d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: run.ID, Workflow: "wf", Status: hoppertype.RunRunning, CreatedAt: testBase}}))
		require.NoError(t, d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run.ID, LeaseToken: run.LeaseToken, Events: events(1, 1, 2, 3)}))
		for k := range 3 {
			require.NoError(t, d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: fmt.Sprintf("%s-h%d", run.ID, k), RunID: run.ID, CreatedAt: testBase}}))
		}
		_, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: run.ID, Chunks: [][]byte{[]byte("a"), []byte("b")}, Now: testBase})
		require.NoError(t, err)
	}
	plain := newJob("plain")
	plain.State, plain.EndedAt = hoppertype.JobStateDead, testBase
	insert(t, d.Executor(), plain)
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: gone.ID, LeaseToken: gone.LeaseToken, State: hoppertype.JobStateSucceeded, Attempt: gone.Attempt, RunAt: testBase, EndedAt: testBase,
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	n, err := d.Executor().JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: testBase.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the run's job and the plain job")
	_, err = d.Executor().RunGet(ctx, &driver.RunGetParams{ID: gone.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	require.Empty(t, seqsOf(t, d.Executor(), gone.ID))
	hooks, err := d.Executor().HookListByRun(ctx, &driver.HookListByRunParams{RunID: gone.ID})
	require.NoError(t, err)
	require.Empty(t, hooks)
	chunks, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: gone.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, chunks)

	_, err = d.Executor().RunGet(ctx, &driver.RunGetParams{ID: kept.ID})
	require.NoError(t, err)
	require.Len(t, seqsOf(t, d.Executor(), kept.ID), 3)
	hooks, err = d.Executor().HookListByRun(ctx, &driver.HookListByRunParams{RunID: kept.ID})
	require.NoError(t, err)
	require.Len(t, hooks, 3)
	chunks, err = d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: kept.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, chunks, 2)

	n, err = d.Executor().JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: testBase.Add(time.Second)})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to delete")
}

// TestRunsHooksInTx checks run and hook conflicts inside a transaction: a
// duplicate run id or hook token, a refused compare-and-set and a resumed
// hook leave the transaction usable.
func TestRunsHooksInTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	run := &hoppertype.RunRow{ID: "run-1", Workflow: "wf", Status: hoppertype.RunPending, ParentID: "p", CodeVersion: "v1",
		CreatedAt: testBase, UpdatedAt: testBase}
	require.NoError(t, d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: run}))
	hook := &hoppertype.HookRow{Token: "tok-1", RunID: run.ID, Name: "approve", CreatedAt: testBase}
	require.NoError(t, d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: hook}))
	_, err := d.Executor().HookResume(ctx, &driver.HookResumeParams{Token: hook.Token, Payload: []byte(`{"ok":true}`), Now: testBase})
	require.NoError(t, err)

	end := testBase.Add(time.Minute)
	err = d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		require.ErrorIs(t, tx.RunInsert(ctx, &driver.RunInsertParams{Row: run}), hoppertype.ErrDuplicateID)
		require.ErrorIs(t, tx.HookInsert(ctx, &driver.HookInsertParams{Row: hook}), hoppertype.ErrDuplicateID)
		cur, err := tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: run.ID, Status: hoppertype.RunCompleted,
			ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunRunning}, Now: end})
		require.ErrorIs(t, err, hoppertype.ErrStateConflict)
		require.Equal(t, hoppertype.RunPending, cur.Status, "the conflict returns the run")
		_, err = tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: "missing", Status: hoppertype.RunCompleted, Now: end})
		require.ErrorIs(t, err, hoppertype.ErrNotFound)
		h, err := tx.HookResume(ctx, &driver.HookResumeParams{Token: hook.Token, Payload: []byte(`{}`), Now: end})
		require.ErrorIs(t, err, hoppertype.ErrStateConflict)
		require.Equal(t, `{"ok":true}`, string(h.Payload), "the resumed hook is returned unchanged")
		_, err = tx.HookResume(ctx, &driver.HookResumeParams{Token: "missing", Now: end})
		require.ErrorIs(t, err, hoppertype.ErrNotFound)
		up, err := tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: run.ID, Status: hoppertype.RunFailed, EndedAt: end,
			Error: &hoppertype.ErrorInfo{Message: "bad", At: end}, ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunPending, hoppertype.RunRunning}, Now: end})
		require.NoError(t, err)
		require.Equal(t, hoppertype.RunFailed, up.Status)
		return nil
	})
	require.NoError(t, err)
	got, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: run.ID})
	require.NoError(t, err)
	require.Equal(t, &hoppertype.RunRow{ID: run.ID, Workflow: "wf", Status: hoppertype.RunFailed, ParentID: "p", CodeVersion: "v1",
		Error: &hoppertype.ErrorInfo{Message: "bad", At: end}, CreatedAt: testBase, UpdatedAt: end, EndedAt: end}, got)

	// An update without an error or end time keeps them.
	got, err = d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: run.ID, Status: hoppertype.RunStuck, Now: end.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, "bad", got.Error.Message)
	require.True(t, got.EndedAt.Equal(end))
	require.True(t, got.UpdatedAt.Equal(end.Add(time.Second)))
	require.Error(t, d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: "bad", Status: "nonsense"}}), "an invalid status is refused")
}

// TestRunListNewestFirst checks RunList's order, filters and paging.
func TestRunListNewestFirst(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	statuses := []hoppertype.RunStatus{hoppertype.RunRunning, hoppertype.RunWaiting, hoppertype.RunCompleted}
	var all []string
	for i := range 12 {
		r := &hoppertype.RunRow{ID: fmt.Sprintf("r%02d", i), Workflow: fmt.Sprintf("wf%d", i%2), Status: statuses[i%3],
			CreatedAt: testBase.Add(time.Duration(i/2) * time.Second)} // pairs share a CreatedAt
		if i%4 == 0 {
			r.ParentID = "parent"
		}
		require.NoError(t, d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: r}))
		all = append([]string{r.ID}, all...)
	}
	list := func(p driver.RunListParams) []string {
		t.Helper()
		rows, err := d.Executor().RunList(ctx, &p)
		require.NoError(t, err)
		out := []string{}
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, all, list(driver.RunListParams{Limit: 100}), "newest first, ties by id descending")
	require.Equal(t, all[3:7], list(driver.RunListParams{Offset: 3, Limit: 4}))
	require.Equal(t, []string{"r09", "r06", "r03", "r00"}, list(driver.RunListParams{Statuses: statuses[:1], Limit: 100}))
	require.Equal(t, []string{"r10", "r09", "r07", "r06", "r04", "r03", "r01", "r00"},
		list(driver.RunListParams{Statuses: statuses[:2], Limit: 100}))
	require.Equal(t, []string{"r11", "r09", "r07"}, list(driver.RunListParams{Workflow: "wf1", Limit: 3}))
	require.Equal(t, []string{"r08", "r04", "r00"}, list(driver.RunListParams{ParentID: "parent", Limit: 100}))
	require.Equal(t, []string{"r05", "r04", "r03", "r02"},
		list(driver.RunListParams{CreatedAfter: testBase.Add(time.Second), CreatedBefore: testBase.Add(3 * time.Second), Limit: 100}))
	_, err := d.Executor().RunList(ctx, &driver.RunListParams{})
	require.Error(t, err, "a limit is required")
}
