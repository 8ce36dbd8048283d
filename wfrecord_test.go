package hopper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// appendSpy counts the history appends made outside a transaction (a
// step's record, a run's start) and the run loads.
type appendSpy struct {
	driver.Driver
	baseExec
	mu      sync.Mutex
	appends map[string]int // run id → appends
	loads   map[string]int // run id → RunLoad calls
	gets    map[string]int // job id → JobGet calls
	runGets map[string]int // run id → RunGet calls
	got     changes
}

func newAppendSpy(d driver.Driver) *appendSpy {
	return &appendSpy{Driver: d, baseExec: d.Executor(), appends: map[string]int{}, loads: map[string]int{}, gets: map[string]int{},
		runGets: map[string]int{}}
}

// Executor is the spy itself.
func (s *appendSpy) Executor() driver.Executor { return s }

func (s *appendSpy) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	s.mu.Lock()
	s.appends[p.RunID]++
	s.mu.Unlock()
	return s.baseExec.RunEventAppend(ctx, p)
}

func (s *appendSpy) RunEventAppendMany(ctx context.Context, p *driver.RunEventAppendManyParams) ([]error, error) {
	s.mu.Lock()
	for _, a := range p.Events {
		s.appends[a.RunID]++
	}
	s.mu.Unlock()
	return s.baseExec.RunEventAppendMany(ctx, p)
}

func (s *appendSpy) RunLoad(ctx context.Context, p *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	s.mu.Lock()
	s.loads[p.ID]++
	s.mu.Unlock()
	return s.baseExec.RunLoad(ctx, p)
}

func (s *appendSpy) JobGet(ctx context.Context, p *driver.JobGetParams) (*hoppertype.JobRow, error) {
	row, err := s.baseExec.JobGet(ctx, p)
	s.mu.Lock()
	s.gets[p.ID]++
	s.mu.Unlock()
	s.got.notify()
	return row, err
}

func (s *appendSpy) RunGet(ctx context.Context, p *driver.RunGetParams) (*hoppertype.RunRow, error) {
	s.mu.Lock()
	s.runGets[p.ID]++
	s.mu.Unlock()
	return s.baseExec.RunGet(ctx, p)
}

func (s *appendSpy) runReads(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runGets[id]
}

func (s *appendSpy) jobGets(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[id]
}

func (s *appendSpy) counts(id string) (appends, loads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appends[id], s.loads[id]
}

// storedSteps names the steps of run id's history as the store has it.
func storedSteps(ctx context.Context, c *hopper.Client, id string) ([]string, error) {
	info, err := c.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range info.Steps {
		names = append(names, s.Name)
	}
	return names, nil
}

// TestStepRecordedBeforeTheNextOperation: a step's record may wait for the
// run's next append, but never past the next operation going live: the
// next step's function finds the steps before it stored, and a
// compensation the step it undoes. The last step is stored with the run's
// end, so a run of three steps appends twice outside its job's completion.
func TestStepRecordedBeforeTheNextOperation(t *testing.T) {
	forEachDriver(t, testStepRecordedBeforeTheNextOperation)
}

