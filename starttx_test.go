package hopper_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// txKind opens, commits and rolls back a caller's transaction of one kind.
type txKind struct {
	name     string
	begin    func() any
	rollback func(any)
	commit   func(any)
}

// testStartTx: a run started through the caller's transaction exists if
// and only if it commits, and then runs; the same id again is the same
// run, another workflow's is ErrDuplicateID, a wrong transaction is
// refused.
func testStartTx(t *testing.T, c *hopper.Client, kinds []txKind) {
	ctx := testCtx(t)
	double := hopper.Workflow("double", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "x2", func(context.Context) (int, error) { return 2 * n, nil }, nil)
	}, nil)
	other := hopper.Workflow("other", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	require.NoError(t, c.Register(double, other))
	for _, k := range kinds {
		tx := k.begin()
		h, err := double.StartTx(ctx, c, tx, 2, &hopper.StartOpts{ID: "rolled-back-" + k.name})
		require.NoError(t, err, k.name)
		k.rollback(tx)
		_, err = c.RunGet(ctx, h.ID())
		require.ErrorIs(t, err, hopper.ErrNotFound, "%s: a rolled-back start leaves no run", k.name)
		_, err = c.JobGet(ctx, h.ID())
		require.ErrorIs(t, err, hopper.ErrNotFound, "%s: nor its job", k.name)

		tx = k.begin()
		h, err = double.StartTx(ctx, c, tx, 21, &hopper.StartOpts{ID: "committed-" + k.name})
		require.NoError(t, err, k.name)
		again, err := double.StartTx(ctx, c, tx, 5, &hopper.StartOpts{ID: "committed-" + k.name})
		require.NoError(t, err, k.name)
		require.True(t, again.Existing(), "%s: the same id in the same transaction is the same run", k.name)
		_, err = other.StartTx(ctx, c, tx, 5, &hopper.StartOpts{ID: "committed-" + k.name})
		require.ErrorIs(t, err, hopper.ErrDuplicateID, k.name)
		k.commit(tx)
		out, err := h.Result(ctx)
		require.NoError(t, err, k.name)
		require.Equal(t, 42, out, k.name)
	}
	_, err := double.StartTx(ctx, c, "not a tx", 1, nil)
	require.ErrorIs(t, err, driver.ErrTxType)
	_, err = double.StartTx(ctx, c, nil, 1, nil)
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}

func TestStartTxSQLite(t *testing.T) {
	t.Parallel()
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "tx.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	c := newClient(t, hopper.Config{Driver: d, PollInterval: 20 * time.Millisecond})
	db := d.DB()
	ctx := testCtx(t)
	testStartTx(t, c, []txKind{{"sql.Tx",
		func() any { tx, err := db.BeginTx(ctx, nil); require.NoError(t, err); return tx },
		func(tx any) { require.NoError(t, tx.(*sql.Tx).Rollback()) },
		func(tx any) { require.NoError(t, tx.(*sql.Tx).Commit()) }}})
}

func TestStartTxPostgres(t *testing.T) {
	url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL transactional start test")
	}
	t.Parallel()
	d := openPostgres(t, url).(*pgdriver.Driver)
	c := newClient(t, hopper.Config{Driver: d})
	ctx := testCtx(t)
	pool := d.Pool()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	testStartTx(t, c, []txKind{
		{"pgx.Tx",
			func() any { tx, err := pool.Begin(ctx); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Rollback(ctx)) },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Commit(ctx)) }},
		{"sql.Tx",
			func() any { tx, err := db.BeginTx(ctx, nil); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Rollback()) },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Commit()) }},
	})
}

func TestStartTxUnsupported(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	wf := hopper.Workflow("w", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	_, err = wf.StartTx(context.Background(), c, struct{}{}, 1, nil)
	require.ErrorIs(t, err, driver.ErrNotImplemented)
}

// TestStartRunAt: a run started with StartOpts.RunAt waits until then
// (seed 004's scheduleOnce), on the injected clock.
func TestStartRunAt(t *testing.T) { forEachDriver(t, testStartRunAt) }

func testStartRunAt(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var ran atomic.Int32
	wf := hopper.Workflow("later", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "run", func(context.Context) (int, error) { ran.Add(1); return n, nil }, nil)
	}, nil)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, 7, &hopper.StartOpts{RunAt: clk.Now().Add(time.Hour), Delay: time.Minute})
	require.NoError(t, err)
	job, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateScheduled, job.State)
	require.True(t, job.RunAt.Equal(clk.Now().Add(time.Hour)), "RunAt wins over Delay: %v", job.RunAt)
	clk.Advance(59 * time.Minute)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunPending, info.Status)
	require.Zero(t, ran.Load())
	clk.Advance(time.Minute)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, out)
}

// TestSkipQueuePerInstance: InsertOpts.SkipQueue and StartOpts.SkipQueue
// run one job's or one run's first attempt in the enqueuing process, on a
// queue no producer polls, while the others of the same type wait there.
func TestSkipQueuePerInstance(t *testing.T) { forEachDriver(t, testSkipQueuePerInstance) }

