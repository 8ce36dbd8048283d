package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// An application's transaction (driver.TxJoiner) can carry what the engine
// would commit on its own: an attempt's success (Attempt.CompleteTx) or a
// workflow step's record (RunState.InAppTx), so that the application's
// writes and hopper's commit together. The engine's writes in it are the
// completer's, fenced by the lease as the completer's are, and its
// in-commit observers run in it; its notifications are delivered with the
// commit, or sent by the engine once it knows the transaction committed.

// errTxUnsupported is the error of a store that cannot join an
// application's transaction.
func (e *Engine) errTxUnsupported() error {
	return fmt.Errorf("%w: the %s store (%w)", hoppertype.ErrTxUnsupported, e.base.Name(), driver.ErrNotImplemented)
}

// joiner returns the store's TxJoiner, or errTxUnsupported.
func (e *Engine) joiner() (driver.TxJoiner, error) {
	j, ok := e.base.(driver.TxJoiner)
	if !ok {
		return nil, e.errTxUnsupported()
	}
	return j, nil
}

// inAppTx runs fn on ex, an application transaction's executor, as the
// engine's InTx would run it on a transaction of its own: the in-commit
// observers see what fn wrote, and may veto it.
func (e *Engine) inAppTx(ctx context.Context, ex driver.Executor, fn func(ctx context.Context, tx driver.Executor) error) error {
	if _, observed := e.drv.(*observedDriver); !observed {
		return fn(ctx, ex)
	}
	mark, err := ex.ChangeMark(ctx, &driver.ChangeMarkParams{})
	if err != nil {
		return err
	}
	w := &observedTx{Executor: ex, e: e, st: &commitState{last: mark}}
	if err := fn(ctx, w); err != nil {
		return err
	}
	return e.runInCommit(ctx, w)
}

// InCallerTx runs write, a write through tx, the caller's own transaction
// (a driver.TxInserter method: EnqueueTx, StartTx), as the engine's InTx
// runs a transition: the InCommit observers see its changes inside tx and
// may veto it. It runs in a savepoint of tx, so a veto (or a failed write)
// undoes hopper's writes alone and leaves tx usable. Without InCommit
// observers it is write alone; with them, a store that cannot join tx
// (driver.TxJoiner) refuses, as the observers could not see the write.
func (e *Engine) InCallerTx(ctx context.Context, tx any, write func(ctx context.Context) error) error {
	if _, observed := e.drv.(*observedDriver); !observed {
		return write(ctx)
	}
	j, err := e.joiner()
	if err != nil {
		return err
	}
	atx, err := j.TxJoin(ctx, tx, &driver.TxJoinParams{})
	if err != nil {
		return err
	}
	return atx.Executor.InTx(ctx, func(ctx context.Context, sp driver.Executor) error {
		return e.inAppTx(ctx, sp, func(ctx context.Context, _ driver.Executor) error { return write(ctx) })
	})
}

// sendNotes sends the notifications a store held for the commit of an
// application's transaction (driver.AppTx.Pending) that the application
// committed. They are hints: a failure is reported, and listeners' polls
// make up for it.
func (e *Engine) sendNotes(ctx context.Context, notes []driver.NotifyParams) {
	for i := range notes {
		if err := e.drv.Notify(ctx, &notes[i]); err != nil {
			e.reportError(fmt.Errorf("notify %s after a transaction: %w", notes[i].Topic, err), hoppertype.PhaseCommit)
			return
		}
	}
}

// rollbackAppTx rolls an application's transaction back after hopper's
// part in it failed, so the application's writes cannot commit without
// it. The transaction may have ended already (a failed statement aborts a
// PostgreSQL transaction, a done context rolls a database/sql one back).
// It is seen through whatever happens to ctx, within life (the attempt's
// hard lifetime) and a short budget.
func rollbackAppTx(ctx, life context.Context, atx *driver.AppTx) {
	rctx, cancel := within(ctx, life, shortBudget)
	defer cancel()
	_ = atx.Rollback(rctx)
}

// txFinish is an attempt's success written through an application's
// transaction tx (CompleteTx), until the engine learns whether it
// committed; notes are the notifications the store holds for that commit.
type txFinish struct {
	f     finished
	tx    any
	notes []driver.NotifyParams
}

