package hopper_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestStatsRecorder: events fold into the seeds' figures — counters,
// last-seen times, running and its peak, wait, run and end-to-end
// summaries, attempts, runs by workflow, and the last minute's throughput.
func TestStatsRecorder(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(hoppertest.Epoch())
	r := hopper.NewStatsRecorder(clk)
	t0 := hoppertest.Epoch()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	job := func(kind hopper.EventKind, id string, attempt int, when time.Duration) hopper.Event {
		return hopper.Event{Kind: kind, JobID: id, Type: "mail", Queue: "q", Attempt: attempt, At: at(when)}
	}
	// a: queued at 0, due at 0, started at 1 s, fails at 2 s, retried,
	// started at 5 s (due at 4 s), succeeds at 8 s.
	r.Observe(job(hopper.EventQueued, "a", 0, 0))
	st := job(hopper.EventStarted, "a", 1, time.Second)
	st.RunAt = at(0)
	r.Observe(st)
	// b: queued at 0, started at 3 s while a runs, dead at 4 s.
	r.Observe(job(hopper.EventQueued, "b", 0, 0))
	f := job(hopper.EventFailed, "a", 1, 2*time.Second)
	f.WillRetry = true
	r.Observe(f)
	st = job(hopper.EventStarted, "b", 1, 3*time.Second)
	st.RunAt = at(time.Second)
	r.Observe(st)
	st = job(hopper.EventStarted, "a", 2, 5*time.Second)
	st.RunAt = at(4 * time.Second)
	r.Observe(st)
	require.Equal(t, int64(2), stats(t, r).Running, "a and b run")
	r.Observe(job(hopper.EventFailed, "b", 1, 6*time.Second))
	r.Observe(job(hopper.EventSucceeded, "a", 2, 8*time.Second))
	r.Observe(job(hopper.EventDeferred, "c", 0, 8*time.Second))
	// Runs: one completes, one waits.
	r.Observe(hopper.Event{Kind: hopper.EventRunQueued, RunID: "r1", Type: "order", Status: hopper.RunPending, At: at(0)})
	r.Observe(hopper.Event{Kind: hopper.EventRunStarted, RunID: "r1", Type: "order", Status: hopper.RunRunning, At: at(time.Second)})
	r.Observe(hopper.Event{Kind: hopper.EventRunCompleted, RunID: "r1", Type: "order", Status: hopper.RunCompleted, At: at(2 * time.Second)})
	r.Observe(hopper.Event{Kind: hopper.EventRunQueued, RunID: "r2", Type: "order", Status: hopper.RunPending, At: at(0)})
	r.Observe(hopper.Event{Kind: hopper.EventRunStarted, RunID: "r2", Type: "order", Status: hopper.RunRunning, At: at(time.Second)})
	r.Observe(hopper.Event{Kind: hopper.EventRunWaiting, RunID: "r2", Type: "order", Status: hopper.RunWaiting, At: at(2 * time.Second)})
	r.Observe(hopper.Event{Kind: hopper.EventRunQueued, RunID: "r3", Type: "order", Status: hopper.RunPending, At: at(0)})

	clk.Advance(10 * time.Second)
	s := r.Stats()
	require.Equal(t, 10*time.Second, s.Uptime)
	ts := stats(t, r)
	require.Equal(t, int64(2), ts.Queued)
	require.Equal(t, int64(3), ts.Started)
	require.Equal(t, int64(1), ts.Succeeded)
	require.Equal(t, int64(2), ts.Failed)
	require.Equal(t, int64(1), ts.Retried)
	require.Equal(t, int64(1), ts.Dead)
	require.Equal(t, int64(1), ts.Deferred)
	require.Equal(t, int64(0), ts.Running)
	require.Equal(t, int64(2), ts.PeakRunning)
	require.Equal(t, at(8*time.Second), ts.LastSucceededAt)
	require.Equal(t, at(6*time.Second), ts.LastFailedAt)
	require.Equal(t, at(5*time.Second), ts.LastStartedAt)
	require.Equal(t, hopper.Summary{Count: 3, Sum: 4, Min: 1, Max: 2, Mean: 4.0 / 3, P50: 1, P95: 2, P99: 2}, ts.Wait)
	require.Equal(t, hopper.Summary{Count: 1, Sum: 3, Min: 3, Max: 3, Mean: 3, P50: 3, P95: 3, P99: 3}, ts.Success)
	require.Equal(t, int64(2), ts.Error.Count, "a's first attempt and b's")
	require.Equal(t, 4.0, ts.Error.Sum, "1 s and 3 s")
	require.Equal(t, hopper.Summary{Count: 2, Sum: 14, Min: 6, Max: 8, Mean: 7, P50: 6, P95: 8, P99: 8}, ts.Total)
	require.Equal(t, 1.5, ts.Attempts.Mean)
	require.Equal(t, hopper.Throughput{PerMinute: 2, PerHour: 120}, s.Throughput, "a and b ended in the last minute")

	w, ok := s.Workflow("order")
	require.True(t, ok)
	require.Equal(t, hopper.WorkflowStats{Workflow: "order", Started: 2, Completed: 1, Queued: 1, Running: 1}, w)

	clk.Advance(time.Minute)
	require.Equal(t, hopper.Throughput{}, r.Stats().Throughput, "nothing ended in the last minute")
	_, ok = s.Type("q", "nope")
	require.False(t, ok)
}

