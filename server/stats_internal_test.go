package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
)

// TestStatsWindows: events land in their second and their minute, per
// queue and type; runs' ends are counted; depth samples come in the
// window of the queue asked for; buckets older than the window are not.
func TestStatsWindows(t *testing.T) {
	var s stats
	now := time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC)
	ev := func(kind hopper.EventKind, queue, typ string, ago time.Duration) hopper.Event {
		return hopper.Event{Kind: kind, JobID: "j", Queue: queue, Type: typ, At: now.Add(-ago), RunAt: now.Add(-ago - 10*time.Millisecond)}
	}
	s.observe(ev(hopper.EventStarted, "q", "mail", 0))
	s.observe(ev(hopper.EventSucceeded, "q", "mail", 0))
	s.observe(ev(hopper.EventFailed, "q", "sms", 0))
	s.observe(ev(hopper.EventSucceeded, "other", "mail", 30*time.Minute))
	s.observe(ev(hopper.EventSucceeded, "q", "mail", 3*time.Hour))
	s.observe(hopper.Event{Kind: hopper.EventRunCompensated, RunID: "r", Type: "saga", At: now})
	s.sampleDepths(now.Add(-time.Minute), []hopper.QueueDepth{{Queue: "q", Due: 7, OldestDueAge: 2 * time.Second}, {Queue: "other", Due: 1}})
	s.sampleDepths(now.Add(-2*time.Hour), []hopper.QueueDepth{{Queue: "q", Due: 99}})

	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	short := s.snapshot(now, "5m", "", "")
	require.Equal(t, 300, short.Buckets)
	require.Equal(t, 1, short.Succeeded[299], "now's second is the last bucket")
	require.Equal(t, 1, sum(short.Failed))
	require.Equal(t, 10.0, short.LagP50[299])
	require.Equal(t, 1, sum(short.RunsCompensated))
	require.Contains(t, short.Queues, "q")
	require.Equal(t, []string{"mail", "sms"}, short.Types)

	hour := s.snapshot(now, "1h", "", "mail")
	require.Equal(t, 2, sum(hour.Succeeded), "now's and the one half an hour ago; not three hours ago")
	require.Equal(t, 0, sum(hour.Failed), "sms is another type")
	require.Equal(t, 1, hour.Succeeded[59])
	require.Equal(t, 1, hour.Succeeded[29])
	require.Len(t, hour.Depths, 2, "the samples of the last hour")

	day := s.snapshot(now, "24h", "q", "")
	require.Equal(t, 2, sum(day.Succeeded), "queue q's: now's and three hours ago")
	require.Equal(t, 1, sum(day.Failed))
	require.Len(t, day.Depths, 2, "queue q's samples of the day")
	require.Equal(t, 99, day.Depths[0].Due, "oldest first")
	require.Equal(t, 2.0, day.Depths[1].OldestDueAgeSeconds)

	require.Equal(t, "2m", s.snapshot(now, "", "", "").Window, "the default window")
}
