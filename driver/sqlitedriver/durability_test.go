package sqlitedriver

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// synchronousIn reads PRAGMA synchronous inside a call's transaction.
func synchronousIn(ctx context.Context, t *executor) (int, error) {
	var v int
	err := t.r.one(ctx, "PRAGMA synchronous", func(rows *sql.Rows) error { return rows.Scan(&v) })
	return v, err
}

// TestClaimBatchesCommitWithoutSync: a batch of claims alone commits with
// synchronous=NORMAL; a batch that holds anything else commits with FULL,
// even when claims share it; and the write handle is FULL again after.
func TestClaimBatchesCommitWithoutSync(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil) // FULL
	ctx := context.Background()
	insert(t, d.Executor(), newJob("lax"), newJob("lax"))

	// Claims alone, with a probe queued as a lax call of the same kind.
	release := holdWriter(t, d)
	var wg sync.WaitGroup
	var claimed []*hoppertype.JobRow
	var claimErr, probeErr error
	var inLax int
	wg.Go(func() {
		claimed, claimErr = d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "lax", Limit: 1, Now: time.Now(),
			LeaseExpiresAt: time.Now().Add(time.Minute), Worker: "w"})
	})
	wg.Go(func() {
		probeErr = d.w.do(ctx, true, true, func(ctx context.Context, t *executor) error {
			var err error
			inLax, err = synchronousIn(ctx, t)
			return err
		})
	})
	awaitQueued(t, d, 2)
	laxBefore := d.w.laxBatches.Load()
	release()
	wg.Wait()
	if claimErr != nil || probeErr != nil || len(claimed) != 1 {
		t.Fatalf("claim %d jobs, %v; probe %v", len(claimed), claimErr, probeErr)
	}
	if inLax != 1 {
		t.Fatalf("a batch of claims ran with synchronous=%d, want 1 (NORMAL)", inLax)
	}
	if n := d.w.laxBatches.Load() - laxBefore; n != 1 {
		t.Fatalf("%d lax batches, want 1", n)
	}

	// A claim beside another write: the batch is synced.
	release = holdWriter(t, d)
	var inMixed int
	wg.Go(func() {
		claimed, claimErr = d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "lax", Limit: 1, Now: time.Now(),
			LeaseExpiresAt: time.Now().Add(time.Minute), Worker: "w"})
	})
	wg.Go(func() {
		probeErr = d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			var err error
			inMixed, err = synchronousIn(ctx, tx.(*executor))
			return err
		})
	})
	awaitQueued(t, d, 2)
	laxBefore = d.w.laxBatches.Load()
	release()
	wg.Wait()
	if claimErr != nil || probeErr != nil || len(claimed) != 1 {
		t.Fatalf("claim %d jobs, %v; probe %v", len(claimed), claimErr, probeErr)
	}
	if inMixed != 2 {
		t.Fatalf("a batch of a claim and another write ran with synchronous=%d, want 2 (FULL)", inMixed)
	}
	if n := d.w.laxBatches.Load() - laxBefore; n != 0 {
		t.Fatalf("%d lax batches, want 0", n)
	}

	// The handle callers use for their own transactions is FULL.
	var onHandle int
	if err := d.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&onHandle); err != nil || onHandle != 2 {
		t.Fatalf("DB() has synchronous=%d (%v), want 2 (FULL)", onHandle, err)
	}
}

// TestClaimBatchesUnderNormal: with synchronous=NORMAL configured, nothing
// changes the setting.
func TestClaimBatchesUnderNormal(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	insert(t, d.Executor(), newJob("n"))
	if _, err := d.Executor().JobClaim(context.Background(), &driver.JobClaimParams{Queue: "n", Limit: 1, Now: time.Now(),
		LeaseExpiresAt: time.Now().Add(time.Minute), Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if n := d.w.laxBatches.Load(); n != 0 {
		t.Fatalf("%d lax batches under NORMAL, want 0", n)
	}
	var v int
	if err := d.DB().QueryRow("PRAGMA synchronous").Scan(&v); err != nil || v != 1 {
		t.Fatalf("DB() has synchronous=%d (%v), want 1 (NORMAL)", v, err)
	}
}

// TestCheckpointerCopiesTheLog: the database file grows only when a
// checkpoint copies the write-ahead log into it. The writer's own threshold
// is far above what this test writes, so the file grows only if the
// background checkpointer runs.
func TestCheckpointerCopiesTheLog(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil)
	var pages int
	if err := d.DB().QueryRow("PRAGMA wal_autocheckpoint").Scan(&pages); err != nil || pages != writerCheckpointPages {
		t.Fatalf("writer's wal_autocheckpoint = %d (%v), want %d", pages, err, writerCheckpointPages)
	}
	size := func() int64 {
		fi, err := os.Stat(d.Path())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for range 20 {
		jobs := make([]*hoppertype.JobRow, 100)
		for i := range jobs {
			jobs[i] = newJob("ckpt")
		}
		insert(t, d.Executor(), jobs...)
	}
	poll(t, "the database file to take the inserted jobs", func() bool { return size() > before+100_000 })
	if d.ckpt.runs.Load() == 0 {
		t.Fatal("the file grew without a background checkpoint")
	}
}
