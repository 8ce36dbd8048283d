//go:build unix

package hopperotel_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hopperotel"
)

// discard is a span exporter that drops what it is given: the benchmark
// measures making and ending spans, not shipping them.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkObservabilityOverhead works no-op jobs on SQLite without and
// with observability: a fleet StatsRecorder following the store's events
// as a server does; the metadata hopperotel stores in each job, alone;
// OpenTelemetry metrics through hopperotel (SDK); traces (SDK, batched, one
// trace in ten or every one sampled); all of it. Each iteration enqueues
// and works 5,000 jobs with 50 workers; jobs/s and CPU per job are
// reported (docs/BENCHMARKS.md, "Observability's cost"):
//
//	go test ./hopperotel -run '^$' -bench ObservabilityOverhead -benchtime 10x -count 3
func BenchmarkObservabilityOverhead(b *testing.B) {
	for _, m := range []benchMode{
		{name: "off"},
		{name: "fleet", fleet: true},
		{name: "metadata", meta: true},
		{name: "metrics", metrics: true},
		{name: "traces-1in10", metrics: true, sample: 0.1},
		{name: "traces-all", metrics: true, sample: 1},
		{name: "all", metrics: true, sample: 1, fleet: true},
	} {
		b.Run(m.name, func(b *testing.B) { benchObserved(b, m) })
	}
}

// benchMode is what a run of the benchmark observes: metrics through
// hopperotel, traces sampled at a ratio (0: none made), a fleet recorder
// following the feed.
type benchMode struct {
	name    string
	metrics bool
	sample  float64
	fleet   bool
	// meta adds, with an insert middleware of its own, the metadata
	// hopperotel stores (the cost of metadata without OpenTelemetry).
	meta bool
}

func benchObserved(b *testing.B, m benchMode) {
	const jobs, workers = 5000, 50
	ctx := context.Background()
	d, err := sqlitedriver.Open(filepath.Join(b.TempDir(), "bench.db"), &sqlitedriver.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	noop := hopper.Define("noop", func(context.Context, int) (int, error) { return 0, nil }, nil)
	cfg := hopper.Config{Driver: d, MaxWorkers: workers}
	var stop func()
	if m.metrics || m.sample > 0 {
		opts := &hopperotel.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
		if m.sample > 0 {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.TraceIDRatioBased(m.sample)))
			defer func() { _ = tp.Shutdown(ctx) }()
			opts.TracerProvider = tp
		}
		if m.metrics {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer func() { _ = mp.Shutdown(ctx) }()
			opts.MeterProvider = mp
		}
		mw := hopperotel.New(opts)
		cfg.InsertMiddleware = []hopper.InsertMiddleware{mw}
		cfg.WorkMiddleware = []hopper.WorkMiddleware{mw}
		cfg.StepMiddleware = []hopper.StepMiddleware{mw}
	}
	if m.meta {
		cfg.InsertMiddleware = []hopper.InsertMiddleware{hopper.InsertMiddlewareFunc(func(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
			for _, r := range rows {
				r.Metadata = map[string]string{hopperotel.MetadataKey: `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`}
			}
			return doInner(ctx)
		})}
	}
	c, err := hopper.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(noop); err != nil {
		b.Fatal(err)
	}
	if m.fleet {
		rec := hopper.NewStatsRecorder(nil)
		cur, err := c.ChangeTail(ctx)
		if err != nil {
			b.Fatal(err)
		}
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.TailEvents(fctx, cur, nil, func(e hopper.Event) error { rec.Observe(e); return nil })
		}()
		stop = func() { cancel(); <-done }
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if stop != nil {
			stop()
		}
		_ = c.Stop(ctx)
	}()
	ins := make([]int, 500)
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		done := make(chan struct{})
		var n atomic.Int64
		unsub := c.Subscribe(func(e hopper.Event) {
			if e.Kind == hopper.EventSucceeded && n.Add(1) == jobs {
				close(done)
			}
		})
		before := cpuTime()
		for left := jobs; left > 0; left -= len(ins) {
			if _, err := noop.EnqueueMany(ctx, c, ins[:min(left, len(ins))], nil); err != nil {
				b.Fatal(err)
			}
		}
		<-done
		cpu += cpuTime() - before
		unsub()
	}
	b.StopTimer()
	b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(jobs*b.N), "cpu-µs/job")
}