func testStepRecordedBeforeTheNextOperation(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	spy := newAppendSpy(newDriver(t))
	c := newClient(t, hopper.Config{Driver: spy})
	ctx := testCtx(t)

	var mu sync.Mutex
	seen := map[string][]string{} // step or compensation → steps stored when it ran
	look := func(ctx context.Context, id, at string) error {
		names, err := storedSteps(ctx, c, id)
		mu.Lock()
		seen[at] = names
		mu.Unlock()
		return err
	}
	three := hopper.Workflow("three-steps", func(wf hopper.WorkflowContext, in int) (int, error) {
		sum := in
		for _, name := range []string{"a", "b", "c"} {
			v, err := hopper.Step(wf, name, func(ctx context.Context) (int, error) {
				return 1, look(ctx, wf.RunID(), name)
			}, nil)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}, nil)
	saga := hopper.Workflow("charge-then-fail", func(wf hopper.WorkflowContext, _ int) (int, error) {
		// Registered before its step, so nothing but the run's failure
		// comes between the step and the compensation.
		wf.Compensate("refund", func(ctx context.Context) error { return look(ctx, wf.RunID(), "refund") })
		_, err := hopper.Step(wf, "charge", func(context.Context) (int, error) {
			return 0, hopper.Abort(errors.New("card declined after the hold"))
		}, nil)
		return 0, err
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})
	require.NoError(t, c.Register(three, saga))

	h, err := three.Start(ctx, c, 10, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 13, out)
	steps, err := storedSteps(ctx, c, h.ID())
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, steps, "the last step is stored with the run's end")
	mu.Lock()
	require.Empty(t, seen["a"])
	require.Equal(t, []string{"a"}, seen["b"], "step b runs after a's record")
	require.Equal(t, []string{"a", "b"}, seen["c"], "step c runs after b's record")
	mu.Unlock()
	appends, _ := spy.counts(h.ID())
	require.Equal(t, 2, appends, "a's and b's records, each as the next step went live; c's with the run's end")

	s, err := saga.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = s.Result(ctx)
	require.Error(t, err)
	info, err := c.RunGet(ctx, s.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompensated, info.Status)
	mu.Lock()
	require.Equal(t, []string{"charge"}, seen["refund"], "the step a compensation undoes is stored before it runs")
	mu.Unlock()
}

// TestSkipQueueRunStartsFromItsRow: the first execution of a run started in
// this process, skipping the queue, does not read the run back, and sees it
// as the store has it (its start time, to the microsecond and in UTC, is
// what a replay reads).
func TestSkipQueueRunStartsFromItsRow(t *testing.T) {
	forEachDriver(t, testSkipQueueRunStartsFromItsRow)
}

func testSkipQueueRunStartsFromItsRow(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	spy := newAppendSpy(newDriver(t))
	c := newClient(t, hopper.Config{Driver: spy})
	ctx := testCtx(t)
	started := hopper.Workflow("started-at", func(wf hopper.WorkflowContext, _ int) (string, error) {
		return hopper.Step(wf, "now", func(context.Context) (string, error) {
			at := wf.StartedAt()
			return at.Format(time.RFC3339Nano) + " " + at.Location().String(), nil
		}, nil)
	}, &hopper.WorkflowOpts{SkipQueue: true})
	require.NoError(t, c.Register(started))

	h, err := started.Start(ctx, c, 0, &hopper.StartOpts{Queue: "nowhere"})
	require.NoError(t, err)
	at, err := h.Result(ctx)
	require.NoError(t, err)
	_, loads := spy.counts(h.ID())
	require.Zero(t, loads, "the run this process started is not read back")
	require.Zero(t, spy.runReads(h.ID()), "a completed run's output is its job's result: its row is not read")
	require.Zero(t, spy.jobGets(h.ID()), "the wait for a run executing here reads nothing: its finish here wakes it")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, info.CreatedAt.UTC().Format(time.RFC3339Nano)+" UTC", at, "the execution's start time is the stored one")
}

// TestSkipQueueRunIsStoredRunning: a run whose first execution begins at
// once in the starting process is stored running, beside its job stored
// claimed: its first change is running, and no record of its execution
// moves it there (a status update the first step would otherwise pay).
func TestSkipQueueRunIsStoredRunning(t *testing.T) {
	forEachDriver(t, testSkipQueueRunIsStoredRunning)
}

