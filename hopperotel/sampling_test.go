package hopperotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hopperotel"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestUnsampledSendCarriesNothing: a send span that is not sampled stores
// no context in its jobs (their attempts start their own trace either way,
// and a link to a span never exported leads nowhere), unless the attempts
// would use it: as their parent under ParentFirstAttempt, or for the
// baggage it holds. The jobs run all the same.
func TestUnsampledSendCarriesNothing(t *testing.T) {
	t.Parallel()
	member, err := baggage.NewMember("tenant", "t1")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		opts       hopperotel.Options
		ctx        func(context.Context) context.Context
		wantFields []string // the propagator's fields stored; none: no MetadataKey
	}{
		{name: "default"},
		{name: "parent-first", opts: hopperotel.Options{ParentFirstAttempt: true}, wantFields: []string{"traceparent"}},
		{name: "baggage",
			opts:       hopperotel.Options{Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})},
			ctx:        func(ctx context.Context) context.Context { return baggage.ContextWithBaggage(ctx, bag) },
			wantFields: []string{"traceparent", "baggage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.NeverSample()))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			o := tc.opts
			o.TracerProvider = tp
			mw := hopperotel.New(&o)
			c, _ := hoppertest.NewClient(t, hopper.Config{
				InsertMiddleware: []hopper.InsertMiddleware{mw},
				WorkMiddleware:   []hopper.WorkMiddleware{mw},
			})
			typ := hopper.Define("otel-double", double, nil)
			require.NoError(t, c.Register(typ))
			ctx := testCtx(t)
			sendCtx := ctx
			if tc.ctx != nil {
				sendCtx = tc.ctx(ctx)
			}
			h, err := typ.Enqueue(sendCtx, c, 21, nil)
			require.NoError(t, err)
			out, err := h.Result(ctx)
			require.NoError(t, err)
			require.Equal(t, 42, out)
			require.Empty(t, spans.GetSpans(), "nothing is sampled")
			row, err := c.JobGet(ctx, h.ID())
			require.NoError(t, err)
			if len(tc.wantFields) == 0 {
				require.NotContains(t, row.Metadata, hopperotel.MetadataKey)
				return
			}
			fields := stored(t, c, h.ID())
			for _, f := range tc.wantFields {
				require.Contains(t, fields, f)
			}
			require.Contains(t, fields["traceparent"], "-00", "the stored context says it is not sampled")
		})
	}
}