// CompleteTx writes the attempt's success, with result as the job's
// result, through tx, an open transaction of the application on the store
// (see driver.TxJoiner): everything the completer writes for a success —
// the job's finish, a compare-and-set on its lease, the attempt's record,
// its group's count and value, the children it spawned, the gates watching
// it, the run its end wakes, the change rows and the in-commit observers —
// commits with tx, or not at all. When it fails (the lease was lost, an
// observer vetoed, the store failed), it rolls tx back, so the
// application's writes cannot commit without the job's success, and
// returns the error (hoppertype.ErrLeaseLost for a lost lease).
//
// Once the attempt returns, the engine looks whether tx committed (see
// confirmTx): then the job is done, whatever the handler returned;
// otherwise the attempt ends as its handler says. Call it last before the
// commit, and commit or roll back before the handler returns: while tx
// holds the job's row, the store holds back the engine's writes to it.
func (a *Attempt) CompleteTx(ctx context.Context, tx any, result []byte) error {
	e := a.e
	switch {
	case a.life == nil:
		return fmt.Errorf("%w: complete in a transaction: the attempt does not run in a started client", hoppertype.ErrInvalidInput)
	case isRunJob(a.row):
		return fmt.Errorf("%w: complete in a transaction: a workflow run ends with its function (write through a step's transaction instead)", hoppertype.ErrInvalidInput)
	}
	j, err := e.joiner()
	if err != nil {
		return err
	}
	atx, err := j.TxJoin(ctx, tx, &driver.TxJoinParams{})
	if err != nil {
		return fmt.Errorf("hopper: complete job %s in a transaction: %w", a.row.ID, err)
	}
	a.txMu.Lock()
	defer a.txMu.Unlock()
	if a.tx != nil && sameTx(a.tx.tx, tx) {
		return fmt.Errorf("%w: complete job %s in a transaction: it is completed in this transaction already", hoppertype.ErrInvalidInput, a.row.ID)
	}
	o := decide(a.row, attemptResult{out: result}, nil, e.now(), nil, nil)
	it := finishItem{row: a.row, outcome: o, group: a.groupEffect(), run: a.run, effects: a.effects}
	f := finished{item: &it}
	err = e.inAppTx(ctx, atx.Executor, func(ctx context.Context, tx driver.Executor) error {
		if err := e.finishOwn(ctx, tx, it, &f); err != nil {
			return err
		}
		if f.job == nil {
			return f.err
		}
		out := []finished{f}
		if err := notifyKeyFreed(ctx, tx, out); err != nil {
			return err
		}
		return notifyDone(ctx, tx, out)
	})
	if err != nil {
		rollbackAppTx(ctx, a.HardLife(), atx)
		return fmt.Errorf("hopper: complete job %s in a transaction: %w", a.row.ID, err)
	}
	tf := &txFinish{f: f, tx: tx}
	if atx.Pending != nil {
		tf.notes = atx.Pending()
	}
	a.tx = tf
	return nil
}

// sameTx says whether x and y are the same transaction (a transaction of
// a kind that does not compare is never taken for another).
func sameTx(x, y any) bool {
	t := reflect.TypeOf(x)
	return t != nil && t == reflect.TypeOf(y) && t.Comparable() && x == y
}

// txDone returns the success CompleteTx wrote last, nil if none.
func (a *Attempt) txDone() *txFinish {
	a.txMu.Lock()
	defer a.txMu.Unlock()
	return a.tx
}

