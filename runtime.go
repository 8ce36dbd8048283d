package hopper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"

	"github.com/hopper-go/hopper/internal/engine"
)

// errStopping is the cause given to handlers cancelled by Stop.
var errStopping = errors.New("hopper: client stopping")

// runtime is everything a started client runs. A client makes a new one on
// each Start.
type runtime struct {
	c *Client

	// feedCtx ends, after the last outcome is recorded, the AfterCommit
	// observers' delivery loops (feedLoops).
	feedCtx    context.Context
	feedCancel context.CancelFunc
	feedLoops  sync.WaitGroup

	// life holds the runtime's lifetimes (deadline.go).
	life *lifetimes
	// ctx ends when Stop begins (life.stopping): producers and maintenance
	// stop on it.
	ctx    context.Context
	cancel context.CancelFunc
	// schedulesOff is set when Stop has ended the schedules; guarded by
	// Client.schedMu.
	schedulesOff bool
	// schedReported holds the stored schedules reported as not runnable
	// here, with the definition reported; guarded by syncMu.
	schedReported map[string]driver.ScheduleDef
	// syncMu serialises the reads of the stored schedules.
	syncMu sync.Mutex
	// schedWG counts the schedule goroutines the runtime started, for stop
	// to wait for (retired and removed ones too).
	schedWG sync.WaitGroup
	// workCtx is the parent of handler contexts; Stop cancels it only once
	// its own ctx is done.
	workCtx    context.Context
	workCancel context.CancelCauseFunc

	slots *engine.Slots
	// startedAt is when the client started (its worker row says so).
	startedAt time.Time
	// limits holds the limiters: "" for Config.Limit, else per type name.
	limits limiters

	mu        sync.Mutex
	draining  bool // set once Stop waits for running attempts: no more dispatch
	producers map[string]*producer
	active    map[driver.Lease]*activeJob

	loops     sync.WaitGroup // producers, heartbeater, maintenance, listeners
	execs     sync.WaitGroup // running attempts
	execsDone chan struct{}  // closed by stop once every attempt has returned
	pool      chan dispatchItem
	poolDone  chan struct{}
	poolWG    sync.WaitGroup // pooled worker goroutines
	completer *completer
	maint     *maintenance

	stopOnce sync.Once
	stopErr  error
	// workerDirty, when it holds a token, has the heartbeat loop refresh
	// the worker row at once (workerChanged).
	workerDirty chan struct{}
}

type activeJob struct {
	row    *hoppertype.JobRow
	cancel context.CancelCauseFunc
	// cancelRequested is set when the job was cancelled while running.
	mu              sync.Mutex
	cancelRequested bool
}

func startRuntime(ctx context.Context, c *Client) (*runtime, error) {
	rt := &runtime{
		c:         c,
		slots:     engine.NewSlots(c.cfg.MaxWorkers),
		producers: map[string]*producer{},
		active:    map[driver.Lease]*activeJob{},
		pool:      make(chan dispatchItem),
		execsDone: make(chan struct{}),
		poolDone:  make(chan struct{}),
		// workerDirty asks the heartbeat loop to report the worker row
		// now: what it reports (the schedules run here) changed.
		workerDirty: make(chan struct{}, 1),
	}
	rt.life = newLifetimes(ctx)
	rt.ctx, rt.cancel = rt.life.stopping, rt.life.endStopping
	rt.workCtx, rt.workCancel = context.WithCancelCause(rt.life.hard)
	rt.completer = newCompleter(c, rt.life.hard)
	rt.completer.start()

	if err := rt.listen(driver.TopicJobAvailable, func(q string) {
		q, sender, signed := strings.Cut(q, ",")
		if signed && sender == rt.c.sender {
			return // this client's own enqueue, which woke the queue already
		}
		if q == "" {
			rt.wakeAll()
			return
		}
		rt.wake(q, time.Time{})
	}); err != nil {
		rt.abortStart(ctx)
		return nil, err
	}
	if err := rt.listen(driver.TopicJobCancel, rt.cancelLocal); err != nil {
		rt.abortStart(ctx)
		return nil, err
	}
	rt.startObservers()
	rt.maint = newMaintenance(c, rt.life) // before the producers, which use it
	rt.startedAt = c.now()
	// Start holds the client's lock: a report waits for a goroutine, since
	// its handler may call the client.
	if err := rt.upsertWorker(ctx); err != nil && ctx.Err() == nil {
		rt.loops.Add(1)
		go func() {
			defer rt.loops.Done()
			c.reportError(err, PhaseMaintenance)
		}()
	}
	rt.ensureProducers()
	rt.startSchedules()
	// Timers are armed before Start returns, so a virtual clock moved right
	// after Start finds them.
	hb := c.clock.NewTimer(c.cfg.HeartbeatInterval)
	rt.loops.Add(1)
	go rt.heartbeatLoop(hb)
	// The stored schedules start before Start returns too (their reports
	// wait for the sync goroutine: the client's lock is held here).
	reports := rt.syncStoredOnce(ctx)
	rt.loops.Add(1)
	go rt.syncStoredSchedules(reports)
	rt.loops.Add(1)
	go func() {
		defer rt.loops.Done()
		rt.maint.run()
	}()
	return rt, nil
}

