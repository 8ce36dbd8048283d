package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
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
		nudged, done := d.wait(t.Context(), false)
		if !nudged || done {
			t.Fatalf("%s: wait = nudged %v, done %v; want a nudge", o.Name, nudged, done)
		}
		if waited := time.Since(start); waited < o.Gap {
			t.Fatalf("%s answered a nudge after %v, before its gap of %v", o.Name, waited, o.Gap)
		}
	}
}
