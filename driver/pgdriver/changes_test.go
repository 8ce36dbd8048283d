package pgdriver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestChangeFeedFinality holds a transaction open after it wrote a change
// and commits a later one beside it: neither is listed while the first
// transaction runs (a reader that moved past the later change would skip the
// earlier one for good), and both are, in (tx, position) order, once it
// ends.
func TestChangeFeedFinality(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	slow, fast := newJob("q"), newJob("q")

	wrote, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{slow}}); err != nil {
				return err
			}
			close(wrote)
			<-release
			return nil
		})
	}()
	<-wrote
	insert(t, d, fast)

	list := func() []*hoppertype.Change {
		chs, err := d.ChangeList(ctx, &driver.ChangeListParams{Limit: 10})
		require.NoError(t, err)
		return chs
	}
	// Other tests share the cluster; give their transactions time to end.
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, list(), "nothing is final while an older transaction runs")
	own, err := d.ChangeList(ctx, &driver.ChangeListParams{EntityID: fast.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, own, 1, "the committed change exists all the same")

	close(release)
	require.NoError(t, <-done)
	var chs []*hoppertype.Change
	require.Eventually(t, func() bool { chs = list(); return len(chs) == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, slow.ID, chs[0].EntityID, "the older transaction's change comes first")
	require.Equal(t, fast.ID, chs[1].EntityID)
	require.Less(t, chs[0].Tx, chs[1].Tx)
}
