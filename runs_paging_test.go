package hopper_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestListRunsByCursor pages through runs with RunList's cursor: every run
// once, newest first, whatever is started between two pages; a bad cursor,
// or a cursor with an offset, is refused.
func TestListRunsByCursor(t *testing.T) { forEachDriver(t, testListRunsByCursor) }

func testListRunsByCursor(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	wf := hopper.Workflow("paged", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	ctx := testCtx(t)
	// Not registered: the runs stay pending, which is all a listing needs.
	var want []string
	for i := range 7 {
		h, err := wf.Start(ctx, c, i, &hopper.StartOpts{ID: fmt.Sprintf("run-%d", i)})
		require.NoError(t, err)
		want = append([]string{h.ID()}, want...) // newest first
		if i%2 == 0 {
			clk.Advance(time.Second) // ties of creation time on the way
		}
	}
	var got []string
	q := &hopper.RunQuery{Workflow: "paged", Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging did not end")
		page, err := c.RunList(ctx, q)
		require.NoError(t, err)
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		if pages == 0 {
			// A run started between two pages is newer than the cursor:
			// it is not listed on later pages and shifts nothing.
			_, err := wf.Start(ctx, c, 99, &hopper.StartOpts{ID: "run-late"})
			require.NoError(t, err)
		}
		if page.NextCursor == "" {
			require.LessOrEqual(t, len(page.Runs), 3)
			break
		}
		require.Len(t, page.Runs, 3)
		q.Cursor = page.NextCursor
	}
	require.Equal(t, want, got)

	for _, bad := range []*hopper.RunQuery{
		{Cursor: "not-a-cursor"},
		{Cursor: "cjF8MTIzfA"}, // "r1|123|": no id
		{Cursor: q.Cursor, Offset: 1},
	} {
		_, err := c.RunList(ctx, bad)
		require.True(t, errors.Is(err, hopper.ErrInvalidInput), "%+v: %v", bad, err)
	}
}

// runsOf is the runs of a RunList page, for the tests that read one page.
func runsOf(page *hopper.RunPage, err error) ([]*hopper.RunInfo, error) {
	if err != nil {
		return nil, err
	}
	return page.Runs, nil
}
