package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// session is everything a started engine runs. An engine makes a new one on
// each Start.
type session struct {
	e *Engine
	// pub is the session as services see it.
	pub *Session

	// feedCtx ends, after the last outcome is recorded, the AfterCommit
	// observers' delivery loops (feedLoops).
	feedCtx    context.Context
	feedCancel context.CancelFunc
	feedLoops  sync.WaitGroup

	// life holds the session's lifetimes (deadline.go).
	life *lifetimes
	// ctx ends when Stop begins (life.stopping): producers and maintenance
	// stop on it.
	ctx    context.Context
	cancel context.CancelFunc
	// workCtx is the parent of handler contexts; Stop cancels it only once
	// its own ctx is done.
	workCtx    context.Context
	workCancel context.CancelCauseFunc

	slots *Slots
	// startedAt is when the client started (its worker row says so).
	startedAt time.Time
	// limits holds the limiters: "" for Config.Limit, else per type name.
	limits limiters

	mu       sync.Mutex
	draining bool // set once Stop waits for running attempts: no more dispatch
	// rounds counts the producers' claim rounds under way (Settle).
	rounds atomic.Int32
	// scalings are the autoscaler's latest decisions (guarded by mu).
	scalings  []hoppertype.ScalingInfo
	producers map[string]*producer
	active    map[driver.Lease]*activeJob
	// here counts, per job id, the attempts dispatched to this process
	// whose end is not yet recorded: a wait for such a job is woken by that
	// end (see Engine.WaitJob).
	here map[string]int

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

// initialSlots is the slots' first cap: MaxWorkers, or the autoscaler's
// minimum.
func initialSlots(cfg Config) int {
	if cfg.Autoscale != nil {
		return cfg.Autoscale.Min
	}
	return cfg.MaxWorkers
}

func startSession(ctx context.Context, e *Engine) (*session, error) {
	s := &session{
		e:         e,
		slots:     NewSlots(initialSlots(e.cfg)),
		producers: map[string]*producer{},
		active:    map[driver.Lease]*activeJob{},
		here:      map[string]int{},
		pool:      make(chan dispatchItem),
		execsDone: make(chan struct{}),
		poolDone:  make(chan struct{}),
		// workerDirty asks the heartbeat loop to report the worker row
		// now: what it reports (the schedules run here) changed.
		workerDirty: make(chan struct{}, 1),
	}
	s.pub = &Session{s: s}
	s.life = newLifetimes(ctx)
	s.ctx, s.cancel = s.life.stopping, s.life.endStopping
	s.workCtx, s.workCancel = context.WithCancelCause(s.life.hard)
	s.completer = newCompleter(e, s.life.hard)
	s.completer.start()

	if err := s.listen(driver.TopicJobAvailable, func(q string) {
		q, sender, signed := strings.Cut(q, ",")
		if signed && sender == s.e.sender {
			return // this client's own enqueue, which woke the queue already
		}
		if q == "" {
			s.wakeAll()
			return
		}
		s.wake(q, time.Time{})
	}); err != nil {
		s.abortStart(ctx)
		return nil, err
	}
	if err := s.listen(driver.TopicJobCancel, s.cancelLocal); err != nil {
		s.abortStart(ctx)
		return nil, err
	}
	s.startObservers()
	s.maint = newMaintenance(e, s.life) // before the producers, which use it
	s.startedAt = e.now()
	// Start holds the client's lock: a report waits for a goroutine, since
	// its handler may call the client.
	if err := s.upsertWorker(ctx); err != nil && ctx.Err() == nil {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			e.reportError(err, hoppertype.PhaseMaintenance)
		}()
	}
	s.ensureProducers()
	s.startScheduler(ctx)
	// Timers are armed before Start returns, so a virtual clock moved right
	// after Start finds them.
	hb := hclock.NewBackgroundTimer(e.clock, e.cfg.HeartbeatInterval)
	s.loops.Add(1)
	go s.heartbeatLoop(hb)
	if a := e.cfg.Autoscale; a != nil {
		s.slots.Measure(e.clock.Now)
		t := hclock.NewBackgroundTimer(e.clock, a.Interval)
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.autoscale(a, t)
		}()
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		s.maint.run()
	}()
	return s, nil
}

// abortStart undoes a Start that failed; its work that finishes what was
// begun has until ctx is done plus stopGrace.
func (s *session) abortStart(ctx context.Context) {
	s.life.endHardAfter(ctx)
	s.stopObservers()
	s.cancel()
	s.workCancel(ErrStopping)
	s.loops.Wait()
	s.completer.stop()
	s.life.end()
}

