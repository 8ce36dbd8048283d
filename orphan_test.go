package hopper_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
)

// orphans records the groups an OnOrphanGroup hook reported.
type orphans struct {
	mu      sync.Mutex
	ids     []string
	sum     map[string]int
	changed changes
}

func (o *orphans) hook(g *hopper.GroupValue) {
	var v int
	_ = g.Decode(&v)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids = append(o.ids, g.ID)
	if o.sum == nil {
		o.sum = map[string]int{}
	}
	o.sum[g.ID] = v
	o.changed.notify()
}

func (o *orphans) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ids...)
}

// markSpy reports the awaited-group marks written through it.
// Executor is the spy itself.
func (m *markSpy) Executor() driver.Executor { return m }

type markSpy struct {
	driver.Driver
	baseExec
	marked chan string
}

func (m *markSpy) KeySetIfAbsent(ctx context.Context, p *driver.KeySetIfAbsentParams) (bool, error) {
	ok, err := m.baseExec.KeySetIfAbsent(ctx, p)
	if err == nil && strings.HasPrefix(p.Key, "hopper.awaited:") {
		select {
		case m.marked <- p.Key:
		default:
		}
	}
	return ok, err
}

func TestOrphanGroupHook(t *testing.T) { forEachDriver(t, testOrphanGroupHook) }

func testOrphanGroupHook(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var seen orphans
	base := newDriver(t)
	d := &markSpy{Driver: base, baseExec: base.Executor(), marked: make(chan string, 16)}
	fan := fanoutType("orphan-fanout", summing, nil)
	// Two clients, both with the hook: a group is reported once in all.
	c1 := newClient(t, hopper.Config{Driver: d, OnOrphanGroup: seen.hook, MaxWorkers: 4})
	c2 := newClient(t, hopper.Config{Driver: d, OnOrphanGroup: seen.hook, MaxWorkers: 4})
	require.NoError(t, c1.Register(fan, summing))
	require.NoError(t, c2.Register(fan, summing))
	ctx := testCtx(t)

	// The awaited group must not settle before its waiter marks it (it
	// would be an orphan then): its queue stays paused until the mark.
	require.NoError(t, c1.QueuePause(ctx, hopper.DefaultQueue, nil))
	awaited, err := fan.Enqueue(ctx, c1, fanIn{N: 5}, nil)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := awaited.Group(ctx)
		waited <- err
	}()
	select {
	case key := <-d.marked:
		require.Equal(t, "hopper.awaited:"+awaited.GroupID(), key)
	case <-ctx.Done():
		t.Fatal("the waiter never marked its group")
	}
	require.NoError(t, c1.QueueResume(ctx, hopper.DefaultQueue))
	require.NoError(t, <-waited)

	orphan, err := fan.Enqueue(ctx, c1, fanIn{N: 4}, nil)
	require.NoError(t, err)
	await(t, "the orphan's report", func() bool { return len(seen.list()) > 0 }, seen.changed.next)
	_, err = c2.GroupWait(ctx, orphan.GroupID())
	require.NoError(t, err)
	// A second report, which must not come, would come from the end of a
	// transition: stopping both clients waits for every one of those.
	require.NoError(t, c1.Stop(ctx))
	require.NoError(t, c2.Stop(ctx))
	require.Equal(t, []string{orphan.GroupID()}, seen.list(), "only the group nobody awaited, once")
	seen.mu.Lock()
	require.Equal(t, 10, seen.sum[orphan.GroupID()], "the hook gets the group value")
	seen.mu.Unlock()
}
