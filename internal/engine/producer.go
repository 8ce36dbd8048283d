package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// producer claims the due jobs of one queue, in batches sized by the free
// worker slots, and hands them to executors. It sleeps until a notification
// (a local enqueue, a notification from the store, a slot granted to it in
// turn) or the next due time, with PollInterval as the fallback: an idle
// queue costs one poll per interval and no busy loop. Before each round it
// asks Config.Backpressure, and it passes each claimed job through
// Config.Accept (backpressure.go).
type producer struct {
	s     *session
	queue string
	wakeC chan struct{}
	done  chan struct{}

	// slot is the producer's place in the line for worker slots.
	slot SlotWaiter

	mu sync.Mutex
	// nextAt is the earliest due time hinted since the last round.
	nextAt time.Time

	// woken is set by a wake-up for now until the round it asks for
	// begins; while set, the wake-up counts as a round under way (Settle),
	// so a harness does not read the queue as idle while the producer's
	// goroutine has yet to run.
	woken atomic.Bool

	// claimTime and batchTime are moving means, in nanoseconds on the
	// wall clock plus one (zero: nothing measured yet), of how long a
	// round's claims take and how long its jobs then take to return, the
	// last of them (see settle).
	claimTime, batchTime atomic.Int64
}

func newProducer(s *session, queue string) *producer {
	p := &producer{s: s, queue: queue, wakeC: make(chan struct{}, 1), done: make(chan struct{})}
	p.slot.Wake = p.signal
	return p
}

// wake asks for a round now (at zero) or at the given due time. A round
// asked for now takes its turn for a worker slot at once.
func (p *producer) wake(at time.Time) {
	if !at.IsZero() && at.After(p.s.e.now()) {
		p.mu.Lock()
		if p.nextAt.IsZero() || at.Before(p.nextAt) {
			p.nextAt = at
		}
		p.mu.Unlock()
	} else {
		if p.woken.CompareAndSwap(false, true) {
			p.s.rounds.Add(1)
		}
		p.s.slots.Enlist(&p.slot)
	}
	p.signal()
}

// unwake ends the count of a wake-up for now as a round under way: the
// round it asked for has begun, or the producer holds off or stops.
func (p *producer) unwake() {
	if p.woken.Swap(false) {
		p.s.rounds.Add(-1)
	}
}

// signal interrupts the producer's sleep, or its next one.
func (p *producer) signal() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

func (p *producer) run() {
	defer close(p.done)
	e := p.s.e
	errBackoff := time.Duration(0)
	// backlog is set after a full claim: the producer claims again as soon
	// as it has slots, and until that claim ends it counts as a round under
	// way (Settle), not idle, though it may be waiting for the jobs it
	// started (settle) or for its goroutine to run. counted says whether
	// this producer holds one count of s.rounds.
	backlog, counted := false, false
	count := func(on bool) {
		if on != counted {
			counted = on
			if on {
				p.s.rounds.Add(1)
			} else {
				p.s.rounds.Add(-1)
			}
		}
	}
	defer func() {
		count(false)
		p.unwake()
	}()
	for p.s.ctx.Err() == nil {
		if d := p.backpressure(); d > 0 {
			backlog = false
			count(false)
			p.unwake()
			p.hold(d)
			continue
		}
		// A claim that follows a full one runs with a backlog behind it:
		// a slot freed meanwhile waits for it, busy (Slots.Workload).
		p.s.slots.NoteBacklog(&p.slot, backlog)
		count(true)
		p.unwake() // this round answers it
		r, err := p.round()
		p.s.slots.NoteBacklog(&p.slot, false)
		backlog = err == nil && r.full && !r.declinedAll
		count(backlog)
		e.progressed()
		if err != nil {
			e.reportError(fmt.Errorf("claim from queue %q: %w", p.queue, err), hoppertype.PhaseQueue)
			errBackoff = min(max(2*errBackoff, 10*time.Millisecond), e.cfg.PollInterval)
			p.sleep(e.now().Add(errBackoff))
			continue
		}
		errBackoff = 0
		if r.declinedAll {
			// Every job claimed went back (Config.Accept): claiming again
			// at once would take the same jobs back.
			p.hold(e.cfg.PollInterval)
			continue
		}
		if r.full {
			p.settle(r.batch)
			continue
		}
		if r.started == 0 && e.cfg.AutoRedrive > 0 {
			p.s.maint.autoRedrive()
		}
		next := e.now().Add(e.cfg.PollInterval)
		if at := p.nextRunAt(); !at.IsZero() && at.Before(next) {
			next = at
		}
		p.sleep(next)
	}
}

