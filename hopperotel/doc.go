// Package hopperotel traces and measures hopper's jobs with OpenTelemetry,
// following the OpenTelemetry messaging semantic conventions. It is built
// on hopper's middleware: one *Middleware is an InsertMiddleware, a
// WorkMiddleware and a StepMiddleware, set on the client's Config.
//
//	otelmw := hopperotel.New(nil) // the global providers
//	c, err := hopper.New(hopper.Config{
//		Driver:           d,
//		InsertMiddleware: []hopper.InsertMiddleware{otelmw},
//		WorkMiddleware:   []hopper.WorkMiddleware{otelmw},
//		StepMiddleware:   []hopper.StepMiddleware{otelmw},
//	})
//
// # Spans
//
// Each insert (Enqueue, EnqueueMany, EnqueueTx, a run's start, a handler's
// Spawn, a workflow's Activity) makes one PRODUCER span "send <queue>" (or
// "send" when the rows go to several queues), a child of the span in the
// caller's context. Its context is written into each row's metadata under
// MetadataKey, so the jobs carry it through retries, deferrals, rescues
// and redrives to whichever process runs them. A row whose metadata holds
// MetadataKey already keeps it: the caller's context wins. A send span that
// is not sampled stores nothing (its jobs' attempts start their own trace
// either way, and a link to a span never exported leads nowhere), unless
// the attempts would use the context: under Options.ParentFirstAttempt, or
// when it holds baggage.
//
// Each attempt makes one CONSUMER span "process <queue>". It starts a
// trace of its own and links to the stored context rather than being its
// child: an attempt may run days after the insert, and a job retried ten
// times would otherwise make one long trace of them all
// (Options.ParentFirstAttempt parents the first attempt instead). A
// workflow run's
// executions are attempts of its job: each is a "process" span, and the
// steps that really run in it (not those replayed from its history) are
// INTERNAL "step <name>" spans inside it. What a handler or a run inserts
// (a spawned job, an activity) is sent under the attempt's span.
//
// Spans carry messaging.system "hopper", messaging.operation.name and
// .type ("send", "process"), messaging.destination.name (the queue),
// messaging.message.id (the job's id; a batch has
// messaging.batch.message_count instead) and hopper.job.kind (the job's
// type); a process span also hopper.job.attempt, and for a workflow run
// hopper.run.id, hopper.workflow.name and messaging.message.conversation_id
// (the run's id). A failed attempt or step has status Error, the error
// recorded as an event, and error.type, one of hopper's error kinds
// ("handler", "panic", "timeout", "aborted", …). A deferral (a Snooze, a
// run that waits) and a cancellation are not errors; hopper.job.outcome
// says how the attempt ended.
//
// # Metrics
//
// Through the meter: messaging.client.sent.messages (jobs inserted, unit
// "{job}"), messaging.client.consumed.messages (attempts run, "{job}") and
// messaging.process.duration (the attempts' duration, a histogram in
// seconds). Their attributes are bounded: the queue, the job's type, the
// attempt's outcome and error.type, never an id. The OpenTelemetry
// Prometheus exporter adds the unit and _total to the names.
//
// Only the OpenTelemetry API is imported here; the program chooses the SDK
// and exporters. hopper's other packages never import OpenTelemetry.
package hopperotel
