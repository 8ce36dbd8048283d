package hopper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// Handle refers to an enqueued job. Result waits for the job's own output;
// Group waits for its fan-out group's value. A waiter in one process is
// woken when another process finishes the job (by a store notification,
// with a poll every Config.WaitPollInterval as the fallback).
type Handle[O any] struct {
	c            *Client
	id, groupID  string
	state        JobState
	deduplicated bool
	decode       func([]byte) (O, error)
}

func newHandle[O any](c *Client, r driver.JobInsertResult, decode func([]byte) (O, error)) *Handle[O] {
	return &Handle[O]{c: c, id: r.Job.ID, groupID: r.Job.GroupID, state: r.Job.State, deduplicated: r.Existing, decode: decode}
}

// HandleFor returns a typed handle to an existing job by id (in another
// process, say). It does not check that the job exists or is of type t.
func HandleFor[I, O any](c *Client, t *Type[I, O], id string) *Handle[O] {
	return typedHandles[O](c, t.core(), []driver.JobInsertResult{{Job: &hoppertype.JobRow{ID: id, GroupID: id}}})[0]
}

// ID returns the job's id.
func (h *Handle[O]) ID() string { return h.id }

// State returns the job's state as the insert left it: pending or
// scheduled, or for a deduplicated insert the existing job's state then.
// It is empty for a handle made by HandleFor. Client.JobGet reads the state now.
func (h *Handle[O]) State() JobState { return h.state }

// GroupID returns the id of the job's fan-out group.
func (h *Handle[O]) GroupID() string { return h.groupID }

// Deduplicated reports whether the enqueue found a stored job and returned
// it instead of storing a new one: a live job with the same unique key, or
// the job with the same explicit id, type and input (InsertOpts.ID).
func (h *Handle[O]) Deduplicated() bool { return h.deduplicated }

// Wait blocks until the job is terminal (or ctx is done) and returns it.
func (h *Handle[O]) Wait(ctx context.Context) (*hoppertype.JobRow, error) {
	return h.c.waitJob(ctx, h.id)
}

// Result blocks until the job is terminal and returns its own output. A job
// that did not succeed yields a *JobError matching ErrAborted, ErrExpired,
// ErrCancelled, … with errors.Is. A stuck job is not terminal: Result keeps
// waiting until it is retried, cancelled or ctx is done.
func (h *Handle[O]) Result(ctx context.Context) (O, error) {
	var zero O
	row, err := h.Wait(ctx)
	if err != nil {
		return zero, err
	}
	if row.State != hoppertype.JobStateSucceeded {
		return zero, jobErrorFromRow(row)
	}
	v, err := h.decode(row.Result)
	if err != nil {
		return zero, fmt.Errorf("hopper: decode result of job %s: %w", row.ID, err)
	}
	return v, nil
}

// Group blocks until the job's fan-out group settles (every job in it is
// terminal) and returns the group's value.
func (h *Handle[O]) Group(ctx context.Context) (*GroupValue, error) {
	return h.c.waitGroup(ctx, h.groupID)
}

// GroupValue is the settled value of a fan-out group: by default the result
// of the last job to finish, unless a contribution locked it or folded into
// it. Set is false when no job contributed a value.
type GroupValue struct {
	ID    string
	Value []byte
	Set   bool
	// Settled is set once every job in the group is terminal.
	Settled bool
	codec   Codec
}

// Decode decodes the value into v with the client's codec.
func (g *GroupValue) Decode(v any) error {
	if !g.Set {
		return fmt.Errorf("hopper: group %s has no value", g.ID)
	}
	return g.codec.Unmarshal(g.Value, v)
}

// JobWait blocks until the job with this id is terminal (or ctx is done) and
// returns it; it works for jobs of any type and any process.
func (c *Client) JobWait(ctx context.Context, id string) (*JobRow, error) {
	return c.waitJob(ctx, id)
}

// GroupWait blocks until the fan-out group settles and returns its value.
func (c *Client) GroupWait(ctx context.Context, groupID string) (*GroupValue, error) {
	return c.waitGroup(ctx, groupID)
}

// GroupGet returns a group's state and value now, without waiting:
// Settled says whether every job in it is terminal.
func (c *Client) GroupGet(ctx context.Context, groupID string) (*GroupValue, error) {
	if err := checkText("group id", groupID); err != nil {
		return nil, err
	}
	g, err := c.drv.GroupGet(ctx, groupID)
	if err == nil {
		return &GroupValue{ID: groupID, Value: g.Value, Set: g.ValueSet, Settled: g.State == hoppertype.GroupSettled, codec: c.codec}, nil
	}
	if !errors.Is(err, hoppertype.ErrNotFound) {
		return nil, err
	}
	row, err := c.drv.JobGet(ctx, groupID)
	if err != nil {
		return nil, fmt.Errorf("hopper: group %s: %w", groupID, err)
	}
	gv := &GroupValue{ID: groupID, Settled: row.State.Terminal(), codec: c.codec}
	if row.State == hoppertype.JobStateSucceeded && row.Result != nil {
		gv.Value, gv.Set = row.Result, true
	}
	return gv, nil
}