// confirmTx ends an attempt that wrote its success through an
// application's transaction (CompleteTx), once its handler returned: it
// reads the job, and when that transaction committed (the job succeeded
// under the attempt's lease) it does what the completer does after a
// commit — notifications, waiters, events, wake-ups — and reports true.
// It reports false when the job still runs under the lease (the
// transaction rolled back): the attempt then ends as its handler returned,
// through the completer, whose compare-and-set would find the job taken
// if the transaction committed after all. A job moved on by another
// (rescued) or gone (retention) reports true: there is nothing left to
// record.
func (s *session) confirmTx(at *Attempt, tf *txFinish) bool {
	e := s.e
	ctx, cancel := call(s.life.hard, shortBudget)
	defer cancel()
	row, err := e.drv.JobGet(ctx, &driver.JobGetParams{ID: at.row.ID})
	switch {
	case err != nil && !errors.Is(err, hoppertype.ErrNotFound):
		e.reportError(fmt.Errorf("read job %s after its transaction: %w", at.row.ID, err), hoppertype.PhaseCommit)
		return false
	case err == nil && row.LeaseToken == at.row.LeaseToken && row.Attempt == at.row.Attempt && row.State == hoppertype.JobStateRunning:
		return false // the completer records the outcome
	}
	// The attempt's outcome is not the completer's to write: it is no
	// longer executing here (before its waiters are woken).
	s.leftHere(at.row)
	if err != nil || row.LeaseToken != at.row.LeaseToken || row.Attempt != at.row.Attempt ||
		row.State != hoppertype.JobStateSucceeded {
		// Gone, another attempt's now, or rescued (the attempt's outcome
		// would lose its lease): nothing to record. A wait that found
		// the job executing here, and so did not read it, reads it now.
		e.waiters.jobDone(at.row.ID)
		return true
	}
	e.sendNotes(ctx, tf.notes)
	e.afterFinish(s.life.hard, tf.f)
	e.progressed()
	return true
}

// InAppTx runs fn in a transaction of the application's kind that the
// store begins (driver.TxJoiner.TxBegin), handing it the transaction as
// the application holds it (a *sql.Tx, a pgx.Tx), and ends the
// transaction by recording one history event of kind and name with the
// data fn returns, fenced by the run's lease: fn's writes and the event
// commit together or not at all, so a replay finds the event exactly when
// fn's writes exist.
//
// An error of fn (fnErr) rolls the transaction back and records nothing:
// the run goes on, and the caller tries fn again or records the failure.
// Any other failure is the run's (err): the store cannot join a
// transaction (an error matching hoppertype.ErrTxUnsupported, the run
// going on); the lease was lost, the store failed, or the commit's outcome
// is unknown (fatal: the execution ends, and the next one replays what
// committed).
func (st *RunState) InAppTx(ctx context.Context, kind, name string, fn func(ctx context.Context, tx any) (EventData, error)) (fnErr, err error) {
	e := st.e
	j, err := e.joiner()
	if err != nil {
		return nil, err
	}
	// The transaction does not end with ctx (a cancel of the run): once
	// fn returned, its writes and its record commit together, within the
	// lease's length. fn itself sees ctx.
	life := st.a.HardLife()
	tctx, cancel := within(ctx, life, 0)
	defer cancel()
	atx, err := j.TxBegin(tctx, &driver.TxBeginParams{})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err(), nil // cancelled: a try that did not run
		}
		return nil, st.Fail(fmt.Errorf("hopper: workflow run %s: begin a transaction for %s %q: %w", st.Run.ID, kind, name, err))
	}
	// Whatever happens (fn may panic), the transaction ends: on SQLite it
	// holds the one write connection. After a commit this is a no-op.
	defer rollbackAppTx(ctx, life, atx)
	fctx := ctx
	if atx.Bind != nil {
		fctx = atx.Bind(ctx) // a write of the client's own in fn fails, not deadlocks
	}
	data, ferr := fn(fctx, atx.Tx)
	if ferr != nil {
		return ferr, nil
	}
	wctx, wcancel := within(ctx, life, e.cfg.Visibility)
	defer wcancel()
	var ev *hoppertype.RunEvent
	err = e.inAppTx(wctx, atx.Executor, func(ctx context.Context, tx driver.Executor) error {
		var err error
		if ev, err = st.Event(kind, name, data); err != nil {
			return err
		}
		return st.AppendEvent(ctx, tx, ev)
	})
	if err != nil {
		return nil, st.Fail(err)
	}
	if err := atx.Commit(wctx); err != nil {
		return nil, st.Fail(fmt.Errorf("hopper: workflow run %s: commit %s %q: %w", st.Run.ID, kind, name, err))
	}
	st.Accept(ev)
	return nil, nil
}
