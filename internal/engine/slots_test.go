package engine

import (
	"testing"
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
