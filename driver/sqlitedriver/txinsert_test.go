package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

func TestTransactionalEnqueueWithDriverDB(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	enqueue := func(commit bool) *hoppertype.JobRow {
		t.Helper()
		j := newJob("q")
		tx, err := d.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, j.ID); err != nil {
			t.Fatal(err)
		}
		res, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}})
		if err != nil || len(res) != 1 || res[0].Job.ID != j.ID {
			t.Fatalf("JobInsertManyTx: %v, %v", res, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	rolledBack := enqueue(false)
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: rolledBack.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("job of a rolled-back transaction: %v", err)
	}
	committed := enqueue(true)
	got, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: committed.ID})
	if err != nil || got.State != hoppertype.JobStatePending {
		t.Fatalf("job of a committed transaction: %v, %v", got, err)
	}
	// The driver's own writes go on after the caller's transaction.
	rows, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: 10, Now: testBase, LeaseExpiresAt: testBase, Worker: "w"})
	if err != nil || len(rows) != 1 || rows[0].ID != committed.ID {
		t.Fatalf("claim after transactional enqueue: %v, %v", rows, err)
	}
}

func TestTransactionalEnqueueWithOwnDB(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	// The application's own handle on the same file.
	app, err := sql.Open("sqlite", d.Path()+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()

	a, b, dup := newJob("q"), newJob("q"), newJob("q")
	a.UniqueKey, b.UniqueKey = "k", "k"
	tx, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{a, b}})
	if err != nil || len(res) != 2 || res[0].Existing || !res[1].Existing || res[1].Job.ID != a.ID {
		t.Fatalf("unique keys through a caller's transaction: %+v, %v", res, err)
	}
	// JobGetTx reads through the transaction: its own job, not others'.
	if got, err := d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: a.ID}); err != nil || got.ID != a.ID {
		t.Fatalf("JobGetTx of the transaction's own job: %+v, %v", got, err)
	}
	if _, err := d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: "missing"}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("JobGetTx of a missing job: %v", err)
	}
	// A duplicate id fails that call only; the transaction stays usable.
	dup.ID = a.ID
	if _, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q"), dup}}); !errors.Is(err, hoppertype.ErrDuplicateID) {
		t.Fatalf("duplicate id through a caller's transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: a.ID}); err != nil {
		t.Fatalf("committed job: %v", err)
	}
	if n := countJobs(t, d); n != 1 {
		t.Fatalf("%d jobs stored, want 1", n)
	}

	tx, err = app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newJob("q")
	if _, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{c}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: c.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("job of a rolled-back transaction: %v", err)
	}
}

func TestTransactionalEnqueueWrongTxType(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	for _, tx := range []any{nil, "tx", d.DB(), (*sql.Tx)(nil), struct{}{}} {
		if _, err := d.JobInsertManyTx(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{newJob("q")}}); !errors.Is(err, driver.ErrTxType) {
			t.Errorf("JobInsertManyTx(%T): %v, want ErrTxType", tx, err)
		}
		if _, err := d.JobGetTx(ctx, tx, &driver.JobGetParams{ID: "x"}); !errors.Is(err, driver.ErrTxType) {
			t.Errorf("JobGetTx(%T): %v, want ErrTxType", tx, err)
		}
	}
	if n := countJobs(t, d); n != 0 {
		t.Fatalf("%d jobs stored", n)
	}
}
