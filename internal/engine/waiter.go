package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// WaitJob waits for a job to be terminal, in any process. A job that this
// process executes (a run started here that skips the queue, an attempt
// claimed here) is not read first: the end of its attempt here wakes the
// wait, with the row committed when the attempt finished the job. Should
// another process end the job meanwhile (a rescue after a lost lease),
// the attempt here loses its lease and wakes the wait, which then reads
// the job; an attempt that never returns (a handler ignoring its context)
// leaves the wait to the store's notice or to its poll.
func (e *Engine) WaitJob(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	var known *hoppertype.JobRow // the row a local finish woke this wait with
	for first := true; ; first = false {
		w, release := e.waiters.watch(waitJob, id)
		row := known
		if first && e.executesHere(id) {
			// Registered before the check: the attempt's end here,
			// which follows its count's (session.leftHere), wakes w
			// unless it only scheduled a retry.
			e.blocking(id)
			if err := e.waitSignal(ctx, w.ch); err != nil {
				release()
				return nil, err
			}
			known = e.waiters.finished(w)
			release()
			continue
		}
		if row == nil {
			var err error
			if row, err = e.drv.JobGet(ctx, &driver.JobGetParams{ID: id}); err != nil {
				release()
				return nil, err
			}
		}
		if row.State.Terminal() {
			release()
			return row, nil
		}
		e.blocking(id)
		err := e.waitSignal(ctx, w.ch)
		known = e.waiters.finished(w)
		release()
		if err != nil {
			return nil, err
		}
	}
}

// blocking calls the test hook of a job wait about to block.
// (One atomic load when no test set one: no lock on a wait's path.)
func (e *Engine) blocking(id string) {
	if f := e.waiters.onBlock.Load(); f != nil {
		(*f)(id)
	}
}

// GroupResult is a settled group's value.
type GroupResult struct {
	ID    string
	Value []byte
	// Set says whether a job contributed a value.
	Set bool
}

// WaitGroup waits for a group to settle. A job that never fanned out is a
// group of one with no row: it settles when the job is terminal, with the
// job's result as its value when it succeeded.
func (e *Engine) WaitGroup(ctx context.Context, id string) (*GroupResult, error) {
	if _, err := e.markAwaited(ctx, id); err != nil {
		return nil, fmt.Errorf("hopper: wait for group %s: %w", id, err)
	}
	for {
		gw, grelease := e.waiters.watch(waitGroup, id)
		jw, jrelease := e.waiters.watch(waitJob, id)
		release := func() { grelease(); jrelease() }
		g, err := e.drv.GroupGet(ctx, &driver.GroupGetParams{ID: id})
		switch {
		case err == nil:
			if g.State == hoppertype.GroupSettled {
				release()
				return &GroupResult{ID: id, Value: g.Value, Set: g.ValueSet}, nil
			}
		case errors.Is(err, hoppertype.ErrNotFound):
			row, err := e.drv.JobGet(ctx, &driver.JobGetParams{ID: id})
			if err != nil {
				release()
				return nil, err
			}
			if row.State.Terminal() {
				// The row is created in the same transaction as a fan-out;
				// look again in case it appeared.
				if _, gerr := e.drv.GroupGet(ctx, &driver.GroupGetParams{ID: id}); gerr == nil {
					release()
					continue
				}
				release()
				gv := &GroupResult{ID: id}
				if row.State == hoppertype.JobStateSucceeded && row.Result != nil {
					gv.Value, gv.Set = row.Result, true
				}
				return gv, nil
			}
		default:
			release()
			return nil, err
		}
		err = e.waitSignal(ctx, gw.ch, jw.ch)
		release()
		if err != nil {
			return nil, err
		}
	}
}

// waitSignal waits for any of chs, the wait poll or ctx. The poll is the
// fallback for a missed notification, so it runs on the wall clock even
// under a virtual one (where it would otherwise wait for the clock to move).
func (e *Engine) waitSignal(ctx context.Context, chs ...<-chan struct{}) error {
	t := hclock.Real{}.NewTimer(e.cfg.WaitPollInterval)
	defer t.Stop()
	var second <-chan struct{}
	if len(chs) > 1 {
		second = chs[1]
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-chs[0]:
	case <-second:
	case <-t.C():
	}
	return nil
}

type waitKind int

type waitKey struct {
	kind waitKind
	id   string
}

type waitEntry struct {
	ch   chan struct{}
	refs int
	// row is the job's row as this process's finish committed it, set
	// before ch is closed (nil when another process finished it).
	row *hoppertype.JobRow
}

// waiterHub wakes local waiters when a job or group they wait for finishes,
// whether this client or another one (through the store's notifications)
// finished it. It listens to the store only while someone waits.
type waiterHub struct {
	e       *Engine
	mu      sync.Mutex
	entries map[waitKey]*waitEntry
	// busy counts, per job id, the finishes of this process in progress:
	// the store's notice that such a job is done is passed over, as the
	// finish wakes its waiters with the row it committed.
	busy    map[string]int
	refs    int
	cancel  context.CancelFunc
	stopped chan struct{}
	// onBlock, when set (tests), is called with a job's id each time a
	// wait for it, registered and done reading, is about to block.
	onBlock atomic.Pointer[func(id string)]
	// linger ends the listening once no one has waited for waitLinger:
	// waits that follow one another (a caller starting workflows one at a
	// time and waiting for each) keep one subscription instead of
	// subscribing and unsubscribing each time.
	linger *time.Timer
}

// waitLinger is how long the hub keeps listening after its last waiter.
const waitLinger = time.Second

