package hopper_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// appDB is the application's side of a store in these tests: its own
// tables in the store's database, written in its own transactions. Queries
// are written for PostgreSQL ($1 parameters, tables named with %[1]s for the
// schema); appDB adapts them to SQLite.
type appDB struct {
	d      driver.Driver
	prefix string // the schema and a dot on PostgreSQL
	sqlite *sqlitedriver.Driver
	pg     *pgdriver.Driver
	// pgSQL, when set, is where the application begins its transactions
	// on PostgreSQL: *sql.Tx through pgx's database/sql driver.
	pgSQL *sql.DB
}

// sqlTxPG is a PostgreSQL store whose application opens its transactions
// through pgx's database/sql driver, on db.
type sqlTxPG struct {
	*pgdriver.Driver
	db *sql.DB
}

// appTxn is an application transaction: the transaction itself (what
// CompleteTx takes) and how the test writes through it and ends it.
type appTxn struct {
	tx       any
	exec     func(ctx context.Context, q string, args ...any) error
	commit   func(ctx context.Context) error
	rollback func(ctx context.Context) error
}

func newAppDB(d driver.Driver) *appDB {
	a := &appDB{d: d}
	switch d := d.(type) {
	case *sqlitedriver.Driver:
		a.sqlite = d
	case *pgdriver.Driver:
		a.pg, a.prefix = d, `"`+d.Schema()+`".`
	case sqlTxPG:
		a.pg, a.prefix, a.pgSQL = d.Driver, `"`+d.Schema()+`".`, d.db
	}
	return a
}

// sql adapts a query: tables named, parameters in the store's style.
func (a *appDB) sql(q string) string {
	q = fmt.Sprintf(q, a.prefix)
	if a.sqlite != nil {
		q = strings.ReplaceAll(q, "$", "?")
	}
	return q
}

func (a *appDB) exec(ctx context.Context, q string, args ...any) error {
	if a.sqlite != nil {
		_, err := a.sqlite.DB().ExecContext(ctx, a.sql(q), args...)
		return err
	}
	_, err := a.pg.Pool().Exec(ctx, a.sql(q), args...)
	return err
}

// int reads one integer.
func (a *appDB) int(ctx context.Context, q string, args ...any) (int, error) {
	var n int
	if a.sqlite != nil {
		err := a.sqlite.DB().QueryRowContext(ctx, a.sql(q), args...).Scan(&n)
		return n, err
	}
	err := a.pg.Pool().QueryRow(ctx, a.sql(q), args...).Scan(&n)
	return n, err
}

// begin opens a transaction: on SQLite on the driver's write handle, on
// PostgreSQL a pgx.Tx on its pool.
func (a *appDB) begin(ctx context.Context) (*appTxn, error) {
	if a.sqlite != nil || a.pgSQL != nil {
		db := a.pgSQL
		if a.sqlite != nil {
			db = a.sqlite.DB()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return &appTxn{
			tx: tx,
			exec: func(ctx context.Context, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, a.sql(q), args...)
				return err
			},
			commit:   func(context.Context) error { return tx.Commit() },
			rollback: func(context.Context) error { return tx.Rollback() },
		}, nil
	}
	tx, err := a.pg.Pool().Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &appTxn{
		tx: tx,
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := tx.Exec(ctx, a.sql(q), args...)
			return err
		},
		commit:   tx.Commit,
		rollback: tx.Rollback,
	}, nil
}

// bankSchema is the application's tables: accounts, and a ledger whose
// key refuses a job's second transfer.
const bankSchema = `CREATE TABLE %[1]saccounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL);
CREATE TABLE %[1]sledger (job_id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`

func (a *appDB) createBank(ctx context.Context, accounts map[string]int) error {
	for _, q := range strings.Split(bankSchema, ";") {
		if err := a.exec(ctx, q); err != nil {
			return err
		}
	}
	for id, bal := range accounts {
		if err := a.exec(ctx, `INSERT INTO %[1]saccounts (id, balance) VALUES ($1, $2)`, id, bal); err != nil {
			return err
		}
	}
	return nil
}

