package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
)

// The dashboard's charts: what the store's events — the whole fleet's —
// say second by second (the last five minutes) and minute by minute (the
// last day), in total and per queue and type, and the queues' depths
// sampled every depthEvery. Everything is kept in memory in rings of fixed
// size: the events from the store's history (read back at the start, see
// readHistory) and from its feed since; the depths since the server
// started.

// Windows a chart may show, and the step of their buckets.
var statsWindows = map[string]struct {
	span, step time.Duration
}{
	"2m":  {2 * time.Minute, time.Second},
	"5m":  {5 * time.Minute, time.Second},
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, time.Minute},
}

const (
	// secondBuckets and minuteBuckets size the two rings.
	secondBuckets = 300
	minuteBuckets = 1440
	// maxLagSamples caps the pickup lags a bucket keeps for its
	// percentiles.
	maxLagSamples = 512
	// depthEvery is how often the queues' depths are sampled.
	depthEvery = 15 * time.Second
	// depthSamples keeps a day of depth samples.
	depthSamples = int(24 * time.Hour / depthEvery)
)

// stats keeps the charts' figures.
type stats struct {
	mu      sync.Mutex
	seconds [secondBuckets]statBucket
	minutes [minuteBuckets]statBucket
	depths  []depthSample // a ring of depthSamples
	depthAt int
}

// statBucket is a step's figures: in total, and per queue and type.
type statBucket struct {
	at    int64 // the step's start, in steps since the epoch
	all   statCounts
	byKey map[statKey]*statCounts
	runs  map[hopper.EventKind]int
}

type statKey struct{ queue, typ string }

type statCounts struct {
	succeeded, failed, started int
	lagsMs                     []float64
}

func (c *statCounts) observe(e hopper.Event) {
	switch e.Kind {
	case hopper.EventSucceeded:
		c.succeeded++
	case hopper.EventFailed:
		c.failed++
	case hopper.EventStarted:
		c.started++
		if !e.RunAt.IsZero() && len(c.lagsMs) < maxLagSamples {
			c.lagsMs = append(c.lagsMs, float64(max(e.At.Sub(e.RunAt), 0))/float64(time.Millisecond))
		}
	}
}

// depthSample is a queue's depth at a sample.
type depthSample struct {
	at                  time.Time
	queue               string
	due, running        int
	oldestDueAgeSeconds float64
}

func (s *stats) observe(e hopper.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bucket(s.seconds[:], e.At.Unix()); b != nil {
		b.add(e)
	}
	if b := s.bucket(s.minutes[:], e.At.Unix()/60); b != nil {
		b.add(e)
	}
}

// bucket returns the ring's bucket of step at, emptied when it held an
// older step; nil when it holds a newer one (at is past the ring).
func (s *stats) bucket(ring []statBucket, at int64) *statBucket {
	b := &ring[((at%int64(len(ring)))+int64(len(ring)))%int64(len(ring))]
	switch {
	case b.at > at:
		return nil
	case b.at < at:
		*b = statBucket{at: at}
	}
	return b
}

func (b *statBucket) add(e hopper.Event) {
	if e.RunID != "" && e.JobID == "" {
		switch e.Kind {
		case hopper.EventRunCompleted, hopper.EventRunFailed, hopper.EventRunCompensated, hopper.EventRunCancelled:
			if b.runs == nil {
				b.runs = map[hopper.EventKind]int{}
			}
			b.runs[e.Kind]++
		}
		return
	}
	b.all.observe(e)
	if e.Type == "" {
		return
	}
	if b.byKey == nil {
		b.byKey = map[statKey]*statCounts{}
	}
	k := statKey{e.Queue, e.Type}
	c := b.byKey[k]
	if c == nil {
		c = &statCounts{}
		b.byKey[k] = c
	}
	c.observe(e)
}

