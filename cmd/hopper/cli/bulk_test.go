package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// TestJobsBulkBothWays searches dead jobs and acts on them in bulk, on the
// database and through a server: a filter action unconfirmed only counts
// and fails; --dry-run counts; --yes and --max act.
func TestJobsBulkBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSharedStore(t, ctx, doomed)
	for way := range s.ways() {
		for range 3 {
			h, err := s.c.EnqueueName(ctx, "doomed", json.RawMessage(`null`), &hopper.InsertOpts{Metadata: map[string]string{"way": way}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.c.JobWait(ctx, h.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for way, flags := range s.ways() {
		t.Run(way, func(t *testing.T) {
			cli := func(args ...string) (string, string, int) { return run(t, append(args, flags...)...) }
			sel := []string{"--type", "doomed", "--meta", "way=" + way}

			out, errOut, code := cli(append([]string{"dead", "list", "--error", "doomed on purpose", "--json"}, sel...)...)
			var page server.JobListJSON
			if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 3 {
				t.Fatalf("dead list by error and metadata: %d %q %q", code, out, errOut)
			}
			if _, errOut, code = cli("dead", "list", "--meta", "way"); code == 0 || !strings.Contains(errOut, "key=value") {
				t.Fatalf("a meta without a value: %d %q", code, errOut)
			}

			out, errOut, code = cli(append([]string{"jobs", "bulk", "delete"}, sel...)...)
			if code == 0 || !strings.Contains(errOut, "3 match; nothing done: confirm with --max 3") {
				t.Fatalf("unconfirmed: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli(append([]string{"jobs", "bulk", "delete", "--dry-run", "--json"}, sel...)...)
			var res server.BulkResultJSON
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res != (server.BulkResultJSON{Action: "delete", DryRun: true, Matched: 3}) {
				t.Fatalf("dry run: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli(append([]string{"jobs", "bulk", "delete", "--max", "1"}, sel...)...)
			if code != 0 || !strings.Contains(out, "delete: 1 matched, 1 changed, 0 skipped") || !strings.Contains(out, "more match") {
				t.Fatalf("--max 1: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli(append([]string{"jobs", "bulk", "delete", "--yes"}, sel...)...)
			if code != 0 || !strings.Contains(out, "delete: 2 matched, 2 changed") {
				t.Fatalf("--yes: %d %q %q", code, out, errOut)
			}
			if _, errOut, code = cli("jobs", "bulk", "archive", "--id", "x"); code == 0 || !strings.Contains(errOut, "unknown bulk action") {
				t.Fatalf("unknown action: %d %q", code, errOut)
			}
			if _, errOut, code = cli("runs", "bulk", "retry"); code == 0 || !strings.Contains(errOut, "needs a selection") {
				t.Fatalf("runs bulk without a selection: %d %q", code, errOut)
			}
			out, errOut, code = cli("runs", "bulk", "cancel", "--workflow", "none", "--json")
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Matched != 0 {
				t.Fatalf("runs bulk, nothing matches: %d %q %q", code, out, errOut)
			}
		})
	}
}

// TestJobsSearchWindowBothWays: a search by metadata with --scan stops at
// its window and says how to search on, on the database and through a
// server; without --scan the default window holds the few jobs there are.
func TestJobsSearchWindowBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSharedStore(t, ctx, doomed)
	for range 2 {
		h, err := s.c.EnqueueName(ctx, "doomed", json.RawMessage(`null`), &hopper.InsertOpts{Metadata: map[string]string{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.JobWait(ctx, h.ID()); err != nil {
			t.Fatal(err)
		}
	}
	for way, flags := range s.ways() {
		t.Run(way, func(t *testing.T) {
			cli := func(args ...string) (string, string, int) { return run(t, append(args, flags...)...) }
			out, errOut, code := cli("dead", "list", "--meta", "tenant=acme", "--scan", "1")
			if code != 0 || !strings.Contains(out, "the search stopped after --scan jobs; search on: --cursor ") {
				t.Fatalf("--scan 1: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli("jobs", "list", "--meta", "tenant=acme", "--scan", "1", "--json")
			var page server.JobListJSON
			if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 1 || page.NextCursor != page.Jobs[0].ID {
				t.Fatalf("--scan 1, JSON: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli("dead", "list", "--meta", "tenant=acme")
			if code != 0 || strings.Contains(out, "--cursor") || strings.Count(out, "doomed") != 2 {
				t.Fatalf("the default window: %d %q %q", code, out, errOut)
			}
		})
	}
}
