package main

import (
	"context"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestAlbum runs the guide's fan-out: the album's resize jobs fold the
// bytes they wrote into its group.
func TestAlbum(t *testing.T) {
	ctx := context.Background()
	c, _ := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(album, resize); err != nil {
		t.Fatal(err)
	}
	total, err := albumSize(ctx, c, []string{"a.png", "bb.png"})
	if err != nil || total != 11 {
		t.Fatalf("got %d, %v", total, err)
	}
}

// TestOnboard runs the guide's workflow over its day's sleep; starting it
// again for the same email returns the same run.
func TestOnboard(t *testing.T) {
	ctx := context.Background()
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(onboard); err != nil {
		t.Fatal(err)
	}
	run, err := startOnboarding(ctx, c, "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	again, err := startOnboarding(ctx, c, "ada@example.com")
	if err != nil || again.ID() != run.ID() {
		t.Fatalf("started again: %v, %v", again, err)
	}
	got, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil)
	if err != nil || got != "user:ada@example.com" {
		t.Fatalf("got %q, %v", got, err)
	}
	hoppertest.RequireHistory(t, c, run.ID(),
		hoppertest.Event{Kind: "step", Name: "create-user"}, hoppertest.Event{Kind: "sleep", Name: "sleep"},
		hoppertest.Event{Kind: "step", Name: "send-tips"})
}
