package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAgoReadsAsPeopleSayIt: relative times in whole units people use,
// never Go's duration syntax ("27m0s").
func TestAgoReadsAsPeopleSayIt(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, "—"},
		{now.Add(200 * time.Millisecond), "just now"},
		{now.Add(-300 * time.Millisecond), "just now"},
		{now.Add(-42 * time.Second), "42 s ago"},
		{now.Add(-27*time.Minute - 10*time.Second), "27 min ago"},
		{now.Add(-3*time.Hour - 59*time.Minute), "3 h ago"},
		{now.Add(-47 * time.Hour), "47 h ago"},
		{now.Add(-50 * time.Hour), "2 days ago"},
		{now.Add(5*time.Minute + 30*time.Second), "in 5 min"},
	} {
		require.Equal(t, c.want, ago(c.at), "%v before now", now.Sub(c.at))
	}
}

// TestStampNamesItsZone: every absolute time reads in UTC, and says so.
func TestStampNamesItsZone(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.FixedZone("CET", 3600))
	require.Equal(t, "2026-03-04 04:06:07.890 UTC", stamp(at))
}

// TestShortIDs: a UUID by its tail, a chosen id whole, a long one by its
// end; a backlog's age in words.
func TestShortIDs(t *testing.T) {
	require.Equal(t, "1d3c5e7f9a0b", shortID("01a21efd-bf4f-7245-9666-1d3c5e7f9a0b"))
	require.Equal(t, "trip-lisbon@3.a4", shortID("trip-lisbon@3.a4"))
	require.Equal(t, "…0123456789abcdefghij", shortID("a-very-long-job-id-0123456789abcdefghij"))
	require.Equal(t, "1 h", roundDur(time.Hour+2*time.Minute))
	require.Equal(t, "28 min", roundDur(27*time.Minute+40*time.Second))
	require.Equal(t, "0 s", roundDur(-time.Second))
}
