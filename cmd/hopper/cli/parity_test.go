package cli

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
)

// jsonKeys returns the key paths of a JSON document ("jobs[].id"); a
// stream of JSON values (runs tail) is read value by value.
func jsonKeys(t *testing.T, doc string) []string {
	t.Helper()
	set := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := prefix + "." + k
				set[p] = true
				walk(p, e)
			}
		case []any:
			for _, e := range v {
				walk(prefix+"[]", e)
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, doc)
		}
		walk("", v)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var doomed = hopper.Define("doomed", func(context.Context, hopper.None) (hopper.None, error) {
	return hopper.None{}, hopper.Abort(errors.New("doomed on purpose"))
}, nil)

// TestJSONSameBothWays runs every list and show command with --json on
// the database and through a server over it, and compares what they print:
// the same keys, and the same values (nothing changes in between).
func TestJSONSameBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSharedStoreWith(t, ctx, func(c *hopper.Client) error {
		_, err := c.Schedule(hopper.Schedule{Name: "nightly", Cron: "0 3 * * *", CatchUp: 5 * time.Minute,
			Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
		return err
	}, exampleAdd, exampleApproval, doomed)
	c := s.c
	if err := c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "daily-add", Cron: "@daily", Type: "add", Input: json.RawMessage(`{"a":1,"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	// The server's client runs the stored schedule once it read it, and
	// says so in its worker row, which announces nothing: look again.
	for reported := false; !reported; {
		ws, err := c.WorkerList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			reported = reported || slices.ContainsFunc(w.Schedules, func(s hopper.WorkerSchedule) bool { return s.Name == "daily-add" })
		}
		if !reported {
			select {
			case <-ctx.Done():
				t.Fatal("the worker row never reported the stored schedule")
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if _, _, code := run(t, "queues", "pause", "later", "--create", "--db", s.db); code != 0 {
		t.Fatal("pause ahead")
	}
	h, err := exampleAdd.Enqueue(ctx, c, AddInput{A: 2, B: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		t.Fatal(err)
	}
	dead, err := doomed.Enqueue(ctx, c, hopper.None{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Result(ctx); err == nil {
		t.Fatal("doomed succeeded")
	}
	done, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a chair"}, &hopper.StartOpts{ID: "done-1"})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := exampleApproval.Start(ctx, c, ApprovalInput{Request: "a desk"}, &hopper.StartOpts{ID: "waiting-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{done.ID(), waiting.ID()} {
		var info *hopper.RunInfo
		awaitEvents(t, ctx, c, "run "+id+" to wait", func() bool {
			var err error
			if info, err = c.RunGet(ctx, id); err != nil {
				t.Fatal(err)
			}
			return info.Status == hopper.RunWaiting
		})
		if id == done.ID() {
			if err := c.HookResume(ctx, info.Hooks[0].Token, json.RawMessage(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := done.Result(ctx); err != nil {
		t.Fatal(err)
	}

	commands := [][]string{
		{"jobs", "list"}, {"jobs", "list", "--state", "succeeded,dead", "--limit", "1"}, {"jobs", "show", h.ID()}, {"jobs", "show", dead.ID()},
		{"jobs", "attempts", h.ID()}, {"jobs", "attempts", dead.ID()}, {"dead", "list"}, {"queues", "list"},
		{"runs", "list"}, {"runs", "list", "--status", "completed"}, {"runs", "show", "done-1"}, {"runs", "show", "waiting-1"},
		{"runs", "history", "done-1"}, {"runs", "tail", "done-1"}, {"runs", "tail", "waiting-1", "--follow=false"},
		{"schedules"}, {"schedules", "list"},
	}
	for _, args := range commands {
		a, errA, codeA := run(t, append(args, "--json", "--db", s.db)...)
		b, errB, codeB := run(t, append(args, "--json", "--server", s.url)...)
		if codeA != 0 || codeB != 0 {
			t.Errorf("%v: %d %q / %d %q", args, codeA, errA, codeB, errB)
			continue
		}
		if ka, kb := jsonKeys(t, a), jsonKeys(t, b); !slices.Equal(ka, kb) {
			t.Errorf("%v: the keys differ:\n database: %v\n server:   %v", args, ka, kb)
			continue
		}
		if a != b {
			t.Errorf("%v: the values differ:\n database: %s\n server:   %s", args, a, b)
		}
	}
	// Workers and demand move on between two reads (heartbeats, rates):
	// their keys are the same both ways.
	ws, err := c.WorkerList(ctx)
	if err != nil || len(ws) == 0 {
		t.Fatalf("workers: %v, %v", ws, err)
	}
	for _, args := range [][]string{{"workers", "list"}, {"workers", "show", ws[0].ID}, {"queues", "demand", "default"}} {
		a, errA, codeA := run(t, append(args, "--json", "--db", s.db)...)
		b, errB, codeB := run(t, append(args, "--json", "--server", s.url)...)
		if codeA != 0 || codeB != 0 {
			t.Errorf("%v: %d %q / %d %q", args, codeA, errA, codeB, errB)
			continue
		}
		if ka, kb := jsonKeys(t, a), jsonKeys(t, b); !slices.Equal(ka, kb) {
			t.Errorf("%v: the keys differ:\n database: %v\n server:   %v", args, ka, kb)
		}
	}
	// The schedules as a client that runs none reads them from the
	// store: the server's is registered, with its catch-up.
	out, _, _ := run(t, "schedules", "--json", "--db", s.db)
	if !strings.Contains(out, `"catch_up": "5m0s"`) || strings.Contains(out, `"registered": false`) {
		t.Errorf("schedules: %s", out)
	}
	out, _, _ = run(t, "runs", "tail", "done-1", "--json", "--db", s.db)
	if !strings.Contains(out, `"at":`) {
		t.Errorf("runs tail --json: %s", out)
	}

	// Commands that change something answer alike too.
	for _, args := range [][]string{
		{"queues", "pause", "default"}, {"queues", "resume", "default"},
		{"schedules", "pause", "nightly"}, {"schedules", "resume", "nightly"},
		{"dead", "redrive", "--type", "nosuch"},
		{"jobs", "cancel", waiting.ID()},
	} {
		a, errA, codeA := run(t, append(args, "--json", "--db", s.db)...)
		if args[1] == "cancel" { // a cancelled job cannot be cancelled again: compare with show
			args = []string{"jobs", "show", waiting.ID()}
		}
		b, errB, codeB := run(t, append(args, "--json", "--server", s.url)...)
		if codeA != 0 || codeB != 0 {
			t.Errorf("%v: %d %q / %d %q", args, codeA, errA, codeB, errB)
			continue
		}
		if ka, kb := jsonKeys(t, a), jsonKeys(t, b); !slices.Equal(ka, kb) {
			t.Errorf("%v: the keys differ:\n database: %v\n server:   %v", args, ka, kb)
		}
	}
}