// abortStart undoes a Start that failed; its work that finishes what was
// begun has until ctx is done plus stopGrace.
func (rt *runtime) abortStart(ctx context.Context) {
	rt.life.endHardAfter(ctx)
	rt.stopObservers()
	rt.cancel()
	rt.workCancel(errStopping)
	rt.loops.Wait()
	rt.completer.stop()
	rt.life.end()
}

// listen runs fn for every notification on topic until the runtime stops.
func (rt *runtime) listen(topic string, fn func(payload string)) error {
	sub, err := rt.c.base.Listen(rt.ctx, topic)
	if err != nil {
		return fmt.Errorf("hopper: listen %s: %w", topic, err)
	}
	rt.loops.Add(1)
	go func() {
		defer rt.loops.Done()
		defer sub.Close()
		for {
			select {
			case <-rt.ctx.Done():
				return
			case p, ok := <-sub.C():
				if !ok {
					return
				}
				fn(p)
			}
		}
	}()
	return nil
}

// ensureProducers starts a producer for every queue the client works.
func (rt *runtime) ensureProducers() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ctx.Err() != nil {
		return
	}
	for _, q := range rt.c.queues() {
		if _, ok := rt.producers[q]; ok {
			continue
		}
		p := newProducer(rt, q)
		rt.producers[q] = p
		rt.loops.Add(1)
		go func() {
			defer rt.loops.Done()
			p.run()
		}()
	}
}

func (rt *runtime) wake(queue string, at time.Time) {
	rt.mu.Lock()
	p := rt.producers[queue]
	rt.mu.Unlock()
	if p != nil {
		p.wake(at)
	}
}

// wakeAll asks every producer for a round.
func (rt *runtime) wakeAll() {
	rt.mu.Lock()
	ps := make([]*producer, 0, len(rt.producers))
	for _, p := range rt.producers {
		ps = append(ps, p)
	}
	rt.mu.Unlock()
	for _, p := range ps {
		p.wake(time.Time{})
	}
}

// cancelLocal cancels a job's attempts running in this process, if any.
func (rt *runtime) cancelLocal(id string) {
	rt.mu.Lock()
	var as []*activeJob
	for l, a := range rt.active {
		if l.ID == id {
			as = append(as, a)
		}
	}
	rt.mu.Unlock()
	for _, a := range as {
		a.mu.Lock()
		a.cancelRequested = true
		a.mu.Unlock()
		a.cancel(ErrCancelled)
	}
}

func leaseOf(row *hoppertype.JobRow) driver.Lease {
	return driver.Lease{ID: row.ID, Token: row.LeaseToken}
}

// addActive tracks a running attempt. Attempts are keyed by lease, not job
// id: a job rescued and claimed again by this same process may briefly run
// twice here, and each attempt must keep its own lease.
func (rt *runtime) addActive(row *hoppertype.JobRow, cancel context.CancelCauseFunc) *activeJob {
	a := &activeJob{row: row, cancel: cancel}
	rt.mu.Lock()
	rt.active[leaseOf(row)] = a
	rt.mu.Unlock()
	return a
}

func (rt *runtime) removeActive(row *hoppertype.JobRow) {
	rt.mu.Lock()
	delete(rt.active, leaseOf(row))
	rt.mu.Unlock()
}

