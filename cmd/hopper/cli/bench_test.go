package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTwice runs hopper bench again and again on one database: each
// run counts only the jobs of its own queue, deletes them unless --keep,
// and says what it left; a SQLite file a run created goes whole.
func TestBenchTwice(t *testing.T) {
	cases := [][]string{{"sqlite", "sqlite://" + filepath.Join(t.TempDir(), "twice.db")}}
	if url := os.Getenv("HOPPER_TEST_POSTGRES_URL"); url != "" {
		cases = append(cases, []string{"postgres", freshPostgres(t, url)})
	}
	for _, c := range cases {
		t.Run(c[0], func(t *testing.T) { testBenchTwice(t, c[0], c[1]) })
	}
}

func testBenchTwice(t *testing.T, driverName, db string) {
	bench := func(args ...string) ThroughputResult {
		t.Helper()
		out, errOut, code := run(t, append([]string{"bench", "--driver", driverName, "--db", db, "--workers", "10", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("bench %v: code %d, stderr %q", args, code, errOut)
		}
		var r ThroughputResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench %v: %q: %v", args, out, err)
		}
		return r
	}
	kept := bench("--jobs", "40", "--keep")
	if kept.Completed != 40 || kept.LeftJobs != 40 || kept.RemovedJobs != 0 || !strings.HasPrefix(kept.Queue, "bench-") {
		t.Fatalf("the kept run: %+v", kept)
	}
	_, saysCPU := processCPU()
	if saysCPU && kept.WorkCPUPerJobUs <= 0 {
		t.Fatalf("the run reports no CPU per job: %+v", kept)
	}
	// Twice more on the same database, beside the 40 kept jobs: each
	// counts its own 30, and deletes them.
	var queues []string
	for range 2 {
		r := bench("--jobs", "30", "--backlog", "20")
		if r.Completed != 30 || r.LeftJobs != 0 || r.RemovedJobs != 50 || r.RemovedStore {
			t.Fatalf("a run after another: %+v", r)
		}
		queues = append(queues, r.Queue)
	}
	if queues[0] == queues[1] || queues[0] == kept.Queue {
		t.Fatalf("the runs shared a queue: %v, %s", queues, kept.Queue)
	}
	out, errOut, code := run(t, "bench", "--driver", driverName, "--db", db, "--jobs", "5", "--mode", "workflow", "--workers", "4", "--json")
	var wr WorkflowResult
	if code != 0 || json.Unmarshal([]byte(out), &wr) != nil || wr.Workflows != 5 || wr.RemovedJobs != 5+benchSeq {
		t.Fatalf("a workflow run: %d %q %q", code, out, errOut)
	}
	if saysCPU && wr.CPUPerRunUs <= 0 {
		t.Fatalf("the workflow run reports no CPU per run: %q", out)
	}
	// Direct: each run from its own goroutine, Start + Result, no queue.
	out, errOut, code = run(t, "bench", "--driver", driverName, "--db", db, "--jobs", "6", "--mode", "workflow", "--launch", "direct", "--workers", "3", "--json")
	wr = WorkflowResult{}
	if code != 0 || json.Unmarshal([]byte(out), &wr) != nil || wr.Workflows != 6 || wr.Launch != "direct" || wr.RemovedJobs != 6+benchSeq ||
		!strings.Contains(wr.Config, "run from 3 goroutines") {
		t.Fatalf("a direct workflow run: %d %q %q", code, out, errOut)
	}
	if _, errOut, code = run(t, "bench", "--driver", driverName, "--db", db, "--mode", "workflow", "--launch", "sideways"); code == 0 || !strings.Contains(errOut, "--launch") {
		t.Fatalf("an unknown --launch: %d %q", code, errOut)
	}
	if _, errOut, code = run(t, "bench", "--driver", driverName, "--db", db, "--launch", "direct"); code == 0 || !strings.Contains(errOut, "--mode workflow") {
		t.Fatalf("--launch direct outside workflow mode: %d %q", code, errOut)
	}
	out, errOut, code = run(t, "bench", "--driver", driverName, "--db", db, "--jobs", "10")
	if code != 0 || !strings.Contains(out, "removed its 10 jobs (queue bench-") {
		t.Fatalf("bench says what it removed: %d %q %q", code, out, errOut)
	}
	out, errOut, code = run(t, "bench", "--driver", driverName, "--db", db, "--jobs", "10", "--keep")
	if code != 0 || !strings.Contains(out, "left 10 jobs on queue bench-") {
		t.Fatalf("bench says what it left: %d %q %q", code, out, errOut)
	}

	// Only the kept runs' jobs are left.
	out, errOut, code = run(t, "queues", "list", "--db", db, "--json")
	var qs struct {
		Queues []struct {
			Name   string         `json:"name"`
			Counts map[string]int `json:"counts"`
		} `json:"queues"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &qs) != nil {
		t.Fatalf("queues list: %d %q %q", code, out, errOut)
	}
	total := 0
	for _, q := range qs.Queues {
		if q.Name == queues[0] || q.Name == queues[1] {
			t.Errorf("queue %s of a run that was not kept is still there: %+v", q.Name, q)
		}
		for _, n := range q.Counts {
			total += n
		}
	}
	if total != 50 {
		t.Errorf("%d jobs left in the database, want the kept 40 + 10: %s", total, out)
	}
}

// TestBenchRemovesTheFileItCreated: a SQLite file that a run created is
// removed afterwards, unless --keep.
func TestBenchRemovesTheFileItCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	out, errOut, code := run(t, "bench", "--driver", "sqlite", "--db", path, "--jobs", "10")
	if code != 0 || !strings.Contains(out, "removed "+path+", which this run created") {
		t.Fatalf("bench on a new file: %d %q %q", code, out, errOut)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there: %v", path+suffix, err)
		}
	}
	if _, errOut, code := run(t, "bench", "--driver", "sqlite", "--db", path, "--jobs", "10", "--keep"); code != 0 {
		t.Fatalf("bench --keep: %q", errOut)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("--keep removed the file: %v", err)
	}
}