func stats(t *testing.T, r *hopper.StatsRecorder) hopper.TypeStats {
	t.Helper()
	s := r.Stats()
	ts, ok := s.Type("q", "mail")
	require.True(t, ok)
	return ts
}

// TestClientStats: a client's Stats count what it ran, and its slots.
func TestClientStats(t *testing.T) {
	t.Parallel()
	fail := true
	job := hopper.Define("once-fails", func(ctx context.Context, _ hopper.None) (int, error) {
		if fail {
			fail = false
			return 0, errors.New("first")
		}
		return 1, nil
	}, &hopper.TypeOpts[hopper.None]{Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Millisecond, Max: time.Millisecond}})
	c := newClient(t, hopper.Config{MaxWorkers: 4})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	wake := onEvents(t, c)
	var ts hopper.TypeStats
	await(t, "the success counted", func() bool {
		s := c.Stats()
		ts, _ = s.Type("default", "once-fails")
		return ts.Succeeded == 1
	}, wake)
	require.Equal(t, int64(1), ts.Queued)
	require.Equal(t, int64(2), ts.Started)
	require.Equal(t, int64(1), ts.Retried)
	require.Equal(t, int64(1), ts.Total.Count)
	require.Equal(t, 2.0, ts.Attempts.Max)
	s := c.Stats()
	require.Equal(t, hopper.WorkerStats{Processes: 1, Total: 4, Busy: 0, Idle: 4}, s.Workers)
}

// TestStatsRecorderForgets: a recorder fed starts that never end (their
// ends seen by another process) forgets the oldest, so its memory — and
// its running gauge — stay bounded; a job it still remembers ends as
// usual.
func TestStatsRecorderForgets(t *testing.T) {
	t.Parallel()
	r := hopper.NewStatsRecorder(nil)
	const n = 200_000
	at := hoppertest.Epoch()
	for i := range n {
		r.Observe(hopper.Event{Kind: hopper.EventStarted, JobID: strconv.Itoa(i), Type: "mail", Queue: "q", Attempt: 1, At: at})
	}
	ts := stats(t, r)
	require.Equal(t, int64(n), ts.Started)
	require.Less(t, ts.Running, int64(n/2), "the oldest starts are forgotten")
	require.Positive(t, ts.Running)
	running := ts.Running
	r.Observe(hopper.Event{Kind: hopper.EventSucceeded, JobID: strconv.Itoa(n - 1), Type: "mail", Queue: "q", Attempt: 1, At: at.Add(time.Second)})
	ts = stats(t, r)
	require.Equal(t, running-1, ts.Running, "the newest start is remembered")
	require.Equal(t, int64(1), ts.Success.Count)
	r.Observe(hopper.Event{Kind: hopper.EventSucceeded, JobID: "0", Type: "mail", Queue: "q", Attempt: 1, At: at.Add(time.Second)})
	require.Equal(t, int64(1), stats(t, r).Success.Count, "the oldest was forgotten: no run time")
}

