package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// This file delivers AfterCommit observers: one deliverer per observer and
// process, holding the observer name's cursor under a lease while it
// delivers the feed's changes after it.

// feedPage is how many changes of the feed one delivery round reads.
const feedPage = 2000

// nudgeFeed tells this client's AfterCommit observers that it committed
// something: they look at the feed now rather than at their next poll.
func (e *Engine) nudgeFeed() {
	select {
	case e.feedNudge <- struct{}{}:
	default:
	}
}

// deliverer runs one AfterCommit observer in this process: it holds the
// observer's cursor (a lease renewed as delivery goes) and delivers the
// feed's changes after it.
type deliverer struct {
	e     *Engine
	o     *Observer
	nudge chan struct{}
	ttl   time.Duration
	// hard is the session's hard lifetime: saving and releasing the
	// cursor outlive delivery (its context) until it ends.
	hard context.Context
	// held is set while this process holds the cursor; cur is where
	// delivery stands, saved where the store has it, renewed when the
	// lease was last renewed (used by the delivery goroutine only).
	held    atomic.Bool
	cur     hoppertype.ChangeCursor
	saved   hoppertype.ChangeCursor
	renewed time.Time
	// failAt is the change that failed last, fails how often in a row;
	// tried is when this process last asked for the cursor held elsewhere.
	failAt hoppertype.ChangeCursor
	fails  int
	tried  time.Time
}

