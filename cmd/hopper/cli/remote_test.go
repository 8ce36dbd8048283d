package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/server"
)

// TestServerMode drives the operator commands against a server with
// --server: jobs, dead letters, queues, runs, hooks, with and without the
// token.
func TestServerMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := memdriver.New()
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(exampleAdd, exampleApproval); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	srv := server.New(c, &server.Options{Tokens: []string{"s3cret-token-of-32-characters-ok"}})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	remote := func(args ...string) (string, string, int) {
		return run(t, append(args, "--server", hs.URL, "--api-token", "s3cret-token-of-32-characters-ok")...)
	}

	// Schedules: the server's, and the store's, paused and resumed through
	// the server.
	stop, err := c.Schedule(hopper.Schedule{Name: "nightly", Cron: "0 3 * * *", CatchUp: -1,
		Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out, errOut, code := remote("schedules")
	if code != 0 || !strings.Contains(out, "nightly") || !strings.Contains(out, "0 3 * * *") {
		t.Fatalf("schedules: %d %q %q", code, out, errOut)
	}
	out, _, code = remote("schedules", "--json")
	var scheds struct{ Schedules []server.ScheduleJSON }
	if code != 0 || json.Unmarshal([]byte(out), &scheds) != nil || len(scheds.Schedules) != 1 || scheds.Schedules[0].Next == nil {
		t.Fatalf("schedules --json: %q", out)
	}
	if !scheds.Schedules[0].Registered {
		t.Fatalf("the server runs the schedule: %q", out)
	}
	if out, errOut, code := remote("schedules", "pause", "nightly"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("schedules pause: %d %q %q", code, out, errOut)
	}
	infos, err := c.ScheduleList(ctx)
	if err != nil || len(infos) != 1 || !infos[0].Paused {
		t.Fatalf("paused through the server: %+v %v", infos, err)
	}
	if _, errOut, code := remote("schedules", "resume", "nightly"); code != 0 {
		t.Fatalf("schedules resume: %q", errOut)
	}
	if infos, err := c.ScheduleList(ctx); err != nil || infos[0].Paused {
		t.Fatalf("resumed through the server: %+v %v", infos, err)
	}
	if out, errOut, code := remote("schedules", "define", "daily-add", "--cron", "@daily", "--type", "add", "--input", `{"a":1,"b":2}`); code != 0 || !strings.Contains(out, "defined") {
		t.Fatalf("schedules define through the server: %d %q %q", code, out, errOut)
	}
	if infos, err := c.ScheduleList(ctx); err != nil || len(infos) != 2 || !infos[0].Stored || !infos[0].Registered {
		t.Fatalf("the server's client runs the stored schedule: %+v %v", infos, err)
	}
	if _, errOut, code := remote("schedules", "define", "bad", "--cron", "@daily", "--type", "add", "--input", `{"a":"x"}`); code == 0 || !strings.Contains(errOut, "400") && !strings.Contains(errOut, "invalid") {
		t.Fatalf("an undecodable input is refused by the server: %d %q", code, errOut)
	}
	if _, errOut, code := remote("schedules", "delete", "nope"); code == 0 || !strings.Contains(errOut, `no schedule "nope" on the server`) {
		t.Fatalf("deleting an unknown schedule: %d %q", code, errOut)
	}

	h, err := exampleAdd.Enqueue(ctx, c, AddInput{A: 2, B: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = remote("jobs", "list", "--state", "succeeded")
	if code != 0 || !strings.Contains(out, h.ID()) || !strings.Contains(out, "add") {
		t.Fatalf("jobs list: %d %q %q", code, out, errOut)
	}
	out, _, code = remote("jobs", "show", h.ID(), "--json")
	var job server.JobJSON
	if code != 0 || json.Unmarshal([]byte(out), &job) != nil || job.State != "succeeded" || string(job.Result) != "5" {
		t.Fatalf("jobs show: %q", out)
	}
	out, _, code = remote("jobs", "attempts", h.ID(), "--json")
	var attempts server.AttemptListJSON
	if code != 0 || json.Unmarshal([]byte(out), &attempts) != nil || len(attempts.Attempts) != 1 || attempts.Attempts[0].Outcome != "succeeded" {
		t.Fatalf("jobs attempts: %q", out)
	}
	if _, errOut, code := remote("jobs", "show", "nope"); code == 0 || !strings.Contains(errOut, `no job "nope" on the server`) {
		t.Fatalf("jobs show missing: %d %q", code, errOut)
	}
	if _, errOut, code := run(t, "jobs", "list", "--server", hs.URL); code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("without the token: %d %q", code, errOut)
	}
	out, _, code = remote("queues", "list", "--json")
	if code != 0 || !strings.Contains(out, `"succeeded": 1`) {
		t.Fatalf("queues list: %q", out)
	}
	if _, errOut, code := remote("queues", "pause", "default"); code != 0 {
		t.Fatalf("queues pause: %q", errOut)
	}
	out, _, _ = remote("queues", "list", "--json")
	if !strings.Contains(out, `"paused": true`) {
		t.Fatalf("paused queue: %q", out)
	}
	if _, errOut, code := remote("queues", "resume", "default"); code != 0 {
		t.Fatalf("queues resume: %q", errOut)
	}
	out, _, code = remote("dead", "redrive", "--all")
	if code != 0 || !strings.Contains(out, "redriven: 0") {
		t.Fatalf("dead redrive: %q", out)
	}

	// A run waiting on a hook: listed, shown, tailed, resumed, finished.
	rh, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a desk"}, &hopper.StartOpts{ID: "remote-1"})
	if err != nil {
		t.Fatal(err)
	}
	token := ""
	awaitEvents(t, ctx, c, "the run's hook", func() bool {
		info, err := c.RunGet(ctx, rh.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == hopper.RunWaiting && len(info.Hooks) == 1 {
			token = info.Hooks[0].Token
		}
		return token != ""
	})
	out, _, code = remote("runs", "list", "--workflow", "approval")
	if code != 0 || !strings.Contains(out, "remote-1") || !strings.Contains(out, "waiting") {
		t.Fatalf("runs list: %q", out)
	}
	out, _, code = remote("runs", "show", "remote-1")
	if code != 0 || !strings.Contains(out, token) {
		t.Fatalf("runs show: %q", out)
	}
	out, _, code = remote("runs", "tail", "remote-1", "--follow=false")
	if code != 0 || !strings.HasPrefix(out, "0 ") || !strings.Contains(out, "a desk") {
		t.Fatalf("runs tail: %q", out)
	}
	out, _, code = remote("runs", "history", "remote-1")
	if code != 0 || !strings.Contains(out, `"workflow": "approval"`) {
		t.Fatalf("runs history: %q", out)
	}
	if _, errOut, code := remote("hooks", "resume", token, `{"ok":1}`); code != 0 {
		t.Fatalf("hooks resume: %q", errOut)
	}
	if _, errOut, code := remote("hooks", "resume", token, `{"ok":1}`); code == 0 || errOut == "" {
		t.Fatal("a second resume is refused")
	}
	if got, err := rh.Result(ctx); err != nil || string(got) != `{"ok":1}` {
		t.Fatalf("result: %s %v", got, err)
	}
	// Following a finished run's stream ends at once.
	out, _, code = remote("runs", "tail", "remote-1", "--json")
	if code != 0 || !strings.Contains(out, `"offset":0`) {
		t.Fatalf("runs tail --json: %q", out)
	}

	other, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a boat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = remote("runs", "cancel", other.ID(), "--json")
	if code != 0 {
		t.Fatalf("runs cancel: %q", errOut)
	}
	if _, err := other.Result(ctx); err == nil {
		t.Fatal("a cancelled run has no result")
	}
}
