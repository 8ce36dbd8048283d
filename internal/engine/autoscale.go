package engine

import (
	"math"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// Autoscale moves a session's worker slots between Min and Max by seed
// 004's rule, evaluated every Interval on the engine's clock (see
// ScaleStep). The slots start at Min.
type Autoscale struct {
	Min, Max int
	// Up and Down are the workload (busy ÷ slots) at or above which the
	// slots grow, and at or below which they shrink.
	Up, Down float64
	Interval time.Duration
}

// ScaleStep is one evaluation of seed 004's autoscaler: with busy of cur
// slots in use, it returns the slots to have. At a workload (busy ÷ cur)
// of at least up, below max, it adds min(ceil((max − cur)/2), max − cur);
// at a workload of at most down, above min, it removes
// max(1, min(floor((cur − min)/2), cur − min)) — the seed's count with
// hopper's fix (a pool at min + 1 would never reach min). Otherwise it
// keeps cur. A cur outside [min, max] is brought inside first.
func ScaleStep(cur, busy, lo, hi int, up, down float64) int {
	cur = max(lo, min(cur, hi))
	if cur <= 0 {
		return cur
	}
	workload := float64(busy) / float64(cur)
	switch {
	case workload >= up && cur < hi:
		return cur + min(int(math.Ceil(float64(hi-cur)/2)), hi-cur)
	case workload <= down && cur > lo:
		return cur - max(1, min((cur-lo)/2, cur-lo))
	}
	return cur
}

// autoscale runs the session's autoscaler until it stops: every Interval
// it measures the workload, moves the slots' cap, and reports a change as
// an EventScaled event and a log line.
// t is its timer, armed by Start.
func (s *session) autoscale(a *Autoscale, t hclock.Timer) {
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
		}
		s.scaleOnce(a)
		t.Reset(a.Interval)
	}
}

// scaleOnce is one evaluation of the autoscaler.
func (s *session) scaleOnce(a *Autoscale) {
	e := s.e
	// Busy are the attempts running (or waiting in a limiter), not the
	// slots in use: a claim reserves every free slot while it runs, and
	// would read as a full pool.
	s.mu.Lock()
	busy := len(s.active)
	s.mu.Unlock()
	cur := s.slots.Max()
	next := ScaleStep(cur, busy, a.Min, a.Max, a.Up, a.Down)
	if next == cur {
		return
	}
	s.slots.SetMax(next)
	workload := float64(busy) / float64(max(cur, 1))
	e.log.Info("hopper: autoscaled", "workload", workload, "busy", busy, "from", cur, "to", next)
	e.emit(hoppertype.Event{Kind: hoppertype.EventScaled, At: e.now(),
		Scaling: &hoppertype.ScalingInfo{Workload: workload, Busy: busy, Before: cur, After: next}})
	s.workerChanged()
}
