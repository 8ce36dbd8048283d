package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper"
)

// The example types `hopper dev` registers, so a newcomer sees hopper work
// within seconds.

// AddInput is the input of the "add" example.
type AddInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

// FlakyInput is the input of the "flaky" example.
type FlakyInput struct {
	FailTimes int `json:"fail_times"`
}

// FanoutInput is the input of the "fanout" example.
type FanoutInput struct {
	N int `json:"n"`
}

// exampleAdd adds; inside a fan-out group it also folds its sum into the
// group value.
var exampleAdd = hopper.Define("add", func(ctx context.Context, in AddInput) (int, error) {
	sum := in.A + in.B
	return sum, hopper.FoldGroup(ctx, func(acc int) int { return acc + sum })
}, nil)

// exampleFanout fans out add jobs {a: i, b: 0} for i = 1..n; their sums fold
// into the group value, n(n+1)/2.
var exampleFanout = hopper.Define("fanout", func(ctx context.Context, in FanoutInput) (hopper.None, error) {
	if in.N < 0 || in.N > 10_000 {
		return hopper.None{}, hopper.Abort(fmt.Errorf("fanout: n must be between 0 and 10000, got %d", in.N))
	}
	job := hopper.JobFromContext(ctx)
	children := make([]*hopper.JobSpec, in.N)
	for i := range children {
		children[i] = exampleAdd.Job(AddInput{A: i + 1}, nil)
	}
	return hopper.None{}, job.Spawn(children...)
}, nil)

var exampleFlaky = hopper.Define("flaky", func(ctx context.Context, in FlakyInput) (string, error) {
	job := hopper.JobFromContext(ctx)
	if job.Attempt() <= in.FailTimes {
		return "", fmt.Errorf("flaky: attempt %d of %d fails on purpose", job.Attempt(), job.MaxAttempts())
	}
	return fmt.Sprintf("succeeded on attempt %d", job.Attempt()), nil
}, &hopper.TypeOpts[FlakyInput]{
	// Enough attempts to get through the requested failures, retried quickly.
	Options: func(in FlakyInput) *hopper.InsertOpts {
		return &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: max(3, in.FailTimes+1), Base: 500 * time.Millisecond, Max: 5 * time.Second}}
	},
})

// exampleTypes are registered by hopper dev (and hopper serve --examples).
func exampleTypes() []hopper.AnyType {
	return []hopper.AnyType{exampleAdd, exampleFlaky, exampleFanout}
}
