package engine

import (
	"context"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// histWriter group-commits workflow history appends: runs that record at
// the same moment share one statement (RunEventAppendMany), each append
// keeping its own lease fence and outcome. It has no goroutine of its own:
// a caller that finds fewer than maxHistFlushers flushes in progress
// flushes the queue itself, its own append included, until the queue is
// empty; the others wait for their outcome. A lone append goes to the store
// as it would without the writer.
type histWriter struct {
	mu       sync.Mutex
	queue    []*histReq
	flushing int
}

type histReq struct {
	p    *driver.RunEventAppendParams
	done chan error
}

const (
	// maxHistFlushers bounds the flushes in flight (each holds a store
	// connection).
	maxHistFlushers = 2
	// maxHistBatch bounds one flush.
	maxHistBatch = 128
)

// append stores p's events and returns its outcome. The write is not
// abandoned when ctx ends (other runs' appends may share it): each
// statement ends with life or after budget (ctx gives its values).
func (w *histWriter) append(ctx, life context.Context, budget time.Duration, drv driver.Executor, p *driver.RunEventAppendParams) error {
	r := &histReq{p: p, done: make(chan error, 1)}
	w.mu.Lock()
	w.queue = append(w.queue, r)
	if w.flushing >= maxHistFlushers {
		w.mu.Unlock()
		return <-r.done
	}
	w.flushing++
	w.mu.Unlock()
	w.flush(ctx, life, budget, drv)
	return <-r.done
}

// flush writes batches from the queue until it is empty.
func (w *histWriter) flush(ctx, life context.Context, budget time.Duration, drv driver.Executor) {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.flushing--
			w.mu.Unlock()
			return
		}
		n := min(len(w.queue), maxHistBatch)
		batch := make([]*histReq, n)
		copy(batch, w.queue)
		w.queue = append(w.queue[:0], w.queue[n:]...)
		w.mu.Unlock()
		wctx, cancel := within(ctx, life, budget)
		w.write(wctx, drv, batch)
		cancel()
	}
}

func (w *histWriter) write(ctx context.Context, drv driver.Executor, batch []*histReq) {
	if len(batch) == 1 {
		batch[0].done <- drv.RunEventAppend(ctx, batch[0].p)
		return
	}
	params := make([]*driver.RunEventAppendParams, len(batch))
	for i, r := range batch {
		params[i] = r.p
	}
	errs, err := drv.RunEventAppendMany(ctx, &driver.RunEventAppendManyParams{Events: params})
	if err != nil {
		// The call applied nothing (a key committed meanwhile, a store
		// error): each append on its own, for its own outcome.
		for _, r := range batch {
			r.done <- drv.RunEventAppend(ctx, r.p)
		}
		return
	}
	for i, r := range batch {
		r.done <- errs[i]
	}
}

// AppendHistory stores a run's history events, group-committed with other
// runs' (see histWriter.append): each statement ends with life or after
// the lease's length.
func (e *Engine) AppendHistory(ctx, life context.Context, p *driver.RunEventAppendParams) error {
	return e.hist.append(ctx, life, e.cfg.Visibility, e.drv, p)
}
