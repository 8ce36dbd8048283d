package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// TestJobTextReadsAsTheAPI: the human tables and job pages read a workflow
// run's job as its run and count its attempts as the run's tries ("1 of
// 1", never "1/101"), and a gate's job as what it watches and queues, the
// same on the database and through --server.
func TestJobTextReadsAsTheAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "hopper.db")
	d, err := sqlitedriver.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := startExamples(t, ctx, d)
	h, err := exampleOrder.Start(ctx, c, OrderInput{OrderID: "o1", Amount: 1, FailAt: "ship"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(ctx); err == nil {
		t.Fatal("the order should fail and compensate")
	}
	if _, err := c.JobWait(ctx, h.ID()); err != nil {
		t.Fatal(err)
	}
	// A gate that waited on two jobs and queued another.
	first, second := exampleAdd.Job(AddInput{A: 1, B: 1}, nil), exampleAdd.Job(AddInput{A: 2, B: 2}, nil)
	next := exampleAdd.Job(AddInput{A: 40, B: 2}, nil)
	gate := hopper.Gate([]string{first.ID(), second.ID()}, []*hopper.JobSpec{next}, hopper.CountDone(2), 0)
	if _, err := c.EnqueueMany(ctx, first, second, gate); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobWait(ctx, gate.ID()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(c, nil)
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, via := range [][]string{{"--db", db}, {"--server", hs.URL}} {
		// A compensated saga is listed as dead only when asked for.
		out, _, code := run(t, append([]string{"dead", "list"}, via...)...)
		if code != 0 || strings.Contains(out, h.ID()[24:]) {
			t.Fatalf("dead list %v lists the compensated order: %d\n%s", via, code, out)
		}
		for _, args := range [][]string{{"dead", "list", "--compensated"}, {"jobs", "show", h.ID()}} {
			out, errOut, code := run(t, append(args, via...)...)
			if code != 0 {
				t.Fatalf("%v %v: %d %s", args, via, code, errOut)
			}
			if !strings.Contains(out, "workflow order") || !strings.Contains(out, "1 of 1") || strings.Contains(out, "101") {
				t.Fatalf("%v %v reads:\n%s", args, via, out)
			}
		}
		// A gate's job says what it watched and what it queued, in words,
		// not hopper's encoding of it (Go field names, base64).
		out, errOut, code := run(t, append([]string{"jobs", "show", gate.ID()}, via...)...)
		if code != 0 {
			t.Fatalf("jobs show GATE %v: %d %s", via, code, errOut)
		}
		for _, want := range []string{"type:     gate\n", "waits:    until 2 of 2 jobs finish: " + first.ID() + ", " + second.ID() + "\n", "then:     add " + next.ID() + ` {"a":40,"b":2}` + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("jobs show GATE %v lacks %q:\n%s", via, want, out)
			}
		}
		for _, internal := range []string{"input:", "eyJ", "On", "Next", "Cond", "QueuedAt"} {
			if strings.Contains(out, internal) {
				t.Errorf("jobs show GATE %v shows %q:\n%s", via, internal, out)
			}
		}
	}
}
