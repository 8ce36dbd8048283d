package server

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
)

// statsWindow is how many seconds of throughput the server keeps.
const statsWindow = 300

// stats keeps per-second throughput and pickup lag (due → started) of the
// store's events — the whole fleet's — for the dashboard's charts and GET
// /v1/stats.
type stats struct {
	mu      sync.Mutex
	buckets [statsWindow]statBucket
}

type statBucket struct {
	sec       int64
	succeeded int
	failed    int
	started   int
	lagsMs    []float64
}

const maxLagSamples = 512

func (s *stats) observe(e hopper.Event) {
	sec := e.At.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.buckets[sec%statsWindow]
	if b.sec != sec {
		*b = statBucket{sec: sec, lagsMs: b.lagsMs[:0]}
	}
	switch e.Kind {
	case hopper.EventSucceeded:
		b.succeeded++
	case hopper.EventFailed:
		b.failed++
	case hopper.EventStarted:
		b.started++
		if !e.RunAt.IsZero() && len(b.lagsMs) < maxLagSamples {
			b.lagsMs = append(b.lagsMs, float64(max(e.At.Sub(e.RunAt), 0))/float64(time.Millisecond))
		}
	}
}

// StatsJSON is GET /v1/stats: per-second counts for the last Seconds
// seconds, oldest first, and the pickup lag over the last minute.
type StatsJSON struct {
	Seconds   int   `json:"seconds"`
	Succeeded []int `json:"succeeded"`
	Failed    []int `json:"failed"`
	Started   []int `json:"started"`
	// LagP50 and LagP99 are each second's pickup lag percentiles in
	// milliseconds (0 for a second in which nothing started).
	LagP50 []float64 `json:"lag_p50_ms"`
	LagP99 []float64 `json:"lag_p99_ms"`
	LagMs  LagJSON   `json:"pickup_lag_ms"`
	Until  time.Time `json:"until"`
	// Fleet are the seeds' figures of every process, from the store's
	// events since the server started, with the live workers' slots;
	// Process those of this process's own client (hopper.Client.Stats).
	Fleet   *hopper.Stats `json:"fleet,omitempty"`
	Process *hopper.Stats `json:"process,omitempty"`
}

// LagJSON is a latency summary in milliseconds.
type LagJSON struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

func (s *stats) snapshot(now time.Time, seconds int) StatsJSON {
	seconds = max(1, min(seconds, statsWindow))
	out := StatsJSON{Seconds: seconds, Until: now.Truncate(time.Second), Succeeded: make([]int, seconds), Failed: make([]int, seconds), Started: make([]int, seconds),
		LagP50: make([]float64, seconds), LagP99: make([]float64, seconds)}
	var lags []float64
	end := now.Unix()
	s.mu.Lock()
	for i := 0; i < seconds; i++ {
		sec := end - int64(seconds-1-i)
		b := &s.buckets[((sec%statsWindow)+statsWindow)%statsWindow]
		if b.sec != sec {
			continue
		}
		out.Succeeded[i], out.Failed[i], out.Started[i] = b.succeeded, b.failed, b.started
		if len(b.lagsMs) > 0 {
			sec := slices.Clone(b.lagsMs)
			slices.Sort(sec)
			out.LagP50[i], out.LagP99[i] = percentile(sec, 0.5), percentile(sec, 0.99)
		}
		if end-sec < 60 {
			lags = append(lags, b.lagsMs...)
		}
	}
	s.mu.Unlock()
	slices.Sort(lags)
	pct := func(p float64) float64 { return percentile(lags, p) }
	out.LagMs = LagJSON{Samples: len(lags), P50: pct(0.5), P95: pct(0.95), P99: pct(0.99), Max: pct(1)}
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
	out := s.stats.snapshot(time.Now(), 120)
	fleet, process := s.fleet.rec.Stats(), s.c.Stats()
	if ws, err := s.c.WorkerList(r.Context()); err == nil {
		fleet.Workers = fleetWorkers(ws)
	}
	out.Fleet, out.Process = &fleet, &process
	writeJSON(w, http.StatusOK, out)
}