// transfer writes t in tx: the ledger row of the job, then the two
// balances.
func transfer(ctx context.Context, tx *appTxn, jobID string, t Transfer) error {
	if err := tx.exec(ctx, `INSERT INTO %[1]sledger (job_id, amount) VALUES ($1, $2)`, jobID, t.Amount); err != nil {
		return err
	}
	if err := tx.exec(ctx, `UPDATE %[1]saccounts SET balance = balance - $1 WHERE id = $2`, t.Amount, t.From); err != nil {
		return err
	}
	return tx.exec(ctx, `UPDATE %[1]saccounts SET balance = balance + $1 WHERE id = $2`, t.Amount, t.To)
}

// txDrivers are the stores that join an application's transaction; on
// PostgreSQL also with the application's transactions opened through
// pgx's database/sql driver ("postgres-sql").
func txDrivers() []driverCase {
	var out []driverCase
	for _, dc := range testDrivers() {
		switch dc.name {
		case "memory":
		case "postgres":
			out = append(out, dc, driverCase{"postgres-sql", func(t testing.TB) driver.Driver {
				d := dc.open(t).(*pgdriver.Driver)
				db := stdlib.OpenDBFromPool(d.Pool())
				t.Cleanup(func() { _ = db.Close() })
				return sqlTxPG{d, db}
			}})
		default:
			out = append(out, dc)
		}
	}
	return out
}

// forEachTxDriver runs a test once per store that joins an application's
// transaction, in parallel.
func forEachTxDriver(t *testing.T, test func(t *testing.T, d driver.Driver)) {
	t.Parallel()
	for _, dc := range txDrivers() {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			test(t, dc.open(t))
		})
	}
}

// TestCompleteTx: a handler finishes its job in the transaction that moves
// the money. The job succeeds once, with its result; the ledger and the
// balances show each transfer once; the job's group folds its value, a
// gate watching the jobs fires, the succeeded events are emitted, the
// change feed has each success and an InCommit observer sees it in the
// transaction.
func TestCompleteTx(t *testing.T) { forEachTxDriver(t, testCompleteTx) }

