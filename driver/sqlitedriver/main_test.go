package sqlitedriver

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTemp opens a fresh database in a temporary directory and closes it
// when the test ends.
func openTemp(t testing.TB, opts *Options) *Driver {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "hopper.db"), opts)
}

// openAt opens the database at path and closes it when the test ends.
func openAt(t testing.TB, path string, opts *Options) *Driver {
	t.Helper()
	d, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// testBase is the reference time of this package's tests.
var testBase = time.Date(2025, time.March, 14, 15, 9, 26, 0, time.UTC)

var jobSeq atomic.Int64

// newJob returns a pending job of type "t" in queue q, due at testBase.
func newJob(q string) *hoppertype.JobRow {
	id := fmt.Sprintf("job-%09d", jobSeq.Add(1))
	return &hoppertype.JobRow{
		ID: id, Type: "t", Queue: q, State: hoppertype.JobStatePending, Input: []byte(`{}`), GroupID: id,
		Retry:    hoppertype.RetryPolicy{Attempts: 3, Backoff: "exponential", Base: time.Second, Factor: 2},
		QueuedAt: testBase, RunAt: testBase,
	}
}

// insert inserts jobs and fails the test on error.
func insert(t testing.TB, d driver.Executor, jobs ...*hoppertype.JobRow) {
	t.Helper()
	if _, err := d.JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// countJobs returns how many jobs the database holds.
func countJobs(t testing.TB, d *Driver) int {
	t.Helper()
	var n int
	if err := d.rdb.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// awaitQueued waits until n calls wait in the writer's queue (behind a
// writer the test holds: each caller blocks inside the driver), woken by
// each change of the queue; it fails the test after a minute.
func awaitQueued(t testing.TB, d *Driver, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		changed := d.w.queueChanged()
		if d.w.queued() == n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %d queued calls (%d are)", n, d.w.queued())
		}
	}
}

// poll waits until cond holds, checking it every millisecond, and fails
// the test after a minute. It is for what nothing announces: the file
// growing under a background checkpoint.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
