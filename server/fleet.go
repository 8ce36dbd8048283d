package server

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// fleet follows the store's events — every process's — into the
// server's figures: the fleet's StatsRecorder (GET /v1/stats "fleet",
// the hopper_job_*/hopper_workflow_* metrics) and the dashboard's
// per-second charts.
type fleet struct {
	rec    *hopper.StatsRecorder
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	// at is how far the follower read (the cursor of its last event);
	// seen, when set, is closed at the next event (made on demand, for
	// whoever waits for the follower: the tests).
	at   hoppertype.ChangeCursor
	seen chan struct{}
	// ready is closed once the follower read where the store's events
	// stood when it began.
	ready chan struct{}
	// history is how far the read of the store's history got; historyDone
	// is closed when it ends.
	history     HistoryJSON
	historyDone chan struct{}
}

// HistoryJSON is how far the server read the store's history back when it
// started (GET /v1/stats "history"): the charts' figures from before the
// server started come from that read.
type HistoryJSON struct {
	// Done reports whether the read ended: it reached a day back or the
	// feed's oldest change, or stopped at Options.HistoryLimit.
	Done bool `json:"done"`
	// Capped reports that the read stopped at Options.HistoryLimit
	// changes: the charts hold nothing from before From.
	Capped bool `json:"capped"`
	// From is the oldest moment the charts cover: a day back once the
	// read is done and not capped, where the read got to otherwise.
	From time.Time `json:"from"`
	// Changes counts the changes read.
	Changes int `json:"changes"`
}

// historyStatus returns how far the read of the store's history got.
func (f *fleet) historyStatus() HistoryJSON {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.history
}

// next returns a channel closed when the follower folds its next event.
func (f *fleet) next() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = make(chan struct{})
	}
	return f.seen
}

// fleetRetry is how long the follower waits before reading again after
// the store failed it.
const fleetRetry = 2 * time.Second