// nextRunAt is when the queue's next job is due (zero if unknown), asked
// within a poll interval: not knowing, the producer polls then.
func (p *producer) nextRunAt() time.Time {
	ctx, cancel := call(p.s.ctx, p.s.e.cfg.PollInterval)
	defer cancel()
	at, err := p.s.e.drv.JobNextRunAt(ctx, &driver.JobNextRunAtParams{Queue: p.queue})
	if err != nil {
		return time.Time{}
	}
	return at
}

// sleep waits until next, a wake-up or the end of the session.
func (p *producer) sleep(next time.Time) {
	e := p.s.e
	p.mu.Lock()
	if !p.nextAt.IsZero() {
		if p.nextAt.Before(next) {
			next = p.nextAt
		}
		p.nextAt = time.Time{}
	}
	p.mu.Unlock()
	d := next.Sub(e.now())
	if d <= 0 {
		return
	}
	t := hclock.NewBackgroundTimer(e.clock, d)
	defer t.Stop()
	// Under a virtual clock the poll that makes up for a missed
	// notification still runs on the wall clock.
	var fallback <-chan time.Time
	if _, real := e.clock.(hclock.Real); !real {
		ft := time.NewTimer(e.cfg.PollInterval)
		defer ft.Stop()
		fallback = ft.C
	}
	select {
	case <-p.s.ctx.Done():
	case <-p.wakeC:
	case <-t.C():
	case <-fallback:
	}
}

// roundResult says what a round did.
type roundResult struct {
	// started counts the jobs dispatched.
	started int
	// full is set when the claim filled every slot it had: more jobs may
	// be waiting.
	full bool
	// declinedAll is set when the round claimed jobs and Config.Accept
	// declined every one.
	declinedAll bool
	// batch follows the jobs the round started (nil if none).
	batch *roundBatch
}

// roundBatch follows the jobs one round handed to workers (those a limiter
// holds back do not count) until the last of them returns.
type roundBatch struct {
	p     *producer
	start time.Time
	left  atomic.Int32
	done  chan struct{}
}

func newRoundBatch(p *producer, n int) *roundBatch {
	b := &roundBatch{p: p, start: time.Now(), done: make(chan struct{})}
	b.left.Store(int32(n))
	return b
}

// attemptDone counts one of the batch's jobs returned (or never started).
func (b *roundBatch) attemptDone() {
	if b.left.Add(-1) == 0 {
		noteMean(&b.p.batchTime, time.Since(b.start))
		close(b.done)
	}
}

// noteMean moves the mean m (nanoseconds plus one, zero if empty) an
// eighth of the way to d.
func noteMean(m *atomic.Int64, d time.Duration) {
	old := m.Load()
	if old == 0 {
		m.Store(int64(d) + 1)
		return
	}
	m.Store(old + (int64(d)+1-old)/8)
}

// settle runs between a full round and the next claim. A claim costs a
// round trip and a commit besides its rows, so one claim of many jobs is
// cheaper than two of half as many; yet claiming again at once, as the
// round's jobs are only starting, sizes the next claim by the slots free at
// that instant, and a pool of short jobs then claims in halves, each half
// waiting for the other's claim. When the round's jobs return, by the
// means, in under half the time a claim takes, and the next claim could
// take more than the slots free now, settle waits for them: at most half a
// claim's time, and never for jobs that run longer. Other queues'
// producers meanwhile take the slots freed in their turn, as always.
func (p *producer) settle(b *roundBatch) {
	if b == nil || p.claimsAhead() {
		// Claims ahead take the slots the round's jobs will free.
		return
	}
	claim, batch := p.claimTime.Load(), p.batchTime.Load()
	if claim == 0 || batch == 0 || 2*batch > claim {
		return
	}
	s := p.s
	if max := s.slots.Max(); max == Unlimited || max-s.slots.Used() >= s.e.cfg.FetchBatch {
		return
	}
	t := time.NewTimer(time.Duration(claim / 2))
	defer t.Stop()
	s.slots.NoteBacklog(&p.slot, true)
	defer s.slots.NoteBacklog(&p.slot, false)
	select {
	case <-b.done:
	case <-t.C:
	case <-s.ctx.Done():
	}
}

