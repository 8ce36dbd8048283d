package hopper_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// wrap is the application's view of a transaction TxStep hands over: a
// *sql.Tx on SQLite, a pgx.Tx on PostgreSQL.
func (a *appDB) wrap(tx any) *appTxn {
	switch tx := tx.(type) {
	case *sql.Tx:
		return &appTxn{tx: tx, exec: func(ctx context.Context, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, a.sql(q), args...)
			return err
		}}
	case pgx.Tx:
		return &appTxn{tx: tx, exec: func(ctx context.Context, q string, args ...any) error {
			_, err := tx.Exec(ctx, a.sql(q), args...)
			return err
		}}
	}
	panic(fmt.Sprintf("not an application transaction: %T", tx))
}

// TestTxStep: a transactional step's writes and its record commit
// together: a try that fails is rolled back and retried, the step's writes
// exist once, and a replay (after the run waited for a hook) returns the
// recorded result without running the step again.
func TestTxStep(t *testing.T) { forEachTxDriver(t, testTxStep) }

func testTxStep(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.createBank(ctx, map[string]int{"alice": 100, "bob": 0}))
	var tries, bodies atomic.Int32
	tokens := make(chan string, 4)
	pay := hopper.Workflow("pay", func(wf hopper.WorkflowContext, amount int) (int, error) {
		bodies.Add(1)
		v, err := hopper.TxStep(wf, "move", func(ctx context.Context, tx any) (int, error) {
			n := tries.Add(1)
			meta, _ := hopper.StepFromContext(ctx)
			if err := transfer(ctx, db.wrap(tx), wf.RunID(), Transfer{"alice", "bob", amount}); err != nil {
				return 0, err
			}
			if meta.Attempt == 1 {
				return 0, fmt.Errorf("try %d fails after its writes", n)
			}
			return amount * 2, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond}})
		if err != nil {
			return 0, err
		}
		// The run suspends until the test resumes the hook, then is
		// replayed.
		h, err := hopper.NewHook[int](wf, "go on")
		if err != nil {
			return 0, err
		}
		select {
		case tokens <- h.Token():
		default:
		}
		w, err := h.Wait(nil)
		if err != nil {
			return 0, err
		}
		return v + w, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(pay))
	run, err := pay.Start(ctx, c, 10, nil)
	require.NoError(t, err)
	token := <-tokens
	awaitRunStatus(t, c, run.ID(), hopper.RunWaiting)
	require.NoError(t, c.HookResume(ctx, token, []byte(`1`)))
	v, err := run.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 21, v)
	require.EqualValues(t, 2, tries.Load(), "a failed try and the one that committed; the replay ran none")
	require.EqualValues(t, 2, bodies.Load(), "the run was replayed once, after the hook")
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the failed try's writes were rolled back")
	bal, err := db.int(ctx, `SELECT balance FROM %[1]saccounts WHERE id = $1`, "bob")
	require.NoError(t, err)
	require.Equal(t, 10, bal)
	h, err := c.RunHistory(ctx, run.ID())
	require.NoError(t, err)
	var steps []string
	for _, ev := range h.Events {
		if ev.Kind == "step" {
			steps = append(steps, ev.Name)
		}
	}
	require.Equal(t, []string{"move"}, steps)
}

// TestTxStepFails: a step whose every try fails records its final error
// and none of its writes; a function taking a transaction of another kind
// fails the step at once.
func TestTxStepFails(t *testing.T) { forEachTxDriver(t, testTxStepFails) }

func testTxStepFails(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.createBank(ctx, map[string]int{"alice": 100, "bob": 0}))
	var tries atomic.Int32
	wf := hopper.Workflow("fails", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		_, err := hopper.TxStep(wf, "move", func(ctx context.Context, tx any) (int, error) {
			tries.Add(1)
			if err := transfer(ctx, db.wrap(tx), wf.RunID(), Transfer{"alice", "bob", 10}); err != nil {
				return 0, err
			}
			return 0, errors.New("declined")
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 2, Base: time.Millisecond}})
		var se *hopper.StepError
		if !errors.As(err, &se) {
			return "", fmt.Errorf("want a step error, got %w", err)
		}
		_, err = hopper.TxStep(wf, "wrong-kind", func(ctx context.Context, tx *int) (int, error) {
			return 0, errors.New("never called")
		}, nil)
		return fmt.Sprintf("%s; %v %v", se.Message, errors.Is(err, hopper.ErrAborted), err), nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(wf))
	run, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	out, err := run.Result(ctx)
	require.NoError(t, err)
	require.Contains(t, out, "declined; true")
	require.Contains(t, out, "takes a *int")
	require.EqualValues(t, 2, tries.Load())
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestTxStepMemory: the memory store refuses a transactional step with
// ErrTxUnsupported, and a stub of the step (hoppertest) runs in its place.
func TestTxStepMemory(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	errs := make(chan error, 1)
	wf := hopper.Workflow("tx", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		v, err := hopper.TxStep(wf, "write", func(ctx context.Context, tx any) (int, error) { return 1, nil }, nil)
		if err != nil {
			errs <- err
		}
		return v, err
	}, nil)
	c := newClient(t, hopper.Config{Driver: memdriver.New()})
	require.NoError(t, c.Register(wf))
	run, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	err = <-errs
	require.ErrorIs(t, err, hopper.ErrTxUnsupported)
	require.ErrorIs(t, err, driver.ErrNotImplemented)
	_, err = run.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted, "no retry of the run helps")

	stubbed, _ := hoppertest.NewClient(t, hopper.Config{})
	require.NoError(t, stubbed.Register(wf))
	hoppertest.StubStep(t, stubbed, "write", func(context.Context) (int, error) { return 42, nil })
	run, err = wf.Start(ctx, stubbed, hopper.None{}, nil)
	require.NoError(t, err)
	v, err := run.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, v)
}

// TestTxStepClientWrite: a step's function that writes through the client
// instead of its transaction does not hang: on SQLite, where the client's
// writes wait for the step's transaction, the write fails at once; on
// PostgreSQL it is a write of its own.
func TestTxStepClientWrite(t *testing.T) { forEachTxDriver(t, testTxStepClientWrite) }

func testTxStepClientWrite(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	one := hopper.Define("one", func(context.Context, int) (int, error) { return 1, nil }, nil)
	var c *hopper.Client
	wf := hopper.Workflow("writes", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		return hopper.TxStep(wf, "enqueue", func(ctx context.Context, tx any) (string, error) {
			_, err := one.Enqueue(ctx, c, 1, nil)
			return fmt.Sprint(err), nil
		}, nil)
	}, nil)
	c = newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(wf, one))
	run, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	out, err := run.Result(ctx)
	require.NoError(t, err)
	if _, ok := d.(*sqlitedriver.Driver); ok {
		require.Contains(t, out, "would wait for")
	} else {
		require.Equal(t, "<nil>", out)
	}
}