// startFleet follows the store's events from its tail (the events to
// come) until Close.
func (s *Server) startFleet() {
	ctx, cancel := context.WithCancel(context.Background())
	s.fleet = &fleet{rec: hopper.NewStatsRecorder(nil), cancel: cancel, ready: make(chan struct{}), historyDone: make(chan struct{}),
		history: HistoryJSON{From: time.Now()}}
	s.fleet.done.Add(2)
	go func() {
		defer s.fleet.done.Done()
		s.sampleDepthsEvery(ctx)
	}()
	go func() {
		defer s.fleet.done.Done()
		started := false
		var cur hoppertype.ChangeCursor
		for ctx.Err() == nil {
			if !started {
				tail, err := s.c.ChangeTail(ctx)
				if err == nil {
					cur, started = tail, true
					close(s.fleet.ready)
					s.fleet.done.Add(1)
					go func() {
						defer s.fleet.done.Done()
						s.readHistory(ctx, tail)
					}()
				}
			}
			if started {
				err := s.c.TailEvents(ctx, cur, nil, func(e hopper.Event) error {
					s.fleet.rec.Observe(e)
					s.stats.observe(e)
					cur = e.Cursor
					s.fleet.mu.Lock()
					s.fleet.at = cur
					if s.fleet.seen != nil {
						close(s.fleet.seen)
						s.fleet.seen = nil
					}
					s.fleet.mu.Unlock()
					return nil
				})
				if err == nil {
					return // ctx ended
				}
				s.opts.Logger.Warn("hopper server: following the store's events", "err", err)
			}
			t := time.NewTimer(fleetRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

const (
	// historySpan is how far back the charts reach: their longest window.
	historySpan = 24 * time.Hour
	// historySlack is how far past historySpan the read of the history
	// goes on before it stops: a change's place in the feed is its
	// transaction's, its time its statement's, so times are only roughly
	// in order.
	historySlack = time.Minute
	// historyPage is the changes read at a time.
	historyPage = 500
	// defaultHistoryLimit is Options.HistoryLimit's default.
	defaultHistoryLimit = 200_000
)

// readHistory fills the charts with the store's events of the last day up
// to tail (inclusive; the follower reads on after it), reading the feed
// backwards, newest first, so that a read cut short by
// Options.HistoryLimit leaves the charts whole from where it stopped to
// now. Only the charts: the fleet's StatsRecorder (the Prometheus
// counters) counts from the server's start. The history is what retention
// kept: a job's changes go with it.
func (s *Server) readHistory(ctx context.Context, tail hoppertype.ChangeCursor) {
	f := s.fleet
	defer close(f.historyDone)
	since := time.Now().Add(-historySpan)
	limit := max(s.opts.HistoryLimit, 0)
	before := hoppertype.ChangeCursor{Tx: tail.Tx, Position: tail.Position + 1}
	read := 0
	finish := func(capped bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.history.Done, f.history.Capped, f.history.Changes = true, capped, read
		if !capped {
			f.history.From = since
		}
	}
	for read < limit {
		chs, err := s.c.ChangeListBefore(ctx, before, min(historyPage, limit-read))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.opts.Logger.Warn("hopper server: reading the store's history", "err", err)
			t := time.NewTimer(fleetRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		if len(chs) == 0 {
			finish(false)
			return
		}
		oldest := time.Time{}
		for _, ch := range chs {
			read++
			before = hoppertype.CursorOf(ch)
			if ch.At.Before(since.Add(-historySlack)) {
				finish(false)
				return
			}
			if e, ok := hopper.EventOf(ch); ok && !ch.At.Before(since) {
				s.stats.observe(e)
			}
			if oldest.IsZero() || ch.At.Before(oldest) {
				oldest = ch.At
			}
		}
		if oldest.Before(since) {
			oldest = since
		}
		f.mu.Lock()
		f.history.Changes = read
		if oldest.Before(f.history.From) {
			f.history.From = oldest
		}
		f.mu.Unlock()
	}
	finish(true)
}

func (f *fleet) stop() {
	f.cancel()
	f.done.Wait()
}

// cursor is how far the follower read.
func (f *fleet) cursor() hoppertype.ChangeCursor {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

var (
	fleetLabels     = []string{"queue", "type"}
	jobsEnqueued    = prometheus.NewDesc("hopper_jobs_enqueued_total", "Jobs queued, in the whole fleet (from the store's events since this server started).", fleetLabels, nil)
	attemptsStarted = prometheus.NewDesc("hopper_job_attempts_started_total", "Attempts started, in the whole fleet.", fleetLabels, nil)
	attemptsEnded   = prometheus.NewDesc("hopper_job_attempts_finished_total",
		"Attempts that ended, in the whole fleet, by outcome: succeeded, retried (failed, will run again), dead (failed, dead-lettered), deferred (snoozed: the seed's rescheduled).",
		append(fleetLabels, "outcome"), nil)
	jobsExpired   = prometheus.NewDesc("hopper_jobs_expired_total", "Jobs that passed their deadline, in the whole fleet.", fleetLabels, nil)
	jobsCancelled = prometheus.NewDesc("hopper_jobs_cancelled_total", "Jobs cancelled, in the whole fleet.", fleetLabels, nil)
	jobsStuck     = prometheus.NewDesc("hopper_jobs_stuck_total", "Jobs that became stuck, in the whole fleet.", fleetLabels, nil)
	jobsRedriven  = prometheus.NewDesc("hopper_jobs_redriven_total", "Jobs redriven, in the whole fleet.", fleetLabels, nil)
	jobsRunning   = prometheus.NewDesc("hopper_jobs_running", "Attempts running in the whole fleet (those this server saw start).", fleetLabels, nil)
	jobsLast      = prometheus.NewDesc("hopper_job_last_event_timestamp_seconds", "When the fleet last queued, started, succeeded or failed a job of the type.",
		append(fleetLabels, "event"), nil)
	jobWait     = prometheus.NewDesc("hopper_job_queue_wait_seconds", "Pickup lag: from when an attempt was due to its start.", fleetLabels, nil)
	jobRun      = prometheus.NewDesc("hopper_job_run_seconds", "Attempts' run time, by outcome (success, error).", append(fleetLabels, "outcome"), nil)
	jobTotal    = prometheus.NewDesc("hopper_job_end_to_end_seconds", "From queued to the end, of jobs that succeeded or were dead-lettered.", fleetLabels, nil)
	jobAttempts = prometheus.NewDesc("hopper_job_attempts_used", "Attempts used by jobs that succeeded or were dead-lettered.", fleetLabels, nil)
	runsTotal   = prometheus.NewDesc("hopper_workflow_runs_total",
		"Workflow run events in the whole fleet: started, completed, failed, retried, compensated, cancelled, stuck.", []string{"workflow", "event"}, nil)
	runsLive      = prometheus.NewDesc("hopper_workflow_runs", "Workflow runs queued or running (running, waiting or compensating) now, of those this server saw start.", []string{"workflow", "status"}, nil)
	endedMinute   = prometheus.NewDesc("hopper_jobs_ended_last_minute", "Jobs that ended in the last 60 s, in the whole fleet (the seed's throughput per minute).", nil, nil)
	uptimeDesc    = prometheus.NewDesc("hopper_uptime_seconds", "Seconds since this server began following the fleet.", nil, nil)
	workersDesc   = prometheus.NewDesc("hopper_workers", "Worker processes sharing the store, by status (idle, busy, stopping, dead).", []string{"status"}, nil)
	slotsDesc     = prometheus.NewDesc("hopper_worker_slots", "Worker slots of the live worker processes, by state (busy, idle).", []string{"state"}, nil)
	workloadDesc  = prometheus.NewDesc("hopper_workload_ratio", "Busy ÷ total worker slots of the live worker processes (the seed's workload).", nil, nil)
	fleetDescList = []*prometheus.Desc{jobsEnqueued, attemptsStarted, attemptsEnded, jobsExpired, jobsCancelled, jobsStuck, jobsRedriven,
		jobsRunning, jobsLast, jobWait, jobRun, jobTotal, jobAttempts, runsTotal, runsLive, endedMinute, uptimeDesc, workersDesc, slotsDesc, workloadDesc}
)

// fleetCollector exports the fleet's figures at scrape time.
type fleetCollector struct{ s *Server }

func (f *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range fleetDescList {
		ch <- d
	}
}

func (f *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	st := f.s.fleet.rec.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	summary := func(d *prometheus.Desc, s hopper.Summary, labels ...string) {
		ch <- prometheus.MustNewConstSummary(d, uint64(s.Count), s.Sum, map[float64]float64{0.5: s.P50, 0.95: s.P95, 0.99: s.P99}, labels...)
	}
	for _, t := range st.Types {
		q, ty := t.Queue, t.Type
		counter(jobsEnqueued, t.Queued, q, ty)
		counter(attemptsStarted, t.Started, q, ty)
		counter(attemptsEnded, t.Succeeded, q, ty, "succeeded")
		counter(attemptsEnded, t.Retried, q, ty, "retried")
		counter(attemptsEnded, t.Dead, q, ty, "dead")
		counter(attemptsEnded, t.Deferred, q, ty, "deferred")
		counter(jobsExpired, t.Expired, q, ty)
		counter(jobsCancelled, t.Cancelled, q, ty)
		counter(jobsStuck, t.Stuck, q, ty)
		counter(jobsRedriven, t.Redriven, q, ty)
		ch <- prometheus.MustNewConstMetric(jobsRunning, prometheus.GaugeValue, float64(t.Running), q, ty)
		for ev, at := range map[string]time.Time{"queued": t.LastQueuedAt, "started": t.LastStartedAt, "succeeded": t.LastSucceededAt, "failed": t.LastFailedAt} {
			if !at.IsZero() {
				ch <- prometheus.MustNewConstMetric(jobsLast, prometheus.GaugeValue, float64(at.UnixNano())/1e9, q, ty, ev)
			}
		}
		summary(jobWait, t.Wait, q, ty)
		summary(jobRun, t.Success, q, ty, "success")
		summary(jobRun, t.Error, q, ty, "error")
		summary(jobTotal, t.Total, q, ty)
		summary(jobAttempts, t.Attempts, q, ty)
	}
	for _, w := range st.Workflows {
		for ev, n := range map[string]int64{"started": w.Started, "completed": w.Completed, "failed": w.Failed, "retried": w.Retried,
			"compensated": w.Compensated, "cancelled": w.Cancelled, "stuck": w.Stuck} {
			counter(runsTotal, n, w.Workflow, ev)
		}
		ch <- prometheus.MustNewConstMetric(runsLive, prometheus.GaugeValue, float64(w.Queued), w.Workflow, "queued")
		ch <- prometheus.MustNewConstMetric(runsLive, prometheus.GaugeValue, float64(w.Running), w.Workflow, "running")
	}
	ch <- prometheus.MustNewConstMetric(endedMinute, prometheus.GaugeValue, st.Throughput.PerMinute)
	ch <- prometheus.MustNewConstMetric(uptimeDesc, prometheus.GaugeValue, st.Uptime.Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := f.s.c.WorkerList(ctx)
	if err != nil {
		f.s.opts.Logger.Warn("hopper server: metrics: reading the workers failed", "err", err)
		return
	}
	w := fleetWorkers(ws)
	byStatus := map[string]int{hopper.WorkerIdle: 0, hopper.WorkerBusy: 0, hopper.WorkerStopping: 0, hopper.WorkerDead: 0}
	for _, wi := range ws {
		byStatus[wi.Status]++
	}
	for status, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(w.Busy), "busy")
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(w.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(workloadDesc, prometheus.GaugeValue, w.Workload)
}

// fleetWorkers sums the slots of the live worker processes.
func fleetWorkers(ws []*hopper.WorkerInfo) hopper.WorkerStats {
	var out hopper.WorkerStats
	for _, w := range ws {
		if w.Status == hopper.WorkerDead || w.Slots <= 0 {
			continue
		}
		out.Processes++
		out.Total += w.Slots
		out.Busy += min(w.Active, w.Slots)
	}
	out.Idle = out.Total - out.Busy
	if out.Total > 0 {
		out.Workload = float64(out.Busy) / float64(out.Total)
	}
	return out
}
