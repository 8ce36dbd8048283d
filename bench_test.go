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