// listen runs fn for every notification on topic until the session stops.
func (s *session) listen(topic string, fn func(payload string)) error {
	sub, err := s.e.base.Listen(s.ctx, topic)
	if err != nil {
		return fmt.Errorf("hopper: listen %s: %w", topic, err)
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		defer sub.Close()
		for {
			select {
			case <-s.ctx.Done():
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
func (s *session) ensureProducers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	for _, q := range s.e.queues() {
		if _, ok := s.producers[q]; ok {
			continue
		}
		p := newProducer(s, q)
		s.producers[q] = p
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			p.run()
		}()
	}
}

func (s *session) wake(queue string, at time.Time) {
	s.mu.Lock()
	p := s.producers[queue]
	s.mu.Unlock()
	if p != nil {
		p.wake(at)
	}
}

// wakeAll asks every producer for a round.
func (s *session) wakeAll() {
	s.mu.Lock()
	ps := make([]*producer, 0, len(s.producers))
	for _, p := range s.producers {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.wake(time.Time{})
	}
}

// cancelLocal cancels a job's attempts running in this process, if any.
func (s *session) cancelLocal(id string) {
	s.mu.Lock()
	var as []*activeJob
	for l, a := range s.active {
		if l.ID == id {
			as = append(as, a)
		}
	}
	s.mu.Unlock()
	for _, a := range as {
		a.mu.Lock()
		a.cancelRequested = true
		a.mu.Unlock()
		a.cancel(hoppertype.ErrCancelled)
	}
}

func leaseOf(row *hoppertype.JobRow) driver.Lease {
	return driver.Lease{ID: row.ID, Token: row.LeaseToken}
}

// addActive tracks a running attempt. Attempts are keyed by lease, not job
// id: a job rescued and claimed again by this same process may briefly run
// twice here, and each attempt must keep its own lease.
func (s *session) addActive(row *hoppertype.JobRow, cancel context.CancelCauseFunc) *activeJob {
	a := &activeJob{row: row, cancel: cancel}
	s.mu.Lock()
	s.active[leaseOf(row)] = a
	s.mu.Unlock()
	s.e.progressed()
	return a
}

// leftHere ends what dispatchItem counted in here for row: called once the
// attempt's end is recorded (its outcome written, or failed to be, or
// found not to be the attempt's to write), just before the job's waiters
// are woken, so that a wait that finds the job here is woken after and
// one that finds it gone reads it.
func (s *session) leftHere(row *hoppertype.JobRow) {
	s.mu.Lock()
	if n := s.here[row.ID]; n > 1 {
		s.here[row.ID] = n - 1
	} else {
		delete(s.here, row.ID)
	}
	s.mu.Unlock()
}

// executesHere reports whether an attempt of job id is dispatched to this
// process and its end not yet recorded.
func (s *session) executesHere(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.here[id] > 0
}

func (s *session) removeActive(row *hoppertype.JobRow) {
	s.mu.Lock()
	delete(s.active, leaseOf(row))
	s.mu.Unlock()
	s.e.progressed()
}

// stop implements Client.Stop.
func (s *session) stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		// What finishes what was begun has until ctx is done plus
		// stopGrace, whatever the store does (deadline.go).
		s.life.endHardAfter(ctx)
		defer s.life.end()
		// Handlers are cancelled once ctx is done, whatever Stop waits
		// for then (a claim seen through, say).
		unwatch := context.AfterFunc(ctx, func() { s.workCancel(ErrStopping) })
		defer unwatch()
		// 1. No new claims, no more occurrences.
		s.cancel()
		s.stopScheduler()
		s.reportStopping()
		s.mu.Lock()
		ps := make([]*producer, 0, len(s.producers))
		for _, p := range s.producers {
			ps = append(ps, p)
		}
		s.mu.Unlock()
		for _, p := range ps {
			<-p.done
		}
		// 2. Let running attempts finish until ctx is done, then cancel them.
		s.mu.Lock()
		s.draining = true
		s.mu.Unlock()
		s.putBackWaiting()
		finished := make(chan struct{})
		go func() {
			s.execs.Wait()
			close(finished)
		}()
		select {
		case <-finished:
			if !unwatch() {
				s.stopErr = ctx.Err() // ctx's end cancelled them
			}
		case <-ctx.Done():
			s.stopErr = ctx.Err()
			s.workCancel(ErrStopping)
			<-finished
		}
		s.workCancel(ErrStopping)
		close(s.execsDone)
		s.life.endDrained() // no lease left to heartbeat
		close(s.poolDone)
		s.poolWG.Wait()
		// 3. Record every outcome, then stop the rest.
		s.completer.stop()
		s.stopObservers()
		s.loops.Wait()
		s.maint.resign()
		s.forgetWorker()
	})
	return s.stopErr
}