func testCompleteTx(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.createBank(ctx, map[string]int{"alice": 100, "bob": 0}))

	var calls atomic.Int32
	move := hopper.Define("move", func(ctx context.Context, in Transfer) (int, error) {
		calls.Add(1)
		job := hopper.JobFromContext(ctx)
		if err := hopper.FoldGroup(ctx, func(sum int) int { return sum + in.Amount }); err != nil {
			return 0, err
		}
		tx, err := db.begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.rollback(ctx) //nolint:errcheck // a no-op after the commit
		if err := transfer(ctx, tx, job.ID(), in); err != nil {
			return 0, err
		}
		if err := hopper.CompleteTx(ctx, tx.tx, in.Amount); err != nil {
			return 0, err
		}
		return -1, tx.commit(ctx) // the result committed is CompleteTx's
	}, nil)
	split := hopper.Define("split", func(ctx context.Context, n int) (hopper.None, error) {
		job := hopper.JobFromContext(ctx)
		for i := range n {
			if err := job.Spawn(move.Job(Transfer{From: "alice", To: "bob", Amount: 10}, &hopper.InsertOpts{ID: fmt.Sprintf("%s-move-%d", job.ID(), i)})); err != nil {
				return hopper.None{}, err
			}
		}
		return hopper.None{}, nil
	}, nil)
	after := hopper.Define("after", func(ctx context.Context, _ int) ([]string, error) {
		return hopper.JobFromContext(ctx).Dependents(), nil
	}, nil)

	var mu sync.Mutex
	seenInCommit := map[string]bool{}
	events := newEventLog()
	// No poll: a wake-up the completion misses would hang the test.
	c, err := hopper.New(hopper.Config{Driver: d, OnEvent: events.hook, PollInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, c.Observe("in-commit", hopper.InCommit, hopper.ChangeFilter{Types: []string{"move"}, States: []string{"succeeded"}},
		func(ctx context.Context, ch hopper.Change) error {
			mu.Lock()
			seenInCommit[ch.EntityID] = true
			mu.Unlock()
			return nil
		}))
	require.NoError(t, c.Register(move, split, after))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(sctx))
	})

	// Two transfers, and a gate that runs "after" once both succeeded.
	hs, err := move.EnqueueMany(ctx, c, []Transfer{{"alice", "bob", 10}, {"alice", "bob", 20}}, nil)
	require.NoError(t, err)
	ids := []string{hs[0].ID(), hs[1].ID()}
	gate, err := c.EnqueueMany(ctx, hopper.Gate(ids, []*hopper.JobSpec{after.Job(0, nil)}, hopper.AllSuccess(), 0))
	require.NoError(t, err)
	for i, h := range hs {
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, []int{10, 20}[i], v, "the result is CompleteTx's, not the handler's return")
	}
	g, err := c.GroupWait(ctx, gate[0].ID())
	require.NoError(t, err)
	require.True(t, g.Settled, "the gate fired and its job ran")

	// A fan-out of three: the group's value folds every transfer.
	sh, err := split.Enqueue(ctx, c, 3, nil)
	require.NoError(t, err)
	gv, err := c.GroupWait(ctx, sh.ID())
	require.NoError(t, err)
	sum, err := hopper.GroupDecode[int](gv)
	require.NoError(t, err)
	require.Equal(t, 30, sum)

	require.EqualValues(t, 5, calls.Load(), "every transfer ran once")
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	bal, err := db.int(ctx, `SELECT balance FROM %[1]saccounts WHERE id = $1`, "bob")
	require.NoError(t, err)
	require.Equal(t, 60, bal)

	moved := append(ids, sh.ID()+"-move-0", sh.ID()+"-move-1", sh.ID()+"-move-2")
	for _, id := range moved {
		// A success is seen in the store once its transaction commits; its
		// event follows when the handler has returned.
		await(t, "the success event of "+id, func() bool {
			return slices.Contains(events.attempts(id), "succeeded/1")
		}, onEvents(t, c))
		require.Equal(t, []string{"started/1", "succeeded/1"}, slices.DeleteFunc(events.attempts(id), func(s string) bool { return s == "queued/0" }),
			"job %s: one start, one success", id)
		row, err := c.JobGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, hopper.StateSucceeded, row.State)
		require.Empty(t, row.Worker, "the lease is released")
		chs, err := d.Executor().ChangeList(ctx, &driver.ChangeListParams{EntityID: id, Limit: 10})
		require.NoError(t, err)
		var states []string
		for _, ch := range chs {
			states = append(states, ch.State)
		}
		require.Equal(t, []string{"pending", "running", "succeeded"}, states, "job %s's changes", id)
		mu.Lock()
		require.True(t, seenInCommit[id], "the InCommit observer saw %s succeed", id)
		mu.Unlock()
	}
}

// TestCompleteTxRolledBack: a transaction that completed the job and then
// rolled back leaves neither the writes nor the success: the job ends as
// its handler returns, and a handler may try its transaction again.
func TestCompleteTxRolledBack(t *testing.T) { forEachTxDriver(t, testCompleteTxRolledBack) }

