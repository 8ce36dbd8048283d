package hopper_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// idleClient is a client that is not started (nothing runs), closed when
// the test ends.
func idleClient(t *testing.T, d driver.Driver, types ...hopper.AnyType) *hopper.Client {
	t.Helper()
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(types...))
	return c
}

// requireDuplicate asserts err matches ErrDuplicateID and carries no
// store text.
func requireDuplicate(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, hopper.ErrDuplicateID, msgAndArgs...)
	require.NotContains(t, err.Error(), "SQLSTATE", msgAndArgs...)
	require.NotContains(t, err.Error(), "driver", msgAndArgs...)
}

// TestDuplicateJobID: enqueueing a job with an explicit id that a stored
// job has is idempotent when type and input are the same (the stored job's
// handle, Deduplicated), and ErrDuplicateID otherwise, on every driver.
func TestDuplicateJobID(t *testing.T) { forEachDriver(t, testDuplicateJobID) }

func testDuplicateJobID(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	other := hopper.Define("other", addHandler, nil)
	c := idleClient(t, newDriver(t), add, other)
	ctx := testCtx(t)
	opts := &hopper.InsertOpts{ID: "order-1"}

	h, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, opts)
	require.NoError(t, err)
	require.False(t, h.Deduplicated())

	// The same job again (a client retrying a lost reply): the same job.
	again, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, opts)
	require.NoError(t, err)
	require.True(t, again.Deduplicated())
	require.Equal(t, "order-1", again.ID())
	byName, err := c.EnqueueName(ctx, "add", []byte(`{"a":1,"b":2}`), opts)
	require.NoError(t, err)
	require.True(t, byName.Deduplicated(), "by name, the same input is the same job")

	// Another input or another type under the id: refused.
	_, err = add.Enqueue(ctx, c, addIn{A: 1, B: 3}, opts)
	requireDuplicate(t, err, "another input")
	_, err = other.Enqueue(ctx, c, addIn{A: 1, B: 2}, opts)
	requireDuplicate(t, err, "another type")

	// Among several jobs enqueued together, a taken id fails them all.
	_, err = c.EnqueueMany(ctx, add.Job(addIn{}, &hopper.InsertOpts{ID: "fresh"}), add.Job(addIn{A: 1, B: 2}, opts))
	requireDuplicate(t, err, "a batch")
	_, err = c.JobGet(ctx, "fresh")
	require.ErrorIs(t, err, hopper.ErrNotFound, "nothing of the batch is stored")

	page, err := c.JobList(ctx, nil)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1, "one job stored in all")
}

// TestDuplicateJobIDInTx: the same holds through the caller's transaction
// (EnqueueTx), which stays usable: the stored job is read through it, so a
// job enqueued earlier in the same transaction counts too.
func TestDuplicateJobIDInTx(t *testing.T) { forEachDriver(t, testDuplicateJobIDInTx) }

func testDuplicateJobIDInTx(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	ctx := testCtx(t)
	var begin func() (tx any, commit func() error)
	switch d := d.(type) {
	case *sqlitedriver.Driver:
		begin = func() (any, func() error) {
			tx, err := d.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback() })
			return tx, tx.Commit
		}
	case *pgdriver.Driver:
		begin = func() (any, func() error) {
			tx, err := d.Pool().Begin(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx, func() error { return tx.Commit(ctx) }
		}
	default:
		t.Skip("no transactional enqueue on this driver")
	}
	add := hopper.Define("add", addHandler, nil)
	c := idleClient(t, d, add)
	opts := &hopper.InsertOpts{ID: "order-1"}
	_, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, opts)
	require.NoError(t, err)

	tx, commit := begin()
	h, err := add.EnqueueTx(ctx, c, tx, addIn{A: 1, B: 2}, opts)
	require.NoError(t, err)
	require.True(t, h.Deduplicated())
	_, err = add.EnqueueTx(ctx, c, tx, addIn{A: 9, B: 9}, opts)
	requireDuplicate(t, err, "another input in a transaction")
	// A job enqueued earlier in this transaction is found through it.
	_, err = add.EnqueueTx(ctx, c, tx, addIn{A: 5}, &hopper.InsertOpts{ID: "in-tx"})
	require.NoError(t, err)
	h, err = add.EnqueueTx(ctx, c, tx, addIn{A: 5}, &hopper.InsertOpts{ID: "in-tx"})
	require.NoError(t, err)
	require.True(t, h.Deduplicated(), "the job this transaction stored")
	require.NoError(t, commit(), "the transaction is still usable")
	got, err := c.JobGet(ctx, "in-tx")
	require.NoError(t, err)
	require.Equal(t, "add", got.Type)
}

// TestDuplicateRunID: starting a run under an id a run of the same
// workflow has returns that run; a run of another workflow, or a job that
// is not a run, under the id is ErrDuplicateID, and so is a job enqueued
// under a run's id.
func TestDuplicateRunID(t *testing.T) { forEachDriver(t, testDuplicateRunID) }

func testDuplicateRunID(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	a := hopper.Workflow("wf-a", func(wf hopper.WorkflowContext, in int) (int, error) { return in, nil }, nil)
	b := hopper.Workflow("wf-b", func(wf hopper.WorkflowContext, in int) (int, error) { return in, nil }, nil)
	add := hopper.Define("add", addHandler, nil)
	c := idleClient(t, newDriver(t), a, b, add)
	ctx := testCtx(t)

	h, err := a.Start(ctx, c, 1, &hopper.StartOpts{ID: "run-1"})
	require.NoError(t, err)
	require.False(t, h.Existing())
	h, err = a.Start(ctx, c, 2, &hopper.StartOpts{ID: "run-1"})
	require.NoError(t, err)
	require.True(t, h.Existing(), "the same workflow: the existing run")
	_, err = c.StartName(ctx, "wf-a", []byte(`1`), &hopper.StartOpts{ID: "run-1"})
	require.NoError(t, err)

	_, err = b.Start(ctx, c, 1, &hopper.StartOpts{ID: "run-1"})
	requireDuplicate(t, err, "another workflow")
	_, err = c.StartName(ctx, "wf-b", []byte(`1`), &hopper.StartOpts{ID: "run-1"})
	requireDuplicate(t, err, "another workflow by name")

	_, err = add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{ID: "job-1"})
	require.NoError(t, err)
	_, err = a.Start(ctx, c, 1, &hopper.StartOpts{ID: "job-1"})
	requireDuplicate(t, err, "a job's id")
	_, err = add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{ID: "run-1"})
	requireDuplicate(t, err, "a run's id")
	_, err = c.RunGet(ctx, "job-1")
	require.ErrorIs(t, err, hopper.ErrNotFound, "no run stored under the job's id")
}