// waitJob waits for a job to be terminal.
func (c *Client) waitJob(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	for {
		ch, release := c.waiters.watch(waitJob, id)
		row, err := c.drv.JobGet(ctx, id)
		if err != nil {
			release()
			return nil, err
		}
		if row.State.Terminal() {
			release()
			return row, nil
		}
		err = c.waitSignal(ctx, ch)
		release()
		if err != nil {
			return nil, err
		}
	}
}

// waitGroup waits for a group to settle. A job that never fanned out is a
// group of one with no row: it settles when the job is terminal, with the
// job's result as its value when it succeeded.
func (c *Client) waitGroup(ctx context.Context, id string) (*GroupValue, error) {
	if err := checkText("group id", id); err != nil {
		return nil, err
	}
	if _, err := c.markAwaited(ctx, id); err != nil {
		return nil, fmt.Errorf("hopper: wait for group %s: %w", id, err)
	}
	for {
		gch, grelease := c.waiters.watch(waitGroup, id)
		jch, jrelease := c.waiters.watch(waitJob, id)
		release := func() { grelease(); jrelease() }
		g, err := c.drv.GroupGet(ctx, id)
		switch {
		case err == nil:
			if g.State == hoppertype.GroupSettled {
				release()
				return &GroupValue{ID: id, Value: g.Value, Set: g.ValueSet, Settled: true, codec: c.codec}, nil
			}
		case errors.Is(err, hoppertype.ErrNotFound):
			row, err := c.drv.JobGet(ctx, id)
			if err != nil {
				release()
				return nil, err
			}
			if row.State.Terminal() {
				// The row is created in the same transaction as a fan-out;
				// look again in case it appeared.
				if _, gerr := c.drv.GroupGet(ctx, id); gerr == nil {
					release()
					continue
				}
				release()
				gv := &GroupValue{ID: id, Settled: true, codec: c.codec}
				if row.State == hoppertype.JobStateSucceeded && row.Result != nil {
					gv.Value, gv.Set = row.Result, true
				}
				return gv, nil
			}
		default:
			release()
			return nil, err
		}
		err = c.waitSignal(ctx, gch, jch)
		release()
		if err != nil {
			return nil, err
		}
	}
}

// waitSignal waits for any of chs, the wait poll or ctx. The poll is the
// fallback for a missed notification, so it runs on the wall clock even
// under a virtual one (where it would otherwise wait for the clock to move).
func (c *Client) waitSignal(ctx context.Context, chs ...<-chan struct{}) error {
	t := hclock.Real{}.NewTimer(c.cfg.WaitPollInterval)
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

const (
	waitJob waitKind = iota
	waitGroup
)

type waitKey struct {
	kind waitKind
	id   string
}

type waitEntry struct {
	ch   chan struct{}
	refs int
}

// waiterHub wakes local waiters when a job or group they wait for finishes,
// whether this client or another one (through the store's notifications)
// finished it. It listens to the store only while someone waits.
type waiterHub struct {
	c       *Client
	mu      sync.Mutex
	entries map[waitKey]*waitEntry
	refs    int
	cancel  context.CancelFunc
	stopped chan struct{}
	// linger ends the listening once no one has waited for waitLinger:
	// waits that follow one another (a caller starting workflows one at a
	// time and waiting for each) keep one subscription instead of
	// subscribing and unsubscribing each time.
	linger *time.Timer
}

// waitLinger is how long the hub keeps listening after its last waiter.
const waitLinger = time.Second

func newWaiterHub(c *Client) *waiterHub {
	return &waiterHub{c: c, entries: map[waitKey]*waitEntry{}}
}

// watch registers interest in id and returns a channel closed when it is
// done, and a release function to call once no longer waiting.
func (h *waiterHub) watch(kind waitKind, id string) (<-chan struct{}, func()) {
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
	return e.ch, func() {
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

func (h *waiterHub) done(kind waitKind, id string) {
	k := waitKey{kind, id}
	h.mu.Lock()
	if e := h.entries[k]; e != nil {
		close(e.ch)
		delete(h.entries, k)
	}
	h.mu.Unlock()
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

func (h *waiterHub) jobDone(id string)   { h.done(waitJob, id) }
func (h *waiterHub) groupDone(id string) { h.done(waitGroup, id) }

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
		sub, err := h.c.base.Listen(ctx, w.topic)
		if err != nil {
			// Polling still finds the outcome.
			h.c.reportError(fmt.Errorf("listen %s: %w", w.topic, err), PhaseQueue)
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
						h.done(w.kind, id)
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
