package sqlitedriver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestContention runs enqueuers, claimers and listers on two Drivers open on
// one file (as two processes would be) and requires that no call ever fails,
// in particular not with SQLITE_BUSY ("database is locked").
func TestContention(t *testing.T) {
	t.Parallel()
	const (
		enqueuers  = 20
		perEnqueue = 100 // 2000 jobs
		claimers   = 4
		listers    = 2
		total      = enqueuers * perEnqueue
	)
	path := filepath.Join(t.TempDir(), "hopper.db")
	ds := []*Driver{openAt(t, path, nil), openAt(t, path, nil)}
	// A bound for a stuck test, not a speed target: under the race detector
	// on a loaded machine 2,000 fsync'd commits from two writers take a
	// while.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var (
		errMu    sync.Mutex
		errs     []error
		finished atomic.Int64
		done     = make(chan struct{})
		doneOnce sync.Once
	)
	report := func(who string, err error) {
		errMu.Lock()
		errs = append(errs, fmt.Errorf("%s: %w", who, err))
		errMu.Unlock()
		doneOnce.Do(func() { close(done) })
	}
	var wg sync.WaitGroup
	for e := range enqueuers {
		d := ds[e%2]
		wg.Go(func() {
			for range perEnqueue {
				j := newJob("contention")
				err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
					if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}}); err != nil {
						return err
					}
					return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: "contention"})
				})
				if err != nil {
					report("enqueue", err)
					return
				}
			}
		})
	}
	for c := range claimers {
		d := ds[c%2]
		sub, err := d.Listen(ctx, driver.TopicJobAvailable)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer sub.Close()
			worker := fmt.Sprintf("w%d", c)
			for finished.Load() < total {
				rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{
					Queue: "contention", Limit: 10, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: worker,
				})
				if err != nil {
					report("claim", err)
					return
				}
				if len(rows) == 0 {
					select { // wait for new jobs, polling as a fallback
					case <-sub.C():
					case <-time.After(10 * time.Millisecond):
					case <-done:
						return
					}
					continue
				}
				items := make([]driver.JobFinishParams, len(rows))
				for i, r := range rows {
					items[i] = driver.JobFinishParams{ID: r.ID, LeaseToken: r.LeaseToken, State: hoppertype.JobStateSucceeded,
						Attempt: r.Attempt, RunAt: r.RunAt, EndedAt: testBase}
				}
				res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: items})
				if err != nil {
					report("finish", err)
					return
				}
				for _, r := range res {
					if r.Err != nil {
						report("finish item", r.Err)
						return
					}
				}
				finished.Add(int64(len(rows)))
			}
		})
	}
	for l := range listers {
		d := ds[l%2]
		wg.Go(func() {
			for finished.Load() < total {
				if _, err := d.Executor().JobList(ctx, &driver.JobListParams{Queues: []string{"contention"}, Limit: 50}); err != nil {
					report("list", err)
					return
				}
				if _, err := d.Executor().JobCountByState(ctx, &driver.JobCountParams{Queue: "contention"}); err != nil {
					report("count", err)
					return
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		msg := err.Error()
		if strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") {
			t.Errorf("lock contention reached a caller: %v", err)
		} else {
			t.Errorf("%v", err)
		}
	}
	if t.Failed() {
		return
	}
	counts, err := ds[0].Executor().JobCountByState(context.Background(), &driver.JobCountParams{Queue: "contention"})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].State != hoppertype.JobStateSucceeded || counts[0].Count != total {
		t.Fatalf("final counts %+v, want %d succeeded", counts, total)
	}
	t.Logf("transactions: %d + %d for %d enqueues and their claims and finishes",
		ds[0].w.batches.Load(), ds[1].w.batches.Load(), total)
}

// TestOpenWhileAnotherWrites opens a second Driver on a file whose first
// Driver commits back to back, as a process starting beside a busy one does:
// the open-time schema check takes the write lock too, and must get it
// within the busy timeout rather than fail with "database is locked".
func TestOpenWhileAnotherWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	busy := openAt(t, path, nil)
	if _, err := busy.wdb.Exec(`CREATE TABLE spin (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	spun := make(chan error, 1)
	go func() {
		// Write transactions with gaps of microseconds between them: SQLite's
		// own busy handler, which sleeps up to 100ms between tries, rarely
		// lands in one.
		for {
			select {
			case <-stop:
				spun <- nil
				return
			default:
			}
			tx, err := busy.wdb.Begin()
			if err != nil {
				spun <- err
				return
			}
			if _, err := tx.Exec(`INSERT INTO spin VALUES (1)`); err != nil {
				tx.Rollback()
				spun <- err
				return
			}
			if err := tx.Commit(); err != nil {
				spun <- err
				return
			}
		}
	}()
	for i := range 5 {
		d, err := Open(path, &Options{BusyTimeout: 3 * time.Second})
		if err != nil {
			close(stop)
			<-spun
			t.Fatalf("open %d beside a busy writer: %v", i, err)
		}
		d.Close()
	}
	close(stop)
	if err := <-spun; err != nil {
		t.Fatalf("busy writer: %v", err)
	}
}
