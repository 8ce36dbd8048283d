package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// readSpy tells of each job the engine reads, once the read is done.
// Executor is the spy itself.
type readSpy struct {
	*memdriver.Driver
	baseExec
	reads chan string
}

func (d *readSpy) Executor() driver.Executor { return d }

func (d *readSpy) JobGet(ctx context.Context, p *driver.JobGetParams) (*hoppertype.JobRow, error) {
	row, err := d.baseExec.JobGet(ctx, p)
	d.reads <- p.ID
	return row, err
}

// waiterFixture is an engine whose job reads are told on reads, over a
// memory store (ex, which the spy does not see) on a virtual clock. Waits
// end on signals only: their poll is an hour.
func waiterFixture(t *testing.T, tune func(*Config)) (*Engine, driver.Executor, chan string) {
	t.Helper()
	base := memdriver.New()
	d := &readSpy{Driver: base, baseExec: base.Executor(), reads: make(chan string, 16)}
	t.Cleanup(func() { _ = d.Close() })
	cfg := testConfig(d)
	cfg.Clock = hclock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.WaitPollInterval = time.Hour
	if tune != nil {
		tune(&cfg)
	}
	e := New(cfg)
	t.Cleanup(e.Close)
	return e, base.Executor(), d.reads
}

type waitResult struct {
	row *hoppertype.JobRow
	err error
}

// startWait runs WaitJob(id) and returns its result's channel once the
// wait read the job; the wait is ended at the end of the test.
func startWait(t *testing.T, e *Engine, reads chan string, id string) <-chan waitResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan waitResult, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		row, err := e.WaitJob(ctx, id)
		res <- waitResult{row, err}
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Equal(t, id, <-reads, "the wait reads the job")
	return res
}

// TestWaitJobTakesTheLocalFinish: a job this process finished wakes its
// waiters with the row it committed, and they return it without reading
// the store again.
func TestWaitJobTakesTheLocalFinish(t *testing.T) {
	t.Parallel()
	e, ex, reads := waiterFixture(t, nil)
	now := e.now()
	_, err := ex.JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{insertRow("j", "t", "", "q", now)}})
	require.NoError(t, err)
	res := startWait(t, e, reads, "j")

	finished := insertRow("j", "t", "", "q", now)
	finished.State, finished.Result = hoppertype.JobStateSucceeded, []byte(`"local"`)
	e.waiters.jobFinished(finished)
	select {
	case r := <-res:
		require.NoError(t, r.err)
		require.Equal(t, hoppertype.JobStateSucceeded, r.row.State)
		require.Equal(t, `"local"`, string(r.row.Result), "the row the finish committed")
	case <-reads:
		t.Fatal("the wait read the store again")
	}
}

// TestWaitJobWokenByTheStore: a job another process finished wakes the
// waiters here through the store's notice (one of several ids in it), and
// they read its row.
func TestWaitJobWokenByTheStore(t *testing.T) {
	t.Parallel()
	e, ex, reads := waiterFixture(t, nil)
	ctx := context.Background()
	now := e.now()
	_, err := ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{insertRow("j", "t", "", "q", now)}})
	require.NoError(t, err)
	res := startWait(t, e, reads, "j")

	_, err = ex.JobCancel(ctx, &driver.JobCancelParams{ID: "j", Now: now})
	require.NoError(t, err)
	require.NoError(t, ex.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobDone, Payload: "other,j"}))
	require.Equal(t, "j", <-reads, "woken, the wait reads the job again")
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, hoppertype.JobStateCancelled, r.row.State)
}

// TestWaiterHubFinishing: while this process finishes a job someone here
// waits for, the store's notice of it is passed over; the finish wakes
// the waiters with (a copy of) its row. Once the finish is over, a notice
// wakes a later waiter, which gets no row: another process finished it.
func TestWaiterHubFinishing(t *testing.T) {
	t.Parallel()
	e, _, _ := waiterFixture(t, nil)
	h := e.waiters
	w, release := h.watch(waitJob, "j")
	defer release()
	ids := h.finishing([]finishItem{{row: &hoppertype.JobRow{ID: "j"}}, {row: &hoppertype.JobRow{ID: "unwatched"}}})
	require.Equal(t, []string{"j"}, ids, "only the jobs someone waits for")

	h.noticed(waitJob, "j")
	require.False(t, isClosed(w.ch), "the notice of a finish in progress here is passed over")
	require.Nil(t, h.finished(w))
	h.jobFinished(&hoppertype.JobRow{ID: "j", State: hoppertype.JobStateSucceeded})
	require.True(t, isClosed(w.ch))
	row := h.finished(w)
	require.Equal(t, hoppertype.JobStateSucceeded, row.State)
	row.State = hoppertype.JobStateDead
	require.Equal(t, hoppertype.JobStateSucceeded, h.finished(w).State, "each waiter gets its own copy")

	h.finishedAll(ids)
	w2, release2 := h.watch(waitJob, "j")
	defer release2()
	h.noticed(waitJob, "j")
	require.True(t, isClosed(w2.ch), "the finish is over: a notice wakes")
	require.Nil(t, h.finished(w2), "no row: the waiter reads the store")
}

// TestWaitGroupOfOne: a job that never fanned out is a group of one: it
// settles when the job ends, with the job's result as its value when it
// succeeded and none otherwise; a stored group settles with its own value.
// A wait marks the group awaited, so its settling is no orphan.
func TestWaitGroupOfOne(t *testing.T) {
	t.Parallel()
	var orphans []string
	e, ex, reads := waiterFixture(t, func(c *Config) {
		c.Hooks.OnOrphanGroup = func(g *hoppertype.GroupRow) { orphans = append(orphans, g.ID) }
	})
	go func() {
		for range reads { // not watched here
		}
	}()
	t.Cleanup(func() { close(reads) })
	ctx := context.Background()
	now := e.now()
	ok := insertRow("ok", "t", "", "q", now)
	ok.State, ok.EndedAt, ok.Result = hoppertype.JobStateSucceeded, now, []byte(`7`)
	dead := insertRow("dead", "t", "", "q", now)
	dead.State, dead.EndedAt, dead.Result = hoppertype.JobStateDead, now, []byte(`8`)
	_, err := ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{ok, dead}})
	require.NoError(t, err)
	require.NoError(t, ex.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: "g", State: hoppertype.GroupSettled,
		Value: []byte(`9`), ValueSet: true, CreatedAt: now}}))

	g, err := e.WaitGroup(ctx, "ok")
	require.NoError(t, err)
	require.Equal(t, GroupResult{ID: "ok", Value: []byte(`7`), Set: true}, *g)
	g, err = e.WaitGroup(ctx, "dead")
	require.NoError(t, err)
	require.Equal(t, GroupResult{ID: "dead"}, *g, "a failed job contributes nothing")
	g, err = e.WaitGroup(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, GroupResult{ID: "g", Value: []byte(`9`), Set: true}, *g)

	e.groupSettled(ctx, &hoppertype.GroupRow{ID: "g"}, now)
	require.Empty(t, orphans, "an awaited group is no orphan")
}

func TestSplitIDs(t *testing.T) {
	t.Parallel()
	require.Nil(t, splitIDs(""))
	require.Equal(t, []string{"a"}, splitIDs("a"))
	require.Equal(t, []string{"a", "b", "c"}, splitIDs(",a,,b,c,"))
}
