package engine

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// limTrace admits jobs to a limiter and records the order they start in;
// started jobs run until finish is called.
type limTrace struct {
	mu      sync.Mutex
	started []string
}

func (tr *limTrace) admit(l *limiter, id, key string, prio int, queued time.Time) {
	row := &hoppertype.JobRow{ID: id, FairKey: key, Priority: prio, QueuedAt: queued}
	l.admit(row, func() {
		tr.mu.Lock()
		tr.started = append(tr.started, id)
		tr.mu.Unlock()
	})
}

func (tr *limTrace) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.started...)
}

func TestLimiterOrders(t *testing.T) {
	clk := hclock.NewVirtual(t0)
	// c5 is older than b5, with the same priority and group.
	cases := []struct {
		name  string
		limit hoppertype.Limit
		want  []string
	}{
		// Admitted while one runs: a1 (first, starts at once), then the rest wait.
		{"priority: highest first, then oldest", *&hoppertype.Limit{Max: 1, Order: hoppertype.OrderPriority}, []string{"a1", "d9", "c5", "b5"}},
		{"age: oldest first", *&hoppertype.Limit{Max: 1, Order: hoppertype.OrderAge}, []string{"a1", "c5", "b5", "d9"}},
		// Fair serves group t2 once (its best, c5), then t3, then t2 again.
		{"fair: round-robin over groups", *&hoppertype.Limit{Max: 1, Order: hoppertype.OrderFair}, []string{"a1", "c5", "d9", "b5"}},
	}
	for _, e := range cases {
		var tr limTrace
		l := newLimiter(e.limit, clk, nil)
		tr.admit(l, "a1", "t1", 1, t0)
		tr.admit(l, "b5", "t2", 5, t0.Add(time.Second))
		tr.admit(l, "c5", "t2", 5, t0.Add(-time.Second)) // older than b5, same group and priority
		tr.admit(l, "d9", "t3", 9, t0.Add(2*time.Second))
		require.Equal(t, []string{"a1"}, tr.list(), "%s: a cap of 1 starts one", e.name)
		for range 3 {
			l.done()
		}
		require.Equal(t, e.want, tr.list(), e.name)
	}
}

func TestLimiterCapAndBacklog(t *testing.T) {
	var drained int
	var tr limTrace
	l := newLimiter(hoppertype.Limit{Max: 2}, hclock.NewVirtual(t0), func() { drained++ })
	for i := range 4 {
		tr.admit(l, fmt.Sprint(i), "", 0, t0.Add(time.Duration(i)))
	}
	require.Equal(t, []string{"0", "1"}, tr.list(), "at most Max run")
	require.True(t, l.full(), "two waiting reach the backlog of Max")
	l.done()
	require.Equal(t, []string{"0", "1", "2"}, tr.list())
	require.Equal(t, 1, drained, "dropping below the backlog lets producers claim again")
	require.False(t, l.full())
	l.done()
	l.done()
	l.done()
	require.Equal(t, 1, drained)
}

// TestLimiterRate runs in a synctest bubble: synctest.Wait returns once
// what a move of the clock set off is done, so each check, the one that
// nothing started early too, sees all of it.
func TestLimiterRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := hclock.NewVirtual(t0)
		var tr limTrace
		l := newLimiter(*&hoppertype.Limit{Rate: 2, Burst: 1}, clk, nil) // one start per 500ms
		defer l.close()
		for i := range 3 {
			tr.admit(l, fmt.Sprint(i), "", 0, t0)
		}
		synctest.Wait()
		require.Equal(t, []string{"0"}, tr.list(), "a burst of 1")
		clk.Advance(499 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []string{"0"}, tr.list())
		clk.Advance(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []string{"0", "1"}, tr.list())
		clk.Advance(500 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []string{"0", "1", "2"}, tr.list())
	})
}
