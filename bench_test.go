package hopper_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

var noop = hopper.Define("noop", func(context.Context, int) (hopper.None, error) { return hopper.None{}, nil }, nil)

// BenchmarkEnqueue measures enqueueing one job per call on the memory driver.
func BenchmarkEnqueue(b *testing.B) {
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := noop.Enqueue(ctx, c, i, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueMany measures enqueueing 1,000 jobs per call.
func BenchmarkEnqueueMany(b *testing.B) {
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ins := make([]int, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := noop.EnqueueMany(ctx, c, ins, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ins))/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkThroughputNoop measures end-to-end no-op throughput on the memory
// driver: b.N jobs are inserted first, then the clock runs from Start until
// every completion has committed.
func BenchmarkThroughputNoop(b *testing.B) {
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New(), OnEvent: func(e hopper.Event) {
		if e.Kind == hopper.EventSucceeded && done.Add(1) == n {
			close(all)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(noop); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ins := make([]int, 5000)
	for left := b.N; left > 0; left -= len(ins) {
		if left < len(ins) {
			ins = ins[:left]
		}
		if _, err := noop.EnqueueMany(ctx, c, ins, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	elapsed := time.Since(start)
	b.StopTimer()
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}

// BenchmarkChannelHandoff is the floor the memory driver is measured
// against: b.N items handed through a buffered channel to 100 goroutines,
// each "completion" counted, no durability at all.
func BenchmarkChannelHandoff(b *testing.B) {
	ch := make(chan int, 5000)
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	for range 100 {
		go func() {
			for range ch {
				if done.Add(1) == n {
					close(all)
				}
			}
		}()
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ch <- i
	}
	<-all
	elapsed := time.Since(start)
	b.StopTimer()
	close(ch)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}

// BenchmarkWorkflowSteps measures workflow overhead on the memory driver:
// one run of b.N no-op steps, so ns/op is the cost of a checkpointed step
// (its record included).
func BenchmarkWorkflowSteps(b *testing.B) {
	n := b.N
	wf := hopper.Workflow("bench-steps", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		for i := range n {
			if _, err := hopper.Step(wf, "s", func(context.Context) (int, error) { return i, nil }, nil); err != nil {
				return 0, err
			}
		}
		return n, nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(wf); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Stop(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkWorkflowRuns measures whole 3-step workflows on the memory
// driver, 100 at a time.
func BenchmarkWorkflowRuns(b *testing.B) {
	wf := hopper.Workflow("bench-3", func(wf hopper.WorkflowContext, in int) (int, error) {
		for _, name := range [...]string{"a", "b", "c"} {
			if _, err := hopper.Step(wf, name, func(context.Context) (int, error) { return in, nil }, nil); err != nil {
				return 0, err
			}
		}
		return in, nil
	}, nil)
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New(), MaxWorkers: 100, OnEvent: func(e hopper.Event) {
		if e.Kind == hopper.EventSucceeded && done.Add(1) == n {
			close(all)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(wf); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range b.N {
		if _, err := wf.Start(ctx, c, i, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "workflows/s")
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFanOutFanIn measures a fan-out of 10,000 children folded into
// their group, then a gate that fires once all of them succeeded: one op
// is one whole fan-out and fan-in, on each store.
func BenchmarkFanOutFanIn(b *testing.B) {
	const children = 10000
	leaf := hopper.Define("bench-leaf", func(ctx context.Context, n int) (hopper.None, error) {
		return hopper.None{}, hopper.FoldGroup(ctx, func(acc int) int { return acc + n })
	}, nil)
	final := hopper.Define("bench-final", func(ctx context.Context, _ int) (int, error) {
		return len(hopper.JobFromContext(ctx).Dependents()), nil
	}, nil)
	root := hopper.Define("bench-root", func(ctx context.Context, n int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for range n {
			if err := job.Spawn(leaf.Job(1, nil)); err != nil {
				return hopper.None{}, err
			}
		}
		job.Then(hopper.AllSuccess(), final.Job(0, nil))
		return hopper.None{}, nil
	}, nil)
	for _, dc := range testDrivers() {
		b.Run(dc.name, func(b *testing.B) {
			c, err := hopper.New(hopper.Config{Driver: dc.open(b), MaxWorkers: 100})
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Register(leaf, final, root); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer c.Stop(ctx)
			b.ResetTimer()
			for range b.N {
				h, err := root.Enqueue(ctx, c, children, nil)
				if err != nil {
					b.Fatal(err)
				}
				g, err := h.Group(ctx)
				if err != nil {
					b.Fatal(err)
				}
				// The leaves fold 1 each; the gate's job queues final, whose
				// result (its dependents, 10,000) is the last contribution.
				if v, err := hopper.GroupDecode[int](g); err != nil || v != children {
					b.Fatalf("group value %d, %v; want %d", v, err, children)
				}
			}
			b.ReportMetric(float64(b.N*children)/b.Elapsed().Seconds(), "children/s")
		})
	}
}