// stop implements Client.Stop.
func (rt *runtime) stop(ctx context.Context) error {
	rt.stopOnce.Do(func() {
		// What finishes what was begun has until ctx is done plus
		// stopGrace, whatever the store does (deadline.go).
		rt.life.endHardAfter(ctx)
		defer rt.life.end()
		// Handlers are cancelled once ctx is done, whatever Stop waits
		// for then (a claim seen through, say).
		unwatch := context.AfterFunc(ctx, func() { rt.workCancel(errStopping) })
		defer unwatch()
		// 1. No new claims, no more occurrences.
		rt.cancel()
		rt.stopSchedules()
		rt.mu.Lock()
		ps := make([]*producer, 0, len(rt.producers))
		for _, p := range rt.producers {
			ps = append(ps, p)
		}
		rt.mu.Unlock()
		for _, p := range ps {
			<-p.done
		}
		// 2. Let running attempts finish until ctx is done, then cancel them.
		rt.mu.Lock()
		rt.draining = true
		rt.mu.Unlock()
		rt.putBackWaiting()
		finished := make(chan struct{})
		go func() {
			rt.execs.Wait()
			close(finished)
		}()
		select {
		case <-finished:
			if !unwatch() {
				rt.stopErr = ctx.Err() // ctx's end cancelled them
			}
		case <-ctx.Done():
			rt.stopErr = ctx.Err()
			rt.workCancel(errStopping)
			<-finished
		}
		rt.workCancel(errStopping)
		close(rt.execsDone)
		rt.life.endDrained() // no lease left to heartbeat
		close(rt.poolDone)
		rt.poolWG.Wait()
		// 3. Record every outcome, then stop the rest.
		rt.completer.stop()
		rt.stopObservers()
		rt.loops.Wait()
		rt.maint.resign()
		rt.forgetWorker()
	})
	return rt.stopErr
}

// heartbeatLoop renews the leases of running jobs and cancels jobs whose
// lease was lost or whose cancel was requested from another process.
func (rt *runtime) heartbeatLoop(t Timer) {
	defer rt.loops.Done()
	c := rt.c
	defer t.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			// Keep heartbeating while attempts drain: Stop waits for them.
			rt.drainHeartbeats()
			return
		case <-rt.workerDirty:
			rt.reportWorker(rt.ctx)
			continue
		case <-t.C():
		}
		// Re-arm before the work, so beats keep a fixed rate and the next
		// one is armed as soon as this one is visible.
		t.Reset(c.cfg.HeartbeatInterval)
		rt.heartbeatOnce()
		rt.reportWorker(rt.ctx)
	}
}

// drainHeartbeats keeps leases alive while Stop waits for running attempts
// (until Stop closes execsDone: waiting on the WaitGroup here would race
// with the producers' last dispatches).
func (rt *runtime) drainHeartbeats() {
	done := rt.execsDone
	t := rt.c.clock.NewTimer(rt.c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			t.Reset(rt.c.cfg.HeartbeatInterval)
			rt.heartbeatOnce()
		}
	}
}

// heartbeatOnce renews the leases of the running attempts, within a
// heartbeat interval and until they have drained. A renewal the store does
// not answer in time is reported and tried again at the next beat; a lease
// never renewed expires and the rescuer retries its job.
func (rt *runtime) heartbeatOnce() {
	rt.mu.Lock()
	if len(rt.active) == 0 {
		rt.mu.Unlock()
		return
	}
	leases := make([]driver.Lease, 0, len(rt.active))
	for l := range rt.active {
		leases = append(leases, l)
	}
	rt.mu.Unlock()
	c := rt.c
	ctx, cancel := call(rt.life.drained, c.cfg.HeartbeatInterval)
	defer cancel()
	res, err := c.drv.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Leases: leases, ExpiresAt: c.now().Add(c.cfg.Visibility)})
	if err != nil {
		if rt.life.drained.Err() != nil {
			return // the attempts have drained: no lease to keep
		}
		c.reportError(fmt.Errorf("heartbeat: %w", err), PhaseQueue)
		return
	}
	if len(res) != len(leases) {
		c.reportError(fmt.Errorf("heartbeat: %d results for %d leases", len(res), len(leases)), PhaseQueue)
		return
	}
	for i, r := range res {
		switch {
		case !r.Held:
			rt.mu.Lock()
			a := rt.active[leases[i]]
			rt.mu.Unlock()
			if a != nil {
				a.cancel(ErrLeaseLost)
			}
		case r.CancelRequested:
			rt.cancelLocal(r.ID)
		}
	}
}

// limiters holds a runtime's limiters, made on first use.
type limiters struct {
	mu sync.Mutex
	m  map[string]*limiter
}

