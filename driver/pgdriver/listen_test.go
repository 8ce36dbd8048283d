package pgdriver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// TestListenerReconnects kills the listener's backend and checks that the
// subscription is told to look again and still gets later notifications.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 4)
	d := newTestDriver(t, pool)
	ctx := t.Context()
	sub, err := d.Listen(ctx, "topic")
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, d.Executor().Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: "before"}))
	require.Equal(t, "before", recv(t, sub))

	for round := range 2 {
		var killed int
		require.NoError(t, pool.QueryRow(ctx,
			`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			listenerAppPrefix+d.schema).Scan(&killed))
		require.Equal(t, 1, killed, "round %d: one listener connection", round)
		require.Equal(t, "", recv(t, sub), "round %d: after reconnecting, subscribers are told to look again", round)
		require.NoError(t, d.Executor().Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: "after"}))
		require.Equal(t, "after", recv(t, sub), "round %d: notifications flow again", round)
	}
}

// TestListenAfterClose checks that Close ends subscriptions and refuses new
// ones.
func TestListenAfterClose(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 2)
	d := newTestDriver(t, pool)
	sub, err := d.Listen(t.Context(), "t")
	require.NoError(t, err)
	require.NoError(t, d.Close())
	_, ok := <-sub.C()
	require.False(t, ok, "the subscription ended with the driver")
	sub.Close()
	_, err = d.Listen(t.Context(), "t")
	require.Error(t, err)
}
