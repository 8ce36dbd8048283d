package hopper_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// runLoadSpy counts how a store's runs are read: one by one (RunLoad) or
// with a claim's other runs (RunLoadMany), and the longest history a batch
// read returned.
type runLoadSpy struct {
	driver.Driver
	baseExec
	single, batches, longest atomic.Int64
}

func (s *runLoadSpy) Executor() driver.Executor { return s }

func (s *runLoadSpy) RunLoad(ctx context.Context, p *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	s.single.Add(1)
	return s.baseExec.RunLoad(ctx, p)
}

func (s *runLoadSpy) RunLoadMany(ctx context.Context, p *driver.RunLoadManyParams) (map[string]*driver.RunLoaded, error) {
	s.batches.Add(1)
	got, err := s.baseExec.(driver.RunBatchLoader).RunLoadMany(ctx, p)
	for _, l := range got {
		if n := int64(len(l.Events)); n > s.longest.Load() {
			s.longest.Store(n)
		}
	}
	return got, err
}

// TestClaimedRunsAreReadTogether: the runs of workflow jobs one claim
// returns are read in one call, histories included, and each execution
// goes on from its history: runs that waited on a hook, resumed while no
// worker ran, finish without running their first step again.
func TestClaimedRunsAreReadTogether(t *testing.T) { forEachDriver(t, testClaimedRunsAreReadTogether) }

func testClaimedRunsAreReadTogether(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	const n = 12
	var first, second atomic.Int64
	signal := hopper.DefineHook[int]("batch-signal")
	wf := hopper.Workflow("batch-read", func(wf hopper.WorkflowContext, in int) (int, error) {
		a, err := hopper.Step(wf, "a", func(context.Context) (int, error) { first.Add(1); return in, nil }, nil)
		if err != nil {
			return 0, err
		}
		h, err := signal.Create(wf)
		if err != nil {
			return 0, err
		}
		v, err := h.Wait(nil)
		if err != nil {
			return 0, err
		}
		return hopper.Step(wf, "b", func(context.Context) (int, error) { second.Add(1); return a + v, nil }, nil)
	}, nil)
	base := newDriver(t)
	spy := &runLoadSpy{Driver: base, baseExec: base.Executor()}
	ctx := testCtx(t)

	c1, err := hopper.New(hopper.Config{Driver: spy})
	require.NoError(t, err)
	require.NoError(t, c1.Register(wf))
	require.NoError(t, c1.Start(ctx))
	changed := onEvents(t, c1)
	ids := make([]string, n)
	for i := range ids {
		h, err := wf.Start(ctx, c1, i, nil)
		require.NoError(t, err)
		ids[i] = h.ID()
	}
	tokens := make([]string, n)
	for i, id := range ids {
		await(t, "run "+id+" waiting on its hook", func() bool {
			info, err := c1.RunGet(ctx, id)
			if err != nil || len(info.Hooks) == 0 || info.Status != hopper.RunWaiting {
				return false
			}
			tokens[i] = info.Hooks[0].Token
			return true
		}, changed)
	}
	require.NoError(t, c1.Stop(ctx))
	require.EqualValues(t, n, first.Load())

	// Resumed while no worker runs: all wait together for the next claim.
	for _, tok := range tokens {
		require.NoError(t, c1.HookResume(ctx, tok, json.RawMessage(`100`)))
	}
	spy.single.Store(0)
	c2 := newClient(t, hopper.Config{Driver: spy})
	require.NoError(t, c2.Register(wf))
	for i, id := range ids {
		out, err := wf.Handle(c2, id).Result(ctx)
		require.NoError(t, err)
		require.Equal(t, i+100, out)
	}
	require.EqualValues(t, n, first.Load(), "no first step ran again")
	require.EqualValues(t, n, second.Load())
	require.Positive(t, spy.batches.Load(), "the claimed runs were read together")
	require.Positive(t, spy.longest.Load(), "with their histories")
	require.Less(t, spy.single.Load(), int64(n), "not each on its own")
}
