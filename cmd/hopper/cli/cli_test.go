package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"go.uber.org/goleak"

	"github.com/hopper-go/hopper/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "hopper ") {
		t.Fatalf("version: code %d, out %q", code, out)
	}
	out, _, code = run(t, "version", "--json")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["version"] == "" {
		t.Fatalf("version --json: code %d, out %q", code, out)
	}
}

func TestBenchThroughputMemory(t *testing.T) {
	out, errOut, code := run(t, "bench", "--driver", "memory", "--jobs", "2000", "--workers", "50", "--backlog", "1000", "--json")
	if code != 0 {
		t.Fatalf("bench: code %d, stderr %q", code, errOut)
	}
	var r ThroughputResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	if r.Mode != "throughput" || r.Driver != "memory" || r.Jobs != 2000 || r.Completed != 2000 || r.Workers != 50 || r.Backlog != 1000 {
		t.Fatalf("bench result %+v", r)
	}
	if r.InsertJobsPerS <= 0 || r.WorkJobsPerS <= 0 {
		t.Fatalf("rates not measured: %+v", r)
	}
}

// TestBenchBacklogStores runs a throughput bench with a backlog on the SQL
// stores, whose backlog ends with a checkpoint of the store.
func TestBenchBacklogStores(t *testing.T) {
	args := [][]string{{"--driver", "sqlite"}}
	if url := os.Getenv("HOPPER_TEST_POSTGRES_URL"); url != "" {
		args = append(args, []string{"--driver", "postgres", "--db", freshPostgres(t, url)})
	}
	for _, a := range args {
		t.Run(a[1], func(t *testing.T) {
			out, errOut, code := run(t, append([]string{"bench", "--jobs", "300", "--workers", "20", "--backlog", "500", "--batch", "200", "--json"}, a[2:]...)...)
			if code != 0 {
				t.Fatalf("bench: code %d, stderr %q", code, errOut)
			}
			if strings.Contains(errOut, "no checkpoint") {
				t.Fatalf("the backlog was not checkpointed: %s", errOut)
			}
			var r ThroughputResult
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("bench output %q: %v", out, err)
			}
			if r.Completed != 300 || r.Backlog != 500 {
				t.Fatalf("bench result %+v", r)
			}
		})
	}
}

func TestBenchLatencyMemory(t *testing.T) {
	out, errOut, code := run(t, "bench", "--driver", "memory", "--mode", "latency", "--rate", "500", "--duration", "200ms", "--json")
	if code != 0 {
		t.Fatalf("bench: code %d, stderr %q", code, errOut)
	}
	var r LatencyResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	if r.Mode != "latency" || r.Jobs < 10 || r.P50Ms <= 0 || r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs {
		t.Fatalf("latency result %+v", r)
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--driver", "oracle"},
		{"bench", "--jobs", "0"},
		{"bench", "--mode", "sideways", "--driver", "memory"},
		{"bench", "--db", "ftp://x"},
	} {
		if _, errOut, code := run(t, args...); code == 0 || errOut == "" {
			t.Errorf("%v: code %d, stderr %q: want a failure with a message", args, code, errOut)
		}
	}
}

