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
// Dead letters stay queryable (Client.List) until Client.Redrive or
// Client.Retry moves them back as fresh jobs.
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
// # Testing
//
// Package hoppertest gives a client on the in-memory driver with a virtual
// clock, so backoff, delays, deadlines and leases are tested without
// waiting.
package hopper
