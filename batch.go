package hopper

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
)

// BatchFunc runs a batch: it receives the inputs of several jobs and
// returns one output per input, in the same order.
type BatchFunc[I, O any] func(ctx context.Context, in []I) ([]O, error)

// DefineBatch makes a job type whose jobs run together: each job is
// enqueued, prioritised, retried and joins groups on its own, but a worker
// process gathers the jobs of the type it has claimed — up to size of them,
// or as many as arrived within maxWait of the first — and calls run once
// with their inputs. Each job's handle gets its own output, the one at its
// index.
//
// When run fails, every job in the batch fails with that error and follows
// its own retry policy (a retried job may land in another batch). A run
// that returns Snooze defers every job. A run that returns a number of
// outputs other than the number of inputs fails the batch with
// `batch "<type>" returned N outputs for M inputs`.
//
// run gets no JobContext (it serves several jobs); its context ends when
// the client stops. Jobs waiting for their batch hold worker slots, so a
// batch holds at most Config.MaxWorkers jobs: set MaxWorkers to at least
// size. opts are as for Define.
func DefineBatch[I, O any](name string, size int, maxWait time.Duration, run BatchFunc[I, O], opts *TypeOpts[I]) *Type[I, O] {
	switch {
	case size < 1:
		panic(fmt.Sprintf("hopper: DefineBatch %q with size %d (want at least 1)", name, size))
	case maxWait < 0:
		panic(fmt.Sprintf("hopper: DefineBatch %q with a negative maxWait", name))
	case run == nil:
		panic(fmt.Sprintf("hopper: DefineBatch %q with a nil run", name))
	}
	def := &batchDef[I, O]{name: name, size: size, maxWait: maxWait, run: run}
	return Define(name, def.join, opts)
}

// batchDef is a batch type's definition; its join is the type's handler.
type batchDef[I, O any] struct {
	name    string
	size    int
	maxWait time.Duration
	run     BatchFunc[I, O]
}

// batcher gathers one client's jobs of one batch type into batches.
type batcher[I, O any] struct {
	def *batchDef[I, O]
	c   *Client
	mu  sync.Mutex
	cur *batchRun[I, O]
}

// batchRun is one batch: the inputs gathered so far and, once run, the
// outputs.
type batchRun[I, O any] struct {
	ins []I
	// gone marks the jobs that stopped waiting (cancelled, lease lost,
	// stopping) before the batch ran: their inputs are left out.
	gone  []atomic.Bool
	timer hclock.Timer
	done  chan struct{}
	outs  []O
	err   error
}

// join adds the job's input to the open batch (opening one if none is) and
// waits for the batch's outcome.
func (d *batchDef[I, O]) join(ctx context.Context, in I) (O, error) {
	var zero O
	j := JobFromContext(ctx)
	if j == nil {
		return zero, fmt.Errorf("hopper: batch %q outside a worker", d.name)
	}
	c := j.c
	v, _ := c.batchers.LoadOrStore(d, &batcher[I, O]{def: d, c: c})
	b := v.(*batcher[I, O])

	b.mu.Lock()
	r := b.cur
	if r == nil {
		r = &batchRun[I, O]{done: make(chan struct{})}
		b.cur = r
		if d.maxWait > 0 && d.size > 1 {
			r.timer = c.clock.AfterFunc(d.maxWait, func() { go b.flush(r) })
		}
	}
	idx := len(r.ins)
	r.ins = append(r.ins, in)
	r.gone = append(r.gone, atomic.Bool{})
	full := len(r.ins) >= d.size || d.maxWait == 0
	if full {
		b.close(r) // under the lock: no job joins a full batch
	}
	n := len(r.ins)
	b.mu.Unlock()
	if f := c.batchJoined.Load(); f != nil {
		(*f)(d.name, n)
	}
	if full {
		b.run(r)
	}
	select {
	case <-r.done:
		if r.err != nil {
			return zero, r.err
		}
		return r.outs[idx], nil
	case <-ctx.Done():
		b.mu.Lock()
		if idx < len(r.gone) {
			r.gone[idx].Store(true)
		}
		b.mu.Unlock()
		return zero, context.Cause(ctx)
	}
}

// flush closes batch r to new jobs and runs it, unless it is closed
// already (it filled up first).
func (b *batcher[I, O]) flush(r *batchRun[I, O]) {
	b.mu.Lock()
	open := b.cur == r
	if open {
		b.close(r)
	}
	b.mu.Unlock()
	if open {
		b.run(r)
	}
}

// close makes r no longer the open batch. b.mu is held.
func (b *batcher[I, O]) close(r *batchRun[I, O]) {
	b.cur = nil
	if r.timer != nil {
		r.timer.Stop()
	}
}

// run calls the batch function once and hands each job its outcome.
func (b *batcher[I, O]) run(r *batchRun[I, O]) {
	defer close(r.done)
	ctx := context.Background()
	if s := b.c.eng.Session(); s != nil {
		ctx = s.WorkContext()
	}
	if ctx.Err() != nil {
		r.err = context.Cause(ctx) // stopping: every job goes back
		return
	}
	// Only the jobs still waiting: one that left was handed back or ended
	// already, and must not be worked on anyway.
	var ins []I
	var at []int
	for i := range r.ins {
		if !r.gone[i].Load() {
			ins = append(ins, r.ins[i])
			at = append(at, i)
		}
	}
	if len(ins) == 0 {
		return
	}
	outs, err := b.call(ctx, ins)
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("batch %q returned %d outputs for %d inputs", b.def.name, len(outs), len(ins))
	}
	r.err = err
	if err == nil {
		r.outs = make([]O, len(r.ins))
		for k, i := range at {
			r.outs[i] = outs[k]
		}
	}
}

// call runs the batch function, turning a panic into an error.
func (b *batcher[I, O]) call(ctx context.Context, ins []I) (outs []O, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &engine.KindError{Kind: hoppertype.ErrorKindPanic, Err: fmt.Errorf("%w: %w", ErrPanic, engine.PanicCause(p)), Stack: string(debug.Stack())}
		}
	}()
	return b.def.run(ctx, ins)
}
