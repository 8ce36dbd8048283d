package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// TestRunsCommands drives a workflow from the command line: a run waiting
// on a hook is listed and shown, its history exported, its hook resumed
// with `hopper hooks resume`; a worker then completes it; a second run is
// cancelled.
func TestRunsCommands(t *testing.T) {
	path := t.TempDir() + "/runs.db"
	db := "sqlite://" + path
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	d, err := sqlitedriver.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond, WaitPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(exampleApproval); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	h, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a laptop"}, &hopper.StartOpts{ID: "approve-1"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a car"}, &hopper.StartOpts{ID: "approve-2"})
	if err != nil {
		t.Fatal(err)
	}
	token := ""
	awaitEvents(t, ctx, c, "the run to wait on its hook", func() bool {
		info, err := c.RunGet(ctx, h.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == hopper.RunWaiting && len(info.Hooks) == 1 {
			token = info.Hooks[0].Token
		}
		return token != ""
	})

	out, errOut, code := run(t, "runs", "list", "--db", db, "--workflow", "approval", "--json")
	if code != 0 {
		t.Fatalf("runs list: %s", errOut)
	}
	// The same shape as the API's (and --server mode's): run_id, status.
	var list struct {
		Runs []struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Runs) != 2 || list.Runs[0].RunID == "" {
		t.Fatalf("runs list --json: %v %q", err, out)
	}
	out, _, code = run(t, "runs", "show", h.ID(), "--db", db)
	if code != 0 || !strings.Contains(out, "approval") || !strings.Contains(out, token) || !strings.Contains(out, "waiting") {
		t.Fatalf("runs show: %q", out)
	}
	out, _, code = run(t, "runs", "history", h.ID(), "--db", db)
	var hist hopper.History
	if code != 0 || json.Unmarshal([]byte(out), &hist) != nil || hist.Workflow != "approval" || len(hist.Events) < 3 {
		t.Fatalf("runs history: %q", out)
	}
	if _, errOut, code := run(t, "runs", "list", "--db", db, "--status", "bogus"); code == 0 || errOut == "" {
		t.Fatal("a bad status is refused")
	}
	if _, errOut, code := run(t, "hooks", "resume", token, "--db", db, "--payload", "{nope"); code == 0 || !strings.Contains(errOut, "JSON") {
		t.Fatalf("bad payload: code %d, %q", code, errOut)
	}
	out, _, code = run(t, "runs", "tail", h.ID(), "--db", db, "--follow=false")
	if code != 0 || !strings.HasPrefix(out, "0 ") || !strings.Contains(out, "a laptop") || !strings.Contains(out, token) {
		t.Fatalf("runs tail: %q", out)
	}
	if _, errOut, code := run(t, "hooks", "resume", token, `{"ok":true}`, "--db", db, "--payload", `{}`); code == 0 || errOut == "" {
		t.Fatal("a payload given twice is refused")
	}
	if _, errOut, code := run(t, "hooks", "resume", token, `{"ok":true}`, "--db", db); code != 0 {
		t.Fatalf("hooks resume: %s", errOut)
	}
	if _, errOut, code := run(t, "hooks", "resume", token, "--db", db, "--payload", `{"ok":true}`); code == 0 || errOut == "" {
		t.Fatal("a hook resumed twice is refused")
	}
	got, err := h.Result(ctx)
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("result after resume: %s, %v", got, err)
	}
	// Following the stream of a run that ended prints it and returns.
	out, _, code = run(t, "runs", "tail", h.ID(), "--db", db, "--json")
	var chunk struct {
		Offset int64           `json:"offset"`
		Data   json.RawMessage `json:"data"`
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &chunk) != nil || chunk.Offset != 0 || !strings.Contains(string(chunk.Data), "a laptop") {
		t.Fatalf("runs tail --json: %q", out)
	}

	out, errOut, code = run(t, "runs", "cancel", other.ID(), "--db", db)
	if code != 0 {
		t.Fatalf("runs cancel: %s", errOut)
	}
	if _, err := other.Result(ctx); err == nil {
		t.Fatal("a cancelled run has no result")
	}
	out, _, code = run(t, "runs", "show", other.ID(), "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"status": "cancelled"`) {
		t.Fatalf("runs show after cancel: %q", out)
	}
	// Retried, the cancelled run waits on its hook again (a fresh attempt).
	if out, errOut, code := run(t, "runs", "retry", other.ID(), "--db", db, "--json"); code != 0 || strings.Contains(out, `"status": "cancelled"`) {
		t.Fatalf("runs retry: %d %q %q", code, out, errOut)
	}
	waitStatus := func(id string, want hopper.RunStatus) {
		t.Helper()
		awaitEvents(t, ctx, c, "run "+id+" to be "+string(want), func() bool {
			info, err := c.RunGet(ctx, id)
			return err == nil && info.Status == want
		})
	}
	waitStatus(other.ID(), hopper.RunWaiting)
	if _, errOut, code := run(t, "runs", "retry", other.ID(), "--db", db); code == 0 || !strings.Contains(errOut, "state conflict") {
		t.Fatalf("runs retry of a waiting run: code %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "runs", "show", "nope", "--db", db); code == 0 || !strings.Contains(errOut, `no run "nope"`) {
		t.Fatalf("show missing: code %d, %q", code, errOut)
	}
}
