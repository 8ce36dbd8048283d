package hopper

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// LimitOrder says which waiting job a capped Limit starts next.
type LimitOrder = hoppertype.LimitOrder

// Limit orders.
const (
	// OrderPriority starts the highest priority first, then the oldest.
	OrderPriority = hoppertype.OrderPriority
	// OrderFair shares the cap across fairness groups (InsertOpts.Group)
	// round-robin, then by priority, then by age, so one tenant's flood
	// cannot take every slot.
	OrderFair = hoppertype.OrderFair
	// OrderAge starts the oldest (first enqueued) first.
	OrderAge = hoppertype.OrderAge
)

// Limit bounds how many attempts of the jobs it governs run at once in a
// client, in which order waiting ones start, and how fast attempts start
// (the seeds' doers). Set one for the whole client (Config.Limit) or per
// type (TypeOpts.Limit); a type's own limit governs its jobs instead of the
// client's. The zero Limit limits nothing.
//
// A limit works in each process on the jobs it has claimed: jobs waiting
// for their turn are claimed (leased, heartbeated) and hold worker slots,
// and a process stops claiming a limit's jobs while Max of them wait (for
// OrderFair, 4×Max and at least 16, the window fairness chooses from).
// Stopping the client hands waiting jobs back, their attempts unused.
type Limit = hoppertype.Limit

// FairLimit caps attempts at max, shared round-robin across fairness
// groups, then by priority, then by age.
func FairLimit(max int) *Limit { return &Limit{Max: max, Order: OrderFair} }

// PriorityLimit caps attempts at max, highest priority first, then oldest.
func PriorityLimit(max int) *Limit { return &Limit{Max: max, Order: OrderPriority} }

// AgeLimit caps attempts at max, oldest first.
func AgeLimit(max int) *Limit { return &Limit{Max: max, Order: OrderAge} }

// RateLimit lets at most perSecond attempts start per second, with bursts
// of up to burst.
func RateLimit(perSecond float64, burst int) *Limit {
	return &Limit{Rate: perSecond, Burst: burst}
}

// validate reports a limit that makes no sense.
func validateLimit(l *Limit) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// fairWindow is the least number of claimed jobs a fair limiter keeps
// waiting to choose from.
const fairWindow = 16

// limiter runs a Limit: claimed jobs are admitted and started as the cap,
// the order and the rate allow.
type limiter struct {
	lim   Limit
	clock hclock.Clock
	// backlog bounds how many admitted jobs wait; the producers stop
	// claiming the jobs this limiter governs while it is reached.
	backlog int
	// drained is called, outside the lock, when waiting drops below
	// backlog again or a rate wait ends: producers may claim again.
	drained func()

	mu      sync.Mutex
	running int
	waiting []*admitted
	// lastKey is the fairness group that started last (OrderFair).
	lastKey string
	bucket  *rate.Limiter
	timer   hclock.Timer
	closed  bool
}

// admitted is a claimed job waiting for its turn.
type admitted struct {
	row   *hoppertype.JobRow
	start func()
}

func newLimiter(l Limit, clock hclock.Clock, drained func()) *limiter {
	if l.Order == "" {
		l.Order = OrderPriority
	}
	lm := &limiter{lim: l, clock: clock, drained: drained, backlog: max(l.Max, 1)}
	if l.Order == OrderFair {
		// Fairness is among the jobs claimed: keep a wider window of them.
		lm.backlog = max(4*l.Max, fairWindow)
	}
	if l.Rate > 0 {
		burst := max(l.Burst, 1)
		lm.bucket = rate.NewLimiter(rate.Limit(l.Rate), burst)
		lm.backlog = max(lm.backlog, burst)
	}
	return lm
}

// room is how many more jobs the limiter takes now: free running places
// plus free places in its backlog.
func (l *limiter) room() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := max(l.backlog-len(l.waiting), 0)
	if l.lim.Max > 0 {
		n += max(l.lim.Max-l.running, 0)
	}
	return n
}

// full reports whether the backlog is reached: claim no more for now.
func (l *limiter) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting) >= l.backlog
}

