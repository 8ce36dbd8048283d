package main

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// trial waits out a two-week trial, then bills the user.
var trial = hopper.Workflow("trial", func(wf hopper.WorkflowContext, user string) (string, error) {
	if err := wf.Sleep(14 * 24 * time.Hour); err != nil {
		return "", err // the run suspends here
	}
	return hopper.Step(wf, "bill", func(ctx context.Context) (string, error) {
		return "billed " + user, nil
	}, nil)
}, nil)

func TestTrial(t *testing.T) {
	ctx := context.Background()
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(trial); err != nil {
		t.Fatal(err)
	}
	run, err := trial.Start(ctx, c, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Runs everything due, jumping the clock over the two weeks.
	got, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	if err != nil || got != "billed ada" {
		t.Fatalf("got %q, %v", got, err)
	}
	hoppertest.RequireHistory(t, c, run.ID(),
		hoppertest.Event{Kind: "sleep", Name: "sleep"}, hoppertest.Event{Kind: "step", Name: "bill"})
}
