package hopperotel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hopperotel"
	"github.com/hopper-go/hopper/hoppertest"
)

var system = semconv.MessagingSystemKey.String("hopper")

func double(_ context.Context, n int) (int, error) { return 2 * n, nil }

// TestSendThenProcess: an insert is a PRODUCER span "send <queue>" whose
// context the job's metadata carries (beside the caller's metadata); the
// attempt is a CONSUMER span "process <queue>" in a trace of its own,
// linked to it.
func TestSendThenProcess(t *testing.T) {
	t.Parallel()
	typ := hopper.Define("otel-double", double, nil)
	b := setup(t, nil, typ)
	ctx := testCtx(t)

	h, err := typ.Enqueue(ctx, b.c, 21, &hopper.InsertOpts{Metadata: map[string]string{"tenant": "t1"}})
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, out)

	send := b.one(t, "send "+hopper.DefaultQueue)
	require.Equal(t, trace.SpanKindProducer, send.SpanKind)
	requireAttrs(t, send, system, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(hopper.DefaultQueue), semconv.MessagingMessageID(h.ID()), hopperotel.KindKey.String("otel-double"))
	requireNoAttrs(t, send, semconv.MessagingBatchMessageCountKey)
	require.Equal(t, codes.Unset, send.Status.Code)

	// The default propagator is W3C trace context, not otel's global no-op.
	require.Equal(t, map[string]string{"traceparent": traceparent(send.SpanContext)}, stored(t, b.c, h.ID()))
	row, err := b.c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, "t1", row.Metadata["tenant"], "the caller's metadata is kept")

	process := b.one(t, "process "+hopper.DefaultQueue)
	require.Equal(t, trace.SpanKindConsumer, process.SpanKind)
	require.False(t, process.Parent.IsValid(), "an attempt starts a trace of its own")
	require.NotEqual(t, send.SpanContext.TraceID(), process.SpanContext.TraceID())
	requireLinkedTo(t, process, send.SpanContext)
	requireAttrs(t, process, system, semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(hopper.DefaultQueue), semconv.MessagingMessageID(h.ID()),
		hopperotel.KindKey.String("otel-double"), hopperotel.AttemptKey.Int(1), hopperotel.OutcomeKey.String(hopperotel.OutcomeSucceeded))
	requireNoAttrs(t, process, hopperotel.RunIDKey, semconv.ErrorTypeKey)
	require.Equal(t, codes.Unset, process.Status.Code)
}

// flaky fails until its attempt reaches the input.
func flaky(ctx context.Context, succeedAt int) (int, error) {
	if a := hopper.JobFromContext(ctx).Attempt(); a < succeedAt {
		return 0, errors.New("not yet")
	}
	return succeedAt, nil
}

var flakyRetry = hopper.RetryPolicy{Attempts: 3, Base: time.Minute, Jitter: hopper.NoJitter}

// TestRetriedAttemptsLinkToOneSend: each attempt of a retried job is a
// process span of its own trace, linked to the same send span (the
// metadata survives the retries); a failed attempt has status Error, the
// error recorded and error.type.
func TestRetriedAttemptsLinkToOneSend(t *testing.T) {
	t.Parallel()
	typ := hopper.Define("otel-flaky", flaky, &hopper.TypeOpts[int]{Retry: flakyRetry})
	b := setup(t, nil, typ)
	ctx := testCtx(t)

	h, err := typ.Enqueue(ctx, b.c, 3, nil)
	require.NoError(t, err)
	require.NoError(t, hoppertest.RunUntilIdle(ctx, b.c, b.clk, nil))
	_, err = h.Result(ctx)
	require.NoError(t, err)

	send := b.one(t, "send "+hopper.DefaultQueue)
	attempts := b.named("process " + hopper.DefaultQueue)
	require.Len(t, attempts, 3)
	traces := map[trace.TraceID]bool{}
	for i, p := range attempts {
		requireLinkedTo(t, p, send.SpanContext)
		require.False(t, p.Parent.IsValid())
		traces[p.SpanContext.TraceID()] = true
		requireAttrs(t, p, hopperotel.AttemptKey.Int(i+1))
		if i < 2 {
			require.Equal(t, codes.Error, p.Status.Code, "attempt %d", i+1)
			require.Equal(t, "not yet", p.Status.Description)
			requireAttrs(t, p, hopperotel.OutcomeKey.String(hopperotel.OutcomeFailed), semconv.ErrorTypeKey.String("handler"))
			require.Len(t, p.Events, 1)
			require.Equal(t, "exception", p.Events[0].Name)
		} else {
			require.Equal(t, codes.Unset, p.Status.Code)
			requireAttrs(t, p, hopperotel.OutcomeKey.String(hopperotel.OutcomeSucceeded))
			requireNoAttrs(t, p, semconv.ErrorTypeKey)
		}
	}
	require.Len(t, traces, 3, "each attempt starts its own trace")
	require.Equal(t, map[string]string{"traceparent": traceparent(send.SpanContext)}, stored(t, b.c, h.ID()), "the context survives the retries")
}