func newWaiterHub(e *Engine) *waiterHub {
	return &waiterHub{e: e, entries: map[waitKey]*waitEntry{}, busy: map[string]int{}}
}

// watch registers interest in id and returns its entry, whose channel is
// closed when it is done, and a release function to call once no longer
// waiting.
func (h *waiterHub) watch(kind waitKind, id string) (*waitEntry, func()) {
	k := waitKey{kind, id}
	h.mu.Lock()
	e := h.entries[k]
	if e == nil {
		e = &waitEntry{ch: make(chan struct{})}
		h.entries[k] = e
	}
	e.refs++
	h.refs++
	if h.refs == 1 {
		if h.linger != nil {
			h.linger.Stop()
			h.linger = nil
		}
		if h.cancel == nil {
			h.startListening()
		}
	}
	h.mu.Unlock()
	var once sync.Once
	return e, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			e.refs--
			if e.refs == 0 && h.entries[k] == e {
				delete(h.entries, k)
			}
			h.refs--
			if h.refs == 0 && h.cancel != nil && h.linger == nil {
				h.linger = time.AfterFunc(waitLinger, h.idle)
			}
		})
	}
}

// idle ends the listening if no one waits.
func (h *waiterHub) idle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.linger = nil
	if h.refs == 0 {
		h.stopListening()
	}
}

// close ends a lingering subscription now and waits until its listeners
// are gone (the client is stopping); waits still running keep theirs.
func (h *waiterHub) close() {
	h.mu.Lock()
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	var wait chan struct{}
	if h.refs == 0 {
		wait = h.stopListening()
	}
	h.mu.Unlock()
	if wait != nil {
		<-wait
	}
}

func (h *waiterHub) done(kind waitKind, id string, row *hoppertype.JobRow) {
	k := waitKey{kind, id}
	h.mu.Lock()
	if e := h.entries[k]; e != nil {
		if row != nil {
			r := *row // copied only when someone waits
			e.row = &r
		}
		close(e.ch)
		delete(h.entries, k)
	}
	h.mu.Unlock()
}

// finishing marks the jobs of items that someone here waits for as being
// finished by this process, and returns their ids for finished to unmark. A
// wait that begins later is woken by the store's notice and reads the row.
func (h *waiterHub) finishing(items []finishItem) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs == 0 {
		return nil
	}
	var ids []string
	for _, it := range items {
		if id := it.row.ID; h.entries[waitKey{waitJob, id}] != nil {
			h.busy[id]++
			ids = append(ids, id)
		}
	}
	return ids
}

// finishedAll unmarks what finishing marked.
func (h *waiterHub) finishedAll(ids []string) {
	if len(ids) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if h.busy[id]--; h.busy[id] <= 0 {
			delete(h.busy, id)
		}
	}
}

// noticed wakes the waiters of a notice from the store, unless this
// process is finishing the job (it wakes them itself, with the row).
func (h *waiterHub) noticed(kind waitKind, id string) {
	h.mu.Lock()
	skip := kind == waitJob && h.busy[id] > 0
	h.mu.Unlock()
	if !skip {
		h.done(kind, id, nil)
	}
}

// finished returns a copy of the row a local finish closed w's channel
// with, or nil: the channel is open, or another process finished the job.
func (h *waiterHub) finished(w *waitEntry) *hoppertype.JobRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.row == nil {
		return nil
	}
	select {
	case <-w.ch:
	default:
		return nil
	}
	r := *w.row
	return &r
}

// doneAll wakes every waiter of kind so it looks again.
func (h *waiterHub) doneAll(kind waitKind) {
	h.mu.Lock()
	for k, e := range h.entries {
		if k.kind == kind {
			close(e.ch)
			delete(h.entries, k)
		}
	}
	h.mu.Unlock()
}

func (h *waiterHub) jobDone(id string) { h.done(waitJob, id, nil) }

// jobFinished wakes the waiters of a job this process finished, handing
// them (a copy of) its row as committed.
func (h *waiterHub) jobFinished(row *hoppertype.JobRow) { h.done(waitJob, row.ID, row) }

func (h *waiterHub) groupDone(id string) { h.done(waitGroup, id, nil) }

// startListening subscribes to done notifications; h.mu is held.
func (h *waiterHub) startListening() {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	h.cancel, h.stopped = cancel, stopped
	var wg sync.WaitGroup
	for _, w := range []struct {
		topic string
		kind  waitKind
	}{{driver.TopicJobDone, waitJob}, {driver.TopicGroupDone, waitGroup}} {
		sub, err := h.e.base.Listen(ctx, w.topic)
		if err != nil {
			// Polling still finds the outcome.
			h.e.reportError(fmt.Errorf("listen %s: %w", w.topic, err), hoppertype.PhaseQueue)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				select {
				case <-ctx.Done():
					return
				case p, ok := <-sub.C():
					if !ok {
						return
					}
					if p == "" {
						h.doneAll(w.kind)
						continue
					}
					for _, id := range splitIDs(p) {
						h.noticed(w.kind, id)
					}
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(stopped)
	}()
}

// stopListening ends the subscriptions; h.mu is held. The returned channel
// closes once the listeners are gone.
func (h *waiterHub) stopListening() chan struct{} {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	s := h.stopped
	h.cancel, h.stopped = nil, nil
	return s
}

func splitIDs(p string) []string {
	if p == "" {
		return nil
	}
	var ids []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == ',' {
			if i > start {
				ids = append(ids, p[start:i])
			}
			start = i + 1
		}
	}
	return ids
}

const (
	waitJob waitKind = iota
	waitGroup
)
