package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// eventLog records the events an engine emits.
type eventLog struct {
	mu  sync.Mutex
	evs []hoppertype.Event
}

func (l *eventLog) add(ev hoppertype.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// of returns the ids of the jobs of kind's events, in order.
func (l *eventLog) of(kind hoppertype.EventKind) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, ev := range l.evs {
		if ev.Kind == kind {
			ids = append(ids, ev.JobID)
		}
	}
	return ids
}

// transitionFixture is an engine over a fresh memory store on a virtual
// clock at its start, recording its events.
type transitionFixture struct {
	t      *testing.T
	e      *Engine
	d      *memdriver.Driver
	ex     driver.Executor
	now    time.Time
	events *eventLog
}

func newTransitionFixture(t *testing.T) *transitionFixture {
	t.Helper()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	f := &transitionFixture{t: t, d: d, ex: d.Executor(), now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), events: &eventLog{}}
	cfg := testConfig(d)
	cfg.Clock = hclock.NewVirtual(f.now)
	cfg.WaitPollInterval = time.Hour // waits end on signals only
	cfg.Hooks.OnEvent = f.events.add
	f.e = New(cfg)
	t.Cleanup(f.e.Close)
	return f
}

// job stores a job of queue q in state (ended ones end now).
func (f *transitionFixture) job(id, group string, state hoppertype.JobState) {
	f.t.Helper()
	row := insertRow(id, "t", "", "q", f.now)
	row.GroupID, row.State = group, state
	if state.Terminal() {
		row.EndedAt = f.now
	}
	_, err := f.ex.JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}})
	require.NoError(f.t, err)
}

// running stores a job and claims it.
func (f *transitionFixture) running(id string) {
	f.t.Helper()
	claimOne(f.t, f.ex, id, 1, f.now, f.now.Add(time.Hour), "w")
}

// group stores an open group with open members.
func (f *transitionFixture) group(id string, open int) {
	f.t.Helper()
	require.NoError(f.t, f.ex.GroupInsert(context.Background(), &driver.GroupInsertParams{
		Row: &hoppertype.GroupRow{ID: id, Open: open, State: hoppertype.GroupOpen, CreatedAt: f.now}}))
}

// run stores run id (a child of parent when set) in status, with its job
// (of its own queue) in state: a running one claimed, an ended one ended
// now.
func (f *transitionFixture) run(id, parent string, status hoppertype.RunStatus, state hoppertype.JobState) {
	f.t.Helper()
	ctx := context.Background()
	require.NoError(f.t, f.ex.RunInsert(ctx, &driver.RunInsertParams{
		Row: &hoppertype.RunRow{ID: id, Workflow: "w", ParentID: parent, Status: status, CreatedAt: f.now, UpdatedAt: f.now}}))
	if state == hoppertype.JobStateRunning {
		claimOne(f.t, f.ex, id, 1, f.now, f.now.Add(time.Hour), "w")
		return
	}
	job := insertRow(id, WorkflowTypePrefix+"w", "", "q-"+id, f.now)
	job.State = state
	switch {
	case state.Terminal() || state == hoppertype.JobStateStuck:
		job.EndedAt = f.now
	case state == hoppertype.JobStateScheduled:
		job.RunAt = f.now.Add(time.Hour)
	}
	_, err := f.ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{job}})
	require.NoError(f.t, err)
}

