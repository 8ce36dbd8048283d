package hopper_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hopper-go/hopper"
)

// Redrive every dead job whose error says so: count them with a dry run,
// then act on at most that many.
func Example_bulk() {
	charge := hopper.Define("charge", func(ctx context.Context, order int) (hopper.None, error) {
		if order%3 == 0 {
			return hopper.None{}, hopper.Abort(errors.New("gateway timeout"))
		}
		return hopper.None{}, hopper.Abort(errors.New("card declined"))
	}, nil)
	ctx := context.Background()
	c := exampleClient(hopper.Config{}, charge)
	for order := range 6 {
		h, err := charge.Enqueue(ctx, c, order, nil)
		if err != nil {
			panic(err)
		}
		_, _ = h.Result(ctx) // dead: aborted
	}
	if err := c.Stop(ctx); err != nil { // redriven jobs stay pending
		panic(err)
	}

	timeouts := &hopper.ListParams{Types: []string{"charge"}, ErrorContains: "timeout"}
	count, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: timeouts, DryRun: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("would redrive", count.Matched)
	done, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkRedrive, Filter: timeouts, Max: count.Matched})
	if err != nil {
		panic(err)
	}
	fmt.Println("redriven", done.Changed, "of", done.Matched)
	// Output:
	// would redrive 2
	// redriven 2 of 2
}
