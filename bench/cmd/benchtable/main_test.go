package main

import "testing"

// TestAddCPU: a run's measured seconds become CPU per job for throughput
// runs and per workflow for workflow runs; backlog runs and other modes
// get none.
func TestAddCPU(t *testing.T) {
	t.Setenv("BENCH_CPU_CLIENT_S", "3")
	t.Setenv("BENCH_CPU_SERVER_S", "6")
	cases := []struct {
		name   string
		res    map[string]any
		added  bool
		client string
		want   float64
	}{
		{"throughput", map[string]any{"mode": "throughput", "jobs": 30000.0}, true, "client_cpu_us_per_job", 100},
		{"backlog", map[string]any{"mode": "throughput", "jobs": 30000.0, "backlog": 1e6}, false, "", 0},
		{"workflow", map[string]any{"mode": "workflow", "workflows": 3000.0}, true, "client_cpu_us_per_run", 1000},
		{"latency", map[string]any{"mode": "latency", "jobs": 2000.0}, false, "", 0},
		{"no count", map[string]any{"mode": "workflow"}, false, "", 0},
	}
	for _, c := range cases {
		if got := addCPU(c.res); got != c.added {
			t.Errorf("%s: added %v, want %v", c.name, got, c.added)
			continue
		}
		if !c.added {
			continue
		}
		if got := c.res[c.client]; got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.name, c.client, got, c.want)
		}
		server := map[string]string{"client_cpu_us_per_job": "server_cpu_us_per_job", "client_cpu_us_per_run": "server_cpu_us_per_run"}[c.client]
		if got := c.res[server]; got != 2*c.want {
			t.Errorf("%s: %s = %v, want %v", c.name, server, got, 2*c.want)
		}
	}
}
