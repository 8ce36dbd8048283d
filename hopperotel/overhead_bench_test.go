//go:build unix

package hopperotel_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
// with observability: OpenTelemetry spans (SDK, batched, every span
// sampled) and metrics through hopperotel, and a fleet StatsRecorder
// following the store's events as a server does. Each iteration enqueues
// and works 5,000 jobs with 50 workers; jobs/s and CPU per job are
// reported (docs/BENCHMARKS.md, "Observability's cost"):
//
//	go test ./hopperotel -run '^$' -bench ObservabilityOverhead -benchtime 10x -count 3
func BenchmarkObservabilityOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) { benchObserved(b, on) })
	}
}

func benchObserved(b *testing.B, on bool) {
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
	if on {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()
		mw := hopperotel.New(&hopperotel.Options{TracerProvider: tp, MeterProvider: mp})
		cfg.InsertMiddleware = []hopper.InsertMiddleware{mw}
		cfg.WorkMiddleware = []hopper.WorkMiddleware{mw}
		cfg.StepMiddleware = []hopper.StepMiddleware{mw}
	}
	c, err := hopper.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(noop); err != nil {
		b.Fatal(err)
	}
	if on {
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
