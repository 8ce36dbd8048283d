package hopper_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
)

// A standalone gate, enqueued beside the jobs it waits on: their ids are
// taken before enqueue, and the gate queues "report" once both succeed.
func ExampleGate() {
	fetch := hopper.Define("fetch", func(ctx context.Context, url string) (int, error) {
		return len(url), nil
	}, nil)
	report := hopper.Define("report", func(ctx context.Context, title string) (string, error) {
		waited := len(hopper.JobFromContext(ctx).Dependents())
		return fmt.Sprintf("%s after %d fetches", title, waited), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, fetch, report)
	defer c.Stop(ctx)

	a, b := fetch.Job("https://example.com/a", nil), fetch.Job("https://example.com/b", nil)
	gate := hopper.Gate([]string{a.ID(), b.ID()}, []*hopper.JobSpec{report.Job("daily", nil)}, hopper.AllSuccess(), 0)
	hs, err := c.EnqueueMany(ctx, a, b, gate)
	if err != nil {
		panic(err)
	}
	// The gate's group settles once the jobs it queued did.
	g, err := hs[2].Group(ctx)
	if err != nil {
		panic(err)
	}
	v, _ := hopper.GroupDecode[string](g)
	fmt.Println(v)
	// Output: daily after 2 fetches
}

// Then chains gates from a handler: the next jobs are queued once the
// previous cohort meets the condition — here, every chunk done, then one
// merge, then one publish.
func ExampleJobContext_Then() {
	var log []string
	step := hopper.Define("step", func(ctx context.Context, name string) (hopper.None, error) {
		log = append(log, name)
		return hopper.None{}, nil
	}, nil)
	pipeline := hopper.Define("pipeline", func(ctx context.Context, chunks int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for i := range chunks {
			if err := job.Spawn(step.Job(fmt.Sprintf("chunk-%d", i), nil)); err != nil {
				return hopper.None{}, err
			}
		}
		job.Then(hopper.AllDone(), step.Job("merge", nil)).
			Then(hopper.AllSuccess(), step.Job("publish", nil))
		return hopper.None{}, nil
	}, nil)

	ctx := context.Background()
	// One worker, so the log needs no lock.
	c := exampleClient(hopper.Config{MaxWorkers: 1}, step, pipeline)
	defer c.Stop(ctx)

	h, _ := pipeline.Enqueue(ctx, c, 3, nil)
	if _, err := h.Group(ctx); err != nil {
		panic(err)
	}
	fmt.Println(len(log), strings.Join(log[3:], " → "))
	// Output: 5 merge → publish
}

// A batch type runs many jobs' inputs in one call; each job still gets its
// own output.
func ExampleDefineBatch() {
	embed := hopper.DefineBatch("embed", 8, 10*time.Millisecond, func(ctx context.Context, texts []string) ([]int, error) {
		out := make([]int, len(texts))
		for i, t := range texts {
			out[i] = len(t) // one model call for the whole batch, in real life
		}
		return out, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, embed)
	defer c.Stop(ctx)

	hs, _ := embed.EnqueueMany(ctx, c, []string{"a", "bb", "ccc"}, nil)
	for _, h := range hs {
		n, _ := h.Result(ctx)
		fmt.Print(n, " ")
	}
	fmt.Println()
	// Output: 1 2 3
}

// A type's Limit caps how many of its jobs run at once in a client (and,
// with Rate, how fast they start), whatever MaxWorkers allows.
func ExampleLimit() {
	var mu sync.Mutex
	running, peak := 0, 0
	call := hopper.Define("call-partner-api", func(ctx context.Context, n int) (hopper.None, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.FairLimit(3)})

	ctx := context.Background()
	c := exampleClient(hopper.Config{MaxWorkers: 50}, call)
	defer c.Stop(ctx)

	hs, _ := call.EnqueueMany(ctx, c, make([]int, 30), nil)
	for _, h := range hs {
		_, _ = h.Result(ctx)
	}
	fmt.Println("at most", peak, "at once")
	// Output: at most 3 at once
}

// A concurrency key caps how many jobs with that key run at once across
// every process sharing the store: here at most one report per customer.
func ExampleInsertOpts_concurrencyKey() {
	var mu sync.Mutex
	running, peak := map[string]int{}, 0
	report := hopper.Define("customer-report", func(ctx context.Context, customer string) (hopper.None, error) {
		mu.Lock()
		running[customer]++
		peak = max(peak, running[customer])
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running[customer]--
		mu.Unlock()
		return hopper.None{}, nil
	}, &hopper.TypeOpts[string]{Options: func(customer string) *hopper.InsertOpts {
		return &hopper.InsertOpts{ConcurrencyKey: "customer:" + customer, ConcurrencyLimit: 1}
	}})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, report)
	defer c.Stop(ctx)

	hs, _ := report.EnqueueMany(ctx, c, []string{"acme", "acme", "acme", "globex", "globex"}, nil)
	for _, h := range hs {
		_, _ = h.Result(ctx)
	}
	fmt.Println("at most", peak, "per customer at once")
	// Output: at most 1 per customer at once
}

// OnOrphanGroup reports, once across the fleet, a fan-out group that
// settled with nobody waiting for it.
func ExampleConfig_onOrphanGroup() {
	orphans := make(chan string, 1)
	leaf := hopper.Define("leaf", func(ctx context.Context, n int) (int, error) { return n, nil }, nil)
	fan := hopper.Define("fan", func(ctx context.Context, n int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for i := range n {
			if err := job.Spawn(leaf.Job(i, nil)); err != nil {
				return hopper.None{}, err
			}
		}
		return hopper.None{}, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{OnOrphanGroup: func(g *hopper.GroupValue) { orphans <- g.ID }}, leaf, fan)
	defer c.Stop(ctx)

	h, _ := fan.Enqueue(ctx, c, 3, nil) // fire and forget: nobody calls h.Group
	fmt.Println(<-orphans == h.GroupID())
	// Output: true
}

// A handler fans out with Spawn; each child folds its result into the
// group value, exactly, however many finish at once. The parent delegates:
// its own result is empty, its group's value is the sum.
func ExampleFoldGroup() {
	square := hopper.Define("square", func(ctx context.Context, n int) (hopper.None, error) {
		return hopper.None{}, hopper.FoldGroup(ctx, func(sum int) int { return sum + n*n })
	}, nil)
	sumSquares := hopper.Define("sum-squares", func(ctx context.Context, n int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for i := 1; i <= n; i++ {
			if err := job.Spawn(square.Job(i, nil)); err != nil {
				return hopper.None{}, err
			}
		}
		return hopper.None{}, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, square, sumSquares)
	defer c.Stop(ctx)

	h, _ := sumSquares.Enqueue(ctx, c, 10, nil)
	g, err := h.Group(ctx)
	if err != nil {
		panic(err)
	}
	total, _ := hopper.GroupDecode[int](g)
	fmt.Println(total)
	// Output: 385
}

// RateLimit spaces the starts of a type's jobs: here at most 50 a second,
// one at a time.
func ExampleRateLimit() {
	var mu sync.Mutex
	var starts []time.Time
	ping := hopper.Define("ping-partner", func(ctx context.Context, _ int) (hopper.None, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Limit: hopper.RateLimit(50, 1)})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, ping)
	defer c.Stop(ctx)

	begin := time.Now()
	hs, _ := ping.EnqueueMany(ctx, c, make([]int, 4), nil)
	for _, h := range hs {
		_, _ = h.Result(ctx)
	}
	// At 50 a second, one at a time, the fourth start comes at least three
	// intervals (60 ms) after the first, which comes after the enqueue.
	// (Gaps between two starts are not checked: a start delayed by the
	// scheduler narrows the next gap.)
	mu.Lock()
	spaced := len(starts) == 4 && starts[3].Sub(begin) >= 3*20*time.Millisecond
	fmt.Println(len(starts), "started, spaced:", spaced)
	mu.Unlock()
	// Output: 4 started, spaced: true
}

// A noisy type on a queue of its own cannot starve the others: the queues
// take the worker slots in turn.
func Example_queues() {
	ingest := hopper.Define("ingest", func(ctx context.Context, _ int) (hopper.None, error) {
		time.Sleep(time.Millisecond)
		return hopper.None{}, nil
	}, &hopper.TypeOpts[int]{Queue: "bulk"})
	checkout := hopper.Define("checkout", func(ctx context.Context, _ int) (hopper.None, error) {
		return hopper.None{}, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{MaxWorkers: 2}, ingest, checkout)
	defer c.Stop(ctx)

	flood, _ := ingest.EnqueueMany(ctx, c, make([]int, 300), nil)
	h, _ := checkout.Enqueue(ctx, c, 1, nil)
	_, _ = h.Result(ctx)
	waiting := 0
	for _, f := range flood {
		if row, err := c.JobGet(ctx, f.ID()); err == nil && !row.State.Terminal() {
			waiting++
		}
	}
	fmt.Println("checkout done while most of the flood waits:", waiting > 200)
	// Output: checkout done while most of the flood waits: true
}
