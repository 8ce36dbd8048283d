package engine

import (
	"slices"
	"sync"
	"time"
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
	// ahead holds the jobs claimed ahead of their slots (see Ahead), in
	// claim order; a freed slot goes to them before the line.
	ahead []*SlotTaker

	// now, when set (Measure), times the slots in use: area sums
	// used × time since since, up to last.
	now         func() time.Time
	since, last time.Time
	area        float64
	// backlogged counts the producers whose claims come back full.
	backlogged int
}

// NoteBacklog records whether w claims with a backlog behind it (its last
// claim came back full): while one does, every slot counts as in use for
// Workload, since a slot freed waits for that claim.
func (s *Slots) NoteBacklog(w *SlotWaiter, backlog bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.backlog == backlog {
		return
	}
	s.tickLocked()
	w.backlog = backlog
	if backlog {
		s.backlogged++
	} else {
		s.backlogged--
	}
}

// Measure makes the slots keep the time-weighted mean of the slots in use,
// on now's clock, for Workload.
func (s *Slots) Measure(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
	s.since, s.last, s.area = now(), now(), 0
}

// tickLocked adds the time since the last change, at the slots in use
// then, to the area.
func (s *Slots) tickLocked() {
	if s.now == nil {
		return
	}
	t := s.now()
	if d := t.Sub(s.last); d > 0 {
		busy := s.used
		if s.backlogged > 0 && s.max != Unlimited {
			busy = max(busy, s.max)
		}
		s.area += float64(busy) * float64(d)
		s.last = t
	}
}

// Workload returns the mean of the slots in use (running, reserved by a
// claim, granted; every slot while a queue has a backlog, see NoteBacklog)
// since the last call, weighted by time, and starts the next period. A
// pool of short jobs with work waiting so reads as busy, though few of its
// jobs run at any one instant and a slot freed waits for the next claim.
func (s *Slots) Workload() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now == nil {
		return float64(s.used)
	}
	s.tickLocked()
	span := s.last.Sub(s.since)
	mean := float64(s.used)
	if s.backlogged > 0 && s.max != Unlimited {
		mean = float64(max(s.used, s.max))
	}
	if span > 0 {
		mean = s.area / float64(span)
	}
	s.since, s.area = s.last, 0
	return mean
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
	// backlog is set while the producer's claims come back full: its
	// queue has more due jobs than slots (NoteBacklog).
	backlog bool
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
		s.tickLocked()
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
	s.tickLocked()
	s.used -= n
	taken := s.takeLocked()
	woken := s.grantLocked()
	s.mu.Unlock()
	run(taken, woken)
}

// run calls the jobs that took slots, then wakes the producers granted
// slots.
func run(taken []*SlotTaker, woken []*SlotWaiter) {
	for _, t := range taken {
		t.Take()
	}
	for _, w := range woken {
		w.Wake()
	}
}

// takeLocked hands free slots to the jobs claimed ahead, in claim order,
// and returns those that took one.
func (s *Slots) takeLocked() []*SlotTaker {
	var taken []*SlotTaker
	for len(s.ahead) > 0 && (s.max == Unlimited || s.used < s.max) {
		t := s.ahead[0]
		s.ahead[0] = nil
		s.ahead = s.ahead[1:]
		t.waiting = false
		s.used++
		taken = append(taken, t)
	}
	return taken
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
	taken := s.takeLocked()
	woken := s.grantLocked()
	s.mu.Unlock()
	run(taken, woken)
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

// SlotTaker is a job claimed ahead of its slot (see Slots.Ahead).
type SlotTaker struct {
	// Take runs once the job holds a slot; it must not block.
	Take func()
	// Back and Since are the owner's: what to do with a job taken out of
	// the wait by LeaveAll or LeaveBefore, and when it was claimed. Slots
	// never calls Back.
	Back  func(announce bool)
	Since time.Time
	// waiting is set while the job is in Slots.ahead (guarded by
	// slots.mu).
	waiting bool
}

// AheadRoom returns how many jobs a claim for w may take beyond the slots
// it reserved, up to n, while at most limit jobs wait claimed ahead in all
// (see Ahead). It is 0 while another producer waits in line (freed slots
// are its turn), and without a cap. w itself may be in line: a freed slot
// goes to the jobs claimed ahead first, then to it.
func (s *Slots) AheadRoom(w *SlotWaiter, n, limit int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max == Unlimited || n <= 0 || len(s.line) > 1 || (len(s.line) == 1 && s.line[0] != w) {
		return 0
	}
	return max(min(n, limit-len(s.ahead)), 0)
}

// Ahead takes a slot for t, a job claimed ahead of its slot: a free one
// at once (t.Take runs before Ahead returns), or else the next slot freed,
// before any producer in line.
func (s *Slots) Ahead(t *SlotTaker) {
	s.mu.Lock()
	if s.max == Unlimited || (s.used < s.max && len(s.ahead) == 0) {
		s.tickLocked()
		s.used++
		s.mu.Unlock()
		t.Take()
		return
	}
	t.waiting = true
	s.ahead = append(s.ahead, t)
	s.mu.Unlock()
}

// Leave takes t, a job claimed ahead, out of the wait for a slot, and
// reports whether it was still waiting (false: it took a slot, or was
// never put in).
func (s *Slots) Leave(t *SlotTaker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.waiting {
		return false
	}
	t.waiting = false
	if i := slices.Index(s.ahead, t); i >= 0 {
		s.ahead = slices.Delete(s.ahead, i, i+1)
	}
	return true
}

// LeaveAll takes every job claimed ahead out of the wait for a slot and
// returns them, in claim order.
func (s *Slots) LeaveAll() []*SlotTaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ahead
	s.ahead = nil
	for _, t := range out {
		t.waiting = false
	}
	return out
}

// LeaveBefore takes the jobs claimed ahead before t out of the wait for a
// slot and returns them, in claim order.
func (s *Slots) LeaveBefore(t time.Time) []*SlotTaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for n < len(s.ahead) && s.ahead[n].Since.Before(t) {
		s.ahead[n].waiting = false
		n++
	}
	out := slices.Clone(s.ahead[:n])
	s.ahead = slices.Delete(s.ahead, 0, n)
	return out
}
