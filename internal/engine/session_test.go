package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// blockingType's attempts tell started, then wait for release or their
// context's end, reporting the context's cause on causes.
func blockingType() (t *fakeType, started chan string, release chan struct{}, causes chan error) {
	started, release, causes = make(chan string, 4), make(chan struct{}), make(chan error, 4)
	t = &fakeType{name: "block", run: func(ctx context.Context, a *Attempt) ([]byte, error) {
		started <- a.Row().ID
		select {
		case <-release:
			causes <- context.Cause(ctx)
			return []byte(`"done"`), nil
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}
	}}
	return t, started, release, causes
}

func insertJob(t *testing.T, e *Engine, id, typ string) {
	t.Helper()
	row := insertRow(id, typ, "", "q", e.now())
	_, err := e.Insert(context.Background(), &InsertParams{Rows: []*hoppertype.JobRow{row}})
	require.NoError(t, err)
}

// TestStopLetsAttemptsFinish: Stop stops claiming, then waits for the
// running attempts without cancelling them, records their outcomes and
// returns; the engine may be started again, and runs jobs again.
func TestStopLetsAttemptsFinish(t *testing.T) {
	t.Parallel()
	typ, started, release, causes := blockingType()
	e, ex, _ := sessionFixture(t, typ)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx), "a second Start does nothing")
	insertJob(t, e, "a", "block")
	require.Equal(t, "a", <-started)

	s := e.session()
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	<-s.ctx.Done() // Stop began: no more claims
	close(release)
	require.NoError(t, <-causes, "the attempt ran to its end, not cancelled")
	require.NoError(t, <-stopped)
	require.False(t, e.Started())
	row, err := ex.JobGet(ctx, &driver.JobGetParams{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateSucceeded, row.State, "the outcome is recorded before Stop returns")

	require.NoError(t, e.Start(ctx))
	insertJob(t, e, "b", "block")
	require.Equal(t, "b", <-started, "started again, it runs jobs")
	require.NoError(t, <-causes)
	require.Equal(t, hoppertype.JobStateSucceeded, awaitJob(t, e, "b").State)
}

// TestStopCancelsWhenItsContextEnds: once Stop's context is done, the
// running attempts are cancelled with ErrStopping; Stop still records
// their outcomes (the job is put back, with no failure), and returns the
// context's error.
func TestStopCancelsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	typ, started, _, causes := blockingType()
	e, ex, _ := sessionFixture(t, typ)
	insertJob(t, e, "a", "block")
	require.Equal(t, "a", <-started)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, e.Stop(ctx), context.Canceled)
	require.ErrorIs(t, <-causes, ErrStopping)
	row, err := ex.JobGet(context.Background(), &driver.JobGetParams{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStatePending, row.State, "the cancelled attempt's job is put back before Stop returns")
	require.Nil(t, row.Error, "a stop is not the job's failure")
}

// TestWorkerRow: a started engine keeps a worker row; its report lists
// the attempts running here ("busy"); once Stop begins with an attempt
// still running it reports "stopping", and when Stop returns the row is
// gone.
func TestWorkerRow(t *testing.T) {
	t.Parallel()
	typ, started, release, causes := blockingType()
	statuses := make(chan string, 16)
	e, ex, _ := tunedSessionFixture(t, func(c *Config) {
		c.Hooks.WorkerInfo = func(r WorkerReport) []byte {
			statuses <- r.Status
			return []byte(r.Status)
		}
	}, typ)
	ctx := context.Background()
	workers := func() []string {
		rows, err := ex.WorkerList(ctx, &driver.WorkerListParams{})
		require.NoError(t, err)
		var ids []string
		for _, w := range rows {
			ids = append(ids, w.ID+":"+string(w.Info))
		}
		return ids
	}
	require.Equal(t, "idle", <-statuses, "the row is written at Start")
	require.Equal(t, []string{"test-worker:idle"}, workers())

	insertJob(t, e, "a", "block")
	require.Equal(t, "a", <-started)
	r, ok := e.Report()
	require.True(t, ok)
	require.Equal(t, "busy", r.Status)
	require.Equal(t, []string{"a"}, r.Jobs)
	require.Equal(t, 1, r.Active)

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	for s := range statuses { // reported while the attempt drains
		if s == "stopping" {
			break
		}
	}
	close(release)
	require.NoError(t, <-causes)
	require.NoError(t, <-stopped)
	require.Empty(t, workers(), "a stopped worker's row is gone")
	_, ok = e.Report()
	require.False(t, ok)
}

// TestSettleCountsSlotsInUse: a worker slot in use (here held by hand, as
// an attempt whose outcome is stored holds it until its goroutine returns)
// keeps Settle from reading the engine as idle, and a producer woken for
// now counts as a claim under way until its round begins.
func TestSettleCountsSlotsInUse(t *testing.T) {
	t.Parallel()
	typ, _, _, _ := blockingType()
	e, _, _ := sessionFixture(t, typ)
	ctx := context.Background()
	const quiet = 10 * time.Millisecond
	st, err := e.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "nothing to do")

	s := e.session()
	held := &SlotWaiter{Wake: func() {}}
	require.Equal(t, 1, s.slots.TryAcquire(held, 1))
	st, err = e.Settle(ctx, quiet)
	require.NoError(t, err)
	require.False(t, st.Idle, "a slot is in use")
	s.slots.Release(1)
	st, err = e.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "the slot is back")

	// A wake-up counts until its round begins: without a goroutine to
	// run it (a producer made here, never run), it stays counted.
	p := newProducer(s, "nobody")
	p.wake(time.Time{})
	require.Zero(t, s.slots.Used(), "with slots free a wake-up is granted none: only the wake-up counts")
	st, err = e.Settle(ctx, quiet)
	require.NoError(t, err)
	require.False(t, st.Idle, "a producer was woken and has not claimed")
	p.unwake()
	st, err = e.Settle(ctx, quiet)
	require.NoError(t, err)
	require.True(t, st.Idle, "its round began")
}
