package hopper_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// exampleClient starts a client on a memory store; the caller stops it.
func exampleClient(cfg hopper.Config, types ...hopper.AnyType) *hopper.Client {
	if cfg.Driver == nil {
		cfg.Driver = memdriver.New()
	}
	if cfg.Clock != nil && cfg.Visibility == 0 {
		// Examples jump a virtual clock by hours: a lease longer than any
		// jump keeps an execution still in flight at the jump from being
		// rescued (and retried on a clock that no longer moves).
		cfg.Visibility = 72 * time.Hour
	}
	c, err := hopper.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := c.Register(types...); err != nil {
		panic(err)
	}
	if err := c.Start(context.Background()); err != nil {
		panic(err)
	}
	return c
}

// Define a typed job, enqueue it, and wait for its result.
func Example() {
	type Add struct{ A, B int }
	add := hopper.Define("add", func(ctx context.Context, in Add) (int, error) {
		return in.A + in.B, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, add)
	defer c.Stop(ctx)

	h, err := add.Enqueue(ctx, c, Add{A: 1, B: 2}, nil)
	if err != nil {
		panic(err)
	}
	sum, err := h.Result(ctx)
	fmt.Println(sum, err)
	// Output: 3 <nil>
}

// A failing attempt is retried under the job's policy, with backoff.
func Example_retries() {
	flaky := hopper.Define("flaky", func(ctx context.Context, failures int) (string, error) {
		job := hopper.JobFromContext(ctx)
		if job.Attempt() <= failures {
			return "", fmt.Errorf("attempt %d failed", job.Attempt())
		}
		return fmt.Sprintf("succeeded on attempt %d of %d", job.Attempt(), job.MaxAttempts()), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 5, Base: time.Millisecond}})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, flaky)
	defer c.Stop(ctx)

	h, _ := flaky.Enqueue(ctx, c, 2, nil)
	fmt.Println(h.Result(ctx))

	// Out of attempts, the job is dead-lettered and the waiter gets the last error.
	h, _ = flaky.Enqueue(ctx, c, 9, &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: 2}})
	_, err := h.Result(ctx)
	var je *hopper.JobError
	if errors.As(err, &je) {
		fmt.Println(je.State, je.Attempt, je.Message)
	}
	// Output:
	// succeeded on attempt 3 of 5 <nil>
	// dead 2 attempt 2 failed
}