func testCompleteTxRolledBack(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.createBank(ctx, map[string]int{"alice": 100, "bob": 0}))
	var tries atomic.Int32
	// mode: "return" rolls back and returns 7; "again" rolls back the
	// first transaction and commits a second; "fail" rolls back and fails.
	move := hopper.Define("move", func(ctx context.Context, mode string) (int, error) {
		job := hopper.JobFromContext(ctx)
		for try := 1; ; try++ {
			tries.Add(1)
			tx, err := db.begin(ctx)
			if err != nil {
				return 0, err
			}
			if err := transfer(ctx, tx, job.ID(), Transfer{"alice", "bob", 10}); err != nil {
				_ = tx.rollback(ctx)
				return 0, err
			}
			if err := hopper.CompleteTx(ctx, tx.tx, 100+try); err != nil {
				return 0, err
			}
			switch {
			case mode == "again" && try == 1:
				require.NoError(t, tx.rollback(ctx))
				continue
			case mode == "again":
				return 0, tx.commit(ctx)
			case mode == "fail" && job.Attempt() == 1:
				require.NoError(t, tx.rollback(ctx))
				return 0, errors.New("rolled back")
			case mode == "fail":
				return 0, tx.commit(ctx)
			}
			require.NoError(t, tx.rollback(ctx))
			return 7, nil
		}
	}, &hopper.TypeOpts[string]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})
	c := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(move))

	h, err := move.Enqueue(ctx, c, "return", nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v, "rolled back: the handler's return is the outcome")
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]sledger WHERE job_id = $1`, h.ID())
	require.NoError(t, err)
	require.Zero(t, n)

	h, err = move.Enqueue(ctx, c, "again", nil)
	require.NoError(t, err)
	v, err = h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 102, v, "the second transaction's completion committed")

	h, err = move.Enqueue(ctx, c, "fail", nil)
	require.NoError(t, err)
	v, err = h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 101, v, "the failed attempt was retried, and its retry committed")
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 2, row.Attempt)

	n, err = db.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Equal(t, 2, n, "only the committed transfers")
	bal, err := db.int(ctx, `SELECT balance FROM %[1]saccounts WHERE id = $1`, "bob")
	require.NoError(t, err)
	require.Equal(t, 20, bal)
}

// TestCompleteTxLeaseLost: a worker stalls past its lease; the job is
// rescued and finished elsewhere. When the stalled worker goes on, its
// CompleteTx fails with ErrLeaseLost and rolls its transaction back: its
// effect never commits, even when it tries to commit anyway.
func TestCompleteTxLeaseLost(t *testing.T) { forEachTxDriver(t, testCompleteTxLeaseLost) }

func testCompleteTxLeaseLost(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.exec(ctx, `CREATE TABLE %[1]seffects (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, PRIMARY KEY (job_id, attempt))`))
	effect := func(ctx context.Context) (int, error) {
		job := hopper.JobFromContext(ctx)
		tx, err := db.begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.rollback(ctx) //nolint:errcheck // a no-op after the commit
		if err := tx.exec(ctx, `INSERT INTO %[1]seffects (job_id, attempt) VALUES ($1, $2)`, job.ID(), job.Attempt()); err != nil {
			return 0, err
		}
		if err := hopper.CompleteTx(ctx, tx.tx, job.Attempt()); err != nil {
			// A careless handler commits all the same: the transaction
			// was rolled back, so it cannot.
			return 0, errors.Join(err, tx.commit(ctx))
		}
		return 0, tx.commit(ctx)
	}

	// Worker A's clock never moves, so it never heartbeats: it is stalled.
	clkA := hoppertest.NewClock(time.Time{})
	stalled := make(chan struct{})
	released := make(chan struct{})
	lateErr := make(chan error, 1)
	jobA := hopper.Define("work", func(ctx context.Context, _ int) (int, error) {
		close(stalled)
		<-released
		v, err := effect(ctx)
		lateErr <- err
		return v, err
	}, nil)
	a, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkA, WorkerID: "A", MaxWorkers: 1})
	require.NoError(t, a.Register(jobA))
	h, err := jobA.Enqueue(ctx, a, 0, nil)
	require.NoError(t, err)
	<-stalled

	// Worker B lives a minute later: it rescues the job and completes it.
	clkB := hoppertest.NewClock(clkA.Now().Add(time.Minute))
	jobB := hopper.Define("work", func(ctx context.Context, _ int) (int, error) { return effect(ctx) },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Second, Jitter: hopper.NoJitter}})
	events := newEventLog()
	b, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkB, WorkerID: "B", OnEvent: events.hook})
	require.NoError(t, b.Register(jobB))
	rescueBy(t, b, events, clkB, h.ID())

	close(released)
	err = <-lateErr
	require.ErrorIs(t, err, hopper.ErrLeaseLost)
	require.NoError(t, a.Stop(ctx))
	row := jobState(t, d, h.ID())
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Equal(t, 2, row.Attempt)
	require.JSONEq(t, `2`, string(row.Result), "B's completion stands")
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]seffects WHERE job_id = $1`, h.ID())
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the rescuer's effect committed")
	n, err = db.int(ctx, `SELECT count(*) FROM %[1]seffects WHERE job_id = $1 AND attempt = 1`, h.ID())
	require.NoError(t, err)
	require.Zero(t, n, "the worker that lost its lease committed nothing")
}

