package hoppertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// exampleClient starts a client on the memory store with a virtual clock,
// as NewClient does in a test.
func exampleClient(types ...hopper.AnyType) (*hopper.Client, *hoppertest.Clock) {
	clk := hoppertest.NewClock(time.Time{})
	c, err := hopper.New(hopper.Config{Driver: memdriver.New(memdriver.WithClock(clk.Now)), Clock: clk})
	if err != nil {
		panic(err)
	}
	if err := c.Register(types...); err != nil {
		panic(err)
	}
	if err := c.Start(context.Background()); err != nil {
		panic(err)
	}
	return c, clk
}

// A workflow that sleeps a week runs to its end in virtual time.
func ExampleRunUntilComplete() {
	trial := hopper.Workflow("trial", func(wf hopper.WorkflowContext, user string) (string, error) {
		if err := wf.Sleep(7 * 24 * time.Hour); err != nil {
			return "", err
		}
		return hopper.Step(wf, "end-trial", func(ctx context.Context) (string, error) {
			return "trial over for " + user, nil
		}, nil)
	}, nil)
	c, clk := exampleClient(trial)
	ctx := context.Background()
	defer c.Stop(ctx)

	start := clk.Now()
	run, _ := trial.Start(ctx, c, "ada", nil)
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	fmt.Println(out, err, clk.Now().Sub(start))
	// Output: trial over for ada <nil> 168h0m0s
}

// Retries wait out their backoff in virtual time.
func ExampleRunUntilIdle() {
	tries := 0
	flaky := hopper.Define("flaky", func(context.Context, string) (int, error) {
		tries++
		if tries < 3 {
			return 0, errors.New("upstream unavailable")
		}
		return tries, nil
	}, &hopper.TypeOpts[string]{Retry: hopper.RetryPolicy{Attempts: 5, Base: 10 * time.Minute, Max: time.Hour, Jitter: hopper.NoJitter}})
	c, clk := exampleClient(flaky)
	ctx := context.Background()
	defer c.Stop(ctx)

	start := clk.Now()
	h, _ := flaky.Enqueue(ctx, c, "x", nil)
	if err := hoppertest.RunUntilIdle(ctx, c, clk, nil); err != nil {
		panic(err)
	}
	n, err := h.Result(ctx)
	fmt.Println(n, err, clk.Now().Sub(start))
	// Output: 3 <nil> 30m0s
}

// With AutoAdvance, a test waits on results as it would with a real
// clock; delays pass at once.
func ExampleAutoAdvance() {
	remind := hopper.Define("remind", func(_ context.Context, who string) (string, error) {
		return "reminded " + who, nil
	}, nil)
	c, clk := exampleClient(remind)
	ctx := context.Background()
	defer c.Stop(ctx)
	stop := hoppertest.AutoAdvance(c, clk, nil)
	defer stop()

	h, _ := remind.Enqueue(ctx, c, "ada", &hopper.InsertOpts{Delay: 3 * 24 * time.Hour})
	fmt.Println(h.Result(ctx))
	// Output: reminded ada <nil>
}

// An activity runs a stub in a test: register the stub in place of the
// real type.
func ExampleStubType() {
	geocode := hopper.Define("geocode", func(ctx context.Context, address string) (string, error) {
		return "", errors.New("calls a paid API")
	}, nil)
	deliver := hopper.Workflow("deliver", func(wf hopper.WorkflowContext, address string) (string, error) {
		return hopper.Activity(wf, geocode, address, nil)
	}, nil)
	stub := hoppertest.StubType(geocode, func(_ context.Context, address string) (string, error) {
		return "52.52,13.40", nil
	})
	c, clk := exampleClient(deliver, stub)
	ctx := context.Background()
	defer c.Stop(ctx)

	run, _ := deliver.Start(ctx, c, "Unter den Linden 1", nil)
	fmt.Println(hoppertest.RunUntilComplete(ctx, c, clk, run, nil))
	fmt.Println(stub.Calls())
	// Output:
	// 52.52,13.40 <nil>
	// [Unter den Linden 1]
}

// printTB stands in for a test's *testing.T in the examples: it prints a
// failure instead of failing.
type printTB struct{}

func (printTB) Helper() {}
func (printTB) Fatalf(format string, args ...any) {
	fmt.Println("FAIL:", strings.SplitN(fmt.Sprintf(format, args...), ";", 2)[0])
}

