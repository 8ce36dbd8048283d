package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// TestJobTextReadsAsTheAPI: the human tables and job pages read a workflow
// run's job as its run and count its attempts as the run's tries ("1 of
// 1", never "1/101"), the same on the database and through --server.
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
	}
}
