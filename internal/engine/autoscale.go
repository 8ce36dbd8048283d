package engine

import (
	"math"
	"slices"
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

// ScaleStep is one evaluation of seed 004's autoscaler: at workload (busy
// slots ÷ cur) it returns the slots to have. At a workload of at least up,
// below max, it adds min(ceil((max − cur)/2), max − cur); at a workload of
// at most down, above min, it removes max(1, min(floor((cur − min)/2),
// cur − min)) — the seed's count with hopper's fix (a pool at min + 1
// would never reach min). Otherwise it keeps cur. A cur outside
// [min, max] is brought inside first.
func ScaleStep(cur int, workload float64, lo, hi int, up, down float64) int {
	cur = max(lo, min(cur, hi))
	switch {
	case workload >= up && cur < hi:
		return cur + min(int(math.Ceil(float64(hi-cur)/2)), hi-cur)
	case workload <= down && cur > lo:
		return cur - max(1, min((cur-lo)/2, cur-lo))
	}
	return cur
}

// reportedScalings is how many of its latest scaling decisions a worker
// reports in its row.
const reportedScalings = 20

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
		// The next evaluation is armed before this one reports: a harness
		// that moves a virtual clock on seeing EventScaled finds it armed.
		t.Reset(a.Interval)
		s.scaleOnce(a)
	}
}

// scaleOnce is one evaluation of the autoscaler. The workload is the
// time-weighted mean of the slots in use over the interval (Slots.Workload)
// over the slots: an instant's count of running attempts says little when
// jobs take microseconds.
func (s *session) scaleOnce(a *Autoscale) {
	e := s.e
	cur := s.slots.Max()
	busy := s.slots.Workload()
	workload := busy / float64(max(cur, 1))
	next := ScaleStep(cur, workload, a.Min, a.Max, a.Up, a.Down)
	if next == cur {
		return
	}
	s.slots.SetMax(next)
	now := e.now()
	info := hoppertype.ScalingInfo{Workload: workload, Busy: int(math.Round(busy)), Before: cur, After: next, At: now}
	s.mu.Lock()
	s.scalings = append(s.scalings, info)
	if len(s.scalings) > reportedScalings {
		s.scalings = slices.Delete(s.scalings, 0, len(s.scalings)-reportedScalings)
	}
	s.mu.Unlock()
	e.log.Info("hopper: autoscaled", "category", "world", "workload", workload, "busy", busy, "from", cur, "to", next)
	e.emit(hoppertype.Event{Kind: hoppertype.EventScaled, At: now, Scaling: &info})
	s.workerChanged()
}