// TestCompleteTxRefused: CompleteTx refuses, writing nothing, outside a
// handler, with a nil transaction, one of another kind, or an output of
// another type, and Spawn is refused after it; the memory store refuses
// with ErrTxUnsupported.
func TestCompleteTxRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	require.ErrorIs(t, hopper.CompleteTx(ctx, struct{}{}, 1), hopper.ErrInvalidInput, "outside a handler")

	// Each subtest has its own context: a parallel subtest may wait for
	// its turn long after this function returned.
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		errs := make(chan error, 1)
		job := hopper.Define("job", func(ctx context.Context, _ int) (int, error) {
			errs <- hopper.CompleteTx(ctx, struct{}{}, 1)
			return 1, nil
		}, nil)
		c := newClient(t, hopper.Config{Driver: memdriver.New()})
		require.NoError(t, c.Register(job))
		h, err := job.Enqueue(ctx, c, 0, nil)
		require.NoError(t, err)
		err = <-errs
		require.ErrorIs(t, err, hopper.ErrTxUnsupported)
		require.ErrorIs(t, err, driver.ErrNotImplemented)
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, v, "the job ends as its handler returns")
	})

	for _, dc := range txDrivers() {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			d := dc.open(t)
			db := newAppDB(d)
			errs := make(chan error, 8)
			var job *hopper.Type[int, int]
			job = hopper.Define("job", func(ctx context.Context, n int) (int, error) {
				if n > 0 {
					return n, nil
				}
				errs <- hopper.CompleteTx(ctx, nil, 1)
				errs <- hopper.CompleteTx(ctx, "not a tx", 1)
				tx, err := db.begin(ctx)
				if err != nil {
					return 0, err
				}
				errs <- hopper.CompleteTx(ctx, tx.tx, "one")
				errs <- hopper.CompleteTx(ctx, tx.tx, 2)
				errs <- hopper.CompleteTx(ctx, tx.tx, 3)
				errs <- hopper.JobFromContext(ctx).Spawn(job.Job(1, nil))
				errs <- tx.commit(ctx)
				return 1, nil
			}, nil)
			c := newClient(t, hopper.Config{Driver: d})
			require.NoError(t, c.Register(job))
			h, err := job.Enqueue(ctx, c, 0, nil)
			require.NoError(t, err)
			require.ErrorIs(t, <-errs, hopper.ErrInvalidInput, "a nil transaction")
			require.ErrorIs(t, <-errs, driver.ErrTxType, "not a transaction")
			require.ErrorIs(t, <-errs, hopper.ErrInvalidInput, "an output of another type")
			require.NoError(t, <-errs, "the refused calls left the transaction usable")
			require.ErrorIs(t, <-errs, hopper.ErrInvalidInput, "a second completion in the transaction")
			require.ErrorIs(t, <-errs, hopper.ErrInvalidInput, "a spawn after the completion")
			require.NoError(t, <-errs)
			v, err := h.Result(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, v)
			g, err := c.GroupGet(ctx, h.ID())
			require.NoError(t, err)
			require.True(t, g.Settled, "no child joined the job's group")
		})
	}
}

// TestCompleteTxVetoed: an InCommit observer that refuses the success
// written in the handler's transaction fails CompleteTx with ErrVetoed and
// rolls the transaction back; the job runs again.
func TestCompleteTxVetoed(t *testing.T) { forEachTxDriver(t, testCompleteTxVetoed) }

