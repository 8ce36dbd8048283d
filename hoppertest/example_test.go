package hoppertest_test

import (
	"context"
	"errors"
	"fmt"
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
