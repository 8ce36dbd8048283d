package pgdriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// No goroutine is ignored: every pool is closed by the test that made it,
// and a pool's background goroutines end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// urlEnv names the database the tests use.
const urlEnv = "HOPPER_TEST_POSTGRES_URL"

// testURL returns the test database's URL. Without one the test is skipped,
// except under CI, where a missing database is a failure.
func testURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(urlEnv)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: the PostgreSQL tests must run under CI", urlEnv)
		}
		t.Skipf("PostgreSQL tests skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", urlEnv)
	}
	return u
}

// newPool opens a pool of at most maxConns connections to the test
// database, closed when the test ends. The machine allows 100 connections
// in all, so tests keep their pools small.
func newPool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testURL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", urlEnv, err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// randomSchema returns a fresh schema name.
func randomSchema() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "hopper_test_" + hex.EncodeToString(b)
}

// dropSchemaLater drops schema when the test ends.
func dropSchemaLater(t testing.TB, pool *pgxpool.Pool, schema string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+quoteIdent(schema)+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

func quoteIdent(s string) string { return `"` + s + `"` }

// newTestDriver makes a driver on pool in a fresh schema, closed and
// dropped when the test ends.
func newTestDriver(t testing.TB, pool *pgxpool.Pool) *Driver {
	t.Helper()
	schema := randomSchema()
	dropSchemaLater(t, pool, schema)
	d, err := New(pool, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("new driver: %v", err)
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

// recv waits for the next payload on sub, failing the test after a while.
func recv(t testing.TB, sub driver.Subscription) string {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case p, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription ended while waiting for a notification")
		}
		return p
	case <-timer.C:
		t.Fatal("no notification within 10s")
		return ""
	}
}