func testSkipQueuePerInstance(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	job := hopper.Define("plain", func(ctx context.Context, n int) (int, error) { return n * 2, nil }, nil)
	wf := hopper.Workflow("plainwf", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "x3", func(context.Context) (int, error) { return 3 * n, nil }, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(job, wf))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 21, &hopper.InsertOpts{Queue: "nowhere", SkipQueue: true})
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, v)
	r, err := wf.Start(ctx, c, 5, &hopper.StartOpts{Queue: "nowhere", SkipQueue: true})
	require.NoError(t, err)
	out, err := r.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 15, out)

	// Without it the same types wait for a worker of that queue.
	h, err = job.Enqueue(ctx, c, 1, &hopper.InsertOpts{Queue: "nowhere"})
	require.NoError(t, err)
	r, err = wf.Start(ctx, c, 1, &hopper.StartOpts{Queue: "nowhere"})
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = h.Result(short)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	_, err = r.Result(short)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// testInCommitObserversSeeCallerTx: the InCommit observers see what
// EnqueueTx and StartTx write, inside the caller's transaction, as they see
// every other transition; a veto fails the call with ErrVetoed and undoes
// hopper's writes alone, so the transaction stays usable and what it wrote
// besides commits.
func testInCommitObserversSeeCallerTx(t *testing.T, d driver.Driver, kinds []txKind) {
	var mu sync.Mutex
	seen := map[string]bool{}
	add := hopper.Define("add", addHandler, nil)
	flow := hopper.Workflow("obs-flow", func(wf hopper.WorkflowContext, n int) (int, error) { return n, nil }, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(add, flow))
	require.NoError(t, c.Observe("gatekeeper", hopper.InCommit, hopper.ChangeFilter{}, func(_ context.Context, ch hopper.Change) error {
		mu.Lock()
		seen[string(ch.Kind)+" "+ch.EntityID] = true
		mu.Unlock()
		if strings.HasPrefix(ch.EntityID, "refused-") {
			return errors.New("not this one")
		}
		return nil
	}))
	ctx := testCtx(t)
	for _, k := range kinds {
		tx := k.begin()
		_, err := add.EnqueueTx(ctx, c, tx, addIn{A: 1}, &hopper.InsertOpts{ID: "refused-job-" + k.name})
		require.ErrorIs(t, err, hopper.ErrVetoed, k.name)
		_, err = flow.StartTx(ctx, c, tx, 1, &hopper.StartOpts{ID: "refused-run-" + k.name})
		require.ErrorIs(t, err, hopper.ErrVetoed, k.name)
		_, err = add.EnqueueTx(ctx, c, tx, addIn{A: 1}, &hopper.InsertOpts{ID: "job-" + k.name})
		require.NoError(t, err, "%s: the transaction is usable after a veto", k.name)
		_, err = flow.StartTx(ctx, c, tx, 1, &hopper.StartOpts{ID: "run-" + k.name})
		require.NoError(t, err, k.name)
		k.commit(tx)

		mu.Lock()
		for _, ch := range []string{"job refused-job-", "run refused-run-", "job job-", "run run-", "job run-"} {
			require.True(t, seen[ch+k.name], "%s: the observer saw %s", k.name, ch+k.name)
		}
		mu.Unlock()
		for _, id := range []string{"refused-job-", "refused-run-"} {
			_, err := c.JobGet(ctx, id+k.name)
			require.ErrorIs(t, err, hopper.ErrNotFound, "%s: the vetoed %s is not stored", k.name, id)
		}
		for _, id := range []string{"job-", "run-"} {
			_, err := c.JobGet(ctx, id+k.name)
			require.NoError(t, err, "%s: %s committed with the transaction", k.name, id)
		}
	}
}

func TestInCommitObserversSeeCallerTxSQLite(t *testing.T) {
	t.Parallel()
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "tx.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	db := d.DB()
	ctx := testCtx(t)
	testInCommitObserversSeeCallerTx(t, d, []txKind{{"sql.Tx",
		func() any { tx, err := db.BeginTx(ctx, nil); require.NoError(t, err); return tx },
		func(tx any) { require.NoError(t, tx.(*sql.Tx).Rollback()) },
		func(tx any) { require.NoError(t, tx.(*sql.Tx).Commit()) }}})
}

func TestInCommitObserversSeeCallerTxPostgres(t *testing.T) {
	url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL transactional observer test")
	}
	t.Parallel()
	d := openPostgres(t, url).(*pgdriver.Driver)
	ctx := testCtx(t)
	pool := d.Pool()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	testInCommitObserversSeeCallerTx(t, d, []txKind{
		{"pgx.Tx",
			func() any { tx, err := pool.Begin(ctx); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Rollback(ctx)) },
			func(tx any) { require.NoError(t, tx.(pgx.Tx).Commit(ctx)) }},
		{"sql.Tx",
			func() any { tx, err := db.BeginTx(ctx, nil); require.NoError(t, err); return tx },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Rollback()) },
			func(tx any) { require.NoError(t, tx.(*sql.Tx).Commit()) }},
	})
}
