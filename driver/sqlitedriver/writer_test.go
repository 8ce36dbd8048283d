package sqlitedriver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// holdWriter occupies the writer with a call that waits until release is
// called, so the calls made meanwhile queue up and run as one batch.
func holdWriter(t *testing.T, d *Driver) (release func()) {
	t.Helper()
	started, gate, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- d.Executor().InTx(context.Background(), func(context.Context, driver.Executor) error {
			close(started)
			<-gate
			return nil
		})
	}()
	<-started
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("holding call: %v", err)
		}
	}
}

func TestGroupCommitManyInserts(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil) // FULL: the case group commit exists for
	const n = 200
	release := holdWriter(t, d)
	before := d.w.batches.Load()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = d.Executor().JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("gc")}})
		})
	}
	awaitQueued(t, d, n)
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if got := countJobs(t, d); got != n {
		t.Fatalf("%d jobs stored, want %d", got, n)
	}
	if b := d.w.batches.Load() - before; b != 1 {
		t.Fatalf("%d calls took %d transactions, want 1", n, b)
	}

	// Without holding the writer, concurrent callers still share commits.
	before = d.w.batches.Load()
	for range n {
		wg.Go(func() { insert(t, d.Executor(), newJob("gc")) })
	}
	wg.Wait()
	t.Logf("%d concurrent inserts took %d transactions", n, d.w.batches.Load()-before)
	if got := countJobs(t, d); got != 2*n {
		t.Fatalf("%d jobs stored, want %d", got, 2*n)
	}
}

func TestGroupCommitFailedCallRollsBackAlone(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil)
	ctx := context.Background()
	sub, err := d.Listen(ctx, "topic")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	a, b, c := newJob("q"), newJob("q"), newJob("q")
	boom := errors.New("boom")
	release := holdWriter(t, d)
	before := d.w.batches.Load()
	results := make(chan struct {
		name string
		err  error
	}, 3)
	run := func(name string, j *hoppertype.JobRow, fail bool) {
		err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}}); err != nil {
				return err
			}
			if err := tx.Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: name}); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		})
		results <- struct {
			name string
			err  error
		}{name, err}
	}
	go run("a", a, false)
	awaitQueued(t, d, 1)
	go run("b", b, true)
	awaitQueued(t, d, 2)
	go run("c", c, false)
	awaitQueued(t, d, 3)
	release()
	for range 3 {
		r := <-results
		switch {
		case r.name == "b" && !errors.Is(r.err, boom):
			t.Errorf("call b returned %v, want boom", r.err)
		case r.name != "b" && r.err != nil:
			t.Errorf("call %s failed: %v", r.name, r.err)
		}
	}
	if got := d.w.batches.Load() - before; got != 1 {
		t.Fatalf("three calls took %d transactions, want 1", got)
	}
	for _, j := range []*hoppertype.JobRow{a, c} {
		if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID}); err != nil {
			t.Errorf("job of a committed call: %v", err)
		}
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: b.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Errorf("job of the failed call: %v, want ErrNotFound", err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case p := <-sub.C():
			got = append(got, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("notifications: got %v", got)
		}
	}
	if got[0] != "a" || got[1] != "c" {
		t.Fatalf("notifications %v, want [a c] (b rolled back)", got)
	}
}

func TestWriterPanicIsReraisedInCaller(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	j := newJob("q")
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("recovered %v, want kaboom", p)
			}
		}()
		d.Executor().InTx(context.Background(), func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}}); err != nil {
				return err
			}
			panic("kaboom")
		})
	}()
	if _, err := d.Executor().JobGet(context.Background(), &driver.JobGetParams{ID: j.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("write of a panicking call survived: %v", err)
	}
	insert(t, d.Executor(), newJob("q")) // the writer still works
}

func TestCancelledCallerWhileQueued(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	release := holdWriter(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	j := newJob("q")
	done := make(chan error, 1)
	go func() {
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
		done <- err
	}()
	awaitQueued(t, d, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	release()
	insert(t, d.Executor(), newJob("q")) // flushes the writer past the abandoned call
	if _, err := d.Executor().JobGet(context.Background(), &driver.JobGetParams{ID: j.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("an abandoned call was applied: %v", err)
	}
}

func TestWriteOnDriverInsideInTxFails(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	err := d.Executor().InTx(context.Background(), func(ctx context.Context, tx driver.Executor) error {
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q")}})
		return err
	})
	if !errors.Is(err, errReentrant) {
		t.Fatalf("write on the Driver from inside InTx: %v, want errReentrant", err)
	}
}

func TestTxExecutorUnusableAfterInTx(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	var kept driver.Executor
	if err := d.Executor().InTx(context.Background(), func(ctx context.Context, tx driver.Executor) error {
		kept = tx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.JobGet(context.Background(), &driver.JobGetParams{ID: "x"}); !errors.Is(err, errTxDone) {
		t.Fatalf("executor used after InTx: %v", err)
	}
}
