package hopper

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper/internal/engine"
)

// This file keeps the metric set of the seeds: per job type, counters of
// lifecycle events, the time of the last ones, the jobs running, and
// summaries of wait, run and end-to-end times; per workflow, runs by
// outcome; and the throughput of the last minute. A StatsRecorder folds
// events into it: Client.Stats has one fed by the client's own events, and
// one fed by Client.TailEvents sees the fleet.

// statsSamples is how many of its latest samples a summary keeps for its
// quantiles.
const statsSamples = 1024

// statsPending bounds the jobs a recorder remembers between events
// (queued and not yet ended, started and not yet ended) and the live runs
// it follows: past it, the oldest are forgotten (a job whose end another
// process saw, or that ends after a long wait), so a recorder's memory
// stays bounded whatever the backlog. A forgotten job's end-to-end or run
// time is not sampled; a forgotten attempt no longer counts as running.
const statsPending = 1 << 16

// Summary sums up a series of samples (seconds, or attempts): their count,
// sum, least, greatest and mean since the recorder began, and the 50th,
// 95th and 99th percentiles of the latest 1,024.
type Summary struct {
	Count int64   `json:"count"`
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// TypeStats are one job type's figures in one queue. The counters count
// events since the recorder began: Queued, Started (attempts), Succeeded,
// Failed (attempts that failed: Retried will run again, Dead were
// dead-lettered), Deferred (snoozed or deferred without using an attempt;
// the seed's work.rescheduled), Expired, Cancelled, Stuck and Redriven.
// Running is the attempts started and not yet ended that the recorder saw
// start, PeakRunning its high-water mark.
type TypeStats struct {
	Type  string `json:"type"`
	Queue string `json:"queue"`

	Queued    int64 `json:"queued"`
	Started   int64 `json:"started"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Retried   int64 `json:"retried"`
	Dead      int64 `json:"dead"`
	Deferred  int64 `json:"deferred"`
	Expired   int64 `json:"expired"`
	Cancelled int64 `json:"cancelled"`
	Stuck     int64 `json:"stuck"`
	Redriven  int64 `json:"redriven"`

	Running     int64 `json:"running"`
	PeakRunning int64 `json:"peak_running"`

	LastQueuedAt    time.Time `json:"last_queued_at,omitzero"`
	LastStartedAt   time.Time `json:"last_started_at,omitzero"`
	LastSucceededAt time.Time `json:"last_succeeded_at,omitzero"`
	LastFailedAt    time.Time `json:"last_failed_at,omitzero"`

	// Wait is each start's pickup lag in seconds: from when the attempt
	// was due to when it started (the seed's wait_time).
	Wait Summary `json:"wait_seconds"`
	// Success and Error are the run times in seconds of attempts that
	// succeeded and that failed.
	Success Summary `json:"success_seconds"`
	Error   Summary `json:"error_seconds"`
	// Total is the end-to-end time in seconds of jobs that succeeded or
	// were dead-lettered, from queued (or last redriven) to their end:
	// jobs whose queued or redriven event the recorder saw, or whose end
	// event carries the time they were queued (Event.QueuedAt: a client's
	// own events).
	Total Summary `json:"total_seconds"`
	// Attempts is the attempts used by jobs that succeeded or were
	// dead-lettered.
	Attempts Summary `json:"attempts"`
}

// WorkflowStats are one workflow's runs: counters of run events since the
// recorder began, and the runs it saw start that are queued or running
// (running, waiting or compensating) now.
type WorkflowStats struct {
	Workflow    string `json:"workflow"`
	Started     int64  `json:"started"`
	Completed   int64  `json:"completed"`
	Failed      int64  `json:"failed"`
	Retried     int64  `json:"retried"`
	Compensated int64  `json:"compensated"`
	Cancelled   int64  `json:"cancelled"`
	Stuck       int64  `json:"stuck"`
	Queued      int64  `json:"queued"`
	Running     int64  `json:"running"`
}

// Throughput is the jobs that ended (succeeded, dead, expired or
// cancelled) in the last 60 seconds, and that rate for an hour (the seed's
// perMinute and perHour over a 60 s rolling window).
type Throughput struct {
	PerMinute float64 `json:"per_minute"`
	PerHour   float64 `json:"per_hour"`
}

// WorkerStats are worker slots: Total the cap on attempts at once, Busy
// those running one, Idle the rest, Workload Busy ÷ Total (0 without
// slots). Processes counts the worker processes they belong to.
type WorkerStats struct {
	Processes int     `json:"processes"`
	Total     int     `json:"total"`
	Busy      int     `json:"busy"`
	Idle      int     `json:"idle"`
	Workload  float64 `json:"workload"`
}

// Stats are the figures of a StatsRecorder (Client.Stats: this client's).
type Stats struct {
	// Since is when the recorder began; At when these figures were taken
	// (Uptime is their difference).
	Since      time.Time       `json:"since"`
	At         time.Time       `json:"at"`
	Uptime     time.Duration   `json:"uptime_ns"`
	Types      []TypeStats     `json:"types"`
	Workflows  []WorkflowStats `json:"workflows"`
	Throughput Throughput      `json:"throughput"`
	// Workers are this client's slots (Client.Stats); zero from a
	// recorder of events, which knows no workers.
	Workers WorkerStats `json:"workers"`
}

// Type returns the figures of a job type in a queue, and false when the
// recorder saw none of its events.
func (s *Stats) Type(queue, typ string) (TypeStats, bool) {
	for _, t := range s.Types {
		if t.Queue == queue && t.Type == typ {
			return t, true
		}
	}
	return TypeStats{}, false
}

// Workflow returns a workflow's figures, and false when the recorder saw
// none of its runs' events.
func (s *Stats) Workflow(name string) (WorkflowStats, bool) {
	for _, w := range s.Workflows {
		if w.Workflow == name {
			return w, true
		}
	}
	return WorkflowStats{}, false
}

// StatsRecorder folds lifecycle events into Stats. Feed it the events of
// one source: a client's own (Client.Subscribe; Client.Stats has one), or
// the store's (Client.TailEvents: the fleet's). It is safe for concurrent
// use and its memory is bounded.
type StatsRecorder struct {
	mu      sync.Mutex
	since   time.Time
	now     func() time.Time
	types   map[statsKey]*typeAcc
	flows   map[string]*WorkflowStats
	runs    map[string]RunStatus // live runs seen, by id
	queued  pending              // jobs seen queued and not ended
	started pending              // attempts seen started and not ended
	// redriven holds the jobs seen redriven and not ended: their
	// end-to-end time runs from the redrive.
	redriven pending
	// endsCarryQueue is set once an ending event carried its job's queue
	// time (Event.QueuedAt): the recorder's source says when each job was
	// queued at its end, so queued jobs are no longer remembered.
	endsCarryQueue bool
	ended          [60]endedSecond
	// last is the type of the last event, by its key lastKey.
	last    *typeAcc
	lastKey statsKey
}

// pending remembers jobs by id, in two generations: when the newer one is
// full, the older one is forgotten and the newer takes its place.
type pending struct{ cur, old map[string]pendingJob }

type pendingJob struct {
	at  time.Time
	key statsKey
}

// put remembers a job and returns the generation it forgot to make room
// (nil when none), and whether it remembered the job already.
func (p *pending) put(id string, j pendingJob) (forgot map[string]pendingJob, had bool) {
	if len(p.old) > 0 {
		if _, ok := p.old[id]; ok {
			delete(p.old, id)
			had = true
		}
	}
	if p.cur == nil {
		p.cur = map[string]pendingJob{}
	}
	if _, ok := p.cur[id]; ok {
		had = true
	} else if len(p.cur) >= statsPending/2 {
		forgot, p.old, p.cur = p.old, p.cur, map[string]pendingJob{}
	}
	p.cur[id] = j
	return forgot, had
}

// take forgets a job and returns what was remembered of it. A job is in
// one generation at most (put moves it out of the older one), so a hit in
// the newer one leaves the older alone: a look-up that misses costs a walk
// over the map's probe sequence, the dearest of its operations.
func (p *pending) take(id string) (pendingJob, bool) {
	if j, ok := p.cur[id]; ok {
		delete(p.cur, id)
		return j, true
	}
	if j, ok := p.old[id]; ok {
		delete(p.old, id)
		return j, true
	}
	return pendingJob{}, false
}

type statsKey struct{ queue, typ string }

type endedSecond struct {
	sec int64
	n   int64
}

type typeAcc struct {
	TypeStats
	wait, success, failure, total, attempts summaryAcc
}

// NewStatsRecorder returns an empty recorder that began now, by clock
// (the wall clock when nil).
func NewStatsRecorder(clock Clock) *StatsRecorder {
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	return &StatsRecorder{since: now(), now: now, types: map[statsKey]*typeAcc{}, flows: map[string]*WorkflowStats{},
		runs: map[string]RunStatus{}}
}

// Observe folds one event in.
func (r *StatsRecorder) Observe(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.RunID != "" && e.JobID == "" {
		r.observeRun(e)
		return
	}
	if e.JobID == "" || e.Type == "" {
		return // group-done, scaled: no job's figures
	}
	k := statsKey{e.Queue, e.Type}
	t := r.last
	if t == nil || r.lastKey != k {
		// Most events are of the type before: its strings are the same,
		// compared without a hash.
		t = r.types[k]
		if t == nil {
			t = &typeAcc{TypeStats: TypeStats{Type: e.Type, Queue: e.Queue}}
			r.types[k] = t
		}
		r.last, r.lastKey = t, k
	}
	switch e.Kind {
	case EventQueued:
		t.Queued++
		t.LastQueuedAt = later(t.LastQueuedAt, e.At)
		if !r.endsCarryQueue {
			r.queued.put(e.JobID, pendingJob{at: e.At, key: k})
		}
	case EventRedriven:
		t.Redriven++
		r.redriven.put(e.JobID, pendingJob{at: e.At, key: k})
	case EventStarted:
		t.Started++
		t.LastStartedAt = later(t.LastStartedAt, e.At)
		if !e.RunAt.IsZero() {
			t.wait.add(max(e.At.Sub(e.RunAt), 0).Seconds())
		}
		forgot, again := r.started.put(e.JobID, pendingJob{at: e.At, key: k}) // again: its last attempt's end was not seen
		for _, j := range forgot {
			if ft := r.types[j.key]; ft != nil {
				ft.Running = max(ft.Running-1, 0)
			}
		}
		if !again {
			t.Running++
			t.PeakRunning = max(t.PeakRunning, t.Running)
		}
	case EventSucceeded:
		t.Succeeded++
		t.LastSucceededAt = later(t.LastSucceededAt, e.At)
		r.attemptEnded(t, e, &t.success)
		r.jobEnded(t, e, true)
	case EventFailed:
		t.Failed++
		t.LastFailedAt = later(t.LastFailedAt, e.At)
		r.attemptEnded(t, e, &t.failure)
		if e.WillRetry {
			t.Retried++
		} else {
			t.Dead++
			r.jobEnded(t, e, true)
		}
	case EventDeferred:
		t.Deferred++
		r.attemptEnded(t, e, nil)
	case EventExpired:
		t.Expired++
		r.attemptEnded(t, e, nil)
		r.jobEnded(t, e, false)
	case EventCancelled:
		t.Cancelled++
		r.attemptEnded(t, e, nil)
		r.jobEnded(t, e, false)
	case EventStuck:
		t.Stuck++
		r.attemptEnded(t, e, nil)
	}
}

// attemptEnded ends the job's running attempt, sampling its run time in
// into (when not nil).
func (r *StatsRecorder) attemptEnded(t *typeAcc, e Event, into *summaryAcc) {
	start, ok := r.started.take(e.JobID)
	if !ok {
		return
	}
	t.Running = max(t.Running-1, 0)
	if into != nil {
		into.add(max(e.At.Sub(start.at), 0).Seconds())
	}
}

// jobEnded forgets a job that ended, sampling its end-to-end time and
// attempts when it succeeded or was dead-lettered (sample), and counts it
// in the throughput.
func (r *StatsRecorder) jobEnded(t *typeAcc, e Event, sample bool) {
	if !e.QueuedAt.IsZero() && !r.endsCarryQueue {
		// Every end of this source says when its job was queued: the
		// queued jobs remembered so far are not needed.
		r.endsCarryQueue = true
		r.queued = pending{}
	}
	since, ok := r.redriven.take(e.JobID)
	if q, queued := r.queued.take(e.JobID); queued && !ok {
		since, ok = q, true
	}
	if !ok && !e.QueuedAt.IsZero() {
		since, ok = pendingJob{at: e.QueuedAt}, true
	}
	if ok && sample {
		t.total.add(max(e.At.Sub(since.at), 0).Seconds())
	}
	if sample && e.Attempt > 0 {
		t.attempts.add(float64(e.Attempt))
	}
	sec := e.At.Unix()
	b := &r.ended[((sec%60)+60)%60]
	if b.sec != sec {
		*b = endedSecond{sec: sec}
	}
	b.n++
}

func (r *StatsRecorder) observeRun(e Event) {
	name := strings.TrimPrefix(e.Type, engine.WorkflowTypePrefix)
	w := r.flows[name]
	if w == nil {
		w = &WorkflowStats{Workflow: name}
		r.flows[name] = w
	}
	switch e.Kind {
	case EventRunStarted:
		w.Started++
	case EventRunCompleted:
		w.Completed++
	case EventRunFailed:
		w.Failed++
	case EventRunRetrying:
		w.Retried++
	case EventRunCompensated:
		w.Compensated++
	case EventRunCancelled:
		w.Cancelled++
	case EventRunStuck:
		w.Stuck++
	}
	prev, seen := r.runs[e.RunID]
	if seen {
		w.add(prev, -1)
	}
	switch {
	case e.Status.Terminal():
		delete(r.runs, e.RunID)
	case seen || len(r.runs) < statsPending:
		r.runs[e.RunID] = e.Status
		w.add(e.Status, 1)
	}
}

// add counts a run of status in Queued or Running.
func (w *WorkflowStats) add(status RunStatus, n int64) {
	switch status {
	case RunPending:
		w.Queued = max(w.Queued+n, 0)
	case RunRunning, RunWaiting, RunCompensating:
		w.Running = max(w.Running+n, 0)
	}
}

// Stats returns the recorder's figures now: job types by queue then type,
// workflows by name.
func (r *StatsRecorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	out := Stats{Since: r.since, At: now, Uptime: now.Sub(r.since), Types: make([]TypeStats, 0, len(r.types)),
		Workflows: make([]WorkflowStats, 0, len(r.flows))}
	for _, t := range r.types {
		ts := t.TypeStats
		ts.Wait, ts.Success, ts.Error, ts.Total, ts.Attempts = t.wait.summary(), t.success.summary(), t.failure.summary(),
			t.total.summary(), t.attempts.summary()
		out.Types = append(out.Types, ts)
	}
	slices.SortFunc(out.Types, func(a, b TypeStats) int { return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Type, b.Type)) })
	for _, w := range r.flows {
		out.Workflows = append(out.Workflows, *w)
	}
	slices.SortFunc(out.Workflows, func(a, b WorkflowStats) int { return cmp.Compare(a.Workflow, b.Workflow) })
	var n int64
	sec := now.Unix()
	for _, b := range r.ended {
		if b.sec > sec-60 && b.sec <= sec {
			n += b.n
		}
	}
	out.Throughput = Throughput{PerMinute: float64(n), PerHour: float64(n) * 60}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// summaryAcc accumulates a Summary: totals since it began, and a ring of
// the latest samples for the percentiles.
type summaryAcc struct {
	count         int64
	sum, min, max float64
	ring          []float64
	next          int
}

func (s *summaryAcc) add(v float64) {
	if s.count == 0 || v < s.min {
		s.min = v
	}
	if s.count == 0 || v > s.max {
		s.max = v
	}
	s.count++
	s.sum += v
	if len(s.ring) < statsSamples {
		s.ring = append(s.ring, v)
		return
	}
	s.ring[s.next] = v
	s.next = (s.next + 1) % statsSamples
}

func (s *summaryAcc) summary() Summary {
	if s.count == 0 {
		return Summary{}
	}
	sorted := slices.Clone(s.ring)
	slices.Sort(sorted)
	pct := func(p float64) float64 {
		i := int(p*float64(len(sorted))+0.999999) - 1
		return sorted[max(0, min(i, len(sorted)-1))]
	}
	return Summary{Count: s.count, Sum: s.sum, Min: s.min, Max: s.max, Mean: s.sum / float64(s.count),
		P50: pct(0.5), P95: pct(0.95), P99: pct(0.99)}
}

// Stats returns this client's figures: those of the events it raised
// since it was made (the jobs it enqueued and ran: see Event), and its
// worker slots now. For the fleet's, fold Client.TailEvents into a
// StatsRecorder (the server's /v1/stats and /metrics do).
func (c *Client) Stats() Stats {
	st := c.stats.Stats()
	if r, ok := c.eng.Report(); ok && r.Slots > 0 {
		st.Workers = WorkerStats{Processes: 1, Total: r.Slots, Busy: min(r.Active, r.Slots), Idle: max(r.Slots-r.Active, 0)}
		st.Workers.Workload = float64(st.Workers.Busy) / float64(r.Slots)
	}
	return st
}
