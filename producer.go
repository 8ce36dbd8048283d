package hopper

import (
	"fmt"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// producer claims the due jobs of one queue, in batches sized by the free
// worker slots, and hands them to executors. It sleeps until a notification
// (a local enqueue, a notification from the store, a freed slot it waited
// for) or the next due time, with PollInterval as the fallback: an idle
// queue costs one poll per interval and no busy loop.
type producer struct {
	rt    *runtime
	queue string
	wakeC chan struct{}
	done  chan struct{}

	mu sync.Mutex
	// nextAt is the earliest due time hinted since the last round.
	nextAt time.Time
	// wantSlots is set while the producer waits for a slot to free up.
	wantSlots bool
}

func newProducer(rt *runtime, queue string) *producer {
	return &producer{rt: rt, queue: queue, wakeC: make(chan struct{}, 1), done: make(chan struct{})}
}

// wake asks for a round now (at zero) or at the given due time.
func (p *producer) wake(at time.Time) {
	if !at.IsZero() && at.After(p.rt.c.now()) {
		p.mu.Lock()
		if p.nextAt.IsZero() || at.Before(p.nextAt) {
			p.nextAt = at
		}
		p.mu.Unlock()
	}
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

// slotFreed wakes the producer only if it is waiting for a slot.
func (p *producer) slotFreed() {
	p.mu.Lock()
	w := p.wantSlots
	p.mu.Unlock()
	if w {
		p.wake(time.Time{})
	}
}

func (p *producer) run() {
	defer close(p.done)
	c := p.rt.c
	errBackoff := time.Duration(0)
	for p.rt.ctx.Err() == nil {
		n, full, err := p.round()
		if err != nil {
			c.reportError(fmt.Errorf("claim from queue %q: %w", p.queue, err), PhaseQueue)
			errBackoff = min(max(2*errBackoff, 10*time.Millisecond), c.cfg.PollInterval)
			p.sleep(c.now().Add(errBackoff))
			continue
		}
		errBackoff = 0
		if full {
			continue
		}
		if n == 0 && c.cfg.AutoRedrive > 0 {
			p.rt.maint.autoRedrive()
		}
		next := c.now().Add(c.cfg.PollInterval)
		if at, err := c.drv.JobNextRunAt(p.rt.ctx, p.queue); err == nil && !at.IsZero() && at.Before(next) {
			next = at
		}
		p.sleep(next)
	}
}

// sleep waits until next, a wake-up or the end of the runtime.
func (p *producer) sleep(next time.Time) {
	c := p.rt.c
	p.mu.Lock()
	if !p.nextAt.IsZero() {
		if p.nextAt.Before(next) {
			next = p.nextAt
		}
		p.nextAt = time.Time{}
	}
	p.mu.Unlock()
	d := next.Sub(c.now())
	if d <= 0 {
		return
	}
	t := c.clock.NewTimer(d)
	defer t.Stop()
	// Under a virtual clock the poll that makes up for a missed
	// notification still runs on the wall clock.
	var fallback <-chan time.Time
	if _, real := c.clock.(hclock.Real); !real {
		ft := time.NewTimer(c.cfg.PollInterval)
		defer ft.Stop()
		fallback = ft.C
	}
	select {
	case <-p.rt.ctx.Done():
	case <-p.wakeC:
	case <-t.C():
	case <-fallback:
	}
}

// round claims and dispatches one batch. It reports how many jobs it took
// and whether it filled every free slot (so more may be waiting).
func (p *producer) round() (int, bool, error) {
	rt, c := p.rt, p.rt.c
	types := c.claimTypes()
	if len(types) == 0 {
		return 0, false, nil
	}
	want := rt.slots.tryAcquire(c.cfg.FetchBatch)
	if want == 0 {
		p.mu.Lock()
		p.wantSlots = true
		p.mu.Unlock()
		// A slot may have freed between the first try and the flag.
		if want = rt.slots.tryAcquire(c.cfg.FetchBatch); want == 0 {
			p.sleepForSlot()
			return 0, true, nil
		}
		p.mu.Lock()
		p.wantSlots = false
		p.mu.Unlock()
	}
	now := c.now()
	rows, err := c.drv.JobClaim(rt.ctx, &driver.JobClaimParams{
		Queue:          p.queue,
		Types:          types,
		Limit:          want,
		Now:            now,
		LeaseExpiresAt: now.Add(c.cfg.Visibility),
		Worker:         c.worker,
	})
	if err != nil {
		rt.slots.unreserve(want)
		return 0, false, err
	}
	rt.slots.unreserve(want - len(rows))
	for _, row := range rows {
		rt.dispatch(row, true)
	}
	return len(rows), len(rows) == want, nil
}

// sleepForSlot waits until a slot frees or the runtime stops.
func (p *producer) sleepForSlot() {
	select {
	case <-p.rt.ctx.Done():
	case <-p.wakeC:
	}
	p.mu.Lock()
	p.wantSlots = false
	p.mu.Unlock()
}

// dispatch runs a claimed job on a pooled worker goroutine: an idle worker
// takes it, or a new one starts. Workers are kept between jobs (their stacks
// stay grown) and exit after a while idle or when the runtime stops.
func (rt *runtime) dispatch(row *hoppertype.JobRow, holdsSlot bool) bool {
	rt.mu.Lock()
	if rt.draining {
		rt.mu.Unlock()
		return false
	}
	rt.execs.Add(1)
	rt.mu.Unlock()
	it := dispatchItem{row: row, holdsSlot: holdsSlot}
	select {
	case rt.pool <- it:
	default:
		rt.poolWG.Add(1)
		go rt.worker(it)
	}
	return true
}

type dispatchItem struct {
	row       *hoppertype.JobRow
	holdsSlot bool
}

// workerIdle is how long a pooled worker waits for another job.
const workerIdle = 10 * time.Second

func (rt *runtime) worker(it dispatchItem) {
	defer rt.poolWG.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		rt.execute(it.row, it.holdsSlot)
		idle.Reset(workerIdle)
		select {
		case it = <-rt.pool:
		case <-idle.C:
			return
		case <-rt.poolDone:
			return
		}
	}
}
