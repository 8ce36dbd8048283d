package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// edgeStore answers GateEdges from a fixed graph (what each gate waits on,
// and what each job waits on through the gates it is queued by).
type edgeStore struct {
	driver.Executor
	edges map[string][]string
}

func (s edgeStore) GateEdges(_ context.Context, p *driver.GateEdgesParams) (map[string][]string, error) {
	out := map[string][]string{}
	for _, id := range p.IDs {
		out[id] = s.edges[id]
	}
	return out, nil
}

// TestGateCycle: a gate that waits on itself through other gates and jobs
// is found, with the path of the wait from it; a gate beside a cycle, or
// on a diamond, is not on one.
func TestGateCycle(t *testing.T) {
	t.Parallel()
	ex := edgeStore{edges: map[string][]string{
		"g1": {"a", "b"}, "a": {"g2"}, "g2": {"g1"}, // g1 → a → g2 → g1
		"g3": {"g1"},                             // waits on the cycle, is not on it
		"g4": {"c", "d"}, "c": {"e"}, "d": {"e"}, // a diamond
	}}
	ctx := context.Background()
	cycle, err := gateCycle(ctx, ex, "g1")
	require.NoError(t, err)
	require.Equal(t, []string{"g1", "g2", "a"}, cycle)
	for _, id := range []string{"g3", "g4", "e"} {
		cycle, err := gateCycle(ctx, ex, id)
		require.NoError(t, err)
		require.Nil(t, cycle, id)
	}
}

// TestRepairGate: a gate's recheck records the watched jobs that ended
// without a transition counting them, and returns the gate as it is then.
func TestRepairGate(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	e := New(testConfig(d))
	t.Cleanup(e.Close)
	ex := d.Executor()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := ex.GateInsert(ctx, &driver.GateInsertParams{Now: now,
		Gates: []*driver.GateSpec{{ID: "g", Cond: hoppertype.GateCondition{Kind: hoppertype.GateAllDone}, On: []string{"a", "b"}}}})
	require.NoError(t, err)
	g, err := ex.GateGet(ctx, &driver.GateGetParams{ID: "g"})
	require.NoError(t, err)
	require.Equal(t, 0, g.Done)

	// a is stored ended, b running, by writes that observe no gate (as a
	// job that commits and ends while the gate's insert is in flight).
	a := insertRow("a", "t", "", "q", now)
	a.State, a.EndedAt = hoppertype.JobStateSucceeded, now
	_, err = ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a, insertRow("b", "t", "", "q", now)}})
	require.NoError(t, err)
	g, err = ex.GateGet(ctx, &driver.GateGetParams{ID: "g"})
	require.NoError(t, err)
	require.Equal(t, 0, g.Done, "no transition counted a")

	g, err = e.repairGate(ctx, "g", g)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 1}, [2]int{g.Done, g.Succeeded}, "a is counted, b still runs")
	require.False(t, g.Cond.Met(g.Total, g.Done, g.Succeeded))
}