// TestParentFirstAttempt: with ParentFirstAttempt the first attempt is a
// child of the send span; the next starts a trace of its own. Both link.
func TestParentFirstAttempt(t *testing.T) {
	t.Parallel()
	typ := hopper.Define("otel-flaky", flaky, &hopper.TypeOpts[int]{Retry: flakyRetry})
	b := setup(t, &hopperotel.Options{ParentFirstAttempt: true}, typ)
	ctx := testCtx(t)

	h, err := typ.Enqueue(ctx, b.c, 2, nil)
	require.NoError(t, err)
	require.NoError(t, hoppertest.RunUntilIdle(ctx, b.c, b.clk, nil))
	_, err = h.Result(ctx)
	require.NoError(t, err)

	send := b.one(t, "send "+hopper.DefaultQueue)
	attempts := b.named("process " + hopper.DefaultQueue)
	require.Len(t, attempts, 2)
	require.Equal(t, send.SpanContext.SpanID(), attempts[0].Parent.SpanID(), "the first attempt is the send span's child")
	require.Equal(t, send.SpanContext.TraceID(), attempts[0].SpanContext.TraceID())
	require.False(t, attempts[1].Parent.IsValid(), "a retry starts its own trace")
	require.NotEqual(t, send.SpanContext.TraceID(), attempts[1].SpanContext.TraceID())
	for _, p := range attempts {
		requireLinkedTo(t, p, send.SpanContext)
	}
}

