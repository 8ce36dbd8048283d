package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// Backpressure pauses claiming while something the jobs need is
// saturated: jobs are still enqueued, and run once it clears.
func Example_backpressure() {
	var saturated atomic.Bool // say, the database pool is nearly exhausted
	saturated.Store(true)
	report := hopper.Define("report", func(ctx context.Context, _ hopper.None) (string, error) {
		return "done", nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{Backpressure: func(ctx context.Context) time.Duration {
		if saturated.Load() {
			return 20 * time.Millisecond // wait, then ask again
		}
		return 0
	}}, report)
	defer c.Stop(ctx)

	h, _ := report.Enqueue(ctx, c, hopper.None{}, nil)
	row, _ := c.JobGet(ctx, h.ID())
	fmt.Println(row.State)

	saturated.Store(false)
	fmt.Println(h.Result(ctx))
	// Output:
	// pending
	// done <nil>
}

// An AdaptiveDelay slows claiming down while attempts fail and speeds it up
// again as they succeed; the client feeds it the outcomes.
func ExampleNewAdaptiveDelay() {
	call := hopper.Define("call-api", func(ctx context.Context, n int) (int, error) {
		if hopper.JobFromContext(ctx).Attempt() < 3 {
			return 0, errors.New("503 from the API") // each failure lengthens the pause
		}
		return n * 2, nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 5, Base: time.Millisecond}})

	ad := hopper.NewAdaptiveDelay(&hopper.AdaptiveDelayOpts{Types: []string{"call-api"}, Max: 5 * time.Second})
	ctx := context.Background()
	c := exampleClient(hopper.Config{Backpressure: ad.Backpressure}, call)
	defer c.Stop(ctx)

	h, _ := call.Enqueue(ctx, c, 21, nil)
	fmt.Println(h.Result(ctx))
	// Output: 42 <nil>
}

// Accept shards job types across processes: each declines the other's
// jobs, which go straight back to the queue, attempt unused, for the other
// to take.
func Example_accept() {
	ctx := context.Background()
	store := memdriver.New()
	// Every process runs the same code; the handlers say where they ran.
	process := func(id, accepts string) *hopper.Client {
		thumbnail := hopper.Define("thumbnail", func(ctx context.Context, name string) (string, error) {
			return name + ".png, made on " + id, nil
		}, nil)
		email := hopper.Define("email", func(ctx context.Context, to string) (string, error) {
			return "mailed " + to + " from " + id, nil
		}, nil)
		accept := func(i hopper.AcceptInfo) bool { return i.Type == accepts }
		return exampleClient(hopper.Config{Driver: store, WorkerID: id, Accept: accept}, thumbnail, email)
	}
	gpu := process("gpu-1", "thumbnail")
	defer gpu.Stop(ctx)
	web := process("web-1", "email")
	defer web.Stop(ctx)

	for _, job := range []struct{ typ, in string }{{"thumbnail", `"cat"`}, {"email", `"ada@example.com"`}} {
		h, _ := web.EnqueueName(ctx, job.typ, json.RawMessage(job.in), nil)
		out, _ := h.Result(ctx)
		row, _ := web.JobGet(ctx, h.ID())
		fmt.Printf("%s, attempt %d\n", out, row.Attempt)
	}
	// Output:
	// "cat.png, made on gpu-1", attempt 1
	// "mailed ada@example.com from web-1", attempt 1
}
