package hopperotel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hopperotel"
)

// crossJob fails its first attempt and succeeds at its second (its input),
// in whichever process works it.
var crossJob = hopper.Define("otel-cross", flaky, &hopper.TypeOpts[int]{
	Retry: hopper.RetryPolicy{Attempts: 3, Base: 10 * time.Millisecond, Jitter: hopper.NoJitter},
})

// spanRecord is a span as the worker child writes it, one JSON object a
// line.
type spanRecord struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	TraceID string            `json:"trace_id"`
	SpanID  string            `json:"span_id"`
	Parent  string            `json:"parent,omitempty"`
	Links   []linkRecord      `json:"links,omitempty"`
	Attrs   map[string]string `json:"attrs"`
	Status  string            `json:"status"`
}

type linkRecord struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// jsonLines is a span exporter that writes each span it is given as a
// spanRecord line.
type jsonLines struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *jsonLines) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		rec := spanRecord{Name: s.Name(), Kind: s.SpanKind().String(), TraceID: s.SpanContext().TraceID().String(),
			SpanID: s.SpanContext().SpanID().String(), Attrs: map[string]string{}, Status: s.Status().Code.String()}
		if s.Parent().IsValid() {
			rec.Parent = s.Parent().SpanID().String()
		}
		for _, l := range s.Links() {
			rec.Links = append(rec.Links, linkRecord{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
		}
		for _, kv := range s.Attributes() {
			rec.Attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if err := e.enc.Encode(rec); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonLines) Shutdown(context.Context) error { return nil }

// TestWorkerChild is the worker process of
// TestTraceJoinsEnqueueToAttemptsInAnotherProcess: on the SQLite file it
// is given, traced by a Middleware whose spans go to a JSON lines file, it
// works jobs until the job it is given has finished, then exits.
func TestWorkerChild(t *testing.T) {
	db, spansPath, jobID := os.Getenv("HOPPEROTEL_CHILD_DB"), os.Getenv("HOPPEROTEL_CHILD_SPANS"), os.Getenv("HOPPEROTEL_CHILD_JOB")
	if db == "" {
		t.Skip("the worker child of TestTraceJoinsEnqueueToAttemptsInAnotherProcess; runs only when it starts it")
	}
	fail := func(what string, err error) {
		fmt.Println(what+":", err)
		os.Exit(2)
	}
	f, err := os.Create(spansPath)
	if err != nil {
		fail("create spans file", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(&jsonLines{enc: json.NewEncoder(f)}))
	mw := hopperotel.New(&hopperotel.Options{TracerProvider: tp})
	d, err := sqlitedriver.Open(db, nil)
	if err != nil {
		fail("open", err)
	}
	c, err := hopper.New(hopper.Config{Driver: d, WorkMiddleware: []hopper.WorkMiddleware{mw}, PollInterval: 50 * time.Millisecond, WorkerID: "child"})
	if err != nil {
		fail("new client", err)
	}
	if err := c.Register(crossJob); err != nil {
		fail("register", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		fail("start", err)
	}
	row, err := c.JobWait(ctx, jobID)
	if err != nil {
		fail("wait", err)
	}
	if err := c.Stop(ctx); err != nil {
		fail("stop", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		fail("tracer provider shutdown", err)
	}
	if err := f.Close(); err != nil {
		fail("close spans file", err)
	}
	_ = d.Close()
	fmt.Println("job", row.State)
	os.Exit(0)
}

// TestTraceJoinsEnqueueToAttemptsInAnotherProcess: a job enqueued in this
// process on a SQLite file is worked, and retried, by a worker in another
// process; each of its attempts' process spans, exported there, links to
// the send span this process exported, which is the child of the request
// that enqueued it.
func TestTraceJoinsEnqueueToAttemptsInAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, spansPath := filepath.Join(dir, "hopper.db"), filepath.Join(dir, "spans.jsonl")
	d, err := sqlitedriver.Open(db, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mw := hopperotel.New(&hopperotel.Options{TracerProvider: tp})
	// This process only enqueues: its client is never started.
	c, err := hopper.New(hopper.Config{Driver: d, InsertMiddleware: []hopper.InsertMiddleware{mw}})
	require.NoError(t, err)
	require.NoError(t, c.Register(crossJob))
	ctx := testCtx(t)

	reqCtx, req := tp.Tracer("test").Start(ctx, "request")
	h, err := crossJob.Enqueue(reqCtx, c, 2, nil)
	req.End()
	require.NoError(t, err)
	var send tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "send "+hopper.DefaultQueue {
			send = s
		}
	}
	require.True(t, send.SpanContext.IsValid(), "no send span")
	require.Equal(t, req.SpanContext().SpanID(), send.Parent.SpanID(), "the send span is the request's child")

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOPPEROTEL_CHILD_DB="+db, "HOPPEROTEL_CHILD_SPANS="+spansPath, "HOPPEROTEL_CHILD_JOB="+h.ID())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "worker child: %s", out)
	require.Contains(t, string(out), "job succeeded")

	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Equal(t, 2, row.Attempt)

	spans, err := os.Open(spansPath)
	require.NoError(t, err)
	defer spans.Close()
	var attempts []spanRecord
	sc := bufio.NewScanner(spans)
	for sc.Scan() {
		var rec spanRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
		if rec.Name == "process "+hopper.DefaultQueue {
			attempts = append(attempts, rec)
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, attempts, 2, "one span per attempt")
	for i, a := range attempts {
		require.Equal(t, "consumer", a.Kind)
		require.Equal(t, fmt.Sprint(i+1), a.Attrs["hopper.job.attempt"])
		require.Equal(t, h.ID(), a.Attrs["messaging.message.id"])
		require.Equal(t, []linkRecord{{TraceID: send.SpanContext.TraceID().String(), SpanID: send.SpanContext.SpanID().String()}}, a.Links,
			"attempt %d links to the send span of the other process", i+1)
		require.Empty(t, a.Parent)
		require.NotEqual(t, send.SpanContext.TraceID().String(), a.TraceID)
	}
	require.Equal(t, "Error", attempts[0].Status, "the first attempt failed")
	require.Equal(t, "handler", attempts[0].Attrs["error.type"])
	require.Equal(t, "Unset", attempts[1].Status)
}