// round claims and dispatches one batch.
func (p *producer) round() (roundResult, error) {
	s, e := p.s, p.s.e
	types := s.claimable(e.claimTypes())
	if len(types) == 0 {
		s.slots.Withdraw(&p.slot) // pass on a slot granted to a wake-up
		return roundResult{}, nil
	}
	want := s.slots.TryAcquire(&p.slot, e.cfg.FetchBatch)
	ahead := 0
	if p.claimsAhead() {
		ahead = s.slots.AheadRoom(&p.slot, e.cfg.FetchBatch-want, e.cfg.FetchBatch)
	}
	if want+ahead == 0 {
		// In line: a freed slot is granted in turn and wakes us.
		p.sleepForSlot()
		return roundResult{full: true}, nil
	}
	now := e.now()
	// The jobs of a limit are claimed apart, no more than it has room for,
	// so a capped type does not take every slot (and its jobs stay free
	// for other processes).
	var rows []*hoppertype.JobRow
	asked := 0
	began := time.Now()
	for _, cl := range s.claimsFor(types, want+ahead) {
		got, err := s.claim(&driver.JobClaimParams{
			Queue:          p.queue,
			Types:          cl.types,
			Limit:          cl.limit,
			Now:            now,
			LeaseExpiresAt: now.Add(e.cfg.Visibility),
			Worker:         e.worker,
		})
		if err != nil {
			s.slots.Release(want - len(rows))
			for _, row := range rows {
				s.start(row, nil, nil) // claimed already: run them
			}
			return roundResult{}, err
		}
		asked += cl.limit
		rows = append(rows, got...)
	}
	noteMean(&p.claimTime, time.Since(began))
	claimed := len(rows)
	rows = p.accepted(rows, now)
	// The first rows take the slots reserved; the rest, claimed ahead,
	// wait for the slots the running jobs free.
	slotted := min(len(rows), want)
	s.slots.Release(want - slotted)
	loaded := s.loadRuns(rows)
	var batch *roundBatch
	if len(rows) > 0 {
		// One count more than the jobs, given back once all are handed
		// out, so the batch cannot end while they are.
		batch = newRoundBatch(p, len(rows)+1)
		defer batch.attemptDone()
	}
	for i, row := range rows {
		if i < slotted {
			s.start(row, loaded[row.ID], batch)
		} else {
			s.startAhead(row, loaded[row.ID], batch)
		}
	}
	return roundResult{started: len(rows), full: asked > 0 && claimed == asked, declinedAll: claimed > 0 && len(rows) == 0, batch: batch}, nil
}

// claimsAhead reports whether the producer's claims take jobs beyond its
// free slots (Slots.AheadRoom), to wait in the process for the next slots
// freed: its queue's jobs are short, a round's returning, by the means, in
// under half the time a claim takes. A claim's cost is mostly per
// statement and per commit, so short jobs claimed a few hundred at a time
// cost the store less each than claims sized by the slots free; and the
// jobs waiting keep the slots busy while the next claim is under way. Not
// with limits, whose claims are sized by their room, nor when
// Config.NoClaimAhead is set.
func (p *producer) claimsAhead() bool {
	e := p.s.e
	if e.cfg.NoClaimAhead || e.cfg.Limit != nil || e.anyTypeLimit() {
		return false
	}
	claim, batch := p.claimTime.Load(), p.batchTime.Load()
	return claim != 0 && batch != 0 && 2*batch <= claim
}

// claim claims jobs unless Stop has begun. Once begun, a claim is seen
// through (within claimBudget and the hard lifetime): one that committed
// while its caller stopped listening would hold its jobs until their
// leases expire.
func (s *session) claim(p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := call(s.life.hard, claimBudget)
	defer cancel()
	return s.e.drv.JobClaim(ctx, p)
}

// sleepForSlot waits until a slot is granted (or another wake-up comes) or
// the session stops.
func (p *producer) sleepForSlot() {
	select {
	case <-p.s.ctx.Done():
	case <-p.wakeC:
	}
}

