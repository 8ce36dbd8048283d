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
)

type fanIn struct {
	N int `json:"n"`
}

// summing adds its input to the group value with a fold.
var summing = hopper.Define("sum", func(ctx context.Context, in addIn) (int, error) {
	v := in.A + in.B
	return v, hopper.FoldGroup(ctx, func(acc int) int { return acc + v })
}, nil)

func fanoutType(name string, child *hopper.Type[addIn, int], fail *atomic.Int32) *hopper.Type[fanIn, hopper.None] {
	return hopper.Define(name, func(ctx context.Context, in fanIn) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		for i := 1; i <= in.N; i++ {
			if err := jc.Spawn(child.Job(addIn{A: i}, nil)); err != nil {
				return hopper.None{}, err
			}
		}
		if fail != nil && fail.Add(-1) >= 0 {
			return hopper.None{}, errors.New("parent fails after spawning")
		}
		return hopper.None{}, nil
	}, &hopper.TypeOpts[fanIn]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})
}

func TestFanOutFold(t *testing.T) { forEachDriver(t, testFanOutFold) }

func testFanOutFold(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	events := newEventLog()
	fan := fanoutType("fanout", summing, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook, MaxWorkers: 16})
	require.NoError(t, c.Register(fan, summing))
	ctx := testCtx(t)

	h, err := fan.Enqueue(ctx, c, fanIn{N: 10}, nil)
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	require.True(t, g.Settled)
	sum, err := hopper.GroupDecode[int](g)
	require.NoError(t, err)
	require.Equal(t, 55, sum, "every child's fold is applied exactly once")

	_, err = h.Result(ctx)
	require.NoError(t, err, "a delegating parent succeeds with no value of its own")
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Nil(t, row.Result)

	page, err := c.JobList(ctx, &hopper.ListParams{ParentID: h.ID()})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 10)
	for _, j := range page.Jobs {
		require.Equal(t, h.GroupID(), j.GroupID)
		require.Equal(t, hopper.StateSucceeded, j.State)
	}
	events.waitFor(t, func(e hopper.Event) bool { return e.Kind == hopper.EventGroupDone && e.GroupID == h.GroupID() })
	n := 0
	for _, k := range events.kinds("") {
		if k == hopper.EventGroupDone {
			n++
		}
	}
	require.Equal(t, 1, n, "group-done fires once")
}

func TestFanOutIsAtomicWithParent(t *testing.T) { forEachDriver(t, testFanOutIsAtomicWithParent) }

func testFanOutIsAtomicWithParent(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var fails atomic.Int32
	fails.Store(2) // the first two attempts spawn and then fail
	fan := fanoutType("fanout", summing, &fails)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(fan, summing))
	ctx := testCtx(t)
	h, err := fan.Enqueue(ctx, c, fanIn{N: 5}, nil)
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	sum, err := hopper.GroupDecode[int](g)
	require.NoError(t, err)
	require.Equal(t, 15, sum)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 3, row.Attempt)
	page, err := c.JobList(ctx, &hopper.ListParams{ParentID: h.ID()})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 5, "children of failed attempts were never stored")
}

func TestGroupValueLastWriterAndFinal(t *testing.T) {
	forEachDriver(t, testGroupValueLastWriterAndFinal)
}

func testGroupValueLastWriterAndFinal(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	plain := hopper.Define("plain", func(ctx context.Context, in addIn) (int, error) { return in.A, nil }, nil)
	parent := hopper.Define("parent", func(ctx context.Context, final bool) (int, error) {
		jc := hopper.JobFromContext(ctx)
		if err := jc.Spawn(plain.Job(addIn{A: 7}, nil)); err != nil {
			return 0, err
		}
		if final {
			jc.FinalizeGroup()
		}
		return 100, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(plain, parent))
	ctx := testCtx(t)

	h, err := parent.Enqueue(ctx, c, false, nil)
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	v, _ := hopper.GroupDecode[int](g)
	require.Equal(t, 7, v, "last contributor to finish wins: the child finishes after its parent")
	own, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, own, "Result is the job's own output")

	h, err = parent.Enqueue(ctx, c, true, nil)
	require.NoError(t, err)
	g, err = h.Group(ctx)
	require.NoError(t, err)
	v, _ = hopper.GroupDecode[int](g)
	require.Equal(t, 100, v, "a final contribution locks the group value")
}

func TestFoldExactUnderConcurrency(t *testing.T) { forEachDriver(t, testFoldExactUnderConcurrency) }

