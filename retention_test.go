package hopper_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// retentionSpy passes a client's calls to the store and reports what
// maintenance did: when the client won the leadership, each retention
// pass that completed (the time it ran at) and how often it deleted jobs.
// Executor is the spy itself.
func (s *retentionSpy) Executor() driver.Executor { return s }

type retentionSpy struct {
	driver.Driver
	baseExec
	led     chan struct{}
	passes  chan time.Time
	deletes atomic.Int64
}

func newRetentionSpy(d driver.Driver) *retentionSpy {
	return &retentionSpy{Driver: d, baseExec: d.Executor(), led: make(chan struct{}, 1), passes: make(chan time.Time, 64)}
}

func (s *retentionSpy) LeaderAttempt(ctx context.Context, p *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	row, err := s.baseExec.LeaderAttempt(ctx, p)
	if err == nil && row.Owner == p.Owner {
		select {
		case s.led <- struct{}{}:
		default:
		}
	}
	return row, err
}

func (s *retentionSpy) JobDeleteFinished(ctx context.Context, p *driver.JobDeleteFinishedParams) (int, error) {
	s.deletes.Add(1)
	return s.baseExec.JobDeleteFinished(ctx, p)
}

// KeyDeleteExpired is a retention pass's last step.
func (s *retentionSpy) KeyDeleteExpired(ctx context.Context, p *driver.KeyDeleteExpiredParams) (int, error) {
	n, err := s.baseExec.KeyDeleteExpired(ctx, p)
	if err == nil {
		select {
		case s.passes <- p.Before:
		default:
		}
	}
	return n, err
}

// TestRetention: terminal jobs go 24 h after they ended by default, per
// state as Config.Retention says (a negative value keeps them), fan-out
// groups' rows with their last jobs, and only the leader deletes: of two
// clients on one store, the other never does. Time is the virtual clock's.
func TestRetention(t *testing.T) { forEachDriver(t, testRetention) }

func testRetention(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	t0 := clk.Now()

	add := hopper.Define("add", addHandler, nil)
	fail := hopper.Define("fail", func(context.Context, hopper.None) (hopper.None, error) {
		return hopper.None{}, hopper.Abort(errors.New("no"))
	}, nil)
	parent := hopper.Define("parent", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		return hopper.None{}, hopper.JobFromContext(ctx).Spawn(add.Job(addIn{A: 1}, nil), add.Job(addIn{A: 2}, nil))
	}, nil)
	cfg := func(spy *retentionSpy, worker string) hopper.Config {
		return hopper.Config{Driver: spy, Clock: clk, WorkerID: worker,
			// A lease that outlives the clock's jumps: A keeps leading.
			LeaderTTL: 1000 * time.Hour,
			// Succeeded keeps the 24 h default.
			Retention: hopper.Retention{Dead: 48 * time.Hour, Expired: time.Hour, Cancelled: -1}}
	}
	spyA, spyB := newRetentionSpy(d), newRetentionSpy(d)
	a, _ := hoppertest.NewClient(t, cfg(spyA, "A"))
	require.NoError(t, a.Register(add, fail, parent))
	select {
	case <-spyA.led:
	case <-ctx.Done():
		t.Fatal("A never led")
	}
	b, _ := hoppertest.NewClient(t, cfg(spyB, "B"))
	require.NoError(t, b.Register(add, fail, parent))

	// One job ending in each state, and a fan-out group, all at t0 (the
	// expired one two minutes later).
	succ, err := add.Enqueue(ctx, a, addIn{A: 1, B: 1}, nil)
	require.NoError(t, err)
	_, err = succ.Result(ctx)
	require.NoError(t, err)
	dead, err := fail.Enqueue(ctx, a, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = dead.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)
	canc, err := add.Enqueue(ctx, a, addIn{}, &hopper.InsertOpts{Delay: time.Hour})
	require.NoError(t, err)
	_, err = a.JobCancel(ctx, canc.ID())
	require.NoError(t, err)
	group, err := parent.Enqueue(ctx, a, hopper.None{}, nil)
	require.NoError(t, err)
	gv, err := group.Group(ctx)
	require.NoError(t, err)
	require.True(t, gv.Settled)
	exp, err := add.Enqueue(ctx, a, addIn{}, &hopper.InsertOpts{Delay: 2 * time.Minute, Timeout: time.Minute})
	require.NoError(t, err)
	clk.Advance(3 * time.Minute)
	_, err = exp.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrExpired)
	page, err := a.JobList(ctx, &hopper.ListParams{GroupID: group.ID()})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 3, "the parent and its two children")
	_, err = d.Executor().GroupGet(ctx, &driver.GroupGetParams{ID: group.ID()})
	require.NoError(t, err, "the group has a row")

	// pass moves the clock to t0+at and waits for a retention pass that
	// ran then; present lists what must still be stored.
	pass := func(at time.Duration) {
		t.Helper()
		clk.AdvanceTo(t0.Add(at))
		for {
			select {
			case ran := <-spyA.passes:
				if !ran.Before(t0.Add(at)) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no retention pass at t0+%s", at)
			}
		}
	}
	stored := func(id string) bool {
		t.Helper()
		_, err := a.JobGet(ctx, id)
		if errors.Is(err, hopper.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	groupRow := func() bool {
		t.Helper()
		_, err := d.Executor().GroupGet(ctx, &driver.GroupGetParams{ID: group.ID()})
		if errors.Is(err, hoppertype.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	pass(time.Hour + 5*time.Minute)
	require.False(t, stored(exp.ID()), "expired: kept 1 h")
	require.True(t, stored(succ.ID()))
	require.True(t, stored(dead.ID()))
	require.True(t, stored(canc.ID()))
	require.True(t, stored(group.ID()))
	require.True(t, groupRow())

	pass(23*time.Hour + 50*time.Minute)
	require.True(t, stored(succ.ID()), "succeeded: kept 24 h by default")
	require.True(t, groupRow())

	pass(24*time.Hour + 5*time.Minute)
	require.False(t, stored(succ.ID()), "succeeded: gone after 24 h")
	require.False(t, stored(group.ID()))
	page, err = a.JobList(ctx, &hopper.ListParams{GroupID: group.ID()})
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "the group's children went with it")
	require.False(t, groupRow(), "the group's row went with its last jobs")
	require.True(t, stored(dead.ID()), "dead: kept 48 h")

	pass(48*time.Hour + 5*time.Minute)
	require.False(t, stored(dead.ID()), "dead: gone after 48 h")
	require.True(t, stored(canc.ID()), "cancelled: kept for good")

	require.True(t, a.IsLeader())
	require.False(t, b.IsLeader())
	require.Zero(t, spyB.deletes.Load(), "B, not the leader, never deleted")
	select {
	case <-spyB.passes:
		t.Fatal("B ran a retention pass")
	default:
	}
}
