package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// TestWorkersCommands: `workers list` shows a started client with its
// status and slots, `workers show` one worker, and an unknown id is an
// error.
func TestWorkersCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hopper.db")
	d, err := sqlitedriver.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d, WorkerID: "w-1", Autoscale: &hopper.Autoscale{Min: 2, Max: 6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	db := "sqlite://" + path

	out, errOut, code := run(t, "workers", "list", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("workers list: %s", errOut)
	}
	var list struct {
		Workers []hopper.WorkerInfo `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Workers) != 1 {
		t.Fatalf("workers list --json: %v %q", err, out)
	}
	if w := list.Workers[0]; w.ID != "w-1" || w.Status != hopper.WorkerIdle || w.Slots != 2 || w.MinWorkers != 2 || w.MaxWorkers != 6 {
		t.Fatalf("worker %+v: want w-1, idle, 2 slots autoscaled 2-6", w)
	}
	out, _, code = run(t, "workers", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "w-1") || !strings.Contains(out, "autoscaled 2-6") || !strings.Contains(out, "0/2") {
		t.Fatalf("workers list: %d %q", code, out)
	}
	out, _, code = run(t, "workers", "show", "w-1", "--db", db)
	if code != 0 || !strings.Contains(out, "status:") || !strings.Contains(out, "idle") || !strings.Contains(out, "scalings:  none") {
		t.Fatalf("workers show: %d %q", code, out)
	}
	if _, errOut, code := run(t, "workers", "show", "nope", "--db", db); code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("an unknown worker: %d %q", code, errOut)
	}

	out, _, code = run(t, "queues", "demand", "default", "--db", db)
	if code != 0 || !strings.Contains(out, "queue default: 0 due (oldest 0s), 0 running, 0.00 arrivals/s, 0.00 completions/s, mean run 1s") || !strings.Contains(out, "backlog to start within 1m0s") || !strings.Contains(out, "needs 0 slots") {
		t.Fatalf("queues demand: %d %q", code, out)
	}
	out, _, code = run(t, "queues", "demand", "default", "--db", db, "--json")
	var demand hopper.QueueDemand
	if code != 0 || json.Unmarshal([]byte(out), &demand) != nil || demand.Queue != "default" || demand.Workers != 1 || demand.SlotsPerWorker != 2 {
		t.Fatalf("queues demand --json: %d %q", code, out)
	}

	// A worker that scaled: `show` prints its decisions, oldest first.
	at := time.Now().UTC().Truncate(time.Second)
	info, err := json.Marshal(hopper.WorkerInfo{Status: hopper.WorkerBusy, MinWorkers: 2, MaxWorkers: 10, Slots: 8, Active: 8,
		Scalings: []hopper.ScalingInfo{
			{Workload: 1, Busy: 2, Before: 2, After: 6, At: at.Add(-20 * time.Second)},
			{Workload: 0.75, Busy: 6, Before: 6, After: 8, At: at.Add(-10 * time.Second)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Executor().WorkerUpsert(context.Background(), &driver.WorkerUpsertParams{Row: &driver.WorkerRow{ID: "w-2", StartedAt: at, SeenAt: at, Info: info}}); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, "workers", "show", "w-2", "--db", db)
	want := "scalings:\n" +
		"  " + at.Add(-20*time.Second).Format(time.RFC3339) + "  2 -> 6 slots  workload 1.00, 2 busy\n" +
		"  " + at.Add(-10*time.Second).Format(time.RFC3339) + "  6 -> 8 slots  workload 0.75, 6 busy\n"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("workers show w-2: %d %q, want it to hold %q", code, out, want)
	}
}