// admit queues a claimed job; start runs it (on a goroutine of the
// caller's choosing) when its turn comes, and the job's end must call done.
func (l *limiter) admit(row *hoppertype.JobRow, start func()) {
	l.mu.Lock()
	l.waiting = append(l.waiting, &admitted{row: row, start: start})
	l.pumpLocked()
}

// done ends a started job's turn.
func (l *limiter) done() {
	l.mu.Lock()
	l.running--
	l.pumpLocked()
}

// pumpLocked starts what may start now; it is called with l.mu held and
// releases it. Starts, and the drained callback when the backlog dropped
// below its bound, run outside the lock.
func (l *limiter) pumpLocked() {
	before := len(l.waiting)
	starts := l.next()
	drained := before >= l.backlog && len(l.waiting) < l.backlog
	l.mu.Unlock()
	for _, s := range starts {
		s()
	}
	if drained && l.drained != nil {
		l.drained()
	}
}

// close stops rate timers; jobs still waiting are left to the caller.
func (l *limiter) close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
}

// remove takes a waiting job out of line (same lease); it reports whether
// the job was waiting.
func (l *limiter) remove(row *hoppertype.JobRow) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, a := range l.waiting {
		if a.row.ID == row.ID && a.row.LeaseToken == row.LeaseToken {
			l.waiting = slices.Delete(l.waiting, i, i+1)
			return true
		}
	}
	return false
}

// drain removes and returns the jobs still waiting.
func (l *limiter) drain() []*hoppertype.JobRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*hoppertype.JobRow, len(l.waiting))
	for i, a := range l.waiting {
		out[i] = a.row
	}
	l.waiting = nil
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	return out
}

// next takes the jobs that may start now, in order, and counts them as
// running. l.mu is held.
func (l *limiter) next() []func() {
	var starts []func()
	for len(l.waiting) > 0 && (l.lim.Max == 0 || l.running < l.lim.Max) {
		if l.bucket != nil {
			now := l.clock.Now()
			r := l.bucket.ReserveN(now, 1)
			if d := r.DelayFrom(now); d > 0 {
				r.CancelAt(now)
				l.armRate(d)
				break
			}
		}
		i := l.pick()
		a := l.waiting[i]
		l.waiting = slices.Delete(l.waiting, i, i+1)
		l.lastKey = a.row.FairKey
		l.running++
		starts = append(starts, a.start)
	}
	return starts
}

// armRate wakes the limiter when the next token is due.
func (l *limiter) armRate(d time.Duration) {
	if l.closed || l.timer != nil {
		return
	}
	l.timer = l.clock.AfterFunc(d, func() {
		l.mu.Lock()
		l.timer = nil
		if l.closed {
			l.mu.Unlock()
			return
		}
		l.pumpLocked()
	})
}

// pick returns the index of the waiting job to start next.
func (l *limiter) pick() int {
	switch l.lim.Order {
	case OrderAge:
		return l.best(func(a, b *hoppertype.JobRow) bool { return olderThan(a, b) })
	case OrderFair:
		// The next group after the last one served, round-robin.
		var keys []string
		for _, a := range l.waiting {
			keys = append(keys, a.row.FairKey)
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		key := keys[0]
		for _, k := range keys {
			if k > l.lastKey {
				key = k
				break
			}
		}
		best := -1
		for i, a := range l.waiting {
			if a.row.FairKey == key && (best < 0 || priorThan(a.row, l.waiting[best].row)) {
				best = i
			}
		}
		return best
	default:
		return l.best(priorThan)
	}
}

func (l *limiter) best(less func(a, b *hoppertype.JobRow) bool) int {
	best := 0
	for i := 1; i < len(l.waiting); i++ {
		if less(l.waiting[i].row, l.waiting[best].row) {
			best = i
		}
	}
	return best
}

// priorThan orders by priority (higher first), then age.
func priorThan(a, b *hoppertype.JobRow) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return olderThan(a, b)
}

// olderThan orders by enqueue time, then id.
func olderThan(a, b *hoppertype.JobRow) bool {
	if !a.QueuedAt.Equal(b.QueuedAt) {
		return a.QueuedAt.Before(b.QueuedAt)
	}
	return strings.Compare(a.ID, b.ID) < 0
}
