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

var exampleAdd = hopper.Define("add", func(_ context.Context, in AddInput) (int, error) {
	return in.A + in.B, nil
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
	return []hopper.AnyType{exampleAdd, exampleFlaky}
}
