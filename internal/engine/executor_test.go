package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// fakeType is a job type whose attempts run run.
type fakeType struct {
	name string
	hb   time.Duration
	runs atomic.Int32
	run  func(ctx context.Context, a *Attempt) ([]byte, error)
}

func (f *fakeType) Name() string                      { return f.name }
func (f *fakeType) Queue() string                     { return "" }
func (f *fakeType) SkipQueue() bool                   { return false }
func (f *fakeType) Limit() *hoppertype.Limit          { return nil }
func (f *fakeType) Classifier() hoppertype.Classifier { return nil }
func (f *fakeType) OnEvent() func(hoppertype.Event)   { return nil }
func (f *fakeType) HeartbeatTimeout() time.Duration   { return f.hb }
func (f *fakeType) Run(ctx context.Context, a *Attempt) ([]byte, error) {
	f.runs.Add(1)
	return f.run(ctx, a)
}

// sessionFixture is a started engine over a fresh memory store on a
// virtual clock that moves only when the test moves it: every periodic
// service (polls, heartbeats, rescue) waits an hour.
func sessionFixture(t *testing.T, types ...JobType) (*Engine, driver.Executor, *hclock.Virtual) {
	t.Helper()
	return tunedSessionFixture(t, nil, types...)
}

// tunedSessionFixture is sessionFixture with its configuration changed by
// tune.
func tunedSessionFixture(t *testing.T, tune func(*Config), types ...JobType) (*Engine, driver.Executor, *hclock.Virtual) {
	t.Helper()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := hclock.NewVirtual(start)
	cfg := testConfig(d)
	cfg.Clock = clk
	cfg.DefaultQueue = "q"
	for _, p := range []*time.Duration{&cfg.Visibility, &cfg.HeartbeatInterval, &cfg.PollInterval, &cfg.RescueInterval,
		&cfg.WaitPollInterval, &cfg.LeaderTTL, &cfg.GateRecheck} {
		*p = time.Hour
	}
	if tune != nil {
		tune(&cfg)
	}
	e := New(cfg)
	t.Cleanup(e.Close)
	require.NoError(t, e.Register(types...))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		// A test that failed may leave an attempt blocked: cancel it.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = e.Stop(ctx)
	})
	return e, d.Executor(), clk
}

// runJob inserts a job of typ (3 attempts) and waits until it ended.
func runJob(t *testing.T, e *Engine, id, typ string, tune func(*hoppertype.JobRow)) *hoppertype.JobRow {
	t.Helper()
	row := insertRow(id, typ, "", "q", e.now())
	row.Retry = hoppertype.RetryPolicy{Attempts: 3, Backoff: "constant", Base: time.Minute}
	if tune != nil {
		tune(row)
	}
	ctx := context.Background()
	_, err := e.Insert(ctx, &InsertParams{Rows: []*hoppertype.JobRow{row}})
	require.NoError(t, err)
	return awaitJob(t, e, id)
}

func awaitJob(t *testing.T, e *Engine, id string) *hoppertype.JobRow {
	t.Helper()
	row, err := e.WaitJob(context.Background(), id)
	require.NoError(t, err)
	return row
}

// TestExecuteRecordsTheOutcome: an attempt's output is recorded with its
// success, with the children it spawned inserted in its group; Fail aborts
// an attempt whose handler returned no error, with no retry; a job past
// its deadline is never run and expires.
func TestExecuteRecordsTheOutcome(t *testing.T) {
	t.Parallel()
	parent := &fakeType{name: "parent", run: func(_ context.Context, a *Attempt) ([]byte, error) {
		kid := insertRow("kid", "kid", "", "q", a.Engine().Now())
		if err := a.Spawn(kid); err != nil {
			return nil, err
		}
		return []byte(`1`), nil
	}}
	kid := &fakeType{name: "kid", run: func(context.Context, *Attempt) ([]byte, error) { return []byte(`2`), nil }}
	failed := &fakeType{name: "failed", run: func(_ context.Context, a *Attempt) ([]byte, error) {
		a.Fail(errors.New("first"))
		a.Fail(errors.New("second"))
		return []byte(`3`), nil
	}}
	late := &fakeType{name: "late", run: func(context.Context, *Attempt) ([]byte, error) { return nil, nil }}
	e, ex, _ := sessionFixture(t, parent, kid, failed, late)

	row := runJob(t, e, "p", "parent", nil)
	require.Equal(t, hoppertype.JobStateSucceeded, row.State)
	require.JSONEq(t, `1`, string(row.Result))
	child, err := ex.JobGet(context.Background(), &driver.JobGetParams{ID: "kid"})
	require.NoError(t, err)
	require.Equal(t, [2]string{"p", "p"}, [2]string{child.GroupID, child.ParentID}, "the child joins the parent's group")
	require.Equal(t, hoppertype.JobStateSucceeded, awaitJob(t, e, "kid").State)

	// (one attempt, so that a failure that is not an abort ends too)
	row = runJob(t, e, "f", "failed", func(r *hoppertype.JobRow) { r.Retry.Attempts = 1 })
	require.Equal(t, hoppertype.JobStateDead, row.State)
	require.Equal(t, hoppertype.ErrorKindAborted, row.Error.Kind, "Fail aborts, whatever the handler returned")
	require.Contains(t, row.Error.Message, "first", "the first failure given counts")
	require.Nil(t, row.Result)

	row = runJob(t, e, "l", "late", func(r *hoppertype.JobRow) { r.Deadline = r.RunAt })
	require.Equal(t, hoppertype.JobStateExpired, row.State)
	require.Zero(t, late.runs.Load(), "a job past its deadline never runs")
}