// TestCallerContextWins: a trace context the caller put in the metadata
// is kept and linked to; one that does not decode is left alone and
// linked to by nothing.
func TestCallerContextWins(t *testing.T) {
	t.Parallel()
	typ := hopper.Define("otel-double", double, nil)
	b := setup(t, nil, typ)
	ctx := testCtx(t)

	const theirs = `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	h, err := typ.Enqueue(ctx, b.c, 1, &hopper.InsertOpts{ID: "theirs", Metadata: map[string]string{hopperotel.MetadataKey: theirs, "tenant": "t1"}})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	row, err := b.c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, map[string]string{hopperotel.MetadataKey: theirs, "tenant": "t1"}, row.Metadata)
	process := b.one(t, "process "+hopper.DefaultQueue)
	require.Len(t, process.Links, 1)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", process.Links[0].SpanContext.TraceID().String())
	require.Equal(t, "b7ad6b7169203331", process.Links[0].SpanContext.SpanID().String())
	require.True(t, process.Links[0].SpanContext.IsRemote())
	b.spans.Reset()

	h, err = typ.Enqueue(ctx, b.c, 1, &hopper.InsertOpts{ID: "garbled", Metadata: map[string]string{hopperotel.MetadataKey: "not json"}})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	row, err = b.c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, map[string]string{hopperotel.MetadataKey: "not json"}, row.Metadata, "left alone")
	process = b.one(t, "process "+hopper.DefaultQueue)
	require.Empty(t, process.Links)
	require.Equal(t, codes.Unset, process.Status.Code)
}

// TestBatchSend: one insert of several jobs is one send span with
// messaging.batch.message_count; rows for several queues make a span
// named "send" without a destination. Every row carries the span's
// context; a shared metadata map is not written to.
func TestBatchSend(t *testing.T) {
	t.Parallel()
	typ := hopper.Define("otel-double", double, nil)
	other := hopper.Define("otel-other", double, nil)
	b := setup(t, nil, typ, other)
	ctx := testCtx(t)

	shared := map[string]string{"tenant": "t1"}
	hs, err := typ.EnqueueMany(ctx, b.c, []int{1, 2, 3}, &hopper.InsertOpts{Metadata: shared})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tenant": "t1"}, shared, "the caller's map is not written to")
	send := b.one(t, "send "+hopper.DefaultQueue)
	requireAttrs(t, send, semconv.MessagingBatchMessageCount(3), semconv.MessagingDestinationName(hopper.DefaultQueue), hopperotel.KindKey.String("otel-double"))
	requireNoAttrs(t, send, semconv.MessagingMessageIDKey)
	for _, h := range hs {
		require.Equal(t, map[string]string{"traceparent": traceparent(send.SpanContext)}, stored(t, b.c, h.ID()))
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	for _, p := range b.named("process " + hopper.DefaultQueue) {
		requireLinkedTo(t, p, send.SpanContext)
	}
	b.spans.Reset()

	_, err = b.c.EnqueueMany(ctx, typ.Job(1, &hopper.InsertOpts{Queue: "unserved-a"}), other.Job(2, &hopper.InsertOpts{Queue: "unserved-b"}))
	require.NoError(t, err)
	send = b.one(t, "send")
	requireAttrs(t, send, system, semconv.MessagingOperationTypeSend, semconv.MessagingBatchMessageCount(2))
	requireNoAttrs(t, send, semconv.MessagingDestinationNameKey, hopperotel.KindKey, semconv.MessagingMessageIDKey)
}

// TestOutcomes: a snooze is a deferral, not an error; a panic, an abort, a
// timeout and a handler's error are failures named by error.type; a
// cancel is not an error.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	var snoozed atomic.Bool
	started := make(chan struct{}, 4)
	typ := hopper.Define("otel-outcomes", func(ctx context.Context, what string) (int, error) {
		switch what {
		case "snooze":
			if !snoozed.Swap(true) {
				return 0, hopper.Snooze(time.Minute)
			}
			return 1, nil
		case "panic":
			panic("boom")
		case "abort":
			return 0, hopper.Abort(errors.New("no use"))
		case "block":
			started <- struct{}{}
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 0, errors.New("plain")
	}, &hopper.TypeOpts[string]{Retry: hopper.RetryPolicy{Attempts: 1}})
	b := setup(t, nil, typ)
	ctx := testCtx(t)

	h, err := typ.Enqueue(ctx, b.c, "snooze", nil)
	require.NoError(t, err)
	require.NoError(t, hoppertest.RunUntilIdle(ctx, b.c, b.clk, nil))
	_, err = h.Result(ctx)
	require.NoError(t, err)
	attempts := b.named("process " + hopper.DefaultQueue)
	require.Len(t, attempts, 2)
	require.Equal(t, codes.Unset, attempts[0].Status.Code, "a snooze is no error")
	requireAttrs(t, attempts[0], hopperotel.OutcomeKey.String(hopperotel.OutcomeDeferred))
	requireNoAttrs(t, attempts[0], semconv.ErrorTypeKey)
	requireAttrs(t, attempts[1], hopperotel.OutcomeKey.String(hopperotel.OutcomeSucceeded))

	for what, errType := range map[string]string{"panic": "panic", "abort": "aborted", "plain": "handler"} {
		b.spans.Reset()
		h, err := typ.Enqueue(ctx, b.c, what, nil)
		require.NoError(t, err)
		_, err = h.Result(ctx)
		require.Error(t, err)
		p := b.one(t, "process "+hopper.DefaultQueue)
		require.Equal(t, codes.Error, p.Status.Code, what)
		requireAttrs(t, p, hopperotel.OutcomeKey.String(hopperotel.OutcomeFailed), semconv.ErrorTypeKey.String(errType))
	}

	b.spans.Reset()
	h, err = typ.Enqueue(ctx, b.c, "block", nil)
	require.NoError(t, err)
	<-started
	_, err = b.c.JobCancel(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	p := b.one(t, "process "+hopper.DefaultQueue)
	require.Equal(t, codes.Unset, p.Status.Code, "a cancel is no error")
	requireAttrs(t, p, hopperotel.OutcomeKey.String(hopperotel.OutcomeCancelled))
}

// TestTimeout: an attempt cut by its timeout fails with error.type
// "timeout", whatever error the handler returns.
func TestTimeout(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 4)
	typ := hopper.Define("otel-slow", func(ctx context.Context, _ int) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, errors.New("gave up")
	}, &hopper.TypeOpts[int]{AttemptTimeout: 5 * time.Second, Retry: hopper.RetryPolicy{Attempts: 1}})
	b := setup(t, nil, typ)
	ctx := testCtx(t)
	h, err := typ.Enqueue(ctx, b.c, 0, nil)
	require.NoError(t, err)
	<-started
	b.clk.Advance(5 * time.Second) // within the lease
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAttemptTimeout)
	p := b.one(t, "process "+hopper.DefaultQueue)
	require.Equal(t, codes.Error, p.Status.Code)
	requireAttrs(t, p, semconv.ErrorTypeKey.String("timeout"), hopperotel.OutcomeKey.String(hopperotel.OutcomeFailed))
}

// TestSpawnUnderAttempt: what a handler inserts is sent under its
// attempt's span, and the spawned job's attempt links to that send.
func TestSpawnUnderAttempt(t *testing.T) {
	t.Parallel()
	leaf := hopper.Define("otel-leaf", double, nil)
	parent := hopper.Define("otel-parent", func(ctx context.Context, n int) (hopper.None, error) {
		return hopper.None{}, hopper.JobFromContext(ctx).Spawn(leaf.Job(n, &hopper.InsertOpts{ID: "otel-child"}))
	}, nil)
	b := setup(t, nil, leaf, parent)
	ctx := testCtx(t)
	h, err := parent.Enqueue(ctx, b.c, 1, nil)
	require.NoError(t, err)
	_, err = h.Group(ctx)
	require.NoError(t, err)

	sends := b.named("send " + hopper.DefaultQueue)
	require.Len(t, sends, 2)
	var parentAttempt, childAttempt tracetest.SpanStub
	for _, p := range b.named("process " + hopper.DefaultQueue) {
		switch attrs(p)[hopperotel.KindKey].AsString() {
		case "otel-parent":
			parentAttempt = p
		case "otel-leaf":
			childAttempt = p
		}
	}
	spawn := sends[1]
	requireAttrs(t, spawn, semconv.MessagingMessageID("otel-child"))
	require.Equal(t, parentAttempt.SpanContext.SpanID(), spawn.Parent.SpanID(), "the spawn is sent under the parent's attempt")
	require.Equal(t, parentAttempt.SpanContext.TraceID(), spawn.SpanContext.TraceID())
	requireLinkedTo(t, childAttempt, spawn.SpanContext)
}

// TestWorkflowSpans: each execution of a run is a process span with the
// run's attributes (one that ends waiting is deferred, not failed); the
// steps that really run are INTERNAL spans inside their execution's span,
// a panicking try failed with error.type "panic"; a replayed step makes
// no span.
func TestWorkflowSpans(t *testing.T) {
	t.Parallel()
	var tries atomic.Int32
	flow := hopper.Workflow("otel-flow", func(wf hopper.WorkflowContext, n int) (int, error) {
		a, err := hopper.Step(wf, "a", func(context.Context) (int, error) { return n + 1, nil }, nil)
		if err != nil {
			return 0, err
		}
		if err := wf.Sleep(time.Hour); err != nil {
			return 0, err
		}
		return hopper.Step(wf, "b", func(context.Context) (int, error) {
			if tries.Add(1) == 1 {
				panic("first try")
			}
			return a * 2, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Second, Jitter: hopper.NoJitter}})
	}, nil)
	b := setup(t, nil, flow)
	ctx := testCtx(t)

	run, err := flow.Start(ctx, b.c, 1, &hopper.StartOpts{ID: "otel-run"})
	require.NoError(t, err)
	out, err := hoppertest.RunUntilComplete(ctx, b.c, b.clk, run, nil)
	require.NoError(t, err)
	require.Equal(t, 4, out)

	start := b.one(t, "send "+hopper.DefaultQueue)
	requireAttrs(t, start, semconv.MessagingMessageID("otel-run"), hopperotel.KindKey.String("workflow:otel-flow"))
	executions := b.named("process " + hopper.DefaultQueue)
	require.Len(t, executions, 2, "one execution waits, the next completes")
	for _, e := range executions {
		requireLinkedTo(t, e, start.SpanContext)
		requireAttrs(t, e, hopperotel.RunIDKey.String("otel-run"), hopperotel.WorkflowKey.String("otel-flow"),
			semconv.MessagingMessageConversationID("otel-run"), semconv.MessagingMessageID("otel-run"))
	}
	require.Equal(t, codes.Unset, executions[0].Status.Code, "a run that waits has not failed")
	requireAttrs(t, executions[0], hopperotel.OutcomeKey.String(hopperotel.OutcomeDeferred))
	requireAttrs(t, executions[1], hopperotel.OutcomeKey.String(hopperotel.OutcomeSucceeded))

	a := b.one(t, "step a") // not again when the second execution replays it
	require.Equal(t, trace.SpanKindInternal, a.SpanKind)
	require.Equal(t, executions[0].SpanContext.SpanID(), a.Parent.SpanID(), "a step is a child of its execution's span")
	require.Equal(t, executions[0].SpanContext.TraceID(), a.SpanContext.TraceID())
	requireAttrs(t, a, hopperotel.StepNameKey.String("a"), hopperotel.StepAttemptKey.Int(1), hopperotel.RunIDKey.String("otel-run"),
		hopperotel.StepIDKey.String("otel-run/a#2"))

	bs := b.named("step b")
	require.Len(t, bs, 2, "two tries")
	for i, s := range bs {
		require.Equal(t, executions[1].SpanContext.SpanID(), s.Parent.SpanID())
		requireAttrs(t, s, hopperotel.StepAttemptKey.Int(i+1))
	}
	require.Equal(t, codes.Error, bs[0].Status.Code, "the panicking try")
	requireAttrs(t, bs[0], semconv.ErrorTypeKey.String("panic"))
	require.Equal(t, codes.Unset, bs[1].Status.Code)
}

// TestAttemptIgnoresAmbientSpan: an attempt's span never becomes the child
// of a span its context happens to hold (a worker started under a span),
// and without a stored context it has no link.
func TestAttemptIgnoresAmbientSpan(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, ambient := b.tp.Tracer("test").Start(context.Background(), "ambient")
	defer ambient.End()
	job := &hopper.JobRow{ID: "j1", Type: "t", Queue: "q", Attempt: 1}
	require.NoError(t, b.mw.Work(ctx, job, func(ctx context.Context) error {
		require.NotEqual(t, ambient.SpanContext().TraceID(), trace.SpanContextFromContext(ctx).TraceID())
		return nil
	}))
	p := b.one(t, "process q")
	require.False(t, p.Parent.IsValid())
	require.Empty(t, p.Links)
}

// TestPanicThroughWork: a panic unwinding through Work (from a middleware
// inside it) is recorded on the attempt's span and goes on; one through
// Step likewise.
func TestPanicThroughWork(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	job := &hopper.JobRow{ID: "j1", Type: "t", Queue: "q", Attempt: 1}
	require.PanicsWithValue(t, "inner", func() {
		_ = b.mw.Work(context.Background(), job, func(context.Context) error { panic("inner") })
	})
	p := b.one(t, "process q")
	require.Equal(t, codes.Error, p.Status.Code)
	requireAttrs(t, p, semconv.ErrorTypeKey.String("panic"), hopperotel.OutcomeKey.String(hopperotel.OutcomeFailed))
	require.Contains(t, p.Status.Description, "inner")

	require.PanicsWithValue(t, "step", func() {
		_ = b.mw.Step(context.Background(), hopper.StepMetadata{RunID: "r", Name: "s", ID: "r/s#2", Attempt: 1},
			func(context.Context) error { panic("step") })
	})
	s := b.one(t, "step s")
	require.Equal(t, codes.Error, s.Status.Code)
	requireAttrs(t, s, semconv.ErrorTypeKey.String("panic"))
}
