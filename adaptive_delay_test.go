package hopper

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper/internal/engine"
)

const ms = time.Millisecond

func TestAdaptiveDelayOptsNormalized(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   AdaptiveDelayOpts
		want AdaptiveDelayOpts
	}{
		{"zero is the seed's defaults", AdaptiveDelayOpts{},
			AdaptiveDelayOpts{Max: 30 * time.Second, Base: 100 * ms, Factor: 2, Step: 100 * ms}},
		{"step follows base", AdaptiveDelayOpts{Base: 250 * ms},
			AdaptiveDelayOpts{Max: 30 * time.Second, Base: 250 * ms, Factor: 2, Step: 250 * ms}},
		{"set fields are kept", AdaptiveDelayOpts{MaxFailRate: 0.5, Min: 10 * ms, Max: time.Second, Base: 50 * ms, Factor: 3, Step: 20 * ms},
			AdaptiveDelayOpts{MaxFailRate: 0.5, Min: 10 * ms, Max: time.Second, Base: 50 * ms, Factor: 3, Step: 20 * ms}},
		{"nonsense means the default", AdaptiveDelayOpts{MaxFailRate: -1, Min: -ms, Max: -ms, Base: -ms, Factor: 0.5, Step: -ms},
			AdaptiveDelayOpts{Max: 30 * time.Second, Base: 100 * ms, Factor: 2, Step: 100 * ms}},
		{"min is capped at max", AdaptiveDelayOpts{Min: time.Minute, Max: time.Second},
			AdaptiveDelayOpts{Min: time.Second, Max: time.Second, Base: 100 * ms, Factor: 2, Step: 100 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.normalized(); got.MaxFailRate != tt.want.MaxFailRate || got.Min != tt.want.Min ||
				got.Max != tt.want.Max || got.Base != tt.want.Base || got.Factor != tt.want.Factor || got.Step != tt.want.Step {
				t.Fatalf("normalized() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdaptiveDelayNext(t *testing.T) {
	t.Parallel()
	def := AdaptiveDelayOpts{}.normalized()
	tolerant := AdaptiveDelayOpts{MaxFailRate: 0.25}.normalized()
	floored := AdaptiveDelayOpts{Min: 150 * ms, Max: time.Second}.normalized()
	tests := []struct {
		name              string
		opts              AdaptiveDelayOpts
		delay             time.Duration
		succeeded, failed uint64
		want              time.Duration
	}{
		{"healthy at zero stays at zero", def, 0, 10, 0, 0},
		{"no outcomes is healthy", def, 0, 0, 0, 0},
		{"one failure starts at base", def, 0, 99, 1, 100 * ms},
		{"below base starts at base", def, 40 * ms, 0, 1, 100 * ms},
		{"failing again multiplies", def, 100 * ms, 0, 3, 200 * ms},
		{"and again", def, 200 * ms, 5, 5, 400 * ms},
		{"growth stops at max", def, 20 * time.Second, 0, 1, 30 * time.Second},
		{"at max stays at max", def, 30 * time.Second, 0, 1, 30 * time.Second},
		{"success takes a step off", def, 400 * ms, 1, 0, 300 * ms},
		{"an idle interval takes a step off", def, 400 * ms, 0, 0, 300 * ms},
		{"steps stop at zero", def, 30 * ms, 8, 0, 0},
		{"a rate at the limit is healthy", tolerant, 400 * ms, 3, 1, 300 * ms},
		{"a rate above the limit backs off", tolerant, 400 * ms, 2, 1, 800 * ms},
		{"healthy stops at min", floored, 200 * ms, 1, 0, 150 * ms},
		{"idle at min stays at min", floored, 150 * ms, 0, 0, 150 * ms},
		{"from min failing multiplies min", floored, 150 * ms, 0, 1, 300 * ms},
		{"failing caps at a lower max", floored, 800 * ms, 0, 1, time.Second},
		{"factor 3", AdaptiveDelayOpts{Factor: 3}.normalized(), 100 * ms, 0, 1, 300 * ms},
		{"huge max does not overflow", AdaptiveDelayOpts{Max: time.Duration(1<<63 - 1)}.normalized(), time.Duration(1 << 62), 0, 1, time.Duration(1<<63 - 1)},
		{"custom step", AdaptiveDelayOpts{Step: 250 * ms}.normalized(), time.Second, 1, 0, 750 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.opts.next(tt.delay, tt.succeeded, tt.failed); got != tt.want {
				t.Fatalf("next(%v, %d ok, %d failed) = %v, want %v", tt.delay, tt.succeeded, tt.failed, got, tt.want)
			}
		})
	}
}

// TestAdaptiveDelayBackpressure drives the controller through a run of
// intervals with counts fed as the client would, per queue, without a
// client and without sleeping.
func TestAdaptiveDelayBackpressure(t *testing.T) {
	t.Parallel()
	counts := &engine.OutcomeCounts{}
	record := func(typ string, ok, failed int) {
		for range ok {
			counts.Observe(Event{Kind: EventSucceeded, Type: typ})
		}
		for range failed {
			counts.Observe(Event{Kind: EventFailed, Type: typ})
		}
	}
	ask := func(a *AdaptiveDelay, queue string) time.Duration {
		return a.Backpressure(context.WithValue(context.Background(), backpressureKey{}, BackpressureInfo{Queue: queue, outcomes: counts}))
	}
	record("api", 5, 5) // before the first look: the baseline, not an interval
	a := NewAdaptiveDelay(&AdaptiveDelayOpts{Max: time.Second})
	watched := NewAdaptiveDelay(&AdaptiveDelayOpts{Types: []string{"api"}})
	steps := []struct {
		ok, failed   int
		typ          string
		want, wantQ2 time.Duration
		wantWatched  time.Duration
	}{
		{0, 0, "api", 0, 0, 0},                      // first look
		{3, 0, "api", 0, 0, 0},                      // healthy
		{3, 1, "api", 100 * ms, 100 * ms, 100 * ms}, // one failure: base
		{0, 2, "db", 200 * ms, 200 * ms, 0},         // a type watched is not in it
		{0, 1, "api", 400 * ms, 400 * ms, 100 * ms},
		{0, 9, "api", 800 * ms, 800 * ms, 200 * ms},
		{0, 9, "api", time.Second, time.Second, 400 * ms}, // capped at a's Max
		{4, 0, "api", 900 * ms, 900 * ms, 300 * ms},
		{0, 0, "", 800 * ms, 800 * ms, 200 * ms}, // idle eases too
	}
	for i, s := range steps {
		record(s.typ, s.ok, s.failed)
		if got := ask(a, "q1"); got != s.want {
			t.Fatalf("step %d: q1 delay %v, want %v", i, got, s.want)
		}
		// Each queue's producer sees every interval: asking for q2 as
		// well does not consume q1's counts.
		if got := ask(a, "q2"); got != s.wantQ2 {
			t.Fatalf("step %d: q2 delay %v, want %v", i, got, s.wantQ2)
		}
		if got := ask(watched, "q1"); got != s.wantWatched {
			t.Fatalf("step %d: watching api only, delay %v, want %v", i, got, s.wantWatched)
		}
	}
	if got := a.Backpressure(context.Background()); got != 0 {
		t.Fatalf("without BackpressureInfo: %v, want Min", got)
	}
}

func TestOutcomeCounts(t *testing.T) {
	t.Parallel()
	var o engine.OutcomeCounts
	for _, e := range []Event{
		{Kind: EventSucceeded, Type: "a"}, {Kind: EventFailed, Type: "a", WillRetry: true}, {Kind: EventFailed, Type: "b"},
		{Kind: EventQueued, Type: "a"}, {Kind: EventStarted, Type: "a"}, {Kind: EventDeferred, Type: "a"},
		{Kind: EventExpired, Type: "b"}, {Kind: EventCancelled, Type: "b"},
	} {
		o.Observe(e)
	}
	b := BackpressureInfo{outcomes: &o}
	for _, tt := range []struct {
		types      []string
		ok, failed uint64
	}{
		{nil, 1, 2},
		{[]string{"a"}, 1, 1},
		{[]string{"b"}, 0, 1},
		{[]string{"a", "b", "a"}, 1, 2},
		{[]string{"c"}, 0, 0},
	} {
		if ok, failed := b.Outcomes(tt.types...); ok != tt.ok || failed != tt.failed {
			t.Errorf("Outcomes(%v) = %d, %d; want %d, %d", tt.types, ok, failed, tt.ok, tt.failed)
		}
	}
	if ok, failed := (BackpressureInfo{}).Outcomes(); ok != 0 || failed != 0 {
		t.Errorf("zero BackpressureInfo: %d, %d", ok, failed)
	}
}
