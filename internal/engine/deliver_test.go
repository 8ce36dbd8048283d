package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// TestNudgedReadsWaitTheObserversGap: commits nudge AfterCommit observers
// all the time under load, and each reads the feed at most once per its
// gap: a nudge is answered no sooner than the observer's gap.
func TestNudgedReadsWaitTheObserversGap(t *testing.T) {
	drv := memdriver.New()
	defer drv.Close()
	e := newTestEngine(t, drv)
	nop := func(context.Context, hoppertype.Change) error { return nil }
	if err := e.Observe(&Observer{Name: "mine", Phase: AfterCommit, Fn: nop}); err != nil {
		t.Fatal(err)
	}
	if err := e.Observe(&Observer{Name: "slow", Phase: AfterCommit, Fn: nop, Gap: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	gaps := map[string]time.Duration{}
	for _, o := range e.afterCommit {
		gaps[o.Name] = o.Gap
	}
	if gaps["mine"] != NudgeGap || gaps["slow"] != 50*time.Millisecond {
		t.Fatalf("gaps %v; want %v for the default and 50ms as given", gaps, NudgeGap)
	}
	for _, o := range e.afterCommit {
		d := &deliverer{e: e, o: o, nudge: make(chan struct{}, 1), ttl: e.cfg.Visibility}
		d.nudge <- struct{}{}
		start := time.Now()
		nudged, done := d.wait(t.Context(), 0)
		if !nudged || done {
			t.Fatalf("%s: wait = nudged %v, done %v; want a nudge", o.Name, nudged, done)
		}
		if waited := time.Since(start); waited < o.Gap {
			t.Fatalf("%s answered a nudge after %v, before its gap of %v", o.Name, waited, o.Gap)
		}
	}
}

// TestCursorLeaseLapsedUnderTheProcess: a process whose cursor lease ran
// out under it (it stalled, or a virtual clock jumped past the lease)
// takes the cursor again, without failing to renew a lease it knows is
// over, and keeps what it delivered when no other process moved the
// cursor meanwhile; when another did, it goes on from the stored cursor.
func TestCursorLeaseLapsedUnderTheProcess(t *testing.T) {
	drv := memdriver.New()
	defer drv.Close()
	clk := hclock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(drv)
	cfg.Clock = clk
	e := New(cfg)
	t.Cleanup(e.Close)
	d := &deliverer{e: e, o: &Observer{Name: "mine"}, nudge: make(chan struct{}, 1), ttl: time.Minute, hard: context.Background()}
	ctx := t.Context()

	held, err := d.lease(ctx)
	if err != nil || !held {
		t.Fatalf("lease = %v, %v; want it held", held, err)
	}
	if err := d.save(hoppertype.ChangeCursor{Tx: 1}); err != nil {
		t.Fatal(err)
	}
	d.cur = hoppertype.ChangeCursor{Tx: 2} // delivered, not saved yet

	clk.Jump(clk.Now().Add(time.Hour)) // far past the lease
	held, err = d.lease(ctx)
	if err != nil || !held {
		t.Fatalf("after the lease lapsed: lease = %v, %v; want it taken again", held, err)
	}
	if d.cur != (hoppertype.ChangeCursor{Tx: 2}) {
		t.Fatalf("cursor %+v; want what this process delivered (tx 2), no one else moved it", d.cur)
	}

	// Another process takes the lapsed cursor and moves it on.
	clk.Jump(clk.Now().Add(time.Hour))
	other := drv.Executor()
	if _, err := other.CursorLease(ctx, &driver.CursorLeaseParams{Name: "mine", Owner: "other", Now: clk.Now(), TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := other.CursorAdvance(ctx, &driver.CursorAdvanceParams{Name: "mine", Owner: "other", At: hoppertype.ChangeCursor{Tx: 9}, Now: clk.Now(), TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	clk.Jump(clk.Now().Add(time.Minute)) // the other's lease lapses too
	held, err = d.lease(ctx)
	if err != nil || !held {
		t.Fatalf("lease = %v, %v; want it taken again", held, err)
	}
	if d.cur != (hoppertype.ChangeCursor{Tx: 9}) {
		t.Fatalf("cursor %+v; want the stored one (tx 9), which the other process moved", d.cur)
	}
}
