package drivertest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
)

// keyCases cover KeySetIfAbsent.
func keyCases() []testCase {
	return []testCase{
		{"FirstWins", testKeyFirstWins},
		{"ExpiredKeyCanBeTakenAgain", testKeyExpiry},
		{"KeyWithoutExpiryIsForever", testKeyNoExpiry},
		{"ConcurrentSetsOneWinner", testKeyConcurrent},
		{"DeleteExpired", testKeyDeleteExpired},
	}
}

func (f *fixture) setKey(t *testing.T, p driver.KeySetIfAbsentParams) bool {
	t.Helper()
	ok, err := f.x.KeySetIfAbsent(f.ctx, &p)
	require.NoError(t, err)
	return ok
}

func testKeyFirstWins(t *testing.T, f *fixture) {
	k := "once-" + f.id()
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Value: []byte("a"), Now: base}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Value: []byte("b"), Now: base}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Value: []byte("a"), Now: at(time.Second)}))
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k + "-other", Now: base}), "keys are independent")
}

func testKeyExpiry(t *testing.T, f *fixture) {
	k := "lease-" + f.id()
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: base, ExpiresAt: at(time.Minute)}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: at(30 * time.Second), ExpiresAt: at(time.Hour)}),
		"an unexpired key is held")
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: at(2 * time.Minute), ExpiresAt: at(3 * time.Minute)}),
		"an expired key can be taken again")
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: at(150 * time.Second), ExpiresAt: at(time.Hour)}),
		"the new holder's expiry applies")
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: at(4 * time.Minute)}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: at(24 * time.Hour)}),
		"taken again without an expiry, it is held for good")
}

func testKeyNoExpiry(t *testing.T, f *fixture) {
	k := "forever-" + f.id()
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Value: []byte("v"), Now: base}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: k, Now: base.AddDate(100, 0, 0)}))
}

func testKeyConcurrent(t *testing.T, f *fixture) {
	const n = 20
	k := "race-" + f.id()
	var wg sync.WaitGroup
	won := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			won[i], errs[i] = f.x.KeySetIfAbsent(f.ctx, &driver.KeySetIfAbsentParams{Key: k, Now: base})
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range n {
		require.NoError(t, errs[i])
		if won[i] {
			winners++
		}
	}
	require.Equal(t, 1, winners, "exactly one caller stores the key")
}

func testKeyDeleteExpired(t *testing.T, f *fixture) {
	p := "exp-" + f.id()
	for i, exp := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, time.Hour} {
		require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: p + string(rune('a'+i)), Now: base, ExpiresAt: at(exp)}))
	}
	forever := p + "-forever"
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: forever, Now: base}))

	n, err := f.x.KeyDeleteExpired(f.ctx, &driver.KeyDeleteExpiredParams{Before: at(time.Minute), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, 2, n, "at most Limit")
	n, err = f.x.KeyDeleteExpired(f.ctx, &driver.KeyDeleteExpiredParams{Before: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the third expired key; the live one and the one without expiry stay")
	// A deleted key is free again; a kept one is still held.
	require.True(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: p + "a", Now: base}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: p + "d", Now: at(time.Minute)}))
	require.False(t, f.setKey(t, driver.KeySetIfAbsentParams{Key: forever, Now: at(time.Hour)}))
	n, err = f.x.KeyDeleteExpired(f.ctx, &driver.KeyDeleteExpiredParams{Before: at(24 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the key that expired in the meantime")
}
