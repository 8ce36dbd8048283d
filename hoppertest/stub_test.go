package hoppertest_test

import (
	"context"
	"errors"
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
