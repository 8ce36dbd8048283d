package hopper_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// An AfterCommit observer receives every committed change of the jobs it
// filters, in order, at least once, from whichever process holds its
// cursor: an audit trail, a projection, a notification.
func ExampleClient_Observe() {
	ship := hopper.Define("ship", func(ctx context.Context, order string) (string, error) {
		return "shipped " + order, nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		panic(err)
	}
	_ = c.Register(ship)
	seen := make(chan hopper.Change, 10)
	err = c.Observe("audit", hopper.AfterCommit, hopper.ChangeFilter{Types: []string{"ship"}},
		func(ctx context.Context, ch hopper.Change) error {
			seen <- ch // a returned error would deliver the change again later
			return nil
		})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = c.Start(ctx)
	defer c.Stop(ctx)

	h, _ := ship.Enqueue(ctx, c, "order-7", nil)
	_, _ = h.Result(ctx)
	for range 3 {
		ch := <-seen
		fmt.Printf("%s: %q -> %q (attempt %d)\n", ch.Kind, ch.Prev, ch.State, ch.Attempt)
	}
	// Output:
	// job: "" -> "pending" (attempt 0)
	// job: "pending" -> "running" (attempt 1)
	// job: "running" -> "succeeded" (attempt 1)
}

// An InCommit observer runs inside the transition's transaction: it can
// refuse the transition (the whole of it rolls back) or add writes that
// commit with it.
func ExampleClient_Observe_inCommit() {
	charge := hopper.Define("charge", func(ctx context.Context, cents int) (int, error) { return cents, nil }, nil)
	receipt := hopper.Define("receipt", func(ctx context.Context, cents int) (string, error) {
		return fmt.Sprintf("receipt for %d cents", cents), nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		panic(err)
	}
	_ = c.Register(charge, receipt)
	err = c.Observe("policy", hopper.InCommit, hopper.ChangeFilter{Types: []string{"charge"}},
		func(ctx context.Context, ch hopper.Change) error {
			switch {
			case ch.Prev == "" && ch.EntityID == "charge-too-big":
				return errors.New("over the limit")
			case ch.State == "succeeded":
				// The receipt exists if and only if the charge succeeded.
				return hopper.CommitFromContext(ctx).Enqueue(ctx, receipt.Job(100, &hopper.InsertOpts{ID: "receipt-" + ch.EntityID}))
			}
			return nil
		})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = c.Start(ctx)
	defer c.Stop(ctx)

	_, err = charge.Enqueue(ctx, c, 1_000_000, &hopper.InsertOpts{ID: "charge-too-big"})
	fmt.Println(errors.Is(err, hopper.ErrVetoed))

	h, _ := charge.Enqueue(ctx, c, 100, &hopper.InsertOpts{ID: "charge-1"})
	_, _ = h.Result(ctx)
	r, _ := hopper.HandleFor(c, receipt, "receipt-charge-1").Result(ctx)
	fmt.Println(r)
	// Output:
	// true
	// receipt for 100 cents
}

// A policy of one's own, written like the built-in retry observer: give
// dead-lettered jobs of one type a single second life, counting lives from
// the job's own changes, and acting only on a job's latest change (a
// delivery may come late: after a crash, or behind a failing change).
func ExampleRetryObserver() {
	var calls atomic.Int32
	fragile := hopper.Define("fragile", func(ctx context.Context, _ int) (string, error) {
		if n := calls.Add(1); n == 1 {
			return "", hopper.Abort(errors.New("first life fails"))
		}
		return "ok in its second life", nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: memdriver.New()})
	if err != nil {
		panic(err)
	}
	_ = c.Register(fragile)
	fmt.Println("built-in cap:", c.RetryObserver().MaxAttempts())
	err = c.Observe("second-life", hopper.AfterCommit,
		hopper.ChangeFilter{Types: []string{"fragile"}, States: []string{string(hopper.StateDead)}},
		func(ctx context.Context, ch hopper.Change) error {
			chs, err := c.JobChanges(ctx, ch.EntityID)
			if err != nil {
				return err
			}
			if chs[len(chs)-1].Position != ch.Position {
				return nil // the job moved on since this change
			}
			if _, lives := hopper.AttemptsOf(chs); lives >= 2 {
				return nil
			}
			_, err = c.JobRetry(ctx, ch.EntityID)
			if errors.Is(err, hopper.ErrStateConflict) {
				return nil // someone moved it on already
			}
			return err
		})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = c.Start(ctx)
	defer c.Stop(ctx)

	h, _ := fragile.Enqueue(ctx, c, 0, &hopper.InsertOpts{ID: "fragile-1"})
	waitUntil(c, func() bool { // the first life ends dead; wait for the second
		row, _ := c.JobGet(ctx, h.ID())
		return row.State == hopper.StateSucceeded
	})
	fmt.Println(h.Result(ctx))
	attempts, _ := c.JobAttempts(ctx, h.ID())
	for _, a := range attempts {
		fmt.Printf("life %d attempt %d: %s\n", a.Generation, a.Number, a.Outcome)
	}
	// Output:
	// built-in cap: 2
	// ok in its second life <nil>
	// life 1 attempt 1: dead
	// life 2 attempt 1: succeeded
}
