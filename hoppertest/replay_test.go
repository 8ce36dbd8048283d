package hoppertest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

func greetWorkflow(step string) *hopper.WorkflowType[string, string] {
	return hopper.Workflow("greet", func(wf hopper.WorkflowContext, name string) (string, error) {
		return hopper.Step(wf, step, func(context.Context) (string, error) { return "hello " + name, nil }, nil)
	}, nil)
}

// TestRequireReplay: a history exported from a real run replays against
// the code that made it; code that changed the step fails naming the file
// and the event; a history of a newer format, or no history at all, fails
// too.
func TestRequireReplay(t *testing.T) {
	t.Parallel()
	v1 := greetWorkflow("say-hello")
	c, clk := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(v1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := v1.Start(ctx, c, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hoppertest.RunUntilComplete(ctx, c, clk, run, nil); err != nil {
		t.Fatal(err)
	}
	h, err := c.RunHistory(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != hopper.HistoryVersion {
		t.Fatalf("exported version %d, want %d", h.Version, hopper.HistoryVersion)
	}
	dir := t.TempDir()
	write := func(name string, h *hopper.History) {
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("greet.json", h)

	if n := hoppertest.RequireReplay(t, v1, filepath.Join(dir, "*.json")); n != 1 {
		t.Fatalf("replayed %d histories, want 1", n)
	}
	msg := failure(func(tb hoppertest.TB) {
		hoppertest.RequireReplay(tb, greetWorkflow("say-hi"), filepath.Join(dir, "*.json"))
	})
	if !strings.Contains(msg, "greet.json") || !strings.Contains(msg, "say-hello") {
		t.Fatalf("want a failure naming the file and the recorded step, got %q", msg)
	}
	msg = failure(func(tb hoppertest.TB) { hoppertest.RequireReplay(tb, v1, filepath.Join(dir, "none-*.json")) })
	if !strings.Contains(msg, "no history") {
		t.Fatalf("want a failure for no history, got %q", msg)
	}
	future := *h
	future.Version = hopper.HistoryVersion + 1
	write("future.json", &future)
	msg = failure(func(tb hoppertest.TB) { hoppertest.RequireReplay(tb, v1, filepath.Join(dir, "*.json")) })
	if !strings.Contains(msg, "future.json") || !strings.Contains(msg, "format version") {
		t.Fatalf("want a failure naming the newer format, got %q", msg)
	}
}
