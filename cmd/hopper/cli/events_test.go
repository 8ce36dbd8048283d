package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// TestEventsTail: `events tail` prints the store's events of a job another
// client worked, from the database and from a server alike; it resumes
// after a cursor, filters by kind, and refuses bad flags.
func TestEventsTail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	d, err := sqlitedriver.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d, WorkerID: "w-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(exampleAdd); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	h, err := exampleAdd.Enqueue(ctx, c, AddInput{A: 1, B: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + path
	srv := server.New(c, &server.Options{Tokens: []string{"s3cret-token-of-32-characters-ok"}})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	for _, where := range [][]string{{"--db", db}, {"--server", hs.URL, "--api-token", "s3cret-token-of-32-characters-ok"}} {
		tail := func(args ...string) (string, string, int) {
			return run(t, append(append([]string{"events", "tail", "--follow=false"}, args...), where...)...)
		}
		out, errOut, code := tail("--after", "start", "--json")
		if code != 0 {
			t.Fatalf("%v: events tail: %s", where, errOut)
		}
		var evs []server.EventJSON
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var e server.EventJSON
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%v: a line of events tail --json: %q: %v", where, line, err)
			}
			if e.JobID == h.ID() {
				evs = append(evs, e)
			}
		}
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		if strings.Join(kinds, " ") != "queued started succeeded" {
			t.Fatalf("%v: the job's events: %v (%q)", where, kinds, out)
		}
		if evs[1].Worker != "w-1" {
			t.Fatalf("%v: the start names the worker: %+v", where, evs[1])
		}
		out, _, code = tail("--after", evs[0].Cursor)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], " started add "+h.ID()+" attempt=1 worker=w-1") ||
			!strings.Contains(lines[1], " succeeded ") {
			t.Fatalf("%v: resumed after the queued event: %d %q", where, code, out)
		}
		out, _, code = tail("--after", "start", "--kind", "succeeded")
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "succeeded") {
			t.Fatalf("%v: --kind succeeded: %d %q", where, code, out)
		}
		if out, _, code = tail(); code != 0 || out != "" {
			t.Fatalf("%v: from the end, nothing yet: %d %q", where, code, out)
		}
		if _, errOut, code := tail("--kind", "exploded"); code == 0 || !strings.Contains(errOut, "not an event kind") {
			t.Fatalf("%v: a bad kind: %d %q", where, code, errOut)
		}
		if _, errOut, code := tail("--after", "yesterday"); code == 0 || !strings.Contains(errOut, "cursor") {
			t.Fatalf("%v: a bad cursor: %d %q", where, code, errOut)
		}
	}
}
