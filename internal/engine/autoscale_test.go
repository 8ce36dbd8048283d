package engine

import (
	"testing"
	"time"

	"github.com/hopper-go/hopper/internal/hclock"
)

// TestScaleStep: seed 004's formulas, evaluation by evaluation, with
// hopper's fix at min + 1 (the seed's floor((cur − min)/2) is 0 there, so
// its pool never reaches min).
func TestScaleStep(t *testing.T) {
	tests := []struct {
		name                string
		cur, busy, min, max int
		want                int
	}{
		{"full at min: up by ceil((10-2)/2)", 2, 2, 2, 10, 6},
		{"0.83: up by ceil((10-6)/2)", 6, 5, 2, 10, 8},
		{"0.75: up by ceil((10-8)/2)", 8, 6, 2, 10, 9},
		{"0.78: up by the last one", 9, 7, 2, 10, 10},
		{"full at max: stays", 10, 10, 2, 10, 10},
		{"0.7 exactly scales up", 10, 7, 2, 20, 15},
		{"0.3 exactly: down by floor((10-2)/2)", 10, 3, 2, 10, 6},
		{"idle: down by floor((6-2)/2)", 6, 0, 2, 10, 4},
		{"0.25: down by floor((4-2)/2)", 4, 1, 2, 10, 3},
		{"min + 1: down by max(1, 0), the fix", 3, 0, 2, 10, 2},
		{"idle at min: stays", 2, 0, 2, 10, 2},
		{"0.4, in the band: stays", 5, 2, 2, 10, 5},
		{"0.6, in the band: stays", 5, 3, 2, 10, 5},
		{"below min: brought to min", 1, 0, 2, 10, 2},
		{"above max, idle: brought to max, then down", 12, 0, 2, 10, 6},
		{"min = max: fixed", 4, 4, 4, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ScaleStep(tt.cur, float64(tt.busy)/float64(tt.cur), tt.min, tt.max, 0.7, 0.3); got != tt.want {
				t.Fatalf("ScaleStep(cur %d, busy %d, min %d, max %d) = %d, want %d", tt.cur, tt.busy, tt.min, tt.max, got, tt.want)
			}
		})
	}
}

// TestSlotsSetMax: a cap lowered below the slots in use grants none until
// enough are freed; a cap raised wakes the producers in line with a grant
// at once.
func TestSlotsSetMax(t *testing.T) {
	s := NewSlots(4)
	woken := 0
	w := &SlotWaiter{Wake: func() { woken++ }}
	if got := s.TryAcquire(w, 4); got != 4 {
		t.Fatalf("acquired %d, want 4", got)
	}
	s.SetMax(2)
	if got := s.TryAcquire(w, 1); got != 0 {
		t.Fatalf("acquired %d over a lowered cap", got)
	}
	s.Release(2) // 2 in use: at the cap, nothing to grant
	if woken != 0 || s.Used() != 2 {
		t.Fatalf("woken %d, used %d; want none woken, 2 used", woken, s.Used())
	}
	s.Release(1) // 1 in use: one slot under the cap goes to the line
	if woken != 1 || s.Used() != 2 {
		t.Fatalf("woken %d, used %d; want the waiter woken with a grant", woken, s.Used())
	}
	if got := s.TryAcquire(w, 3); got != 1 {
		t.Fatalf("acquired %d, want the 1 granted", got)
	}
	if got := s.TryAcquire(w, 1); got != 0 {
		t.Fatalf("acquired %d at the cap", got)
	}
	s.SetMax(5)
	if woken != 2 || s.Used() != 3 {
		t.Fatalf("woken %d, used %d; want the waiter in line woken with a grant", woken, s.Used())
	}
	if got := s.TryAcquire(w, 5); got != 3 {
		t.Fatalf("acquired %d, want the grant and the 2 free under the raised cap", got)
	}
}

// TestSlotsWorkload: the workload is the mean of the slots in use over the
// period, weighted by time, and each call starts a new period.
func TestSlotsWorkload(t *testing.T) {
	clk := hclock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := NewSlots(10)
	s.Measure(clk.Now)
	w := &SlotWaiter{Wake: func() {}}
	s.TryAcquire(w, 4)
	clk.Advance(time.Second)
	s.Release(2)
	clk.Advance(time.Second)
	if got := s.Workload(); got != 3 {
		t.Fatalf("workload %v, want 3 (4 for a second, 2 for a second)", got)
	}
	clk.Advance(2 * time.Second)
	if got := s.Workload(); got != 2 {
		t.Fatalf("workload %v, want 2 over the next period", got)
	}
	s.Release(2)
	s.TryAcquire(w, 10) // a claim reserving every slot for an instant
	s.Release(10)
	clk.Advance(time.Second)
	if got := s.Workload(); got != 0 {
		t.Fatalf("workload %v, want 0: an instant's reservation weighs nothing", got)
	}
}
