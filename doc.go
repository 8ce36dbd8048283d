// Package hopper is a durable job queue and workflow engine for Go: typed
// background jobs with retries, delays, priorities, deadlines and dead
// letters, on an embedded SQLite file, on PostgreSQL for many machines, or in
// memory for tests.
//
// # Jobs
//
// A job type is a named, typed handler. Define makes one; a Client stores
// jobs and, once started, runs the jobs of the types registered with it.
//
//	type Email struct{ To, Subject string }
//
//	sendEmail := hopper.Define("send-email", func(ctx context.Context, in Email) (string, error) {
//		id, err := mailer.Send(ctx, in.To, in.Subject)
//		return id, err
//	}, &hopper.TypeOpts[Email]{Retry: hopper.RetryPolicy{Attempts: 5}})
//
//	c, err := hopper.New(hopper.Config{Driver: sqlitedriver.MustOpen("hopper.db", nil)})
//	_ = c.Register(sendEmail)
//	_ = c.Start(ctx)
//	defer c.Stop(ctx)
//
//	h, err := sendEmail.Enqueue(ctx, c, Email{To: "ada@example.com"}, &hopper.InsertOpts{Delay: time.Minute})
//	messageID, err := h.Result(ctx) // waits, in any process
//
// Callers that do not link the type enqueue by name with JSON input
// (Client.EnqueueName); the input is decoded strictly into the type's input
// before anything is stored. Client.EnqueueMany stores many jobs, of any
// types, in one transaction.
//
// # Options
//
// Per-instance options (InsertOpts: delay, run-at, priority, queue, retry
// policy, deadline, timeout, attempt timeout, unique key, metadata) are
// resolved field by field: the call, then TypeOpts.Options(input), then the
// type's constants, then the client's Config. They are stored with the job,
// so whichever worker runs it applies the same policy. Priority: higher runs
// first.
//
// # Failures
//
// A handler's error retries the job under its RetryPolicy, with the backoff
// min(base·factor^(n−1), max)·(1 − jitter·rand) (defaults: 3 attempts, 1s,
// ×2, 30s cap, jitter 0.5); out of attempts it is dead. A handler can say
// otherwise: Abort(err) dead-letters now; Snooze(d) defers without using an
// attempt; RetryAfter(err, d) retries no sooner than d. A Classifier (per
// type or client-wide) decides centrally. A panic is an ordinary failure with
// its stack kept. A job past its deadline expires, never retried.
//
// Waiters receive a *JobError; errors.Is matches ErrAborted, ErrExpired,
// ErrCancelled, ErrAttemptTimeout, … whichever process finished the job.
// Dead letters stay queryable (Client.JobList) until Client.JobRedrive or
// Client.JobRetry moves them back as fresh jobs.
//
// # Flow control
//
// Each queue has its own producer, and the queues take the worker slots
// (Config.MaxWorkers) in turn, so a backlog on one queue does not starve
// another. Config.Backpressure pauses claiming while it returns a positive
// duration (NewAdaptiveDelay backs off by itself while attempts fail):
//
//	ad := hopper.NewAdaptiveDelay(&hopper.AdaptiveDelayOpts{Max: 10 * time.Second})
//	c, err := hopper.New(hopper.Config{Backpressure: ad.Backpressure})
//
// Config.Accept sees each claimed job before it runs and may decline it: the
// job goes back to pending, its attempt unused, for another process.
//
// A Limit caps how many attempts run at once, in which order waiting ones
// start (FairLimit across fairness groups, PriorityLimit, AgeLimit) and how
// fast they start (RateLimit), for the whole client (Config.Limit) or one
// type (TypeOpts.Limit).
//
// # Groups and gates
//
// A handler fans out with JobContext.Spawn: the children join its group and
// are stored with its success; Handle.Group waits for the group to settle.
// A gate queues jobs once others meet a condition (AllSuccess(), AllDone(),
// CountDone, CountSuccess): JobContext.Then from a handler, or Gate beside
// the jobs it waits on. The transitions of the watched jobs count toward
// the gate in their own transactions, so a gate fires exactly once and
// never polls; one that can no longer fire goes stuck with its cause.
//
//	a, b := fetch.Job(urlA, nil), fetch.Job(urlB, nil)
//	gate := hopper.Gate([]string{a.ID(), b.ID()}, []*hopper.JobSpec{report.Job(day, nil)}, hopper.AllSuccess(), time.Hour)
//	_, err := c.EnqueueMany(ctx, a, b, gate)
//
// # Schedules
//
// Client.Schedule enqueues a job (Schedule.Job) or starts a workflow run
// (Schedule.Run, WorkflowType.RunSpec) at each occurrence of a cron
// expression (or of a Next function), once across every process that
// registers the schedule: the occurrence's key and its job are stored in
// one transaction. An occurrence missed while no process ran fires when one
// catches up within Schedule.CatchUp; none from before the store first saw
// the schedule fires. The store keeps each schedule's state
// for the fleet (Client.ScheduleList): Client.SchedulePause stops its
// occurrences on every process until Client.ScheduleResume.
// Client.ScheduleDefine stores a schedule instead of registering it in code
// (a StoredSchedule: a job type or workflow and its JSON input), run by
// every process that registers its target.
//
//	stop, err := c.Schedule(hopper.Schedule{Name: "nightly", Cron: "0 3 * * *",
//		Job: func(at time.Time) (*hopper.JobSpec, error) { return report.Job(at.Format(time.DateOnly), nil), nil }})
//
// # Change feed and observers
//
// Every state transition of a job, gate or run writes a Change in its own
// transaction. Client.Observe registers an observer: InCommit observers run
// inside the transition's transaction and may veto it (ErrVetoed) or add
// writes (CommitFromContext); AfterCommit observers receive every change,
// in order, at least once, from whichever process holds the observer
// name's cursor. Client.JobAttempts reads a job's attempts from its changes.
// The RetryObserver, registered in every client, reopens jobs stuck by a
// retryable engine failure up to MaxRetryAttempts lives: the example of a
// policy written on this API.
//
// # Guarantees
//
// Delivery is at least once: a worker that dies mid-job loses its lease
// (renewed by heartbeats every Visibility/3) and the job runs again with the
// next attempt number. Every state write a worker makes is a compare-and-set
// on the job's lease token, so a worker that lost its lease changes nothing.
// Guard side effects that must not repeat with JobContext.Claim, which
// returns true exactly once across the fleet.
//
// A handler whose effect is a write to the store's own database makes it
// exactly once with CompleteTx: called in the transaction that writes it,
// just before the commit, it records the job's success in that transaction,
// so the writes and the success commit together or not at all. TxStep does
// the same for a workflow step: its function writes through a transaction
// that commits with the step's record.
//
// # Workflows
//
// A workflow is plain Go that survives crashes. Workflow makes one; each
// run is a job of type "workflow:<name>" whose history, an event log,
// records what it did. Step runs a function and records its result, which
// a replay returns without running it again; Sleep, hooks, Child and
// Activity suspend the run, holding no goroutine, until their time or event
// comes.
//
//	order := hopper.Workflow("order", func(wf hopper.WorkflowContext, o Order) (string, error) {
//		payment, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) {
//			return payments.Charge(ctx, o.ID, o.Cents)
//		}, nil)
//		if err != nil {
//			return "", err
//		}
//		wf.Compensate("refund", func(ctx context.Context) error { return payments.Refund(ctx, payment) })
//		approval, err := hopper.WaitHook[Approval](wf, "approval", &hopper.HookWaitOpts{Timeout: 48 * time.Hour})
//		if err != nil {
//			return "", err // suspended (return it), or timed out: the refund runs
//		}
//		return "approved by " + approval.By, nil
//	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})
//
//	_ = c.Register(order)
//	run, err := order.Start(ctx, c, Order{ID: "o-1", Cents: 4200}, &hopper.StartOpts{ID: "order-o-1"})
//	out, err := run.Result(ctx)
//
// A run resumes by replay: its function runs again from the top and each
// recorded operation returns its recorded result. Workflow code must
// therefore be deterministic: it reads time, randomness and ids through
// WorkflowContext (Now, Random, NewID) and does side effects in steps. A
// replay that diverges from the history fails with a NonDeterminismError
// and the run goes stuck; WorkflowContext.Patch guards code changes for
// runs in flight. A recorded step never runs again in its attempt; one
// interrupted by a crash does, so step effects should be idempotent.
//
// An activity is a job of its own type; its handler may report progress
// with JobContext.HeartbeatMessage. RunGet's RunInfo.Timeline tells each
// activity's executions (started, heartbeat, failed, retry) in place in
// the history, read from the activity job's changes.
//
// Hooks wait for a payload from outside, delivered once by token:
// Client.HookResume, or over HTTP (package server) POST /v1/hooks/{token}
// or a webhook URL. When the function fails, WorkflowOpts.Strategy
// decides: retry from the beginning (the default: up to 3 retries, each
// failed attempt's compensations run before the next attempt, whose
// activities, children and step ids are its own), run the registered
// compensations at once in reverse order, fail, quarantine, or cancel the
// parent and children. Starting with a
// StartOpts.ID is idempotent; Client.RunGet, RunList, RunWait and
// RunCancel inspect and stop runs.
//
// Fetch makes an HTTP request as a recorded step (refusing the internal
// network unless Config.FetchAllowPrivate). A crash resumes a run from its
// history without using one of its retries. Client.RunHistory exports a
// run's history and ReplayHistory checks changed workflow code against
// such histories offline, in tests, before the change ships.
//
// # Testing
//
// Package hoppertest gives a client on the in-memory driver with a virtual
// clock, so backoff, delays, deadlines, leases, durable sleeps and hook
// timeouts are tested without waiting.
package hopper