func testCompleteTxVetoed(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	require.NoError(t, db.createBank(ctx, map[string]int{"alice": 100, "bob": 0}))
	errs := make(chan error, 2)
	move := hopper.Define("move", func(ctx context.Context, in Transfer) (int, error) {
		tx, err := db.begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.rollback(ctx) //nolint:errcheck // a no-op after the commit
		if err := transfer(ctx, tx, fmt.Sprint(hopper.JobFromContext(ctx).ID(), "/", hopper.JobFromContext(ctx).Attempt()), in); err != nil {
			return 0, err
		}
		err = hopper.CompleteTx(ctx, tx.tx, in.Amount)
		errs <- err
		if err != nil {
			return 0, err
		}
		return 0, tx.commit(ctx)
	}, &hopper.TypeOpts[Transfer]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})
	var vetoed atomic.Bool
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Observe("veto-once", hopper.InCommit, hopper.ChangeFilter{Types: []string{"move"}, States: []string{"succeeded"}},
		func(context.Context, hopper.Change) error {
			if vetoed.CompareAndSwap(false, true) {
				return errors.New("not now")
			}
			return nil
		}))
	require.NoError(t, c.Register(move))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(sctx))
	})
	h, err := move.Enqueue(ctx, c, Transfer{"alice", "bob", 10}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, <-errs, hopper.ErrVetoed)
	require.NoError(t, <-errs)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, v)
	n, err := db.int(ctx, `SELECT count(*) FROM %[1]sledger`)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the vetoed attempt's transfer was rolled back")
	n, err = db.int(ctx, `SELECT count(*) FROM %[1]sledger WHERE job_id = $1`, h.ID()+"/2")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the second attempt's transfer committed")
}

// TestWaitOfACompleteTxRescuedMeanwhile: a handler's CompleteTx went
// through but its transaction rolled back, and while the handler still
// runs, another process rescues the job (its lease lapsed) for a retry. A
// wait that begins then finds the job executing here and does not read
// it; the end of the attempt here (nothing to record: the job moved on)
// wakes it, and it reads the job and waits on for the retry, which the
// other process completes.
func TestWaitOfACompleteTxRescuedMeanwhile(t *testing.T) {
	forEachTxDriver(t, testWaitOfACompleteTxRescuedMeanwhile)
}

func testWaitOfACompleteTxRescuedMeanwhile(t *testing.T, d driver.Driver) {
	ctx := testCtx(t)
	db := newAppDB(d)
	// Worker A's clock never moves, so it never heartbeats.
	clkA := hoppertest.NewClock(time.Time{})
	rolledBack, released := make(chan struct{}), make(chan struct{})
	jobA := hopper.Define("work", func(ctx context.Context, _ int) (int, error) {
		tx, err := db.begin(ctx)
		if err != nil {
			return 0, err
		}
		if err := hopper.CompleteTx(ctx, tx.tx, 1); err != nil {
			return 0, errors.Join(err, tx.rollback(ctx))
		}
		if err := tx.rollback(ctx); err != nil {
			return 0, err
		}
		close(rolledBack)
		<-released
		return 0, nil
	}, nil)
	a, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkA, WorkerID: "A", MaxWorkers: 1, WaitPollInterval: time.Hour})
	require.NoError(t, a.Register(jobA))
	h, err := jobA.Enqueue(ctx, a, 0, nil)
	require.NoError(t, err)
	<-rolledBack

	// Worker B lives a minute later: it rescues the job for a retry.
	clkB := hoppertest.NewClock(clkA.Now().Add(time.Minute))
	jobB := hopper.Define("work", func(ctx context.Context, _ int) (int, error) { return 2, nil },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Second, Jitter: hopper.NoJitter}})
	events := newEventLog()
	b, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clkB, WorkerID: "B", OnEvent: events.hook})
	require.NoError(t, b.Register(jobB))
	rescued := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventFailed })
	require.True(t, rescued.WillRetry)

	w := waitAside(t, ctx, a, h.ID(), h.Wait)
	w.blocked("the wait never blocked")
	close(released)
	// Woken by the attempt's end here, the wait reads the job, finds it
	// waiting for its retry, and blocks again: before B runs it.
	w.blocked("the wait was not woken by the end of the attempt here")
	retryAt(t, clkB, rescued.RunAt)
	row, err := w.outcome()
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Equal(t, 2, row.Attempt)
}
