package hopper

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

// PhaseObserver: an AfterCommit observer failed on a change (it is
// retried), or its delivery loop could not read the feed.
const PhaseObserver ErrorPhase = "observer"

// feedPage is how many changes of the feed one delivery round reads.
const feedPage = 2000

// nudgeFeed tells this client's AfterCommit observers that it committed
// something: they look at the feed now rather than at their next poll.
func (c *Client) nudgeFeed() {
	select {
	case c.feedNudge <- struct{}{}:
	default:
	}
}

// deliverer runs one AfterCommit observer in this process: it holds the
// observer's cursor (a lease renewed as delivery goes) and delivers the
// feed's changes after it.
type deliverer struct {
	c     *Client
	o     *observer
	nudge chan struct{}
	ttl   time.Duration
	// hard is the runtime's hard lifetime: saving and releasing the
	// cursor outlive delivery (its context) until it ends.
	hard context.Context
	// held is set while this process holds the cursor; cur is where
	// delivery stands, saved where the store has it, renewed when the
	// lease was last renewed (used by the delivery goroutine only).
	held    atomic.Bool
	cur     ChangeCursor
	saved   ChangeCursor
	renewed time.Time
	// failAt is the change that failed last, fails how often in a row;
	// tried is when this process last asked for the cursor held elsewhere.
	failAt ChangeCursor
	fails  int
	tried  time.Time
}