func (s *session) startObservers() {
	e := s.e
	if len(e.afterCommit) == 0 {
		return
	}
	var ds []*deliverer
	for _, o := range e.afterCommit {
		ds = append(ds, &deliverer{e: e, o: o, nudge: make(chan struct{}, 1), ttl: e.cfg.Visibility, hard: s.life.hard})
	}
	// The client's nudges, fanned out to each observer. Delivery goes on
	// while Stop records the last outcomes, until stopObservers.
	s.feedCtx, s.feedCancel = context.WithCancel(s.life.hard)
	s.feedLoops.Add(1)
	go func() {
		defer s.feedLoops.Done()
		for {
			select {
			case <-s.feedCtx.Done():
				return
			case <-e.feedNudge:
				for _, d := range ds {
					select {
					case d.nudge <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	for _, d := range ds {
		s.feedLoops.Add(1)
		go func() {
			defer s.feedLoops.Done()
			d.run(s.feedCtx)
		}()
	}
}

// stopObservers ends delivery and gives up the cursors this process held,
// so another process takes them over at once. It waits for observers still
// running until the hard lifetime ends, stopGrace after Stop's ctx is done
// (an observer that ignores its context is left to finish on its own).
func (s *session) stopObservers() {
	if s.feedCancel == nil {
		return
	}
	s.feedCancel()
	done := make(chan struct{})
	go func() {
		s.feedLoops.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-s.life.hard.Done():
		s.e.reportError(fmt.Errorf("stop: an observer did not return in time: %w", context.Cause(s.life.hard)), hoppertype.PhaseObserver)
	}
}

// run delivers until ctx ends.
func (d *deliverer) run(ctx context.Context) {
	e := d.e
	defer d.release()
	quick := 0  // re-reads left after a nudge found nothing final yet
	failed := 0 // rounds in a row that a store call failed
	for {
		got, err := d.round(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.reportError(fmt.Errorf("observer %q: %w", d.o.Name, err), hoppertype.PhaseObserver)
			failed++
		} else {
			failed = 0
		}
		if got && err == nil {
			continue
		}
		var soon time.Duration
		switch {
		case failed > 0:
			// A store call failed (a slow or lost connection): try again
			// soon, on the wall clock as the call's budget is, rather than
			// at the next poll.
			soon = min(quickFirst<<min(failed-1, 6), max(e.cfg.PollInterval, quickFirst))
		case quick > 0 && d.held.Load():
			soon = min(quickFirst<<(quickReads-quick), quickMax)
			quick--
		}
		nudged, done := d.wait(ctx, soon)
		if done {
			return
		}
		if nudged {
			quick = quickReads
		}
	}
}

// After a nudge that found nothing final, the deliverer reads again
// quickReads times, quickFirst after the nudge and doubling up to
// quickMax (about 3 s in all): long enough for a transaction of the
// database that began before the commit to end.
const (
	quickReads = 8
	quickFirst = 20 * time.Millisecond
	quickMax   = time.Second
)

// wait waits for a nudge, the poll interval, or (soon, when not 0) a
// short re-read delay; it reports whether a nudge came and whether ctx
// ended.
func (d *deliverer) wait(ctx context.Context, soon time.Duration) (nudged, done bool) {
	e := d.e
	var tick, fallback <-chan time.Time
	if soon > 0 {
		// A change committed here may not be final yet (an older
		// transaction still runs): look again soon. (A poll on real time,
		// as the fallback below: waiting for finality is not a delay of
		// the engine's.)
		s := time.NewTimer(soon)
		defer s.Stop()
		fallback = s.C
	} else {
		t := hclock.NewBackgroundTimer(e.clock, e.cfg.PollInterval)
		defer t.Stop()
		tick = t.C()
		if _, real := e.clock.(hclock.Real); !real {
			// Under a virtual clock, the poll that makes up for a missed
			// nudge still runs on the wall clock.
			s := time.NewTimer(e.cfg.PollInterval)
			defer s.Stop()
			fallback = s.C
		}
	}
	select {
	case <-ctx.Done():
		return false, true
	case <-fallback:
		return false, false
	case <-tick:
		return false, false
	case <-d.nudge:
	}
	// Nudges come with every commit: read at most once per the
	// observer's gap however many arrive. (A throttle on real time, not a
	// delay of the engine's: a virtual clock does not hold it.)
	pause := time.NewTimer(d.o.Gap)
	defer pause.Stop()
	select {
	case <-ctx.Done():
		return true, true
	case <-pause.C:
		return true, false
	}
}

// lease takes or renews the cursor when this process does not hold it or
// its lease is a third through; it reports whether this process holds it.
func (d *deliverer) lease(ctx context.Context) (bool, error) {
	e := d.e
	now := e.now()
	lapsed := false
	if d.held.Load() {
		switch {
		case now.Sub(d.renewed) < d.ttl/3:
			return true, nil
		case now.Sub(d.renewed) < d.ttl:
			// Renew by recording how far delivery got.
			if err := d.save(d.cur); err != nil {
				return false, err
			}
			return true, nil
		}
		// The lease ran out under this process (it stalled, or a
		// virtual clock jumped): take the cursor again as any process
		// would, rather than fail to renew a lease known to be over.
		d.held.Store(false)
		lapsed = true
	}
	// Another process delivers: ask again once a poll interval, not on
	// every commit that nudges this one.
	if !lapsed && !d.tried.IsZero() && now.Sub(d.tried) < e.cfg.PollInterval {
		return false, nil
	}
	d.tried = now
	ctx, cancel := call(ctx, d.ttl/3)
	defer cancel()
	row, err := e.drv.CursorLease(ctx, &driver.CursorLeaseParams{Name: d.o.Name, Owner: e.worker, Now: now, TTL: d.ttl})
	if err != nil {
		// Who holds the cursor is unknown: ask again at the next round.
		d.held.Store(false)
		d.tried = time.Time{}
		return false, err
	}
	if row.Owner != e.worker {
		d.held.Store(false)
		return false, nil
	}
	// The stored cursor is where delivery stands (another process may
	// have moved it while the lease lapsed), unless it is where this
	// process last saved it: then no one else delivered, and what this
	// process delivered since stands.
	if !lapsed || row.At != d.saved {
		d.cur = row.At
	}
	d.saved, d.renewed = row.At, now
	d.held.Store(true)
	return true, nil
}

// save records that delivery got to cur and renews the lease. Delivery
// ending does not cut it: what was delivered is recorded, within a third
// of the lease and the hard lifetime.
func (d *deliverer) save(cur hoppertype.ChangeCursor) error {
	e := d.e
	now := e.now()
	ctx, cancel := call(d.hard, d.ttl/3)
	defer cancel()
	err := e.drv.CursorAdvance(ctx, &driver.CursorAdvanceParams{Name: d.o.Name, Owner: e.worker, At: cur, Now: now, TTL: d.ttl})
	if err != nil {
		d.held.Store(false)
		if !errors.Is(err, hoppertype.ErrLeaseLost) {
			// The call failed, not the lease: this process may hold the
			// cursor still, and asks for it again at the next round
			// rather than after a poll interval.
			d.tried = time.Time{}
		}
		return err
	}
	d.cur, d.saved, d.renewed = cur, cur, now
	return nil
}

// saveEvery is how often a cursor that passed only changes its observer
// does not want is recorded: reading those again after a crash costs
// nothing but the read.
const saveEvery = time.Second

// round delivers one page of changes if this process holds the cursor; it
// reports whether it delivered any (there may be more).
func (d *deliverer) round(ctx context.Context) (bool, error) {
	e := d.e
	if held, err := d.lease(ctx); !held || err != nil {
		return false, err
	}
	// The store reads the changes this observer does not want without
	// handing them over.
	f := *d.o.Filter
	scan := &f
	scan.After, scan.Limit = d.cur, feedPage
	sctx, cancel := call(ctx, d.ttl/3)
	res, err := e.drv.ChangeScan(sctx, scan)
	cancel()
	if err != nil {
		return false, err
	}
	if res.Next == d.cur {
		if d.cur != d.saved && e.now().Sub(d.renewed) >= saveEvery {
			return false, d.save(d.cur)
		}
		return false, nil
	}
	chs := res.Changes
	cur := d.cur
	advance := func() error { return d.save(cur) }
	matched := false
	for _, ch := range chs {
		if d.o.Filter.MatchChange(ch) {
			matched = true
			for {
				err := callObserver(ctx, d.o, ch)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return false, advance()
				}
				// A change that failed in an earlier round keeps its count.
				if d.failAt != hoppertype.CursorOf(ch) {
					d.failAt, d.fails = hoppertype.CursorOf(ch), 0
				}
				d.fails++
				e.reportError(fmt.Errorf("observer %q on change %d (%s %s to %s), try %d: %w", d.o.Name, ch.Position, ch.Kind, ch.EntityID, ch.State, d.fails, err), hoppertype.PhaseObserver)
				// Keep what was delivered and the lease, then wait (never
				// so long that the lease lapses meanwhile).
				if err := advance(); err != nil {
					return false, err
				}
				t := e.clock.NewTimer(min(observerBackoff(d.fails-1), d.ttl/3))
				select {
				case <-ctx.Done():
					t.Stop()
					return false, nil
				case <-t.C():
				}
				if err := advance(); err != nil {
					return false, err
				}
			}
		}
		cur = hoppertype.CursorOf(ch)
		if e.now().Sub(d.renewed) > d.ttl/3 {
			if err := advance(); err != nil {
				return false, err
			}
		}
	}
	cur = res.Next
	if matched || e.now().Sub(d.renewed) >= saveEvery {
		return true, advance()
	}
	d.cur = cur
	return true, nil
}

// observerBackoff is the wait before delivering a failed change again:
// 100ms doubling to a minute.
func observerBackoff(try int) time.Duration {
	d := 100 * time.Millisecond << min(try, 10)
	return min(d, time.Minute)
}

// release gives the cursor up (its lease ends now) if this process holds
// it.
func (d *deliverer) release() {
	if !d.held.Load() {
		return
	}
	e := d.e
	// Record how far delivery got; a zero TTL ends the lease.
	ctx, cancel := call(d.hard, min(d.ttl/3, shortBudget))
	defer cancel()
	err := e.drv.CursorAdvance(ctx, &driver.CursorAdvanceParams{Name: d.o.Name, Owner: e.worker, At: d.cur, Now: e.now(), TTL: 0})
	if err != nil && !errors.Is(err, hoppertype.ErrLeaseLost) {
		e.reportError(fmt.Errorf("observer %q: release cursor: %w", d.o.Name, err), hoppertype.PhaseObserver)
	}
	d.held.Store(false)
}
