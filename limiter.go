package hopper

import (
	"fmt"

	"github.com/hopper-go/hopper/hoppertype"
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
