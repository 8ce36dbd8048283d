package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestRun runs the example on a fresh file with a one-second schedule: it
// returns once two digests ran.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, filepath.Join(t.TempDir(), "cron.db"), time.Second, 2); err != nil {
		t.Fatal(err)
	}
}
