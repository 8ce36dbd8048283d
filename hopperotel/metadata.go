package hopperotel

import (
	"context"
	"encoding/json"
	"maps"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// inject stores the context of ctx's span under MetadataKey in each row
// whose metadata does not hold the key yet. A row's metadata map is
// replaced by a copy, never written to: rows of one call may share the
// caller's map.
//
// The context of a span that is not sampled is stored only where an
// attempt would use it (carries reports which): otherwise its attempts
// start their own trace, sampled on its own, and a link to a span that was
// never exported leads nowhere, so the jobs carry nothing.
func (m *Middleware) inject(ctx context.Context, rows []*hopper.JobRow) {
	if !m.carries(ctx) {
		return
	}
	var value string
	for _, r := range rows {
		if _, ok := r.Metadata[MetadataKey]; ok {
			continue // the caller's context wins
		}
		if value == "" {
			carrier := propagation.MapCarrier{}
			m.prop.Inject(ctx, carrier)
			if len(carrier) == 0 {
				return // no valid span: nothing to carry
			}
			b, err := json.Marshal(map[string]string(carrier))
			if err != nil {
				return
			}
			value = string(b)
		}
		md := make(map[string]string, len(r.Metadata)+1)
		maps.Copy(md, r.Metadata)
		md[MetadataKey] = value
		r.Metadata = md
	}
}

// extract returns the context stored in md under MetadataKey (its span
// context and, with a baggage propagator, its baggage), on top of the
// background context; nil when md holds none or holds something that is
// not a JSON object of strings.
func (m *Middleware) extract(md map[string]string) context.Context {
	v, ok := md[MetadataKey]
	if !ok || v == "" {
		return nil
	}
	fields, err := hoppertype.UnmarshalMetadata([]byte(v)) // a JSON object of strings, read without reflection
	if err != nil || len(fields) == 0 {
		return nil
	}
	return m.prop.Extract(context.Background(), propagation.MapCarrier(fields))
}

// carries reports whether the context of ctx's span is worth storing in the
// jobs it sends: the span is sampled; or its attempts would use the context
// anyway, as their parent (Options.ParentFirstAttempt, so they follow its
// sampling decision) or for the baggage it holds.
func (m *Middleware) carries(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsSampled() || m.parentFirst || baggage.FromContext(ctx).Len() > 0
}