// heartbeatLoop renews the leases of running jobs and cancels jobs whose
// lease was lost or whose cancel was requested from another process.
func (s *session) heartbeatLoop(t hclock.Timer) {
	defer s.loops.Done()
	e := s.e
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			// Keep heartbeating while attempts drain: Stop waits for them.
			s.drainHeartbeats()
			return
		case <-s.workerDirty:
			s.reportWorker(s.ctx)
			continue
		case <-t.C():
		}
		// Re-arm before the work, so beats keep a fixed rate and the next
		// one is armed as soon as this one is visible.
		t.Reset(e.cfg.HeartbeatInterval)
		s.heartbeatOnce()
		s.reportWorker(s.ctx)
	}
}

// drainHeartbeats keeps leases alive while Stop waits for running attempts
// (until Stop closes execsDone: waiting on the WaitGroup here would race
// with the producers' last dispatches).
func (s *session) drainHeartbeats() {
	done := s.execsDone
	t := hclock.NewBackgroundTimer(s.e.clock, s.e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			t.Reset(s.e.cfg.HeartbeatInterval)
			s.heartbeatOnce()
		}
	}
}

// heartbeatOnce renews the leases of the running attempts, within a
// heartbeat interval and until they have drained. A renewal the store does
// not answer in time is reported and tried again at the next beat; a lease
// never renewed expires and the rescuer retries its job.
func (s *session) heartbeatOnce() {
	e := s.e
	s.handBackStale()
	ctx, cancel := call(s.life.drained, e.cfg.HeartbeatInterval)
	defer cancel()
	if err := s.renewLeases(ctx, e.now().Add(e.cfg.Visibility)); err != nil && s.life.drained.Err() == nil {
		e.reportError(fmt.Errorf("heartbeat: %w", err), hoppertype.PhaseQueue)
	}
}

// renewLeases moves the leases of the running attempts to expire at
// expires, cancelling the attempts whose lease was lost or whose cancel
// was requested from another process.
func (s *session) renewLeases(ctx context.Context, expires time.Time) error {
	s.mu.Lock()
	if len(s.active) == 0 {
		s.mu.Unlock()
		return nil
	}
	leases := make([]driver.Lease, 0, len(s.active))
	for l := range s.active {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	res, err := s.e.drv.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Leases: leases, ExpiresAt: expires})
	if err != nil {
		return err
	}
	if len(res) != len(leases) {
		return fmt.Errorf("%d results for %d leases", len(res), len(leases))
	}
	for i, r := range res {
		switch {
		case !r.Held:
			s.mu.Lock()
			a := s.active[leases[i]]
			s.mu.Unlock()
			if a != nil {
				a.cancel(hoppertype.ErrLeaseLost)
			}
		case r.CancelRequested:
			s.cancelLocal(r.ID)
		}
	}
	return nil
}

// limiters holds a session's limiters, made on first use.
type limiters struct {
	mu sync.Mutex
	m  map[string]*limiter
}

// limiterOf returns the limiter governing jobs of type typ: the type's own,
// else the client's, else nil.
func (s *session) limiterOf(typ string) *limiter {
	e := s.e
	if strings.HasPrefix(typ, "hopper.") {
		return nil // hopper's own jobs (gates) are never held back
	}
	key, lim := "", e.cfg.Limit
	if t := e.lookupType(typ); t != nil && t.Limit() != nil {
		key, lim = typ, t.Limit()
	}
	if lim == nil || (lim.Max == 0 && lim.Rate == 0) {
		return nil
	}
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	if s.limits.m == nil {
		s.limits.m = map[string]*limiter{}
	}
	l := s.limits.m[key]
	if l == nil {
		l = newLimiter(*lim, e.clock, s.wakeAll)
		s.limits.m[key] = l
	}
	return l
}

// claimable drops from types those whose limiter has a full backlog: the
// jobs claimed already wait for their turn.
func (s *session) claimable(types []string) []string {
	if s.e.cfg.Limit == nil && !s.e.anyTypeLimit() {
		return types
	}
	out := types[:0:0]
	for _, t := range types {
		if l := s.limiterOf(t); l == nil || !l.full() {
			out = append(out, t)
		}
	}
	return out
}

// start runs a claimed job: now, or once its limiter gives it a turn.
// While it waits it is heartbeated (its lease held) and holds its slot.
// loaded, if not nil, is the job's run read with the claim (see loadRuns);
// batch, if not nil, is told when the attempt returns (see producer.settle).
func (s *session) start(row *hoppertype.JobRow, loaded *driver.RunLoaded, batch *roundBatch) {
	l := s.limiterOf(row.Type)
	if l == nil {
		if !s.dispatchItem(dispatchItem{row: row, holdsSlot: true, loaded: loaded, batch: batch}) && batch != nil {
			batch.attemptDone()
		}
		return
	}
	if batch != nil {
		// Its wait in the limiter is not the round's to wait for.
		batch.attemptDone()
	}
	// While it waits, a cancel or a lost lease takes it out of line.
	s.addActive(row, func(cause error) {
		if l.remove(row) {
			s.endWaiting(row, cause)
		}
	})
	l.admit(row, func() {
		// What was read with the claim is not passed on: the wait may
		// be long, and the execution reads its run afresh.
		if !s.dispatchItem(dispatchItem{row: row, holdsSlot: true, done: l.done}) {
			l.done()
			s.endWaiting(row, ErrStopping) // the client is stopping
		}
	})
}

