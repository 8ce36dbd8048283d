package engine

import (
	"slices"
	"sync"
)

// Slots bounds how many attempts run at once and shares them among the
// queues' producers in turn. A producer that finds no slot free stands in
// line, and every slot freed goes to the producer at the head of the line,
// so a queue with a long backlog cannot take each freed slot while another
// queue's job waits: with k queues in line, a queue waits at most k freed
// slots. A producer woken for new work stands in line at once, before its
// goroutine even runs, so its turn does not depend on the scheduler.
type Slots struct {
	mu   sync.Mutex
	max  int // Unlimited (-1) for no cap
	used int // running, reserved and granted slots
	// line holds the producers waiting for a slot, first come first
	// served. It is empty whenever a slot is free.
	line []*SlotWaiter
}

// SlotWaiter is one producer's place in the line for slots. Its fields
// other than wake are guarded by slots.mu.
type SlotWaiter struct {
	// Wake tells the producer a slot was granted to it; it must not block.
	Wake func()
	// granted counts the slots handed to this producer in its turn, not
	// yet taken by tryAcquire; they count as used.
	granted int
	inLine  bool
	// away is set while the producer does not claim (it holds off under
	// backpressure, say): wake-ups then do not put it in line.
	away bool
}

// Unlimited, as the cap of NewSlots, removes the cap on concurrent attempts.
const Unlimited = -1

// NewSlots returns slots capped at max concurrent attempts (or Unlimited).
func NewSlots(max int) *Slots { return &Slots{max: max} }

// TryAcquire reserves up to n slots for w: the slots granted to it, then
// free ones. When it gets none, w stands in line (if it does not already)
// and its wake is called when a slot is granted.
func (s *Slots) TryAcquire(w *SlotWaiter, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.away = false
	got := min(w.granted, n)
	w.granted -= got
	if rest := n - got; rest > 0 {
		free := rest
		if s.max != Unlimited {
			free = max(min(rest, s.max-s.used), 0)
		}
		s.used += free
		got += free
	}
	if got == 0 && !w.inLine {
		s.line = append(s.line, w)
		w.inLine = true
	}
	return got
}

// Release frees n slots (of finished attempts, or reserved and unused):
// each goes to the next producer in line while the cap allows (a cap
// lowered below the slots in use grants none until enough are freed), the
// rest become free.
func (s *Slots) Release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.used -= n
	woken := s.grantLocked()
	s.mu.Unlock()
	for _, w := range woken {
		w.Wake()
	}
}

// grantLocked hands free slots to the producers in line, in turn, and
// returns those to wake.
func (s *Slots) grantLocked() []*SlotWaiter {
	var woken []*SlotWaiter
	for len(s.line) > 0 && (s.max == Unlimited || s.used < s.max) {
		w := s.line[0]
		s.line[0] = nil
		s.line = s.line[1:]
		w.inLine = false
		w.granted++
		s.used++
		woken = append(woken, w)
	}
	return woken
}

// SetMax changes the cap. Raised, the new slots go to the producers in
// line at once; lowered, no running attempt is cut: claims take no slot
// until enough are freed to come under the new cap.
func (s *Slots) SetMax(max int) {
	s.mu.Lock()
	s.max = max
	woken := s.grantLocked()
	s.mu.Unlock()
	for _, w := range woken {
		w.Wake()
	}
}

// Max returns the cap (Unlimited for none).
func (s *Slots) Max() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// Used returns the slots in use: running, reserved by a claim, or granted
// to a producer in line.
func (s *Slots) Used() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Enlist puts w in line when no slot is free: its producer was woken for
// new work. It does nothing while w is away, in line or holds a grant.
func (s *Slots) Enlist(w *SlotWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.away || w.inLine || w.granted > 0 || s.max == Unlimited || s.used < s.max {
		return
	}
	s.line = append(s.line, w)
	w.inLine = true
}

// Withdraw takes w out of line and passes the slots granted to it on: its
// producer will not claim for a while. w stays away until its next
// tryAcquire.
func (s *Slots) Withdraw(w *SlotWaiter) {
	s.mu.Lock()
	w.away = true
	if w.inLine {
		if i := slices.Index(s.line, w); i >= 0 {
			s.line = slices.Delete(s.line, i, i+1)
		}
		w.inLine = false
	}
	n := w.granted
	w.granted = 0
	s.mu.Unlock()
	s.Release(n)
}