// TestStatsRecorderQueueTimeOnTheEnd: an end event that carries its job's
// queue time (a client's own events) gives the end-to-end time without the
// queued event; a redrive still counts from the redrive; and once the
// source's ends carry it, a queued job need not be remembered for its end
// to be sampled. It fails if Event.QueuedAt is ignored, or if the queued
// jobs the recorder stops remembering lose their samples.
func TestStatsRecorderQueueTimeOnTheEnd(t *testing.T) {
	t.Parallel()
	r := hopper.NewStatsRecorder(nil)
	t0 := hoppertest.Epoch()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	end := func(id string, queued, ended int) hopper.Event {
		return hopper.Event{Kind: hopper.EventSucceeded, JobID: id, Type: "mail", Queue: "q", Attempt: 1, QueuedAt: at(queued), At: at(ended)}
	}
	// b's queued event and d's redrive are seen before any end; c's
	// queued event after the first.
	r.Observe(hopper.Event{Kind: hopper.EventQueued, JobID: "b", Type: "mail", Queue: "q", At: at(1)})
	r.Observe(hopper.Event{Kind: hopper.EventRedriven, JobID: "d", Type: "mail", Queue: "q", At: at(10)})
	r.Observe(end("a", 0, 5)) // never seen queued: 5 s
	r.Observe(hopper.Event{Kind: hopper.EventQueued, JobID: "c", Type: "mail", Queue: "q", At: at(2)})
	r.Observe(end("b", 1, 4))  // 3 s
	r.Observe(end("c", 2, 9))  // 7 s
	r.Observe(end("d", 0, 12)) // from its redrive: 2 s, not 12
	ts := stats(t, r)
	require.Equal(t, hopper.Summary{Count: 4, Sum: 17, Min: 2, Max: 7, Mean: 4.25, P50: 3, P95: 7, P99: 7}, ts.Total)
}

// BenchmarkStatsRecorderJob folds one job's queued, started and succeeded
// events into a recorder that has seen a backlog of 50,000 jobs queued (as
// a client that enqueued them has), per op: with the end events of the
// store's feed (no queue time on them, so the queued jobs are remembered),
// and with a client's own (Event.QueuedAt set).
func BenchmarkStatsRecorderJob(b *testing.B) {
	for _, own := range []bool{false, true} {
		name := "feed"
		if own {
			name = "own"
		}
		b.Run(name, func(b *testing.B) {
			r := hopper.NewStatsRecorder(nil)
			t0 := hoppertest.Epoch()
			const backlog = 50_000
			ids := make([]string, backlog+b.N)
			for i := range ids {
				ids[i] = "job-" + strconv.Itoa(i)
			}
			ev := func(kind hopper.EventKind, i int) hopper.Event {
				e := hopper.Event{Kind: kind, JobID: ids[i], Type: "noop", Queue: "q", Attempt: 1, At: t0, RunAt: t0}
				if own && kind == hopper.EventSucceeded {
					e.QueuedAt = t0
				}
				return e
			}
			for i := range backlog {
				r.Observe(ev(hopper.EventQueued, i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r.Observe(ev(hopper.EventQueued, backlog+i))
				r.Observe(ev(hopper.EventStarted, i))
				r.Observe(ev(hopper.EventSucceeded, i))
			}
		})
	}
}

// TestStatsRecorderStartSeenTwice: an attempt's start seen again before
// any end (its end lost, the job started anew) counts the job running
// once, in the newer generation of remembered starts and in the older.
func TestStatsRecorderStartSeenTwice(t *testing.T) {
	t.Parallel()
	t0 := hoppertest.Epoch()
	r := hopper.NewStatsRecorder(hoppertest.NewClock(t0))
	ev := func(kind hopper.EventKind, id string) hopper.Event {
		return hopper.Event{Kind: kind, JobID: id, Type: "mail", Queue: "q", Attempt: 1, At: t0}
	}
	running := func() int64 { t.Helper(); return stats(t, r).Running }
	r.Observe(ev(hopper.EventStarted, "a"))
	r.Observe(ev(hopper.EventStarted, "a"))
	require.Equal(t, int64(1), running(), "a runs once")
	r.Observe(ev(hopper.EventSucceeded, "a"))
	require.Zero(t, running())

	// Started, then enough other starts to move it to the older
	// generation, then started again: still one more running.
	r.Observe(ev(hopper.EventStarted, "b"))
	for i := range hopper.StatsPending / 2 {
		r.Observe(ev(hopper.EventStarted, "x"+strconv.Itoa(i)))
	}
	before := running()
	r.Observe(ev(hopper.EventStarted, "b"))
	require.Equal(t, before, running(), "b was running already")
}
