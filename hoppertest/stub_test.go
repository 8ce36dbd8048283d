package hoppertest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

var (
	chargeCard = hopper.Define("charge-card", func(context.Context, int) (string, error) {
		return "", errors.New("the real payment service is not reachable from tests")
	}, nil)
	shipOrder = hopper.Workflow("ship-order", func(wf hopper.WorkflowContext, id string) (string, error) {
		return "", errors.New("the real warehouse is not reachable from tests")
	}, nil)
	checkout = hopper.Workflow("checkout", func(wf hopper.WorkflowContext, cents int) (string, error) {
		receipt, err := hopper.Activity(wf, chargeCard, cents, nil)
		if err != nil {
			return "", err
		}
		tracking, err := hopper.Child(wf, shipOrder, receipt, nil)
		if err != nil {
			return "", err
		}
		return receipt + " " + tracking, nil
	}, nil)
)

// TestStubs: a workflow's activity and child run stubs registered in
// place of the real type and workflow, which record their inputs.
func TestStubs(t *testing.T) {
	t.Parallel()
	charge := hoppertest.StubType(chargeCard, func(_ context.Context, cents int) (string, error) {
		return "paid-" + string(rune('0'+cents%10)), nil
	})
	ship := hoppertest.StubWorkflow(shipOrder, func(_ context.Context, receipt string) (string, error) {
		return "track-" + receipt, nil
	})
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(checkout, charge, ship); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := checkout.Start(ctx, c, 1234, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out != "paid-4 track-paid-4" {
		t.Fatalf("got %q", out)
	}
	if got := charge.Calls(); len(got) != 1 || got[0] != 1234 {
		t.Fatalf("charge calls %v, want [1234]", got)
	}
	if got := ship.Calls(); len(got) != 1 || got[0] != "paid-4" {
		t.Fatalf("ship calls %v, want [paid-4]", got)
	}
}

// TestStubStep: a step's function is replaced for one client's runs; a
// stub of the wrong type fails the step, saying so; another client's runs
// call the real function.
func TestStubStep(t *testing.T) {
	t.Parallel()
	real := 0
	quote := hopper.Workflow("quote", func(wf hopper.WorkflowContext, item string) (int, error) {
		return hopper.Step(wf, "price", func(context.Context) (int, error) { real++; return 0, errors.New("the pricing service is down") }, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 1}})
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	require := func(cond bool, format string, args ...any) {
		t.Helper()
		if !cond {
			t.Fatalf(format, args...)
		}
	}
	if err := c.Register(quote); err != nil {
		t.Fatal(err)
	}
	hoppertest.StubStep(t, c, "price", func(context.Context) (int, error) { return 42, nil })
	ctx := context.Background()
	run, err := quote.Start(ctx, c, "tea", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	require(err == nil && out == 42 && real == 0, "stubbed: got %d, %v (real calls %d)", out, err, real)

	other, oclk := hoppertest.NewClient(t, hopper.Config{})
	if err := other.Register(quote); err != nil {
		t.Fatal(err)
	}
	hoppertest.StubStep(t, other, "price", func(context.Context) (string, error) { return "42", nil })
	run, err = quote.Start(ctx, other, "tea", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hoppertest.RunUntilComplete(ctx, other, oclk, run, nil)
	require(err != nil && strings.Contains(err.Error(), "its stub is a func(context.Context) (string, error)"), "a mistyped stub: %v", err)
	require(real == 0, "the real function ran %d times", real)

	plain, pclk := hoppertest.NewClient(t, hopper.Config{})
	if err := plain.Register(quote); err != nil {
		t.Fatal(err)
	}
	run, err = quote.Start(ctx, plain, "tea", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hoppertest.RunUntilComplete(ctx, plain, pclk, run, nil)
	require(err != nil && real == 1, "a client without the stub calls the real function: %v, %d calls", err, real)
}