// limiterOf returns the limiter governing jobs of type typ: the type's own,
// else the client's, else nil.
func (rt *runtime) limiterOf(typ string) *limiter {
	c := rt.c
	if strings.HasPrefix(typ, "hopper.") {
		return nil // hopper's own jobs (gates) are never held back
	}
	key, lim := "", c.cfg.Limit
	if t := c.lookupType(typ); t != nil && t.limit() != nil {
		key, lim = typ, t.limit()
	}
	if lim == nil || (lim.Max == 0 && lim.Rate == 0) {
		return nil
	}
	rt.limits.mu.Lock()
	defer rt.limits.mu.Unlock()
	if rt.limits.m == nil {
		rt.limits.m = map[string]*limiter{}
	}
	l := rt.limits.m[key]
	if l == nil {
		l = newLimiter(*lim, c.clock, rt.wakeAll)
		rt.limits.m[key] = l
	}
	return l
}

// claimable drops from types those whose limiter has a full backlog: the
// jobs claimed already wait for their turn.
func (rt *runtime) claimable(types []string) []string {
	if rt.c.cfg.Limit == nil && !rt.c.anyTypeLimit() {
		return types
	}
	out := types[:0:0]
	for _, t := range types {
		if l := rt.limiterOf(t); l == nil || !l.full() {
			out = append(out, t)
		}
	}
	return out
}

// start runs a claimed job: now, or once its limiter gives it a turn.
// While it waits it is heartbeated (its lease held) and holds its slot.
func (rt *runtime) start(row *hoppertype.JobRow) {
	l := rt.limiterOf(row.Type)
	if l == nil {
		rt.dispatch(row, true, nil)
		return
	}
	// While it waits, a cancel or a lost lease takes it out of line.
	rt.addActive(row, func(cause error) {
		if l.remove(row) {
			rt.endWaiting(row, cause)
		}
	})
	l.admit(row, func() {
		if !rt.dispatch(row, true, l.done) {
			l.done()
			rt.endWaiting(row, errStopping) // the client is stopping
		}
	})
}

// endWaiting ends a job that waited in a limiter without running: handed
// back (stopping), cancelled, or dropped (its lease was lost: the store
// gave it to another worker).
func (rt *runtime) endWaiting(row *hoppertype.JobRow, cause error) {
	rt.removeActive(row)
	defer rt.slots.Release(1)
	if errors.Is(cause, ErrLeaseLost) {
		return
	}
	c := rt.c
	res := attemptResult{err: cause, cause: cause, cancelRequested: errors.Is(cause, ErrCancelled)}
	o := decide(row, res, nil, c.now(), nil, nil)
	rt.completer.submit(finishItem{row: row, outcome: o})
}

// putBackWaiting hands the jobs still waiting in limiters back to the
// store, their attempts unused: the client is stopping.
func (rt *runtime) putBackWaiting() {
	rt.limits.mu.Lock()
	ls := make([]*limiter, 0, len(rt.limits.m))
	for _, l := range rt.limits.m {
		ls = append(ls, l)
	}
	rt.limits.mu.Unlock()
	for _, l := range ls {
		for _, row := range l.drain() {
			rt.endWaiting(row, errStopping)
		}
	}
}

// claim is one JobClaim of a round: these types, at most limit jobs.
type claim struct {
	types []string
	limit int
}

// claimsFor splits a round's claim of want jobs of types: the types with
// no limiter together, and the types of each limiter together, capped at
// its room. Without limits it is one claim of every type.
func (rt *runtime) claimsFor(types []string, want int) []claim {
	if rt.c.cfg.Limit == nil && !rt.c.anyTypeLimit() {
		return []claim{{types: types, limit: want}}
	}
	var free []string
	byLimiter := map[*limiter][]string{}
	var order []*limiter
	for _, t := range types {
		l := rt.limiterOf(t)
		if l == nil {
			free = append(free, t)
			continue
		}
		if _, ok := byLimiter[l]; !ok {
			order = append(order, l)
		}
		byLimiter[l] = append(byLimiter[l], t)
	}
	var out []claim
	left := want
	if len(free) > 0 {
		// Unlimited types first: they take at most what is left after
		// the limits' room, so a limit's jobs still get their turn.
		room := 0
		for _, l := range order {
			room += l.room()
		}
		n := max(left-room, min(left, 1))
		out = append(out, claim{types: free, limit: n})
		left -= n
	}
	for _, l := range order {
		if left <= 0 {
			break
		}
		if n := min(left, l.room()); n > 0 {
			out = append(out, claim{types: byLimiter[l], limit: n})
			left -= n
		}
	}
	return out
}
