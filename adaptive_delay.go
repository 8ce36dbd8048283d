package hopper

import (
	"context"
	"slices"
	"sync"
	"time"
)

// AdaptiveDelayOpts tune an AdaptiveDelay. The zero value of every field
// means its default.
type AdaptiveDelayOpts struct {
	// Types limits the attempts watched to these job types (names as in
	// Event.Type). Defaults to every type.
	Types []string
	// MaxFailRate is the share of failed attempts, failed/(succeeded+failed)
	// over one interval, above which the delay grows. Defaults to 0: any
	// failure.
	MaxFailRate float64
	// Min is the delay while healthy, the floor the delay eases back to.
	// It is capped at Max. Defaults to 0.
	Min time.Duration
	// Max caps the delay. Defaults to 30s.
	Max time.Duration
	// Base is the first delay when backing off starts. Defaults to 100ms.
	Base time.Duration
	// Factor multiplies the delay at each unhealthy interval; values below
	// 1 mean the default. Defaults to 2.
	Factor float64
	// Step is taken off the delay at each healthy interval. Defaults to
	// Base.
	Step time.Duration
}

// AdaptiveDelay is a Config.Backpressure that slows claiming down while
// attempts fail and speeds it up again as they succeed: an AIMD controller,
// the shape TCP congestion control has. Each time a queue's producer asks,
// it looks at the attempts that succeeded and failed since that producer
// last asked (an interval). When the interval's failure rate is above
// MaxFailRate the delay grows multiplicatively (Base first, then times
// Factor, up to Max); otherwise, an interval with no finished attempts
// included, it shrinks additively (by Step, down to Min). The client
// counts the outcomes itself (see BackpressureInfo.Outcomes): there is
// nothing to wire but the one field.
//
//	ad := hopper.NewAdaptiveDelay(&hopper.AdaptiveDelayOpts{Max: 10 * time.Second})
//	c, err := hopper.New(hopper.Config{Backpressure: ad.Backpressure})
//
// It keeps a delay per queue, so give each client its own AdaptiveDelay.
// It is safe for concurrent use.
type AdaptiveDelay struct {
	opts AdaptiveDelayOpts

	mu     sync.Mutex
	queues map[string]*aimdState
}

// aimdState is the controller's state for one queue.
type aimdState struct {
	delay             time.Duration
	succeeded, failed uint64 // counts at the last look
}

// NewAdaptiveDelay returns an AdaptiveDelay; opts may be nil for every
// default.
func NewAdaptiveDelay(opts *AdaptiveDelayOpts) *AdaptiveDelay {
	var o AdaptiveDelayOpts
	if opts != nil {
		o = *opts
		o.Types = slices.Clone(o.Types)
	}
	return &AdaptiveDelay{opts: o.normalized(), queues: map[string]*aimdState{}}
}

// normalized fills in the defaults.
func (o AdaptiveDelayOpts) normalized() AdaptiveDelayOpts {
	if o.MaxFailRate < 0 {
		o.MaxFailRate = 0
	}
	if o.Max <= 0 {
		o.Max = 30 * time.Second
	}
	if o.Base <= 0 {
		o.Base = 100 * time.Millisecond
	}
	if o.Factor < 1 {
		o.Factor = 2
	}
	if o.Step <= 0 {
		o.Step = o.Base
	}
	o.Min = min(max(o.Min, 0), o.Max)
	return o
}

// Backpressure returns how long the producer asking should wait before it
// claims, after moving that queue's delay by one interval. Use it as
// Config.Backpressure. Called with a ctx that does not come from a
// producer (no BackpressureInfo), it returns Min.
func (a *AdaptiveDelay) Backpressure(ctx context.Context) time.Duration {
	info, ok := BackpressureFromContext(ctx)
	if !ok {
		return a.opts.Min
	}
	succeeded, failed := info.Outcomes(a.opts.Types...)
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.queues[info.Queue]
	if st == nil {
		// The first look sets the baseline: outcomes from before this
		// queue's first interval say nothing about it.
		st = &aimdState{delay: a.opts.Min, succeeded: succeeded, failed: failed}
		a.queues[info.Queue] = st
		return st.delay
	}
	st.delay = a.opts.next(st.delay, succeeded-st.succeeded, failed-st.failed)
	st.succeeded, st.failed = succeeded, failed
	return st.delay
}

// next is the controller's step: the delay after an interval in which
// succeeded and failed attempts finished, given the delay before it.
func (o AdaptiveDelayOpts) next(delay time.Duration, succeeded, failed uint64) time.Duration {
	if total := succeeded + failed; total > 0 && float64(failed)/float64(total) > o.MaxFailRate {
		if delay < o.Base {
			return min(max(o.Base, o.Min), o.Max)
		}
		if grown := float64(delay) * o.Factor; grown < float64(o.Max) {
			return max(time.Duration(grown), o.Min)
		}
		return o.Max
	}
	return max(delay-o.Step, o.Min)
}