// TestExecuteHeartbeatTimeout: an attempt of a type with a heartbeat
// timeout that goes that long without a heartbeat is cancelled with
// ErrHeartbeatTimeout, and fails with it: the watchdog runs on the
// engine's clock, from the last heartbeat.
func TestExecuteHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	beat := make(chan struct{})
	quiet := &fakeType{name: "quiet", hb: time.Minute, run: func(ctx context.Context, a *Attempt) ([]byte, error) {
		require.NoError(t, a.Heartbeat(ctx, "alive"))
		close(beat)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}}
	e, _, clk := sessionFixture(t, quiet)
	ctx := context.Background()
	start := e.now()
	row := insertRow("j", "quiet", "", "q", start)
	row.Retry = hoppertype.RetryPolicy{Attempts: 1}
	_, err := e.Insert(ctx, &InsertParams{Rows: []*hoppertype.JobRow{row}})
	require.NoError(t, err)
	<-beat
	require.NoError(t, clk.WaitArmedAt(ctx, start.Add(time.Minute)), "the watchdog waits a minute from the heartbeat")
	clk.Set(start.Add(time.Minute))
	row = awaitJob(t, e, "j")
	require.Equal(t, hoppertype.JobStateDead, row.State)
	require.Contains(t, row.Error.Message, "HeartbeatTimeout")
}

// TestAttemptHeartbeat: a heartbeat renews the lease the attempt holds; one
// for a lease the job no longer holds is ErrLeaseLost, and one for a job
// whose cancel was asked is ErrCancelled.
func TestAttemptHeartbeat(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e, ex, clk := maintenanceFixture(t, start, nil)
	ctx := context.Background()
	claimOne(t, ex, "j", 1, start, start.Add(time.Second), "w")
	row, err := ex.JobGet(ctx, &driver.JobGetParams{ID: "j"})
	require.NoError(t, err)
	a := e.NewAttempt(row)

	clk.Set(start.Add(time.Minute))
	require.NoError(t, a.Heartbeat(ctx, "half way"))
	row, err = ex.JobGet(ctx, &driver.JobGetParams{ID: "j"})
	require.NoError(t, err)
	require.Equal(t, start.Add(time.Minute).Add(e.cfg.Visibility), row.LeaseExpiresAt, "renewed for the visibility from now")

	stale := row.Clone()
	stale.LeaseToken++
	require.ErrorIs(t, e.NewAttempt(stale).Heartbeat(ctx, ""), hoppertype.ErrLeaseLost)

	_, err = ex.JobCancel(ctx, &driver.JobCancelParams{ID: "j", Now: e.now()})
	require.NoError(t, err)
	require.ErrorIs(t, a.Heartbeat(ctx, ""), hoppertype.ErrCancelled)
}

// TestAttemptSpawnAndClaim: spawned children join the attempt's group
// under it, an id given twice is refused; a claim is won once.
func TestAttemptSpawnAndClaim(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	e := newTestEngine(t, d)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	parent := insertRow("p", "t", "", "q", now)
	parent.GroupID = "g"
	a := e.NewAttempt(parent)
	require.Nil(t, a.groupEffect(), "nothing spawned: no effect on the group")
	require.NoError(t, a.Spawn(insertRow("a", "t", "", "q", now), insertRow("b", "t", "", "q", now)))
	require.ErrorIs(t, a.Spawn(insertRow("a", "t", "", "q", now)), hoppertype.ErrInvalidInput)
	require.Equal(t, []string{"a", "b"}, a.Spawned())
	eff := a.groupEffect()
	require.Len(t, eff.children, 2)
	for _, ch := range eff.children {
		require.Equal(t, [2]string{"g", "p"}, [2]string{ch.GroupID, ch.ParentID})
	}

	ctx := context.Background()
	won, err := a.Claim(ctx, "k")
	require.NoError(t, err)
	require.True(t, won)
	won, err = e.NewAttempt(insertRow("other", "t", "", "q", now)).Claim(ctx, "k")
	require.NoError(t, err)
	require.False(t, won, "a claim is won once")
}
