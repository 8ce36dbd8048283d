package sqlitedriver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// setWriterPragma runs a PRAGMA on the write connection (the write handle
// has exactly one), between the writer's transactions.
func setWriterPragma(t *testing.T, d *Driver, pragma string) {
	t.Helper()
	if _, err := d.wdb.Exec("PRAGMA " + pragma); err != nil {
		t.Fatalf("PRAGMA %s: %v", pragma, err)
	}
}

func TestSavepointRollbackIsNotATransactionRollback(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	if !d.hooked.Load() {
		t.Fatal("rollback hook not installed on the write connection")
	}
	// A BEGIN that outlasts its slice is rolled back and retried: that is
	// a real rollback, counted apart.
	before, aborts := d.rollbacks.Load(), d.beginAborts.Load()
	err := d.Executor().InTx(context.Background(), func(ctx context.Context, tx driver.Executor) error {
		return tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return errors.New("undo") })
	})
	if err == nil {
		t.Fatal("want the nested error")
	}
	if got := d.rollbacks.Load() - before - (d.beginAborts.Load() - aborts); got != 0 {
		t.Fatalf("ROLLBACK TO counted as %d transaction rollbacks", got)
	}
}

// TestReadOnlyDatabase makes the write connection read-only (query_only;
// the tests run as root, so file permissions would not stop writes).
func TestReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	old := newJob("q")
	insert(t, d.Executor(), old)

	setWriterPragma(t, d, "query_only = 1")
	j := newJob("q")
	res, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
	if err == nil || res != nil {
		t.Fatalf("insert on a read-only database: %v, %v; want an error", res, err)
	}
	if !strings.Contains(err.Error(), "readonly") && !strings.Contains(err.Error(), "read-only") {
		t.Logf("error: %v", err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("refused job is readable: %v", err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: old.ID}); err != nil {
		t.Fatalf("reads must keep working: %v", err)
	}
	if _, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: 1, Now: testBase, LeaseExpiresAt: testBase, Worker: "w"}); err == nil {
		t.Fatal("claim on a read-only database succeeded")
	}

	setWriterPragma(t, d, "query_only = 0")
	insert(t, d.Executor(), j)
}

// TestDiskFull caps the database size (max_page_count) so a large insert
// hits SQLITE_FULL.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	old := newJob("q")
	insert(t, d.Executor(), old)
	var pages int
	if err := d.wdb.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setWriterPragma(t, d, "max_page_count = "+strconv.Itoa(pages+2))

	big := newJob("q")
	big.Input = make([]byte, 1<<20)
	res, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{big}})
	if err == nil || res != nil {
		t.Fatalf("insert into a full database: %v, %v; want an error", res, err)
	}
	if !strings.Contains(strings.ToLower(err.Error()), "full") {
		t.Errorf("error does not say the database is full: %v", err)
	}

	// A full database fails the big call of a batch, not its neighbours, and
	// never reports a write that did not commit.
	rollbacks := d.rollbacks.Load()
	release := holdWriter(t, d)
	small := newJob("q")
	errs := make(chan error, 2)
	// small runs first and succeeds; big then fails and SQLite rolls the
	// whole transaction back, so small is run again in the next batch.
	go func() {
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{small}})
		errs <- err
	}()
	awaitQueued(t, d, 1)
	go func() {
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{big}})
		errs <- err
	}()
	awaitQueued(t, d, 2)
	release()
	var failed int
	for range 2 {
		if err := <-errs; err != nil {
			t.Logf("batch call error: %v", err)
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d calls of the batch failed, want only the big one", failed)
	}
	t.Logf("transaction rollbacks by SQLite: %d", d.rollbacks.Load()-rollbacks)
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: big.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("the big job was stored: %v", err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: small.ID}); err != nil {
		t.Fatalf("the small job's caller was told it succeeded, but: %v", err)
	}

	// Reads keep working, and writes resume once there is room.
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: old.ID}); err != nil {
		t.Fatalf("read after disk full: %v", err)
	}
	if _, err := d.Executor().JobCountByState(ctx, &driver.JobCountParams{}); err != nil {
		t.Fatalf("count after disk full: %v", err)
	}
	setWriterPragma(t, d, "max_page_count = 1073741823")
	insert(t, d.Executor(), big)
}
