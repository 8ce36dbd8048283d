package engine

import (
	"testing"
	"time"
)

// A freed slot goes to the producer at the head of the line, not to
// whichever producer asks next.
func TestSlotsFreedSlotGoesToHeadOfLine(t *testing.T) {
	s := NewSlots(1)
	var woke []string
	a := &SlotWaiter{}
	b := &SlotWaiter{}
	c := &SlotWaiter{}
	a.Wake = func() { woke = append(woke, "a") }
	b.Wake = func() { woke = append(woke, "b") }
	c.Wake = func() { woke = append(woke, "c") }

	if got := s.TryAcquire(a, 1); got != 1 {
		t.Fatalf("a got %d slots, want 1", got)
	}
	if got := s.TryAcquire(b, 1); got != 0 {
		t.Fatalf("b got %d slots with none free, want 0", got)
	}
	if got := s.TryAcquire(c, 1); got != 0 {
		t.Fatalf("c got %d slots with none free, want 0", got)
	}
	s.Release(1) // a finishes: b is first in line
	if len(woke) != 1 || woke[0] != "b" {
		t.Fatalf("woken %v, want [b]", woke)
	}
	// a asks again before b runs: the granted slot is b's.
	if got := s.TryAcquire(a, 1); got != 0 {
		t.Fatalf("a took %d slots granted to b", got)
	}
	if got := s.TryAcquire(b, 1); got != 1 {
		t.Fatalf("b got %d slots, want its grant", got)
	}
	s.Release(1)
	if len(woke) != 2 || woke[1] != "c" {
		t.Fatalf("woken %v, want [b c]", woke)
	}
}

// A withdrawn producer passes its grant on to the next in line.
func TestSlotsWithdrawPassesGrantOn(t *testing.T) {
	s := NewSlots(1)
	var woke []string
	a := &SlotWaiter{Wake: func() { woke = append(woke, "a") }}
	b := &SlotWaiter{Wake: func() { woke = append(woke, "b") }}
	c := &SlotWaiter{Wake: func() { woke = append(woke, "c") }}
	s.TryAcquire(a, 1)
	s.TryAcquire(b, 1)
	s.TryAcquire(c, 1)
	s.Release(1) // granted to b
	s.Withdraw(b)
	if len(woke) != 2 || woke[1] != "c" {
		t.Fatalf("woken %v, want [b c]", woke)
	}
	if got := s.TryAcquire(c, 1); got != 1 {
		t.Fatalf("c got %d slots, want the grant b passed on", got)
	}
}

// Unlimited never makes anyone wait.
func TestSlotsUnlimited(t *testing.T) {
	s := NewSlots(Unlimited)
	w := &SlotWaiter{Wake: func() { t.Fatal("woken with no cap") }}
	if got := s.TryAcquire(w, 1000); got != 1000 {
		t.Fatalf("got %d, want 1000", got)
	}
	s.Enlist(w)
	s.Release(1000)
}

// A freed slot goes to the jobs claimed ahead, in claim order, before any
// producer in line; a job claimed ahead takes a free slot at once.
func TestSlotsAheadComeFirst(t *testing.T) {
	s := NewSlots(1)
	var took []string
	taker := func(name string) *SlotTaker {
		return &SlotTaker{Take: func() { took = append(took, name) }}
	}
	woke := 0
	b := &SlotWaiter{Wake: func() { woke++ }}
	x, y := taker("x"), taker("y")
	s.Ahead(x)
	if len(took) != 1 || s.Used() != 1 {
		t.Fatalf("took %v with %d used, want x at once on the free slot", took, s.Used())
	}
	s.Ahead(y)
	if got := s.TryAcquire(b, 1); got != 0 {
		t.Fatalf("b got %d slots with none free", got)
	}
	s.Release(1) // x ends: y first, b waits
	if len(took) != 2 || took[1] != "y" || woke != 0 {
		t.Fatalf("took %v, woke %d: want y before b", took, woke)
	}
	s.Release(1)
	if woke != 1 {
		t.Fatalf("woke %d, want b once no job waits ahead", woke)
	}
}

// AheadRoom allows no claim ahead while another producer waits in line or
// without a cap, and never more waiting than its limit.
func TestSlotsAheadRoom(t *testing.T) {
	s := NewSlots(2)
	a := &SlotWaiter{Wake: func() {}}
	b := &SlotWaiter{Wake: func() {}}
	if got := s.AheadRoom(a, 10, 5); got != 5 {
		t.Fatalf("room %d, want the limit 5", got)
	}
	s.TryAcquire(a, 2)
	s.Ahead(&SlotTaker{Take: func() {}})
	if got := s.AheadRoom(a, 10, 5); got != 4 {
		t.Fatalf("room %d, want 4 with one waiting", got)
	}
	if got := s.AheadRoom(a, 2, 5); got != 2 {
		t.Fatalf("room %d, want n (2)", got)
	}
	s.TryAcquire(a, 1) // a in line itself
	if got := s.AheadRoom(a, 10, 5); got != 4 {
		t.Fatalf("room %d with only a in line, want 4", got)
	}
	s.TryAcquire(b, 1) // b waits too
	if got := s.AheadRoom(a, 10, 5); got != 0 {
		t.Fatalf("room %d with b in line, want 0", got)
	}
	if got := NewSlots(Unlimited).AheadRoom(a, 10, 5); got != 0 {
		t.Fatalf("room %d without a cap, want 0", got)
	}
}

// Leave, LeaveBefore and LeaveAll take waiting jobs out; a job that took
// its slot cannot leave.
func TestSlotsAheadLeave(t *testing.T) {
	s := NewSlots(1)
	base := time.Unix(0, 0)
	var took []int
	jobs := make([]*SlotTaker, 4)
	for i := range jobs {
		jobs[i] = &SlotTaker{Since: base.Add(time.Duration(i) * time.Second), Take: func() { took = append(took, i) }}
		s.Ahead(jobs[i])
	}
	if s.Leave(jobs[0]) {
		t.Fatal("job 0 took the free slot; it cannot leave")
	}
	if !s.Leave(jobs[2]) || s.Leave(jobs[2]) {
		t.Fatal("job 2 leaves once")
	}
	if got := s.LeaveBefore(base.Add(2 * time.Second)); len(got) != 1 || got[0] != jobs[1] {
		t.Fatalf("left before 2 s: %v, want job 1", got)
	}
	if got := s.LeaveAll(); len(got) != 1 || got[0] != jobs[3] {
		t.Fatalf("left: %v, want job 3", got)
	}
	s.Release(1)
	if len(took) != 1 || took[0] != 0 {
		t.Fatalf("took %v, want job 0 alone", took)
	}
}