// pending returns the payloads sub holds now: the memory store delivers a
// transaction's notifications before its commit returns.
func pending(sub driver.Subscription) []string {
	var out []string
	for {
		select {
		case p := <-sub.C():
			out = append(out, p)
		default:
			return out
		}
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (f *transitionFixture) get(id string) *hoppertype.JobRow {
	f.t.Helper()
	row, err := f.ex.JobGet(context.Background(), &driver.JobGetParams{ID: id})
	require.NoError(f.t, err)
	return row
}

func (f *transitionFixture) getRun(id string) *hoppertype.RunRow {
	f.t.Helper()
	run, err := f.ex.RunGet(context.Background(), &driver.RunGetParams{ID: id})
	require.NoError(f.t, err)
	return run
}

func (f *transitionFixture) getGroup(id string) *hoppertype.GroupRow {
	f.t.Helper()
	g, err := f.ex.GroupGet(context.Background(), &driver.GroupGetParams{ID: id})
	require.NoError(f.t, err)
	return g
}

// TestRedrive: a redrive moves the chosen dead jobs back to pending, opens
// their group again for each member (a job alone has no group row), tells
// the producers of their queues, and reports each redriven. The job of a
// compensated run stays dead, even when named.
func TestRedrive(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	f.group("g", 1)
	f.job("member", "g", hoppertype.JobStateDead)
	f.job("alone", "alone", hoppertype.JobStateDead)
	f.job("done", "done", hoppertype.JobStateSucceeded)
	f.run("saga", "", hoppertype.RunCompensated, hoppertype.JobStateDead)
	sub, err := f.d.Listen(ctx, driver.TopicJobAvailable)
	require.NoError(t, err)
	defer sub.Close()

	res, err := f.e.Redrive(ctx, &driver.JobRetryParams{IDs: []string{"member", "alone", "done", "saga"},
		States: []hoppertype.JobState{hoppertype.JobStateDead}})
	require.NoError(t, err)
	var ids []string
	for _, r := range res {
		ids = append(ids, r.Job.ID)
		require.Equal(t, hoppertype.JobStateDead, r.PrevState)
	}
	require.ElementsMatch(t, []string{"member", "alone"}, ids)
	for _, id := range []string{"member", "alone"} {
		require.Equal(t, hoppertype.JobStatePending, f.get(id).State, id)
	}
	require.Equal(t, hoppertype.JobStateSucceeded, f.get("done").State, "not in the states chosen")
	require.Equal(t, hoppertype.JobStateDead, f.get("saga").State, "a compensated run's job is no dead letter")
	require.Equal(t, 2, f.getGroup("g").Open, "the member is open again")
	require.ElementsMatch(t, []string{"member", "alone"}, f.events.of(hoppertype.EventRedriven))
	require.Equal(t, []string{"q"}, pending(sub), "the queue is told, once")
}

// TestCancelJob: a waiting job is cancelled at once in one transaction
// with its group (settled by its last member) and its run, and its waiters
// and events are told; a running job is asked to stop, through the store's
// cancel topic, and stays running; a job that ended is a state conflict,
// answered with its row.
func TestCancelJob(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	f.group("g", 1)
	f.job("member", "g", hoppertype.JobStatePending)
	f.running("busy")
	f.job("done", "done", hoppertype.JobStateSucceeded)
	f.run("r", "", hoppertype.RunWaiting, hoppertype.JobStateScheduled)
	cancels, err := f.d.Listen(ctx, driver.TopicJobCancel)
	require.NoError(t, err)
	defer cancels.Close()
	w, release := f.e.waiters.watch(waitJob, "member")
	defer release()

	row, err := f.e.CancelJob(ctx, "member")
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateCancelled, row.State)
	require.Equal(t, hoppertype.ErrorKindCancelled, row.Error.Kind)
	require.Equal(t, hoppertype.JobStateCancelled, f.get("member").State)
	g := f.getGroup("g")
	require.Equal(t, [2]any{0, hoppertype.GroupSettled}, [2]any{g.Open, g.State}, "its last member's end settles the group")
	require.True(t, isClosed(w.ch), "the waiter is woken")
	require.Equal(t, []string{"member"}, f.events.of(hoppertype.EventCancelled))

	row, err = f.e.CancelJob(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateCancelled, row.State)
	run := f.getRun("r")
	require.Equal(t, hoppertype.RunCancelled, run.Status, "a run's job takes its run along")
	require.Equal(t, f.now, run.EndedAt)

	row, err = f.e.CancelJob(ctx, "busy")
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateRunning, row.State)
	require.True(t, f.get("busy").CancelRequested)
	require.Equal(t, []string{"busy"}, pending(cancels), "the process running it is asked")
	require.Equal(t, []string{"member", "r"}, f.events.of(hoppertype.EventCancelled), "a job asked to stop has not ended")

	row, err = f.e.CancelJob(ctx, "done")
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	require.NotNil(t, row, "the conflict comes with the job as it is")
	require.Equal(t, hoppertype.JobStateSucceeded, row.State)
	_, err = f.e.CancelJob(ctx, "missing")
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
}

// TestCancelJobs: the jobs are cancelled together; those that ended or are
// gone are passed over, not an error, and not returned.
func TestCancelJobs(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	f.job("a", "a", hoppertype.JobStatePending)
	f.job("done", "done", hoppertype.JobStateDead)
	f.job("b", "b", hoppertype.JobStateScheduled)
	rows, err := f.e.CancelJobs(context.Background(), []string{"a", "done", "missing", "b"})
	require.NoError(t, err)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
		require.Equal(t, hoppertype.JobStateCancelled, f.get(r.ID).State)
	}
	require.Equal(t, []string{"a", "b"}, ids)
	require.Equal(t, hoppertype.JobStateDead, f.get("done").State)
	require.Equal(t, []string{"a", "b"}, f.events.of(hoppertype.EventCancelled))
}

