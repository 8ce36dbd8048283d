package hopperotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// Work implements hopper.WorkMiddleware: one CONSUMER span per attempt,
// "process <queue>", linked to the context stored in the job's metadata
// (a new trace, or its child for a first attempt under
// Options.ParentFirstAttempt), ended with the attempt's outcome. The
// attempt is counted in messaging.client.consumed.messages and timed in
// messaging.process.duration. A panic that unwinds through Work (from a
// middleware inside it: hopper recovers a handler's own beneath all
// middleware) is recorded and goes on.
func (m *Middleware) Work(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
	start := time.Now()
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, system, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(job.Queue), semconv.MessagingMessageID(job.ID), KindKey.String(job.Type), AttemptKey.Int(job.Attempt))
	if workflow, run, ok := hopper.RunOf(job); ok {
		attrs = append(attrs, RunIDKey.String(run), WorkflowKey.String(workflow), semconv.MessagingMessageConversationID(run))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	parent, newRoot := ctx, true
	if stored := m.extract(job.Metadata); stored != nil {
		if bag := baggage.FromContext(stored); bag.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, bag)
			parent = ctx
		}
		if sc := trace.SpanContextFromContext(stored); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			if m.parentFirst && job.Attempt == 1 {
				parent, newRoot = trace.ContextWithRemoteSpanContext(ctx, sc), false
			}
		}
	}
	if newRoot {
		// Never the child of a span the worker's context happens to hold.
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := m.tracer.Start(parent, "process "+job.Queue, opts...)

	returned := false
	defer func() {
		if returned {
			return
		}
		r := recover()
		if r == nil { // runtime.Goexit, not a panic
			m.endAttempt(ctx, span, job, start, OutcomeFailed, "goexit", errors.New("the attempt's goroutine exited"))
			return
		}
		m.endAttempt(ctx, span, job, start, OutcomeFailed, string(hoppertype.ErrorKindPanic), panicError(r))
		panic(r)
	}()
	err := doInner(ctx)
	returned = true
	outcome, errType := classify(ctx, err)
	m.endAttempt(ctx, span, job, start, outcome, errType, err)
	return err
}

// endAttempt ends an attempt's span and records its metrics.
func (m *Middleware) endAttempt(ctx context.Context, span trace.Span, job *hopper.JobRow, start time.Time, outcome, errType string, err error) {
	took := time.Since(start).Seconds()
	span.SetAttributes(OutcomeKey.String(outcome))
	if outcome == OutcomeFailed {
		fail(span, err, errType)
	}
	span.End()
	set := m.processSet(job.Queue, job.Type, outcome, errType)
	m.consumed.Add(ctx, 1, set)
	m.duration.Record(ctx, took, set)
}

// seriesKey names one series of the Middleware's metrics: bounded values
// only (see the package doc).
type seriesKey struct{ op, queue, kind, outcome, errType string }

// processSet returns the attributes of an attempt's metrics.
func (m *Middleware) processSet(queue, kind, outcome, errType string) metric.MeasurementOption {
	return m.series(seriesKey{op: "process", queue: queue, kind: kind, outcome: outcome, errType: errType}, func() []attribute.KeyValue {
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs, system, semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(queue),
			KindKey.String(kind), OutcomeKey.String(outcome))
		if errType != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
		}
		return attrs
	})
}

// series returns the attributes of the series k, made by attrs once and
// kept (sorting and hashing a set for every measurement costs more than
// the measurement it labels).
func (m *Middleware) series(k seriesKey, attrs func() []attribute.KeyValue) metric.MeasurementOption {
	if v, ok := m.sets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	v, _ := m.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attrs()...)))
	return v.(metric.MeasurementOption)
}

