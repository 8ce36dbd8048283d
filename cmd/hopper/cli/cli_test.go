package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
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