func (rt *runtime) startObservers() {
	c := rt.c
	if len(c.afterCommit) == 0 {
		return
	}
	var ds []*deliverer
	for _, o := range c.afterCommit {
		ds = append(ds, &deliverer{c: c, o: o, nudge: make(chan struct{}, 1), ttl: c.cfg.Visibility, hard: rt.life.hard})
	}
	// The client's nudges, fanned out to each observer. Delivery goes on
	// while Stop records the last outcomes, until stopObservers.
	rt.feedCtx, rt.feedCancel = context.WithCancel(rt.life.hard)
	rt.feedLoops.Add(1)
	go func() {
		defer rt.feedLoops.Done()
		for {
			select {
			case <-rt.feedCtx.Done():
				return
			case <-c.feedNudge:
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
		rt.feedLoops.Add(1)
		go func() {
			defer rt.feedLoops.Done()
			d.run(rt.feedCtx)
		}()
	}
}

// stopObservers ends delivery and gives up the cursors this process held,
// so another process takes them over at once. It waits for observers still
// running until the hard lifetime ends, stopGrace after Stop's ctx is done
// (an observer that ignores its context is left to finish on its own).
func (rt *runtime) stopObservers() {
	if rt.feedCancel == nil {
		return
	}
	rt.feedCancel()
	done := make(chan struct{})
	go func() {
		rt.feedLoops.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-rt.life.hard.Done():
		rt.c.reportError(fmt.Errorf("stop: an observer did not return in time: %w", context.Cause(rt.life.hard)), PhaseObserver)
	}
}

// run delivers until ctx ends.
func (d *deliverer) run(ctx context.Context) {
	c := d.c
	defer d.release()
	quick := 0 // re-reads left after a nudge found nothing final yet
	for {
		got, err := d.round(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.reportError(fmt.Errorf("observer %q: %w", d.o.name, err), PhaseObserver)
		}
		if got {
			continue
		}
		soon := quick > 0 && d.held.Load()
		if soon {
			quick--
		}
		nudged, done := d.wait(ctx, soon)
		if done {
			return
		}
		if nudged {
			quick = 5
		}
	}
}

// wait waits for a nudge, the poll interval, or (soon) a short re-read
// delay; it reports whether a nudge came and whether ctx ended.
func (d *deliverer) wait(ctx context.Context, soon bool) (nudged, done bool) {
	c := d.c
	var tick, fallback <-chan time.Time
	if soon {
		// A change committed here may not be final yet (an older
		// transaction still runs): look again soon. (A poll on real time,
		// as the fallback below: waiting for finality is not a delay of
		// the engine's.)
		rt := time.NewTimer(20 * time.Millisecond)
		defer rt.Stop()
		fallback = rt.C
	} else {
		t := c.clock.NewTimer(c.cfg.PollInterval)
		defer t.Stop()
		tick = t.C()
		if _, real := c.clock.(hclock.Real); !real {
			// Under a virtual clock, the poll that makes up for a missed
			// nudge still runs on the wall clock.
			rt := time.NewTimer(c.cfg.PollInterval)
			defer rt.Stop()
			fallback = rt.C
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
	pause := time.NewTimer(d.o.gap)
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
	c := d.c
	now := c.now()
	if d.held.Load() {
		if now.Sub(d.renewed) < d.ttl/3 {
			return true, nil
		}
		// Renew by recording how far delivery got.
		if err := d.save(d.cur); err != nil {
			return false, err
		}
		return true, nil
	}
	// Another process delivers: ask again once a poll interval, not on
	// every commit that nudges this one.
	if !d.tried.IsZero() && now.Sub(d.tried) < c.cfg.PollInterval {
		return false, nil
	}
	d.tried = now
	ctx, cancel := call(ctx, d.ttl/3)
	defer cancel()
	row, err := c.drv.CursorLease(ctx, &driver.CursorLeaseParams{Name: d.o.name, Owner: c.worker, Now: now, TTL: d.ttl})
	if err != nil {
		d.held.Store(false)
		return false, err
	}
	if row.Owner != c.worker {
		d.held.Store(false)
		return false, nil
	}
	// Whatever this process thought, the stored cursor is where delivery
	// stands (another process may have moved it while the lease lapsed).
	d.cur, d.saved, d.renewed = row.At, row.At, now
	d.held.Store(true)
	return true, nil
}

// save records that delivery got to cur and renews the lease. Delivery
// ending does not cut it: what was delivered is recorded, within a third
// of the lease and the hard lifetime.
func (d *deliverer) save(cur ChangeCursor) error {
	c := d.c
	now := c.now()
	ctx, cancel := call(d.hard, d.ttl/3)
	defer cancel()
	err := c.drv.CursorAdvance(ctx, &driver.CursorAdvanceParams{Name: d.o.name, Owner: c.worker, At: cur, Now: now, TTL: d.ttl})
	if err != nil {
		d.held.Store(false)
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
	c := d.c
	if held, err := d.lease(ctx); !held || err != nil {
		return false, err
	}
	// The store reads the changes this observer does not want without
	// handing them over.
	scan := d.o.filter.scan()
	scan.After, scan.Limit = d.cur, feedPage
	sctx, cancel := call(ctx, d.ttl/3)
	res, err := c.drv.ChangeScan(sctx, scan)
	cancel()
	if err != nil {
		return false, err
	}
	if res.Next == d.cur {
		if d.cur != d.saved && c.now().Sub(d.renewed) >= saveEvery {
			return false, d.save(d.cur)
		}
		return false, nil
	}
	chs := res.Changes
	cur := d.cur
	advance := func() error { return d.save(cur) }
	matched := false
	for _, ch := range chs {
		if d.o.filter.Match(ch) {
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
				c.reportError(fmt.Errorf("observer %q on change %d (%s %s to %s), try %d: %w", d.o.name, ch.Position, ch.Kind, ch.EntityID, ch.State, d.fails, err), PhaseObserver)
				// Keep what was delivered and the lease, then wait (never
				// so long that the lease lapses meanwhile).
				if err := advance(); err != nil {
					return false, err
				}
				t := c.clock.NewTimer(min(observerBackoff(d.fails-1), d.ttl/3))
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
		if c.now().Sub(d.renewed) > d.ttl/3 {
			if err := advance(); err != nil {
				return false, err
			}
		}
	}
	cur = res.Next
	if matched || c.now().Sub(d.renewed) >= saveEvery {
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
	c := d.c
	// Record how far delivery got; a zero TTL ends the lease.
	ctx, cancel := call(d.hard, min(d.ttl/3, shortBudget))
	defer cancel()
	err := c.drv.CursorAdvance(ctx, &driver.CursorAdvanceParams{Name: d.o.name, Owner: c.worker, At: d.cur, Now: c.now(), TTL: 0})
	if err != nil && !errors.Is(err, hoppertype.ErrLeaseLost) {
		c.reportError(fmt.Errorf("observer %q: release cursor: %w", d.o.name, err), PhaseObserver)
	}
	d.held.Store(false)
}