// sampleDepths records the queues' depths.
func (s *stats) sampleDepths(at time.Time, ds []hopper.QueueDepth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		smp := depthSample{at: at, queue: d.Queue, due: d.Due, running: d.Running, oldestDueAgeSeconds: d.OldestDueAge.Seconds()}
		if len(s.depths) < depthSamples {
			s.depths = append(s.depths, smp)
			continue
		}
		s.depths[s.depthAt] = smp
		s.depthAt = (s.depthAt + 1) % depthSamples
	}
}

// sampleDepthsEvery samples the queues' depths every depthEvery until ctx
// ends.
func (s *Server) sampleDepthsEvery(ctx context.Context) {
	t := time.NewTicker(depthEvery)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := s.c.QueueDepths(rctx)
		cancel()
		if err == nil {
			s.stats.sampleDepths(time.Now(), ds)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// StatsJSON is GET /v1/stats: the fleet's figures over a window (?window=
// 2m, the default, 5m, 1h or 24h), oldest bucket first, in buckets of
// StepSeconds (a second up to 5 minutes, a minute beyond); with ?queue=
// and ?type= only those jobs'.
type StatsJSON struct {
	Window      string `json:"window"`
	StepSeconds int    `json:"step_seconds"`
	Buckets     int    `json:"buckets"`
	// Seconds is the window's length.
	Seconds int `json:"seconds"`
	// Succeeded, Failed and Started count each bucket's events.
	Succeeded []int `json:"succeeded"`
	Failed    []int `json:"failed"`
	Started   []int `json:"started"`
	// LagP50 and LagP99 are each bucket's pickup lag percentiles in
	// milliseconds (0 for a bucket in which nothing started).
	LagP50 []float64 `json:"lag_p50_ms"`
	LagP99 []float64 `json:"lag_p99_ms"`
	// RunsCompleted, RunsFailed and RunsCompensated count each bucket's
	// workflow runs that ended so (not filtered by queue or type).
	RunsCompleted   []int `json:"runs_completed"`
	RunsFailed      []int `json:"runs_failed"`
	RunsCompensated []int `json:"runs_compensated"`
	// Depths are the samples of the queues' depths in the window (of the
	// ?queue= when given), oldest first.
	Depths []DepthSampleJSON `json:"depths"`
	// Queues and Types are those seen in the window, for choosing.
	Queues []string `json:"queues"`
	Types  []string `json:"types"`
	// LagMs sums the pickup lag over the last minute.
	LagMs LagJSON   `json:"pickup_lag_ms"`
	Until time.Time `json:"until"`
	// History is how far the server read the store's history back when
	// it started: the charts' figures from before then come from it.
	History HistoryJSON `json:"history"`
	// Fleet are the seeds' figures of every process, from the store's
	// events since the server started, with the live workers' slots;
	// Process those of this process's own client (hopper.Client.Stats).
	Fleet   *hopper.Stats `json:"fleet,omitempty"`
	Process *hopper.Stats `json:"process,omitempty"`
}

// DepthSampleJSON is a queue's depth at a sample.
type DepthSampleJSON struct {
	At                  time.Time `json:"at"`
	Queue               string    `json:"queue"`
	Due                 int       `json:"due"`
	Running             int       `json:"running"`
	OldestDueAgeSeconds float64   `json:"oldest_due_age_seconds"`
}

// LagJSON is a latency summary in milliseconds.
type LagJSON struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// snapshot returns the window's figures at now, of queue and typ (either
// empty: all).
func (s *stats) snapshot(now time.Time, window, queue, typ string) StatsJSON {
	w, ok := statsWindows[window]
	if !ok {
		window, w = "2m", statsWindows["2m"]
	}
	n := int(w.span / w.step)
	out := StatsJSON{Window: window, StepSeconds: int(w.step / time.Second), Buckets: n, Seconds: int(w.span / time.Second),
		Until: now.Truncate(w.step), Succeeded: make([]int, n), Failed: make([]int, n), Started: make([]int, n),
		LagP50: make([]float64, n), LagP99: make([]float64, n), RunsCompleted: make([]int, n), RunsFailed: make([]int, n),
		RunsCompensated: make([]int, n), Depths: []DepthSampleJSON{}, Queues: []string{}, Types: []string{}}
	ring := s.seconds[:]
	step := int64(w.step / time.Second)
	if w.step == time.Minute {
		ring = s.minutes[:]
	}
	end := now.Unix() / step
	queues, types := map[string]bool{}, map[string]bool{}
	var lastMinute []float64
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range n {
		at := end - int64(n-1-i)
		b := &ring[((at%int64(len(ring)))+int64(len(ring)))%int64(len(ring))]
		if b.at != at {
			continue
		}
		for k := range b.byKey {
			queues[k.queue], types[k.typ] = true, true
		}
		c := b.pick(queue, typ)
		out.Succeeded[i], out.Failed[i], out.Started[i] = c.succeeded, c.failed, c.started
		if len(c.lagsMs) > 0 {
			sorted := slices.Clone(c.lagsMs)
			slices.Sort(sorted)
			out.LagP50[i], out.LagP99[i] = percentile(sorted, 0.5), percentile(sorted, 0.99)
		}
		out.RunsCompleted[i], out.RunsFailed[i], out.RunsCompensated[i] = b.runs[hopper.EventRunCompleted], b.runs[hopper.EventRunFailed], b.runs[hopper.EventRunCompensated]
	}
	// The pickup lag of the last minute, from the seconds' ring.
	for i := range 60 {
		at := now.Unix() - int64(i)
		b := &s.seconds[((at%secondBuckets)+secondBuckets)%secondBuckets]
		if b.at == at {
			lastMinute = append(lastMinute, b.pick(queue, typ).lagsMs...)
		}
	}
	slices.Sort(lastMinute)
	pct := func(p float64) float64 { return percentile(lastMinute, p) }
	out.LagMs = LagJSON{Samples: len(lastMinute), P50: pct(0.5), P95: pct(0.95), P99: pct(0.99), Max: pct(1)}
	from := now.Add(-w.span)
	for _, d := range s.depths {
		queues[d.queue] = true
		if d.at.After(from) && (queue == "" || d.queue == queue) {
			out.Depths = append(out.Depths, DepthSampleJSON{At: d.at, Queue: d.queue, Due: d.due, Running: d.running, OldestDueAgeSeconds: d.oldestDueAgeSeconds})
		}
	}
	slices.SortFunc(out.Depths, func(a, b DepthSampleJSON) int { return a.At.Compare(b.At) })
	for q := range queues {
		out.Queues = append(out.Queues, q)
	}
	for t := range types {
		out.Types = append(out.Types, t)
	}
	slices.Sort(out.Queues)
	slices.Sort(out.Types)
	return out
}

// pick returns the bucket's counts of queue and typ (either empty: all).
func (b *statBucket) pick(queue, typ string) statCounts {
	if queue == "" && typ == "" {
		return b.all
	}
	var out statCounts
	for k, c := range b.byKey {
		if (queue == "" || k.queue == queue) && (typ == "" || k.typ == typ) {
			out.succeeded += c.succeeded
			out.failed += c.failed
			out.started += c.started
			out.lagsMs = append(out.lagsMs, c.lagsMs...)
		}
	}
	return out
}

// percentile returns the p-th percentile of sorted values (0 for none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	window := q.Get("window")
	if _, ok := statsWindows[window]; !ok && window != "" {
		var names []string
		for k := range statsWindows {
			names = append(names, k)
		}
		slices.Sort(names)
		s.fail(w, r, badRequest("window: %q (use %s)", window, strings.Join(names, ", ")))
		return
	}
	out := s.stats.snapshot(time.Now(), window, q.Get("queue"), q.Get("type"))
	fleet, process := s.fleet.rec.Stats(), s.c.Stats()
	if ws, err := s.c.WorkerList(r.Context()); err == nil {
		fleet.Workers = fleetWorkers(ws)
	}
	out.Fleet, out.Process = &fleet, &process
	out.History = s.fleet.historyStatus()
	writeJSON(w, http.StatusOK, out)
}
