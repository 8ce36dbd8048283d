package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hopper-go/hopper"
)

// metrics exposes the seeds' work metrics in Prometheus form: counters of
// lifecycle events by job type (fed by this process's events) and, at each
// scrape, the jobs per queue and state in the store.
type metrics struct {
	reg      *prometheus.Registry
	counters map[hopper.EventKind]*prometheus.CounterVec
	retried  *prometheus.CounterVec
	dead     *prometheus.CounterVec
	attempts *prometheus.HistogramVec
}

func newMetrics(c *hopper.Client, log *slog.Logger) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), counters: map[hopper.EventKind]*prometheus.CounterVec{}}
	names := map[hopper.EventKind]string{
		hopper.EventQueued: "queued", hopper.EventStarted: "started", hopper.EventSucceeded: "succeeded",
		hopper.EventFailed: "failed", hopper.EventDeferred: "deferred", hopper.EventExpired: "expired",
		hopper.EventCancelled: "cancelled", hopper.EventStuck: "stuck", hopper.EventRedriven: "redriven",
	}
	for k, n := range names {
		cv := prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hopper", Subsystem: "work", Name: n + "_total",
			Help: "Jobs that were " + n + " (events seen by this process), by type.",
		}, []string{"type"})
		m.reg.MustRegister(cv)
		m.counters[k] = cv
	}
	m.retried = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hopper", Subsystem: "work", Name: "retried_total",
		Help: "Failed attempts that will be retried, by type."}, []string{"type"})
	m.dead = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hopper", Subsystem: "work", Name: "dead_total",
		Help: "Jobs dead-lettered, by type."}, []string{"type"})
	m.attempts = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "hopper", Subsystem: "work", Name: "attempts",
		Help: "Attempts used by jobs that reached a terminal state, by type.", Buckets: []float64{1, 2, 3, 5, 10, 25}}, []string{"type"})
	m.reg.MustRegister(m.retried, m.dead, m.attempts, &queueCollector{c: c, log: log})
	return m
}

func (m *metrics) observe(e hopper.Event) {
	if cv := m.counters[e.Kind]; cv != nil && e.Type != "" {
		cv.WithLabelValues(e.Type).Inc()
	}
	switch {
	case e.Kind == hopper.EventFailed && e.WillRetry:
		m.retried.WithLabelValues(e.Type).Inc()
	case e.Kind == hopper.EventFailed:
		m.dead.WithLabelValues(e.Type).Inc()
		m.attempts.WithLabelValues(e.Type).Observe(float64(e.Attempt))
	case e.Kind == hopper.EventSucceeded:
		m.attempts.WithLabelValues(e.Type).Observe(float64(e.Attempt))
	}
}

func (m *metrics) handler() http.Handler {
	// A metric that cannot be gathered is left out of the scrape (and
	// logged), never answered with the store's error text.
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// The queues' figures come from Client.QueueDemands, each with its queue's
// QueueDepth, whose reads stop at hopper.QueueDepthCap jobs a count: a
// scrape's cost does not grow with the jobs stored. (hopper_queue_jobs, a
// count of every job in every state, read the whole jobs table at each
// scrape; it is gone.)
var (
	queueDepthDesc = prometheus.NewDesc("hopper_queue_depth",
		"Jobs of the queue in the store, by state: due (waiting for a worker now), delayed (scheduled or retrying, due later), running. "+
			"Due and delayed are counted up to "+strconv.Itoa(hopper.QueueDepthCap)+"; "+strconv.Itoa(hopper.QueueDepthCap+1)+" means more.",
		[]string{"queue", "state"}, nil)
	queueOldestDueDesc = prometheus.NewDesc("hopper_queue_oldest_due_age_seconds",
		"Seconds since the queue's longest-waiting due job became due; 0 when no job is due.", []string{"queue"}, nil)
)
var queuePausedDesc = prometheus.NewDesc("hopper_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil)
var (
	queueDesiredWorkersDesc = prometheus.NewDesc("hopper_queue_desired_workers",
		"Worker processes the queue needs (Client.QueueDemand): every process exports the same, from the store, so scale on max(), not sum().", []string{"queue"}, nil)
	queueDesiredSlotsDesc = prometheus.NewDesc("hopper_queue_desired_slots",
		"Worker slots the queue needs (Client.QueueDemand).", []string{"queue"}, nil)
	queueDueDesc = prometheus.NewDesc("hopper_queue_due_jobs", "Jobs due now in the queue, waiting for a worker.", []string{"queue"}, nil)
)
var storeUpDesc = prometheus.NewDesc("hopper_store_up", "1 when the store answered the scrape's read of the queues, 0 when it did not.", nil, nil)

// queueCollector reads queue depths from the store at scrape time.
type queueCollector struct {
	c   *hopper.Client
	log *slog.Logger
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueOldestDueDesc
	ch <- queuePausedDesc
	ch <- queueDesiredWorkersDesc
	ch <- queueDesiredSlotsDesc
	ch <- queueDueDesc
	ch <- storeUpDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// One read gives the queues' depths and their demand.
	ds, err := q.c.QueueDemands(ctx)
	if err != nil {
		q.log.Warn("hopper server: metrics: reading the queues failed", "err", err)
		ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 1)
	for _, d := range ds {
		for _, n := range []struct {
			state string
			jobs  int
		}{{"due", d.Due}, {"delayed", d.Delayed}, {"running", d.Running}} {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n.jobs), d.Queue, n.state)
		}
		ch <- prometheus.MustNewConstMetric(queueOldestDueDesc, prometheus.GaugeValue, d.OldestDueAge.Seconds(), d.Queue)
		paused := 0.0
		if d.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(queuePausedDesc, prometheus.GaugeValue, paused, d.Queue)
		ch <- prometheus.MustNewConstMetric(queueDesiredWorkersDesc, prometheus.GaugeValue, float64(d.DesiredWorkers), d.Queue)
		ch <- prometheus.MustNewConstMetric(queueDesiredSlotsDesc, prometheus.GaugeValue, float64(d.DesiredSlots), d.Queue)
		ch <- prometheus.MustNewConstMetric(queueDueDesc, prometheus.GaugeValue, float64(d.Due), d.Queue)
	}
}