// TestRetryRun: a run that ended in a retryable status starts again:
// pending, its error and end cleared, its job pending. A run in another
// status, or whose job has not ended, is a state conflict and nothing
// changes: the run's reset is undone with the job's.
func TestRetryRun(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	retryable := []hoppertype.RunStatus{hoppertype.RunFailed, hoppertype.RunCancelled}
	f.run("failed", "", hoppertype.RunFailed, hoppertype.JobStateDead)
	_, err := f.ex.RunUpdate(ctx, &driver.RunUpdateParams{ID: "failed", Status: hoppertype.RunFailed, EndedAt: f.now, Now: f.now,
		Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "boom"}})
	require.NoError(t, err)
	f.run("completed", "", hoppertype.RunCompleted, hoppertype.JobStateSucceeded)
	f.run("odd", "", hoppertype.RunFailed, hoppertype.JobStateRunning) // its job still runs

	require.NoError(t, f.e.RetryRun(ctx, "failed", retryable))
	run := f.getRun("failed")
	require.Equal(t, hoppertype.RunPending, run.Status)
	require.Nil(t, run.Error)
	require.True(t, run.EndedAt.IsZero())
	require.Equal(t, hoppertype.JobStatePending, f.get("failed").State)
	require.Equal(t, []string{"failed"}, f.events.of(hoppertype.EventRedriven))

	require.ErrorIs(t, f.e.RetryRun(ctx, "completed", retryable), hoppertype.ErrStateConflict)
	require.Equal(t, hoppertype.RunCompleted, f.getRun("completed").Status)
	require.ErrorIs(t, f.e.RetryRun(ctx, "odd", retryable), hoppertype.ErrStateConflict)
	require.Equal(t, hoppertype.RunFailed, f.getRun("odd").Status, "the run's reset is rolled back")
	require.Equal(t, hoppertype.JobStateRunning, f.get("odd").State)
	require.Equal(t, []string{"failed"}, f.events.of(hoppertype.EventRedriven))
}

// TestCancelRun: a live run is marked cancel-requested and its job woken
// to end it; a stuck run, which nothing can run, ends cancelled at once
// with its job; the run's live children are cancelled too. A run that
// ended is a state conflict.
func TestCancelRun(t *testing.T) {
	t.Parallel()
	f := newTransitionFixture(t)
	ctx := context.Background()
	f.run("parent", "", hoppertype.RunWaiting, hoppertype.JobStateScheduled)
	f.run("child", "parent", hoppertype.RunStuck, hoppertype.JobStateStuck)
	f.run("grandchild", "child", hoppertype.RunRunning, hoppertype.JobStateRunning)
	f.run("sibling", "parent", hoppertype.RunCompleted, hoppertype.JobStateSucceeded)
	f.run("other", "", hoppertype.RunWaiting, hoppertype.JobStateScheduled)
	w, release := f.e.waiters.watch(waitJob, "child")
	defer release()

	require.NoError(t, f.e.CancelRun(ctx, "parent"))
	parent := f.getRun("parent")
	require.Equal(t, hoppertype.RunWaiting, parent.Status, "the run ends as its job ends")
	require.Equal(t, hoppertype.ErrorKindCancelled, parent.Error.Kind)
	job := f.get("parent")
	require.Equal(t, hoppertype.JobStatePending, job.State, "its job is woken to end it")
	require.Equal(t, f.now, job.RunAt)

	child := f.getRun("child")
	require.Equal(t, hoppertype.RunCancelled, child.Status, "a stuck child ends now")
	require.Equal(t, f.now, child.EndedAt)
	require.Equal(t, hoppertype.JobStateCancelled, f.get("child").State)
	require.True(t, isClosed(w.ch), "the waiter is woken")
	require.Equal(t, []string{"child"}, f.events.of(hoppertype.EventCancelled))

	require.Equal(t, hoppertype.ErrorKindCancelled, f.getRun("grandchild").Error.Kind, "the cascade goes down")
	require.True(t, f.get("grandchild").CancelRequested, "a running job is asked to stop")
	require.Nil(t, f.getRun("sibling").Error, "an ended child is left alone")
	require.Nil(t, f.getRun("other").Error)
	require.Equal(t, hoppertype.JobStateScheduled, f.get("other").State)

	require.ErrorIs(t, f.e.CancelRun(ctx, "sibling"), hoppertype.ErrStateConflict)
}
