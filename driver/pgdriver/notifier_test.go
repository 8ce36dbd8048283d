package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// Transactions' notifications are sent after their commits, together when
// they pile up: every committed one arrives, none of a rolled-back one.
func TestNotifyAfterCommitFromManyTransactions(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 8)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	sub, err := d.Listen(ctx, "post")
	require.NoError(t, err)
	defer sub.Close()

	boom := errors.New("boom")
	require.ErrorIs(t, d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		require.NoError(t, tx.Notify(ctx, &driver.NotifyParams{Topic: "post", Payload: "rolled-back"}))
		return boom
	}), boom)

	const n = 40 // within a subscription's buffer (subscriptionBuffer): read after all commit
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
				return tx.Notify(ctx, &driver.NotifyParams{Topic: "post", Payload: fmt.Sprint(i)})
			})
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	// Once every committer returned, a send is in flight or done; the
	// marker is sent after them.
	got := map[string]bool{}
	for len(got) < n {
		p := recv(t, sub)
		require.NotEqual(t, "rolled-back", p, "a rolled-back transaction notifies no one")
		got[p] = true
	}
	require.NoError(t, d.Executor().Notify(ctx, &driver.NotifyParams{Topic: "post", Payload: "end"}))
	require.Equal(t, "end", recv(t, sub))
}