func testFoldExactUnderConcurrency(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	one := hopper.Define("one", func(ctx context.Context, _ addIn) (hopper.None, error) {
		return hopper.None{}, hopper.FoldGroup(ctx, func(acc int) int { return acc + 1 })
	}, nil)
	fan := hopper.Define("fan", func(ctx context.Context, n int) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		specs := make([]*hopper.JobSpec, n)
		for i := range specs {
			specs[i] = one.Job(addIn{}, nil)
		}
		return hopper.None{}, jc.Spawn(specs...)
	}, nil)
	d := newDriver(t)
	var clients []*hopper.Client
	for range 3 {
		c := newClient(t, hopper.Config{Driver: d, MaxWorkers: 32})
		require.NoError(t, c.Register(one, fan))
		clients = append(clients, c)
	}
	ctx := testCtx(t)
	h, err := fan.Enqueue(ctx, clients[0], 300, nil)
	require.NoError(t, err)
	g, err := clients[1].GroupWait(ctx, h.GroupID())
	require.NoError(t, err)
	n, err := hopper.GroupDecode[int](g)
	require.NoError(t, err)
	require.Equal(t, 300, n, "300 concurrent folds across three clients, none lost")
}

func TestNestedFanOutAndRedriveReopens(t *testing.T) {
	forEachDriver(t, testNestedFanOutAndRedriveReopens)
}

func testNestedFanOutAndRedriveReopens(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var failLeaf atomic.Bool
	failLeaf.Store(true)
	leaf := hopper.Define("leaf", func(ctx context.Context, in addIn) (int, error) {
		if in.A == 3 && failLeaf.Load() {
			return 0, hopper.Abort(errors.New("leaf 3 fails"))
		}
		return in.A, hopper.FoldGroup(ctx, func(acc int) int { return acc + in.A })
	}, nil)
	mid := hopper.Define("mid", func(ctx context.Context, in addIn) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		return hopper.None{}, jc.Spawn(leaf.Job(addIn{A: in.A}, nil), leaf.Job(addIn{A: in.A + 1}, nil))
	}, nil)
	root := hopper.Define("root", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		jc := hopper.JobFromContext(ctx)
		return hopper.None{}, jc.Spawn(mid.Job(addIn{A: 1}, nil), mid.Job(addIn{A: 3}, nil))
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(leaf, mid, root))
	ctx := testCtx(t)
	h, err := root.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	v, _ := hopper.GroupDecode[int](g)
	require.Equal(t, 1+2+4, v, "grandchildren join the root's group; the dead leaf contributes nothing")

	dead, err := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{hopper.StateDead}, GroupID: h.GroupID()})
	require.NoError(t, err)
	require.Len(t, dead.Jobs, 1)
	failLeaf.Store(false)
	n, err := c.JobRedrive(ctx, &hopper.RedriveParams{IDs: []string{dead.Jobs[0].ID}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	st, err := c.GroupGet(ctx, h.GroupID())
	require.NoError(t, err)
	_, err = c.JobWait(ctx, dead.Jobs[0].ID)
	require.NoError(t, err)
	g, err = c.GroupWait(ctx, h.GroupID())
	require.NoError(t, err)
	v, _ = hopper.GroupDecode[int](g)
	require.Equal(t, 1+2+3+4, v, "redriving a dead member reopens the group and its fold lands")
	_ = st
}

func TestCancelledChildSettlesGroup(t *testing.T) { forEachDriver(t, testCancelledChildSettlesGroup) }

func testCancelledChildSettlesGroup(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	later := hopper.Define("later", func(ctx context.Context, in addIn) (int, error) { return in.A, nil }, nil)
	parent := hopper.Define("parent", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		return hopper.None{}, hopper.JobFromContext(ctx).Spawn(later.Job(addIn{A: 1}, &hopper.InsertOpts{ID: "the-child", Delay: time.Hour}))
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(later, parent))
	ctx := testCtx(t)
	h, err := parent.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	st, err := c.GroupGet(ctx, h.GroupID())
	require.NoError(t, err)
	require.False(t, st.Settled, "the delayed child keeps the group open")
	_, err = c.JobCancel(ctx, "the-child")
	require.NoError(t, err)
	g, err := h.Group(ctx)
	require.NoError(t, err)
	require.True(t, g.Settled)
	require.False(t, g.Set)
}

func TestSpawnRefusesBadInput(t *testing.T) { forEachDriver(t, testSpawnRefusesBadInput) }

func testSpawnRefusesBadInput(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	child := hopper.Define("child", func(ctx context.Context, in addIn) (int, error) { return 0, nil }, nil)
	errc := make(chan error, 1)
	parent := hopper.Define("parent", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		err := hopper.JobFromContext(ctx).Spawn(child.Job(addIn{}, &hopper.InsertOpts{Delay: -time.Second}))
		errc <- err
		return hopper.None{}, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(child, parent))
	ctx := testCtx(t)
	h, err := parent.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, <-errc, hopper.ErrInvalidInput)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	page, err := c.JobList(ctx, &hopper.ListParams{ParentID: h.ID()})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}