// endWaiting ends a job that waited in a limiter without running: handed
// back (stopping), cancelled, or dropped (its lease was lost: the store
// gave it to another worker).
func (s *session) endWaiting(row *hoppertype.JobRow, cause error) {
	s.removeActive(row)
	defer s.slots.Release(1)
	if errors.Is(cause, hoppertype.ErrLeaseLost) {
		return
	}
	e := s.e
	res := attemptResult{err: cause, cause: cause, cancelRequested: errors.Is(cause, hoppertype.ErrCancelled)}
	o := decide(row, res, nil, e.now(), nil, nil)
	s.completer.submit(finishItem{row: row, outcome: o})
}

// startAhead starts row, claimed ahead of its slot (see
// producer.aheadRoom), once a slot is free: at once if one is, else when
// the next one is freed, before any producer's turn. Until then it counts
// as running here: its lease is renewed, and a cancel or a lost lease
// takes it out of the wait.
func (s *session) startAhead(row *hoppertype.JobRow, loaded *driver.RunLoaded, batch *roundBatch) {
	t := &SlotTaker{Since: s.e.now()}
	s.addActive(row, func(cause error) {
		if s.slots.Leave(t) {
			s.endAhead(row, cause, batch, false)
		}
	})
	t.Take = func() {
		if !s.dispatchItem(dispatchItem{row: row, holdsSlot: true, loaded: loaded, batch: batch}) {
			s.slots.Release(1)
			s.endAhead(row, ErrStopping, batch, false) // the client is stopping
		}
	}
	t.Back = func(announce bool) { s.endAhead(row, ErrStopping, batch, announce) }
	s.slots.Ahead(t)
}

// handBackStale hands the jobs claimed ahead that have waited a heartbeat
// interval for a slot back to the store, their attempts unused, and
// announces their queues: the slots they were claimed for went to longer
// jobs than the claim expected, and another process may have one free.
func (s *session) handBackStale() {
	stale := s.slots.LeaveBefore(s.e.now().Add(-s.e.cfg.HeartbeatInterval))
	if len(stale) == 0 {
		return
	}
	for i, t := range stale {
		t.Back(i == len(stale)-1)
	}
}

// endAhead ends a job claimed ahead that never took its slot: handed back
// (stopping, or waiting too long), its attempt unused, cancelled, or
// dropped (its lease was lost). announce tells other processes its queue
// has a job, once it is back.
func (s *session) endAhead(row *hoppertype.JobRow, cause error, batch *roundBatch, announce bool) {
	if batch != nil {
		defer batch.attemptDone()
	}
	s.removeActive(row)
	if errors.Is(cause, hoppertype.ErrLeaseLost) {
		return
	}
	res := attemptResult{err: cause, cause: cause, cancelRequested: errors.Is(cause, hoppertype.ErrCancelled)}
	it := finishItem{row: row, outcome: decide(row, res, nil, s.e.now(), nil, nil)}
	if announce {
		it.effects = func(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow) error {
			return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: job.Queue})
		}
	}
	s.completer.submit(it)
}

// putBackWaiting hands the jobs still waiting in limiters, or for the
// slots they were claimed ahead of, back to the store, their attempts
// unused: the client is stopping.
func (s *session) putBackWaiting() {
	s.limits.mu.Lock()
	ls := make([]*limiter, 0, len(s.limits.m))
	for _, l := range s.limits.m {
		ls = append(ls, l)
	}
	s.limits.mu.Unlock()
	for _, l := range ls {
		for _, row := range l.drain() {
			s.endWaiting(row, ErrStopping)
		}
	}
	for _, t := range s.slots.LeaveAll() {
		t.Back(false)
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
func (s *session) claimsFor(types []string, want int) []claim {
	if s.e.cfg.Limit == nil && !s.e.anyTypeLimit() {
		return []claim{{types: types, limit: want}}
	}
	var free []string
	byLimiter := map[*limiter][]string{}
	var order []*limiter
	for _, t := range types {
		l := s.limiterOf(t)
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

// Session is a started engine's run, one Start to its Stop, as the code
// around the engine sees it.
type Session struct{ s *session }

// WorkContext is the parent of handler contexts: Stop cancels it once its
// own ctx is done.
func (p *Session) WorkContext() context.Context { return p.s.workCtx }
