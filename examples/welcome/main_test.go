package main

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

func TestWelcome(t *testing.T) {
	ctx := context.Background()
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(sendEmail); err != nil {
		t.Fatal(err)
	}
	h, err := sendEmail.Enqueue(ctx, c, Email{To: "ada@example.com"}, &hopper.InsertOpts{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour) // no waiting
	got, err := h.Result(ctx)
	if err != nil || got != "message-42" {
		t.Fatalf("got %q, %v", got, err)
	}
}