// hold waits d on the client's clock, deaf to wake-ups, or until the
// session stops. The producer leaves the line for slots meanwhile.
func (p *producer) hold(d time.Duration) {
	p.s.slots.Withdraw(&p.slot)
	t := hclock.NewBackgroundTimer(p.s.e.clock, d)
	defer t.Stop()
	select {
	case <-p.s.ctx.Done():
	case <-t.C():
	}
}

// dispatch runs a claimed job on a pooled worker goroutine: an idle worker
// takes it, or a new one starts. Workers are kept between jobs (their stacks
// stay grown) and exit after a while idle or when the session stops.
func (s *session) dispatch(row *hoppertype.JobRow, holdsSlot bool, done func()) bool {
	return s.dispatchItem(dispatchItem{row: row, holdsSlot: holdsSlot, done: done})
}

// dispatchItem hands it to a pooled worker or a new one; it reports false
// once the session drains.
func (s *session) dispatchItem(it dispatchItem) bool {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return false
	}
	s.execs.Add(1)
	s.here[it.row.ID]++
	s.mu.Unlock()
	select {
	case s.pool <- it:
	default:
		s.poolWG.Add(1)
		go s.worker(it)
	}
	return true
}

type dispatchItem struct {
	row       *hoppertype.JobRow
	holdsSlot bool
	// done, if set, runs once the attempt returned (a limiter's turn ends).
	done func()
	// fresh is the run row of a run this process just started (see
	// Attempt.fresh).
	fresh *hoppertype.RunRow
	// loaded is the job's run and history read with the claim's other
	// runs (see session.loadRuns), nil if not read.
	loaded *driver.RunLoaded
	// batch, if set, is the round that claimed the job, told when the
	// attempt returns (see producer.settle).
	batch *roundBatch
}

// loadRuns reads the runs of the workflow jobs among rows, which a claim
// just returned, in one call when the store reads runs in batches (see
// driver.RunBatchLoader): each execution would otherwise read its own run
// first, one round trip per run. The jobs are leased to this process, so
// their histories grow only through it. A failed read is no error here:
// each execution then reads its own run.
func (s *session) loadRuns(rows []*hoppertype.JobRow) map[string]*driver.RunLoaded {
	bl, ok := s.e.drv.(driver.RunBatchLoader)
	if !ok || len(rows) < 2 {
		return nil
	}
	var ids []string
	for _, row := range rows {
		if s.e.isWorkflow(row.Type) {
			ids = append(ids, row.ID)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	ctx, cancel := call(s.life.hard, claimBudget)
	defer cancel()
	loaded, err := bl.RunLoadMany(ctx, &driver.RunLoadManyParams{IDs: ids})
	if err != nil {
		return nil
	}
	return loaded
}

// workerIdle is how long a pooled worker waits for another job, at least
// (at most twice as long: see session.worker).
const workerIdle = 10 * time.Second

func (s *session) worker(it dispatchItem) {
	defer s.poolWG.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for ok := true; ok; it, ok = s.next(idle) {
		s.execute(it)
	}
}

// next waits for the worker's next item, false when it is to exit. The
// timer is not reset for every job (a timer's lock per job): a worker
// that ran a job since it last fired waits one more period, so an idle
// one exits after one to two periods.
//
// Its frame holds waitFrame bytes it never uses: a collection shrinks a
// waiting goroutine's stack to half when it uses under a quarter of it,
// and the next job would grow it again (a copy of the stack per job and
// collection at thousands of workers, each running a job between two
// collections). The worker waits with a quarter of an 8 KB stack in use,
// which its jobs' bookkeeping fits (events, the statistics), so that
// stack stays.
//
//go:noinline
func (s *session) next(idle *time.Timer) (dispatchItem, bool) {
	var pad [waitFrame]byte
	touch(&pad)
	for ran := true; ; {
		select {
		case it := <-s.pool:
			return it, true
		case <-idle.C:
			if !ran {
				return dispatchItem{}, false
			}
			ran = false
			idle.Reset(workerIdle)
		case <-s.poolDone:
			return dispatchItem{}, false
		}
	}
}

// waitFrame is the part of a waiting worker's frame that keeps its stack
// (see session.next): 8 KB / 4 less the runtime's guard and the frames
// below.
const waitFrame = 1280

//go:noinline
func touch(p *[waitFrame]byte) { p[0] = 0 }
