// Package common holds what every peer program of the hopper benchmarks
// shares: the result objects (the same JSON `hopper bench --json` prints, plus
// a "config" field), percentiles, and fresh PostgreSQL schemas.
package common

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// InsertBatch is the insert batch size of every throughput run, as in
// `hopper bench` (--batch 5000).
const InsertBatch = 5000

// ThroughputResult is one throughput run. Its fields and JSON names are those
// of hopper's cmd/hopper/cli.ThroughputResult, plus Config.
type ThroughputResult struct {
	Mode           string  `json:"mode"`
	Driver         string  `json:"driver"`
	Jobs           int     `json:"jobs"`
	Workers        int     `json:"workers"`
	Backlog        int     `json:"backlog,omitempty"`
	InsertJobsPerS float64 `json:"insert_jobs_per_s"`
	WorkJobsPerS   float64 `json:"work_jobs_per_s"`
	Completed      int     `json:"completed"`
	Config         string  `json:"config"`
}

// LatencyResult is one latency run, as hopper's cli.LatencyResult plus Config.
type LatencyResult struct {
	Mode   string  `json:"mode"`
	Driver string  `json:"driver"`
	Rate   float64 `json:"rate"`
	Jobs   int     `json:"jobs"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	Config string  `json:"config"`
}

// WorkflowResult is one workflow run.
type WorkflowResult struct {
	Mode          string  `json:"mode"`
	Driver        string  `json:"driver"`
	Workflows     int     `json:"workflows"`
	WorkflowsPerS float64 `json:"workflows_per_s"`
	StepsPerS     float64 `json:"steps_per_s"`
	SeqP50Ms      float64 `json:"seq_p50_ms"`
	SeqP99Ms      float64 `json:"seq_p99_ms"`
	Config        string  `json:"config"`
}

// Print writes r as indented JSON (as `hopper bench --json` does) or as text.
func Print(w io.Writer, asJSON bool, r any) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	switch r := r.(type) {
	case *ThroughputResult:
		_, err := fmt.Fprintf(w, "%s throughput: %d jobs, %d workers, backlog %d\n  insert: %.0f jobs/s\n  work:   %.0f jobs/s (%d completed)\n  config: %s\n",
			r.Driver, r.Jobs, r.Workers, r.Backlog, r.InsertJobsPerS, r.WorkJobsPerS, r.Completed, r.Config)
		return err
	case *LatencyResult:
		_, err := fmt.Fprintf(w, "%s latency at %.0f jobs/s: %d jobs\n  p50 %.2f ms  p95 %.2f ms  p99 %.2f ms  max %.2f ms\n  config: %s\n",
			r.Driver, r.Rate, r.Jobs, r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs, r.Config)
		return err
	case *WorkflowResult:
		_, err := fmt.Fprintf(w, "%s workflow: %d workflows\n  %.0f workflows/s, %.0f steps/s\n  sequential p50 %.2f ms  p99 %.2f ms\n  config: %s\n",
			r.Driver, r.Workflows, r.WorkflowsPerS, r.StepsPerS, r.SeqP50Ms, r.SeqP99Ms, r.Config)
		return err
	}
	return fmt.Errorf("unknown result %T", r)
}

// Pct returns the p-th percentile of sorted (nearest rank, as hopper bench
// computes it) in milliseconds.
func Pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

// Latency builds a LatencyResult from unsorted latencies.
func Latency(driver string, rate float64, lat []time.Duration, config string) *LatencyResult {
	slices.Sort(lat)
	return &LatencyResult{
		Mode: "latency", Driver: driver, Rate: rate, Jobs: len(lat),
		P50Ms: Pct(lat, 0.50), P95Ms: Pct(lat, 0.95), P99Ms: Pct(lat, 0.99), MaxMs: Pct(lat, 1),
		Config: config,
	}
}

// Fail prints err and exits 1.
func Fail(prog string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	os.Exit(1)
}

// DefaultPostgresURL is the URL used when --db is not given.
func DefaultPostgresURL() string {
	if u := os.Getenv("HOPPER_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// FreshSchema creates an empty schema with a random name in the database at
// url and returns it with a function that drops it (CASCADE).
func FreshSchema(ctx context.Context, url, prefix string) (string, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", name, err)
		}
	}
	return name, drop, nil
}

// WaitUntil calls done every interval until it reports true, ctx ends, or
// timeout passes.
func WaitUntil(ctx context.Context, interval, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Verify returns an error unless got == want completed jobs.
func Verify(got, want int) error {
	if got != want {
		return fmt.Errorf("verification failed: %d jobs completed in the store, want %d", got, want)
	}
	return nil
}
