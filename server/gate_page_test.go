package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/stretchr/testify/require"
)

// TestGatePagePagesWhatItWatches: a gate watching 120 jobs lists them 50
// at a time, with links to the next page and back to the first.
func TestGatePagePagesWhatItWatches(t *testing.T) {
	t.Parallel()
	noop := hopper.Define("noop", func(context.Context, int) (int, error) { return 0, nil }, nil)
	e := setupTypes(t, noop)
	on := make([]string, 120)
	for i := range on {
		on[i] = fmt.Sprintf("w-%03d", i)
	}
	gate := hopper.Gate(on, []*hopper.JobSpec{noop.Job(1, nil)}, hopper.AllSuccess(), 0)
	_, err := e.c.EnqueueMany(context.Background(), gate)
	require.NoError(t, err)

	listed := func(body string) (first, n int) {
		n = strings.Count(body, `<a class="mono" href="/jobs/w-`)
		_, err := fmt.Sscanf(body[strings.Index(body, `href="/jobs/w-`)+len(`href="/jobs/w-`):], "%d", &first)
		require.NoError(t, err)
		return first, n
	}
	code, body := e.page("/jobs/" + gate.ID())
	require.Equal(t, 200, code)
	first, n := listed(body)
	require.Equal(t, []int{0, 50}, []int{first, n})
	require.Contains(t, body, `id="watched-next" href="/jobs/`+gate.ID()+`?watched=50#gate"`)
	require.Contains(t, body, "Jobs 1–50 of 120")

	code, body = e.page("/jobs/" + gate.ID() + "?watched=100")
	require.Equal(t, 200, code)
	first, n = listed(body)
	require.Equal(t, []int{100, 20}, []int{first, n})
	require.NotContains(t, body, `id="watched-next"`)
	require.Contains(t, body, "Jobs 101–120 of 120")
	require.Contains(t, body, `href="/jobs/`+gate.ID()+`#gate">first page`)

	code, body = e.page("/jobs/" + gate.ID() + "?watched=-3")
	require.Equal(t, 200, code)
	first, _ = listed(body)
	require.Zero(t, first, "an offset out of range shows the first page")
}
