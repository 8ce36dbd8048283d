package cli

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// TestExamplePipeline runs hopper dev's pipeline example: the chunks, then
// merge, then publish, whose result is the group's value.
func TestExamplePipeline(t *testing.T) {
	d := memdriver.New()
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(exampleTypes()...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	h, err := examplePipeline.Enqueue(ctx, c, PipelineInput{Chunks: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := hopper.GroupDecode[string](g)
	if err != nil || v != "publish" {
		t.Fatalf("group value %q, %v; want publish", v, err)
	}
}