// RequireEnqueued finds the one job of a type matching the options and
// returns its input; a miss fails the test saying what is there instead.
func ExampleRequireEnqueued() {
	welcome := hopper.Define("welcome", func(ctx context.Context, email string) (hopper.None, error) {
		return hopper.None{}, nil
	}, nil)
	c, _ := exampleClient() // welcome is not registered: its jobs stay put
	ctx := context.Background()
	defer c.Stop(ctx)
	_, _ = welcome.Enqueue(ctx, c, "ada@example.com", &hopper.InsertOpts{Queue: "mail"})

	var t hoppertest.TB = printTB{} // in a test, the test's t
	job := hoppertest.RequireEnqueued(t, c, welcome, &hoppertest.JobOpts[string]{Queue: "mail"})
	fmt.Println(job.Input)
	hoppertest.RequireEnqueued(t, c, welcome, &hoppertest.JobOpts[string]{Match: func(email string) bool { return email == "bob@example.com" }})
	// Output:
	// ada@example.com
	// FAIL: hoppertest: no "welcome" job with an input Match accepts was enqueued
}

// RequireHistory checks that a run recorded these events, in order.
func ExampleRequireHistory() {
	greet := hopper.Workflow("greet", func(wf hopper.WorkflowContext, name string) (string, error) {
		return hopper.Step(wf, "say-hello", func(context.Context) (string, error) { return "hello " + name, nil }, nil)
	}, nil)
	c, clk := exampleClient(greet)
	ctx := context.Background()
	defer c.Stop(ctx)
	run, _ := greet.Start(ctx, c, "ada", &hopper.StartOpts{ID: "greet-1"})
	_, _ = hoppertest.RunUntilComplete(ctx, c, clk, run, nil)

	var t hoppertest.TB = printTB{}
	hoppertest.RequireHistory(t, c, run.ID(), hoppertest.Event{Kind: "step", Name: "say-hello"})
	hoppertest.RequireHistory(t, c, run.ID(), hoppertest.Event{Kind: "step", Name: "say-goodbye"})
	// Output:
	// FAIL: hoppertest: run greet-1's history lacks step "say-goodbye" (after 0 of 1 wanted events)
}

// A child workflow runs a stub in a test.
func ExampleStubWorkflow() {
	audit := hopper.Workflow("audit", func(wf hopper.WorkflowContext, account string) (bool, error) {
		return false, errors.New("the real audit takes days")
	}, nil)
	close := hopper.Workflow("close-account", func(wf hopper.WorkflowContext, account string) (string, error) {
		clean, err := hopper.Child(wf, audit, account, nil)
		if err != nil || !clean {
			return "kept", err
		}
		return "closed", nil
	}, nil)
	stub := hoppertest.StubWorkflow(audit, func(_ context.Context, account string) (bool, error) { return true, nil })
	c, clk := exampleClient(close, stub)
	ctx := context.Background()
	defer c.Stop(ctx)

	run, _ := close.Start(ctx, c, "acct-7", nil)
	fmt.Println(hoppertest.RunUntilComplete(ctx, c, clk, run, nil))
	fmt.Println(stub.Calls())
	// Output:
	// closed <nil>
	// [acct-7]
}

// RequireReplay replays the recorded histories of a workflow against its
// current code.
func ExampleRequireReplay() {
	greet := hopper.Workflow("greet", func(wf hopper.WorkflowContext, name string) (string, error) {
		return hopper.Step(wf, "say-hello", func(context.Context) (string, error) { return "hello " + name, nil }, nil)
	}, nil)
	c, clk := exampleClient(greet)
	ctx := context.Background()
	defer c.Stop(ctx)
	run, _ := greet.Start(ctx, c, "ada", nil)
	_, _ = hoppertest.RunUntilComplete(ctx, c, clk, run, nil)

	// Export the run's history, as `hopper runs history ID` does.
	dir, _ := os.MkdirTemp("", "histories")
	defer os.RemoveAll(dir)
	h, _ := c.RunHistory(ctx, run.ID())
	b, _ := json.Marshal(h)
	_ = os.WriteFile(filepath.Join(dir, "greet.json"), b, 0o600)

	var t hoppertest.TB = printTB{}
	fmt.Println(hoppertest.RequireReplay(t, greet, filepath.Join(dir, "*.json")), "replayed")
	// Output: 1 replayed
}