// Step implements hopper.StepMiddleware: one INTERNAL span "step <name>"
// per try of a step's function, a child of ctx's span (the process span of
// the run's execution). A step replayed from the run's history runs no
// function and makes no span.
func (m *Middleware) Step(ctx context.Context, step hopper.StepMetadata, doInner func(context.Context) error) error {
	ctx, span := m.tracer.Start(ctx, "step "+step.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		StepNameKey.String(step.Name), StepIDKey.String(step.ID), StepAttemptKey.Int(step.Attempt), RunIDKey.String(step.RunID)))
	returned := false
	defer func() {
		if returned {
			return
		}
		// A panic in the step's function unwinds through step middleware:
		// hopper recovers it outside them.
		r := recover()
		if r == nil {
			fail(span, errors.New("the step's goroutine exited"), "goexit")
			span.End()
			return
		}
		fail(span, panicError(r), string(hoppertype.ErrorKindPanic))
		span.End()
		panic(r)
	}()
	err := doInner(ctx)
	returned = true
	if err != nil {
		fail(span, err, errorType(err, context.Cause(ctx)))
	}
	span.End()
	return err
}

// classify says how an attempt that returned err ended, and for a failure
// its error.type.
func classify(ctx context.Context, err error) (outcome, errType string) {
	if err == nil {
		return OutcomeSucceeded, ""
	}
	if snooze := (*hopper.SnoozeError)(nil); errors.As(err, &snooze) {
		return OutcomeDeferred, ""
	}
	cause := context.Cause(ctx)
	if errors.Is(err, hopper.ErrCancelled) || errors.Is(cause, hopper.ErrCancelled) {
		return OutcomeCancelled, ""
	}
	errType = errorType(err, cause)
	if errType == string(hoppertype.ErrorKindHandler) && cause != nil {
		// Cancelled by none of hopper's causes: the client stopping.
		return OutcomeInterrupted, ""
	}
	return OutcomeFailed, errType
}

// causeKinds are the kinds a cancelled attempt's context cause names:
// they win over the error the handler returned (often ctx.Err()).
var causeKinds = []struct {
	err  error
	kind hoppertype.ErrorKind
}{
	{hopper.ErrAttemptTimeout, hoppertype.ErrorKindTimeout}, // a heartbeat timeout too
	{hopper.ErrExpired, hoppertype.ErrorKindExpired},
	{hopper.ErrLeaseLost, hoppertype.ErrorKindLeaseLost},
}

// errorKinds are the kinds an error names through the sentinel it
// matches, in the order hopper tries them.
var errorKinds = []struct {
	err  error
	kind hoppertype.ErrorKind
}{
	{hopper.ErrAborted, hoppertype.ErrorKindAborted},
	{hopper.ErrCancelled, hoppertype.ErrorKindCancelled},
	{hopper.ErrNonDeterminism, hoppertype.ErrorKindNonDeterminism},
	{hopper.ErrAttemptTimeout, hoppertype.ErrorKindTimeout},
	{hopper.ErrExpired, hoppertype.ErrorKindExpired},
	{hopper.ErrPanic, hoppertype.ErrorKindPanic},
	{hopper.ErrEncode, hoppertype.ErrorKindEncode},
	{hopper.ErrInvalidInput, hoppertype.ErrorKindDecode},
	{hopper.ErrLeaseLost, hoppertype.ErrorKindLeaseLost},
	{hopper.ErrUnknownType, hoppertype.ErrorKindUnknownType},
}

// errorType is error.type for an attempt's or a step's failure: one of
// hopper's error kinds, "handler" for an error of the handler's own.
func errorType(err, cause error) string {
	for _, k := range causeKinds {
		if errors.Is(cause, k.err) {
			return string(k.kind)
		}
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return string(k.kind)
		}
	}
	return string(hoppertype.ErrorKindHandler)
}

// fail marks span failed by err.
func fail(span trace.Span, err error, errType string) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
}

// panicError is the error a recovered panic value r is reported as: it
// matches hopper.ErrPanic and, when r is an error, r too.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w: %w", hopper.ErrPanic, err)
	}
	return fmt.Errorf("%w: %v", hopper.ErrPanic, r)
}