func testSkipQueueRunIsStoredRunning(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	c := newClient(t, hopper.Config{Driver: d})
	ctx := testCtx(t)
	body := func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "one", func(context.Context) (int, error) { return n + 1, nil }, nil)
	}
	direct := hopper.Workflow("stored-running", body, &hopper.WorkflowOpts{SkipQueue: true})
	queued := hopper.Workflow("stored-pending", body, nil)
	require.NoError(t, c.Register(direct, queued))

	runChanges := func(id string) []string {
		t.Helper()
		chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: id, Limit: 100})
		require.NoError(t, err)
		var states []string
		for _, ch := range chs {
			if ch.Kind == hoppertype.ChangeRun {
				states = append(states, ch.Prev+">"+ch.State)
			}
		}
		return states
	}
	h, err := direct.Start(ctx, c, 1, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, out)
	require.Equal(t, []string{">running", "running>completed"}, runChanges(h.ID()),
		"a run that skips the queue is stored running")

	// Through the queue a run waits, pending, for a worker.
	q, err := queued.Start(ctx, c, 1, nil)
	require.NoError(t, err)
	_, err = q.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>running", "running>completed"}, runChanges(q.ID()))
}

// TestWaitOfALocalFinishReadsNothing: a wait this process's finish of the
// job ends gets the row the finish committed, without reading it, and
// that row is the stored one. The job executes here when the wait begins,
// so the wait does not read it first either.
func TestWaitOfALocalFinishReadsNothing(t *testing.T) {
	forEachDriver(t, testWaitOfALocalFinishReadsNothing)
}

func testWaitOfALocalFinishReadsNothing(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	spy := newAppendSpy(newDriver(t))
	// No poll of the wait's own (its fallback for a missed notification):
	// only the wake-up ends it.
	c := newClient(t, hopper.Config{Driver: spy, WaitPollInterval: time.Hour})
	ctx := testCtx(t)
	h, release := runHeld(t, ctx, c, "double-later", 21, func(n int) int { return 2 * n })
	w := waitAside(t, ctx, c, h.ID(), h.Wait)
	// The wait is registered and blocks, the job executing here: finish it.
	w.blocked("the wait never began")
	release()
	row, err := w.outcome()
	require.NoError(t, err)
	require.Zero(t, spy.jobGets(h.ID()), "woken by its own finish of a job executing here, the wait reads nothing")
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.JSONEq(t, "42", string(row.Result))
	stored, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, stored, row, "the row the wait returns is the stored one")
}

// TestWaitOfAJobFinishedElsewhereWhileItExecutesHere: a wait that begins
// while this process executes the job reads nothing at first, counting on
// the finish here; when another process ends the job meanwhile (here:
// the store, written directly, as a rescuer that took the lease would),
// the finish here loses its lease and the wait, woken by it, reads the
// job and returns it as the other process left it.
func TestWaitOfAJobFinishedElsewhereWhileItExecutesHere(t *testing.T) {
	forEachDriver(t, testWaitOfAJobFinishedElsewhereWhileItExecutesHere)
}

func testWaitOfAJobFinishedElsewhereWhileItExecutesHere(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	spy := newAppendSpy(newDriver(t))
	c := newClient(t, hopper.Config{Driver: spy, WaitPollInterval: time.Hour})
	ctx := testCtx(t)
	h, release := runHeld(t, ctx, c, "finished-elsewhere", 1, func(n int) int { return n })
	w := waitAside(t, ctx, c, h.ID(), h.Wait)
	w.blocked("the wait never began")
	require.Zero(t, spy.jobGets(h.ID()), "the wait for a job executing here read it before it blocked")

	// Another process ends it under the lease this one holds.
	ex := spy.Driver.Executor()
	row, err := ex.JobGet(ctx, &driver.JobGetParams{ID: h.ID()})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateRunning, row.State)
	res, err := ex.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: row.ID, LeaseToken: row.LeaseToken,
		State: hoppertype.JobStateSucceeded, Attempt: row.Attempt, RunAt: row.RunAt, Result: []byte("7"), EndedAt: row.StartedAt}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	release()
	got, err := w.outcome()
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, got.State)
	require.JSONEq(t, "7", string(got.Result), "the wait returns the job as the other process left it")
}
