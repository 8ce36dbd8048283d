package hopperotel_test

import (
	"context"
	"fmt"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hopperotel"
)

// One Middleware in the client's three middleware lists traces every
// insert, attempt and workflow step. A program sets up its SDK with the
// exporters it uses (OTLP, Prometheus); this one keeps its spans in memory
// to print them.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	mp := sdkmetric.NewMeterProvider()
	ctx := context.Background()
	defer tp.Shutdown(ctx)
	defer mp.Shutdown(ctx)

	otelmw := hopperotel.New(&hopperotel.Options{TracerProvider: tp, MeterProvider: mp})
	d := memdriver.New()
	defer d.Close()
	c, err := hopper.New(hopper.Config{
		Driver:           d,
		InsertMiddleware: []hopper.InsertMiddleware{otelmw},
		WorkMiddleware:   []hopper.WorkMiddleware{otelmw},
		StepMiddleware:   []hopper.StepMiddleware{otelmw},
	})
	if err != nil {
		panic(err)
	}
	greet := hopper.Define("greet", func(_ context.Context, name string) (string, error) {
		return "hello " + name, nil
	}, nil)
	if err := c.Register(greet); err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Stop(ctx)

	h, err := greet.Enqueue(ctx, c, "ada", nil)
	if err != nil {
		panic(err)
	}
	out, err := h.Result(ctx)
	fmt.Println(out, err)

	var lines []string
	for _, s := range spans.GetSpans() {
		lines = append(lines, fmt.Sprintf("%s (%s), %d link(s)", s.Name, s.SpanKind, len(s.Links)))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// hello ada <nil>
	// process default (consumer), 1 link(s)
	// send default (producer), 0 link(s)
}
