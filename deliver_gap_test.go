package hopper

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver/memdriver"
)

// TestNudgedReadsWaitTheObserversGap: commits nudge AfterCommit observers
// all the time under load, and each reads the feed at most once per its
// gap: the retry observer's is the long one, a user observer's the short
// one, and a nudge is answered no sooner than the gap.
func TestNudgedReadsWaitTheObserversGap(t *testing.T) {
	drv := memdriver.New()
	defer drv.Close()
	c, err := New(Config{Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.Observe("mine", AfterCommit, ChangeFilter{}, func(context.Context, Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	gaps := map[string]time.Duration{}
	for _, o := range c.afterCommit {
		gaps[o.name] = o.gap
	}
	if gaps[RetryObserverName] != retryObserverGap || gaps["mine"] != nudgeGap || retryObserverGap <= nudgeGap {
		t.Fatalf("gaps %v; want the retry observer's %v and %v for others", gaps, retryObserverGap, nudgeGap)
	}
	for _, o := range c.afterCommit {
		d := &deliverer{c: c, o: o, nudge: make(chan struct{}, 1), ttl: c.cfg.Visibility}
		d.nudge <- struct{}{}
		start := time.Now()
		nudged, done := d.wait(t.Context(), false)
		if !nudged || done {
			t.Fatalf("%s: wait = nudged %v, done %v; want a nudge", o.name, nudged, done)
		}
		if waited := time.Since(start); waited < o.gap {
			t.Fatalf("%s answered a nudge after %v, before its gap of %v", o.name, waited, o.gap)
		}
	}
}
