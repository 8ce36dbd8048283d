package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// TestRunsBulkBothWays retries failed runs in bulk by filter, on the
// database and through a server: a dry run counts them, --yes retries
// each, and each runs again.
func TestRunsBulkBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ran atomic.Int32
	flop := func(name string) *hopper.WorkflowType[hopper.None, hopper.None] {
		return hopper.Workflow(name, func(hopper.WorkflowContext, hopper.None) (hopper.None, error) {
			ran.Add(1)
			return hopper.None{}, hopper.Abort(errors.New("flops on purpose"))
		}, nil)
	}
	wfs := map[string]*hopper.WorkflowType[hopper.None, hopper.None]{"db": flop("flop-db"), "server": flop("flop-server")}
	s := newSharedStore(t, ctx, wfs["db"], wfs["server"])
	await := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			if info, err := s.c.RunWait(ctx, id); err != nil || info.Status != hopper.RunFailed {
				t.Fatalf("run %s: %+v, %v; want failed", id, info, err)
			}
		}
	}
	for way, flags := range s.ways() {
		t.Run(way, func(t *testing.T) {
			var ids []string
			for range 2 {
				h, err := wfs[way].Start(ctx, s.c, hopper.None{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, h.ID())
			}
			await(ids)
			before := ran.Load()
			cli := func(args ...string) (string, string, int) { return run(t, append(args, flags...)...) }
			sel := []string{"--workflow", "flop-" + way, "--status", "failed"}
			out, errOut, code := cli(append([]string{"runs", "bulk", "retry", "--dry-run", "--json"}, sel...)...)
			var res server.BulkResultJSON
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res != (server.BulkResultJSON{Action: "retry", DryRun: true, Matched: 2}) {
				t.Fatalf("dry run: %d %q %q", code, out, errOut)
			}
			out, errOut, code = cli(append([]string{"runs", "bulk", "retry", "--yes"}, sel...)...)
			if code != 0 || !strings.Contains(out, "retry: 2 matched, 2 changed") {
				t.Fatalf("--yes: %d %q %q", code, out, errOut)
			}
			await(ids)
			if got := ran.Load() - before; got != 2 {
				t.Fatalf("%d runs ran again; want the 2 retried", got)
			}
		})
	}
}
