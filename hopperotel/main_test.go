package hopperotel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hopperotel"
	"github.com/hopper-go/hopper/hoppertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is what setup returns: a client traced and measured by one
// Middleware, its virtual clock, the spans it ended and its metrics.
type bundle struct {
	c      *hopper.Client
	clk    *hoppertest.Clock
	mw     *hopperotel.Middleware
	tp     *sdktrace.TracerProvider
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
}

// setup starts a client on the memory store with a virtual clock, with a
// Middleware (made from opts, its providers filled in) in all three
// middleware lists, and registers types. Spans are exported as they end.
func setup(t *testing.T, opts *hopperotel.Options, types ...hopper.AnyType) *bundle {
	t.Helper()
	b := &bundle{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	b.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(b.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	t.Cleanup(func() {
		_ = b.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	var o hopperotel.Options
	if opts != nil {
		o = *opts
	}
	o.TracerProvider, o.MeterProvider = b.tp, mp
	b.mw = hopperotel.New(&o)
	b.c, b.clk = hoppertest.NewClient(t, hopper.Config{
		InsertMiddleware: []hopper.InsertMiddleware{b.mw},
		WorkMiddleware:   []hopper.WorkMiddleware{b.mw},
		StepMiddleware:   []hopper.StepMiddleware{b.mw},
	})
	require.NoError(t, b.c.Register(types...))
	return b
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// named returns the ended spans called name, in the order they ended.
func (b *bundle) named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range b.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span called name.
func (b *bundle) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	spans := b.named(name)
	require.Len(t, spans, 1, "spans named %q", name)
	return spans[0]
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}

// requireAttrs requires that s has each of want's attributes, with its
// value.
func requireAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(s)
	for _, kv := range want {
		v, ok := got[kv.Key]
		if !ok {
			t.Errorf("span %q has no attribute %s (want %s)", s.Name, kv.Key, kv.Value.Emit())
			continue
		}
		if v != kv.Value {
			t.Errorf("span %q: %s = %s, want %s", s.Name, kv.Key, v.Emit(), kv.Value.Emit())
		}
	}
}

// requireNoAttrs requires that s has none of keys.
func requireNoAttrs(t *testing.T, s tracetest.SpanStub, keys ...attribute.Key) {
	t.Helper()
	got := attrs(s)
	for _, k := range keys {
		if v, ok := got[k]; ok {
			t.Errorf("span %q has attribute %s = %s, want none", s.Name, k, v.Emit())
		}
	}
}

// requireLinkedTo requires that s has exactly one link, to sc.
func requireLinkedTo(t *testing.T, s tracetest.SpanStub, sc trace.SpanContext) {
	t.Helper()
	require.Len(t, s.Links, 1, "links of %q", s.Name)
	require.Equal(t, sc.TraceID(), s.Links[0].SpanContext.TraceID(), "linked trace")
	require.Equal(t, sc.SpanID(), s.Links[0].SpanContext.SpanID(), "linked span")
}

// stored returns the trace context a job's metadata carries.
func stored(t *testing.T, c *hopper.Client, id string) map[string]string {
	t.Helper()
	row, err := c.JobGet(context.Background(), id)
	require.NoError(t, err)
	raw, ok := row.Metadata[hopperotel.MetadataKey]
	require.True(t, ok, "job %s carries no trace context: %v", id, row.Metadata)
	var fields map[string]string
	require.NoError(t, json.Unmarshal([]byte(raw), &fields))
	return fields
}

// traceparent is the W3C traceparent of a sampled span context.
func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}