func TestOperatorCommands(t *testing.T) {
	db := "sqlite://" + t.TempDir() + "/ops.db"
	// Seed jobs with a throughput bench run on the same file, kept: 50
	// succeeded.
	if _, errOut, code := run(t, "bench", "--db", db, "--driver", "sqlite", "--jobs", "50", "--keep", "--json"); code != 0 {
		t.Fatalf("seed: %s", errOut)
	}
	out, errOut, code := run(t, "jobs", "list", "--db", db, "--state", "succeeded", "--limit", "10", "--json")
	if code != 0 {
		t.Fatalf("jobs list: %s", errOut)
	}
	var page struct {
		Jobs []struct {
			ID    string `json:"id"`
			State string `json:"state"`
			Type  string `json:"type"`
		} `json:"jobs"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Jobs) != 10 || page.NextCursor == "" {
		t.Fatalf("jobs list --json: %v %q", err, out)
	}
	id := page.Jobs[0].ID
	out, _, code = run(t, "jobs", "show", id, "--db", db)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "succeeded") {
		t.Fatalf("jobs show: %q", out)
	}
	out, _, code = run(t, "jobs", "attempts", id, "--db", db)
	if code != 0 || !strings.Contains(out, "OUTCOME") || !strings.Contains(out, "succeeded") {
		t.Fatalf("jobs attempts: %q", out)
	}
	out, _, code = run(t, "jobs", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "STATE") || !strings.Contains(out, "bench-noop") {
		t.Fatalf("jobs list table: %q", out)
	}
	if _, errOut, code := run(t, "jobs", "cancel", id, "--db", db); code == 0 || !strings.Contains(errOut, "conflict") {
		t.Fatalf("cancelling a finished job: code %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "jobs", "show", "nope", "--db", db); code == 0 || !strings.Contains(errOut, `no job "nope"`) {
		t.Fatalf("show missing: code %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "jobs", "list", "--db", db, "--state", "bogus"); code == 0 || errOut == "" {
		t.Fatal("a bad state is refused")
	}

	out, _, code = run(t, "queues", "pause", "default", "--db", db)
	if code != 0 {
		t.Fatalf("pause: %q", out)
	}
	out, _, code = run(t, "queues", "list", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"paused": true`) || !strings.Contains(out, `"succeeded": 50`) {
		t.Fatalf("queues list: %q", out)
	}
	if _, _, code := run(t, "queues", "resume", "default", "--db", db); code != 0 {
		t.Fatal("resume failed")
	}

	// Schedules: the store keeps a schedule paused ahead of its deploy.
	if out, _, code := run(t, "schedules", "pause", "nightly", "--create", "--db", db); code != 0 || !strings.Contains(out, "schedule nightly paused") {
		t.Fatalf("schedules pause: %d %q", code, out)
	}
	out, _, code = run(t, "schedules", "--db", db)
	if code != 0 || !strings.Contains(out, "PAUSED") || !strings.Contains(out, "nightly") || !strings.Contains(out, "true") {
		t.Fatalf("schedules: %q", out)
	}
	if _, _, code := run(t, "schedules", "resume", "nightly", "--db", db); code != 0 {
		t.Fatal("schedules resume failed")
	}
	out, _, code = run(t, "schedules", "list", "--db", db, "--json")
	var scheds struct{ Schedules []server.ScheduleJSON }
	if code != 0 || json.Unmarshal([]byte(out), &scheds) != nil || len(scheds.Schedules) != 1 || scheds.Schedules[0].Paused {
		t.Fatalf("schedules list --json after resume: %q", out)
	}
	// A schedule defined in the store from the CLI, which runs no type: no
	// process runs bench-noop now, so it takes --force.
	if out, errOut, code := run(t, "schedules", "define", "hourly-noop", "--cron", "@hourly", "--type", "bench-noop", "--input", `{"n":1}`, "--force", "--db", db); code != 0 || !strings.Contains(out, "defined") {
		t.Fatalf("schedules define: %d %q %q", code, out, errOut)
	}
	out, _, code = run(t, "schedules", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"stored": true`) || !strings.Contains(out, `"type": "bench-noop"`) {
		t.Fatalf("schedules after define: %q", out)
	}
	if _, errOut, code := run(t, "schedules", "define", "bad", "--cron", "61 * * * *", "--type", "x", "--force", "--db", db); code == 0 || !strings.Contains(errOut, "invalid input") {
		t.Fatalf("a bad cron is refused: %d %q", code, errOut)
	}
	if _, _, code := run(t, "schedules", "delete", "hourly-noop", "--db", db); code != 0 {
		t.Fatal("schedules delete of the stored one failed")
	}
	if _, _, code := run(t, "schedules", "delete", "nightly", "--db", db); code != 0 {
		t.Fatal("schedules delete failed")
	}
	if _, errOut, code := run(t, "schedules", "delete", "nightly", "--db", db); code == 0 || !strings.Contains(errOut, `no schedule "nightly"`) {
		t.Fatalf("deleting a schedule twice: %d %q", code, errOut)
	}
	out, _, code = run(t, "dead", "list", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"jobs": []`) {
		t.Fatalf("dead list: %q", out)
	}
	out, _, code = run(t, "dead", "redrive", "--all", "--db", db)
	if code != 0 || !strings.Contains(out, "redriven: 0") {
		t.Fatalf("dead redrive: %q", out)
	}
	if _, errOut, code := run(t, "dead", "redrive", "--db", db); code == 0 || errOut == "" {
		t.Fatal("redrive without a selection is refused")
	}
}

func TestMigrate(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testMigrate(t, "sqlite", "sqlite://"+t.TempDir()+"/m.db") })
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("HOPPER_TEST_POSTGRES_URL is not set")
		}
		testMigrate(t, "postgres", freshPostgres(t, url))
	})
}

// testMigrate migrates db twice and checks the reported versions.
func testMigrate(t *testing.T, driverName, db string) {
	out, errOut, code := run(t, "migrate", "--db", db, "--json")
	if code != 0 {
		t.Fatalf("migrate: %s", errOut)
	}
	var v struct {
		Driver string `json:"driver"`
		Stored int    `json:"schema_version"`
		Known  int    `json:"known_version"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Driver != driverName || v.Stored < 1 || v.Stored != v.Known {
		t.Fatalf("migrate output %q: %v", out, err)
	}
	if out, _, code := run(t, "migrate", "--db", db); code != 0 || !strings.Contains(out, "schema at version") {
		t.Fatalf("second migrate: %q", out)
	}
}

// freshPostgres returns url with a schema of its own, dropped after the test.
func freshPostgres(t *testing.T, url string) string {
	t.Helper()
	schema := fmt.Sprintf("clitest_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "schema=" + schema
}