// Snooze defers a job without using an attempt: poll-style waiting.
func Example_snooze() {
	checks := 0
	poll := hopper.Define("poll", func(ctx context.Context, _ hopper.None) (string, error) {
		checks++
		if checks < 3 {
			return "", hopper.Snooze(time.Millisecond) // not ready: look again soon
		}
		return fmt.Sprintf("ready after %d checks, attempt %d", checks, hopper.JobFromContext(ctx).Attempt()), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, poll)
	defer c.Stop(ctx)

	h, _ := poll.Enqueue(ctx, c, hopper.None{}, nil)
	fmt.Println(h.Result(ctx))
	// Output: ready after 3 checks, attempt 1 <nil>
}

// Abort dead-letters a job at once; a classifier can decide the same
// centrally.
func Example_abort() {
	errDeclined := errors.New("card declined")
	charge := hopper.Define("charge", func(ctx context.Context, cents int) (string, error) {
		if cents > 1000 {
			return "", hopper.Abort(errDeclined) // permanent: retrying will not help
		}
		return "charged", nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, charge)
	defer c.Stop(ctx)

	h, _ := charge.Enqueue(ctx, c, 5000, nil)
	_, err := h.Result(ctx)
	fmt.Println(errors.Is(err, hopper.ErrAborted))
	row, _ := c.JobGet(ctx, h.ID())
	fmt.Println(row.State, row.Attempt)
	// Output:
	// true
	// dead 1
}

// A job that cannot start and finish by its deadline expires without
// running; its waiter gets ErrExpired.
func Example_deadline() {
	report := hopper.Define("report", func(ctx context.Context, _ hopper.None) (string, error) {
		return "done", nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, report)
	defer c.Stop(ctx)

	h, _ := report.Enqueue(ctx, c, hopper.None{}, &hopper.InsertOpts{
		Delay:   20 * time.Millisecond, // due in 20ms …
		Timeout: 10 * time.Millisecond, // … but must be done within 10ms
	})
	_, err := h.Result(ctx)
	fmt.Println(errors.Is(err, hopper.ErrExpired))
	// Output: true
}

// Dead letters stay queryable; JobRedrive moves them back as fresh jobs once
// the cause is fixed.
func Example_redrive() {
	downstreamUp := false
	sync := hopper.Define("sync", func(ctx context.Context, _ hopper.None) (int, error) {
		if !downstreamUp {
			return 0, hopper.Abort(errors.New("downstream down"))
		}
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, sync)
	defer c.Stop(ctx)

	h, _ := sync.Enqueue(ctx, c, hopper.None{}, nil)
	_, err := h.Result(ctx)
	fmt.Println("first run:", err != nil)

	dead, _ := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{hopper.StateDead}})
	fmt.Println("dead letters:", len(dead.Jobs))

	downstreamUp = true
	n, _ := c.JobRedrive(ctx, &hopper.RedriveParams{Type: "sync"})
	fmt.Println("redriven:", n)
	attempt, err := h.Result(ctx)
	fmt.Println("after redrive: attempt", attempt, err)
	// Output:
	// first run: true
	// dead letters: 1
	// redriven: 1
	// after redrive: attempt 1 <nil>
}

// A unique key makes enqueueing idempotent while the first job is live.
func Example_uniqueKey() {
	welcome := hopper.Define("welcome-email", func(ctx context.Context, user string) (string, error) {
		return "sent to " + user, nil
	}, nil)

	ctx := context.Background()
	c, _ := hopper.New(hopper.Config{Driver: memdriver.New()}) // enqueue only: no workers yet

	first, _ := welcome.Enqueue(ctx, c, "ada", &hopper.InsertOpts{UniqueKey: "welcome:ada"})
	second, _ := welcome.Enqueue(ctx, c, "ada", &hopper.InsertOpts{UniqueKey: "welcome:ada"})
	fmt.Println(first.ID() == second.ID(), second.Deduplicated())

	_ = c.Register(welcome)
	_ = c.Start(ctx)
	defer c.Stop(ctx)
	fmt.Println(second.Result(ctx))
	// Output:
	// true true
	// sent to ada <nil>
}

// Lifecycle events reach a client-wide hook (and a per-type one) after each
// transition commits.
func Example_events() {
	events := make(chan hopper.Event, 16)
	flaky := hopper.Define("flaky", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		if hopper.JobFromContext(ctx).Attempt() == 1 {
			return hopper.None{}, errors.New("transient")
		}
		return hopper.None{}, nil
	}, &hopper.TypeOpts[hopper.None]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})

	ctx := context.Background()
	c := exampleClient(hopper.Config{OnEvent: func(e hopper.Event) {
		if e.Kind == hopper.EventFailed || e.Kind == hopper.EventSucceeded {
			events <- e
		}
	}}, flaky)
	defer c.Stop(ctx)

	h, _ := flaky.Enqueue(ctx, c, hopper.None{}, nil)
	_, _ = h.Result(ctx)
	for range 2 {
		e := <-events
		fmt.Println(e.Kind, "attempt", e.Attempt, "will retry:", e.WillRetry)
	}
	// Output:
	// failed attempt 1 will retry: true
	// succeeded attempt 2 will retry: false
}

// Retry retries a plain function with backoff, outside any job.
func ExampleRetry() {
	calls := 0
	err := hopper.Retry(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	}, hopper.RetryPolicy{Attempts: 5, Base: time.Millisecond})
	fmt.Println(calls, err)
	// Output: 3 <nil>
}

// A long handler reports its progress; the message is kept with the
// attempt, in the change feed (and, for an activity, in its run's
// timeline).
func ExampleJobContext_HeartbeatMessage() {
	files := []string{"a.csv", "b.csv", "c.csv"}
	importer := hopper.Define("import", func(ctx context.Context, names []string) (int, error) {
		jc := hopper.JobFromContext(ctx)
		for i := range names {
			// … import names[i] …
			if err := jc.HeartbeatMessage(ctx, fmt.Sprintf("%d of %d files", i+1, len(names))); err != nil {
				return i, err // the lease was lost, or a cancel was asked for
			}
		}
		return len(names), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, importer)
	defer c.Stop(ctx)

	h, _ := importer.Enqueue(ctx, c, files, nil)
	n, _ := h.Result(ctx)
	attempts, _ := c.JobAttempts(ctx, h.ID())
	fmt.Println("imported", n)
	for _, hb := range attempts[0].Heartbeats {
		fmt.Println(hb.Message)
	}
	// Output:
	// imported 3
	// 1 of 3 files
	// 2 of 3 files
	// 3 of 3 files
}
