package hopperotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hopper-go/hopper"
)

// InsertMany implements hopper.InsertMiddleware: one PRODUCER span per
// insert, "send <queue>" ("send" when the rows go to several queues), a
// child of ctx's span. The span's context is stored in each row's metadata
// under MetadataKey unless the row has one already, and the rows are
// counted in messaging.client.sent.messages by queue and type (with
// error.type when the insert failed).
func (m *Middleware) InsertMany(ctx context.Context, rows []*hopper.JobRow, doInner func(context.Context) error) error {
	if len(rows) == 0 {
		return doInner(ctx)
	}
	first := rows[0]
	oneQueue, oneKind := true, true
	for _, r := range rows[1:] {
		oneQueue = oneQueue && r.Queue == first.Queue
		oneKind = oneKind && r.Type == first.Type
	}
	name := "send"
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, system, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend)
	if oneQueue {
		name += " " + first.Queue
		attrs = append(attrs, semconv.MessagingDestinationName(first.Queue))
	}
	if oneKind {
		attrs = append(attrs, KindKey.String(first.Type))
	}
	if len(rows) == 1 {
		attrs = append(attrs, semconv.MessagingMessageID(first.ID))
	} else {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(rows)))
	}
	ctx, span := m.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()
	m.inject(ctx, rows)
	err := doInner(ctx)
	var errType string
	if err != nil {
		errType = insertErrorType(err)
		fail(span, err, errType)
	}
	m.countSent(ctx, rows, errType)
	return err
}

// countSent adds rows to messaging.client.sent.messages, one series per
// queue and type.
func (m *Middleware) countSent(ctx context.Context, rows []*hopper.JobRow, errType string) {
	type series struct{ queue, kind string }
	counts := make(map[series]int64, 1)
	for _, r := range rows {
		counts[series{r.Queue, r.Type}]++
	}
	for s, n := range counts {
		m.sent.Add(ctx, n, m.sendSet(s.queue, s.kind, errType))
	}
}

// sendSet returns the attributes of sent.messages for a queue, a type and
// an error.type.
func (m *Middleware) sendSet(queue, kind, errType string) metric.MeasurementOption {
	return m.series(seriesKey{op: "send", queue: queue, kind: kind, errType: errType}, func() []attribute.KeyValue {
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs, system, semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(queue), KindKey.String(kind))
		if errType != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
		}
		return attrs
	})
}

// insertErrorType names, with few values, why an insert failed.
func insertErrorType(err error) string {
	switch {
	case errors.Is(err, hopper.ErrInvalidInput):
		return "invalid-input"
	case errors.Is(err, hopper.ErrUnknownType):
		return "unknown-type"
	case errors.Is(err, hopper.ErrDuplicateID):
		return "duplicate-id"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
