package hopperotel

import (
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hopper-go/hopper"
)

// MetadataKey is the job metadata key that holds the trace context of the
// span that sent the job: a JSON object of the propagator's fields, such as
// {"traceparent":"00-…-…-01","tracestate":"…"}. Set it yourself (at
// enqueue, in InsertOpts.Metadata) to have the job's attempts link to a
// context of your choosing; the Middleware then leaves it as it is.
const MetadataKey = "otel"

// ScopeName is the instrumentation scope of the Middleware's tracer and
// meter.
const ScopeName = "github.com/hopper-go/hopper/hopperotel"

// Outcomes of an attempt, the value of the hopper.job.outcome attribute on
// process spans and on the consumed.messages and process.duration metrics.
const (
	// OutcomeSucceeded: the attempt returned no error.
	OutcomeSucceeded = "succeeded"
	// OutcomeFailed: the attempt failed (it will be retried or the job is
	// dead); error.type says how.
	OutcomeFailed = "failed"
	// OutcomeDeferred: the job was deferred without using an attempt (a
	// handler's Snooze, a workflow run that waits).
	OutcomeDeferred = "deferred"
	// OutcomeCancelled: the job was cancelled while the attempt ran.
	OutcomeCancelled = "cancelled"
	// OutcomeInterrupted: the attempt's context was cancelled for another
	// reason than hopper's own (a timeout, a deadline, a lost lease, a
	// cancel): in practice the client stopping, which hands the job back
	// without using the attempt.
	OutcomeInterrupted = "interrupted"
)

// Attribute keys of hopper's own, beside the semantic conventions'.
const (
	// KindKey is the job's type (its kind).
	KindKey = attribute.Key("hopper.job.kind")
	// AttemptKey is the attempt's number, from 1.
	AttemptKey = attribute.Key("hopper.job.attempt")
	// OutcomeKey is how an attempt ended (see the Outcome constants).
	OutcomeKey = attribute.Key("hopper.job.outcome")
	// RunIDKey is the id of the workflow run an execution or a step is of.
	RunIDKey = attribute.Key("hopper.run.id")
	// WorkflowKey is the name of the workflow a run executes.
	WorkflowKey = attribute.Key("hopper.workflow.name")
	// StepNameKey is a step's name.
	StepNameKey = attribute.Key("hopper.step.name")
	// StepIDKey is a step's identity (StepMetadata.ID).
	StepIDKey = attribute.Key("hopper.step.id")
	// StepAttemptKey counts a step's tries, from 1.
	StepAttemptKey = attribute.Key("hopper.step.attempt")
)

// system is messaging.system: hopper is not among the conventions' names,
// which allow others.
var system = semconv.MessagingSystemKey.String("hopper")

// Options configure a Middleware. A nil *Options, like the zero value,
// means every default.
type Options struct {
	// TracerProvider makes the spans. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Defaults to
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes the sending span's context into a job's metadata
	// and reads it back for its attempts; add propagation.Baggage{} (in a
	// propagation.NewCompositeTextMapPropagator) to carry baggage too.
	// Defaults to propagation.TraceContext{}, not otel's global
	// propagator, which does nothing until a program sets one.
	Propagator propagation.TextMapPropagator
	// ParentFirstAttempt makes the process span of a job's first attempt
	// a child of the stored context (still linked to it), so a job that
	// succeeds at once is part of its sender's trace; later attempts start
	// their own trace. A deferral does not use an attempt: each execution
	// of a workflow run that waits and resumes has the same number, so all
	// of them join the starter's trace. Defaults to false: every attempt
	// starts its own trace, linked to the stored context.
	ParentFirstAttempt bool
}

// Middleware traces and measures a client's inserts, attempts and workflow
// steps. It is a hopper.InsertMiddleware, a hopper.WorkMiddleware and a
// hopper.StepMiddleware: set it in all three lists of hopper.Config (the
// same value, or values of the same Options). Make one with New; it is
// safe for concurrent use.
type Middleware struct {
	tracer      trace.Tracer
	prop        propagation.TextMapPropagator
	parentFirst bool

	sent     metric.Int64Counter
	consumed metric.Int64Counter
	duration metric.Float64Histogram
	// sets holds each metric series' attributes by seriesKey, made once.
	sets sync.Map
}

var (
	_ hopper.InsertMiddleware = (*Middleware)(nil)
	_ hopper.WorkMiddleware   = (*Middleware)(nil)
	_ hopper.StepMiddleware   = (*Middleware)(nil)
)

// durationBuckets are the conventions' advised boundaries for
// messaging.process.duration, in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// New returns a Middleware configured by opts (nil means every default).
// An instrument the meter provider refuses is reported to otel.Handle and
// replaced by one that records nothing.
func New(opts *Options) *Middleware {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	m := &Middleware{
		tracer:      o.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:        o.Propagator,
		parentFirst: o.ParentFirstAttempt,
	}
	meter := o.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var err error
	if m.sent, err = meter.Int64Counter("messaging.client.sent.messages", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs inserted.")); err != nil {
		otel.Handle(err)
		m.sent = noop.Int64Counter{}
	}
	if m.consumed, err = meter.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{job}"),
		metric.WithDescription("Attempts run, by outcome.")); err != nil {
		otel.Handle(err)
		m.consumed = noop.Int64Counter{}
	}
	if m.duration, err = meter.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of attempts, by outcome."), metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		otel.Handle(err)
		m.duration = noop.Float64Histogram{}
	}
	return m
}