// RequireNotEnqueued fails when a matching job is there.
func ExampleRequireNotEnqueued() {
	refund := hopper.Define("refund", func(ctx context.Context, cents int) (hopper.None, error) {
		return hopper.None{}, nil
	}, nil)
	c, _ := exampleClient()
	ctx := context.Background()
	defer c.Stop(ctx)
	_, _ = refund.Enqueue(ctx, c, 500, nil)

	var t hoppertest.TB = printTB{}
	hoppertest.RequireNotEnqueued(t, c, refund, &hoppertest.JobOpts[int]{Match: func(cents int) bool { return cents > 1000 }})
	hoppertest.RequireNotEnqueued(t, c, refund, nil)
	// Output:
	// FAIL: hoppertest: want no "refund" job, found 1
}

// RequireRunCompleted requires that a run completed and returns its
// output; a failed run fails the test with its error and steps.
func ExampleRequireRunCompleted() {
	double := hopper.Workflow("double", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "double", func(context.Context) (int, error) { return 2 * n, nil }, nil)
	}, nil)
	c, _ := exampleClient(double)
	ctx := context.Background()
	defer c.Stop(ctx)
	run, _ := double.Start(ctx, c, 21, nil)

	var t hoppertest.TB = printTB{}
	fmt.Println(hoppertest.RequireRunCompleted(t, c, run))
	// Output: 42
}

// A virtual clock moves only when told, firing the timers it passes.
func ExampleNewClock() {
	clk := hoppertest.NewClock(time.Time{}) // at hoppertest.Epoch
	fired := clk.NewTimer(time.Hour)
	clk.Advance(time.Hour)
	<-fired.C()
	fmt.Println(clk.Now().Format(time.RFC3339))
	// Output: 2030-01-01T01:00:00Z
}

// exampleT is an example's stand-in for *testing.T: it prints failures
// and runs the cleanups when done is called.
type exampleT struct {
	printTB
	cleanups []func()
}

func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf("ERROR: "+format+"\n", args...) }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// NewClient gives a test a started client on the memory store with a
// virtual clock; a delay passes when the clock moves.
func ExampleNewClient() {
	t := &exampleT{} // in a test, the test's t
	defer t.done()
	greet := hopper.Define("greet", func(_ context.Context, name string) (string, error) {
		return "hello " + name, nil
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	_ = c.Register(greet)
	ctx := context.Background()

	h, _ := greet.Enqueue(ctx, c, "ada", &hopper.InsertOpts{Delay: time.Hour})
	clk.Advance(time.Hour) // no waiting
	fmt.Println(h.Result(ctx))
	// Output: hello ada <nil>
}

// Work runs one attempt of a job through the engine and reports what the
// engine made of it: here a failure, retried after the policy's backoff.
func ExampleWork() {
	t := &exampleT{}
	defer t.done()
	invoice := hopper.Define("invoice", func(ctx context.Context, order string) (string, error) {
		if order == "" {
			return "", errors.New("no order")
		}
		return "invoice for " + order, nil
	}, &hopper.TypeOpts[string]{Retry: hopper.RetryPolicy{Base: time.Minute, Max: time.Hour, Jitter: hopper.NoJitter}})

	w := hoppertest.Work(t, invoice, "o-1", nil)
	fmt.Println(w.Job.State, w.Output)
	w = hoppertest.Work(t, invoice, "", nil)
	fmt.Println(w.Job.State, w.Attempt.Error.Message, w.Job.RunAt.Sub(w.Attempt.StartedAt))
	// Output:
	// succeeded invoice for o-1
	// retrying no order 1m0s
}

// A step's call to a service the test cannot reach runs a stub.
func ExampleStubStep() {
	t := &exampleT{}
	defer t.done()
	convert := hopper.Workflow("convert", func(wf hopper.WorkflowContext, cents int) (float64, error) {
		rate, err := hopper.Step(wf, "fetch-rate", func(ctx context.Context) (float64, error) {
			return 0, errors.New("calls the exchange-rate service")
		}, nil)
		return float64(cents) / 100 * rate, err
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	_ = c.Register(convert)
	hoppertest.StubStep(t, c, "fetch-rate", func(context.Context) (float64, error) { return 1.5, nil })

	ctx := context.Background()
	run, _ := convert.Start(ctx, c, 1000, nil)
	fmt.Println(hoppertest.RunUntilComplete(ctx, c, clk, run, nil))
	// Output: 15 <nil>
}
