package hopper

import (
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// Autoscale configures a client's autoscaler (Config.Autoscale): every
// Interval it measures the workload, the slots in use over the interval
// (time-weighted; all of them while claims come back full) ÷ slots, and
// moves the slots between Min and Max by seed 004's rule. At a workload of at least
// ScaleUp, below Max, it adds min(ceil((Max − cur)/2), Max − cur); at a
// workload of at most ScaleDown, above Min, it removes
// max(1, floor((cur − Min)/2)) — hopper's fix of the seed, whose count is
// 0 at Min + 1. The slots start at Min. Lowering them cuts no running job:
// claims take no slot until enough are freed. Each change is an
// EventScaled event (Event.Scaling) and a log line. The zero value of each
// field means its default.
type Autoscale struct {
	// Min and Max bound the slots. Default 2 and 10.
	Min, Max int
	// ScaleUp and ScaleDown are the workloads at or above which the slots
	// grow and at or below which they shrink. Default 0.7 and 0.3.
	ScaleUp, ScaleDown float64
	// Interval is how often the workload is measured. Default 10s.
	Interval time.Duration
}

// ScalingInfo is what an autoscaling decision saw and did.
type ScalingInfo = hoppertype.ScalingInfo

func (a Autoscale) withDefaults() (Autoscale, error) {
	if a.Min == 0 {
		a.Min = 2
	}
	if a.Max == 0 {
		a.Max = max(10, a.Min)
	}
	if a.ScaleUp == 0 {
		a.ScaleUp = 0.7
	}
	if a.ScaleDown == 0 {
		a.ScaleDown = 0.3
	}
	if a.Interval == 0 {
		a.Interval = 10 * time.Second
	}
	switch {
	case a.Min < 1 || a.Max < a.Min:
		return a, fmt.Errorf("%w: Autoscale Min %d and Max %d (want 1 ≤ Min ≤ Max)", ErrInvalidInput, a.Min, a.Max)
	case a.ScaleDown < 0 || a.ScaleUp > 1 || a.ScaleDown >= a.ScaleUp:
		return a, fmt.Errorf("%w: Autoscale ScaleDown %v and ScaleUp %v (want 0 ≤ ScaleDown < ScaleUp ≤ 1)", ErrInvalidInput, a.ScaleDown, a.ScaleUp)
	case a.Interval < 0:
		return a, fmt.Errorf("%w: Autoscale Interval %s is negative", ErrInvalidInput, a.Interval)
	}
	return a, nil
}

// engine returns the engine's form of a (nil for none).
func (a *Autoscale) engine() *engine.Autoscale {
	if a == nil {
		return nil
	}
	return &engine.Autoscale{Min: a.Min, Max: a.Max, Up: a.ScaleUp, Down: a.ScaleDown, Interval: a.Interval}
}
