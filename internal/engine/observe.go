package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// ObserverPhase says when an observer sees a change.
type ObserverPhase int

// Observer phases (see hopper.InCommit and hopper.AfterCommit).
const (
	InCommit    ObserverPhase = 1
	AfterCommit ObserverPhase = 2
)

// Observer is one registered observer.
type Observer struct {
	Name   string
	Phase  ObserverPhase
	Filter *driver.ChangeScanParams
	Fn     func(ctx context.Context, ch hoppertype.Change) error
	// Gap is the least time between two reads of the feed that commits
	// nudge (AfterCommit; 0: NudgeGap).
	Gap time.Duration
}

// NudgeGap is an AfterCommit observer's least time between two reads that
// commits nudge: nudges come with every commit, and under load a read per
// commit would cost the store more than the work it observes.
const NudgeGap = 5 * time.Millisecond

// Observe registers o. Observers are registered before Start; a name is
// registered once.
func (e *Engine) Observe(o *Observer) error {
	name, phase := o.Name, o.Phase
	if name == "" || o.Fn == nil {
		return fmt.Errorf("%w: an observer needs a name and a function", hoppertype.ErrInvalidInput)
	}
	if phase != InCommit && phase != AfterCommit {
		return fmt.Errorf("%w: unknown observer phase %d", hoppertype.ErrInvalidInput, int(phase))
	}
	if o.Filter == nil {
		o.Filter = &driver.ChangeScanParams{}
	}
	if o.Gap <= 0 {
		o.Gap = NudgeGap
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.s != nil {
		return fmt.Errorf("%w: register observer %q before Start", hoppertype.ErrInvalidInput, name)
	}
	all := slices.Concat(e.inCommit(), e.afterCommit)
	if slices.ContainsFunc(all, func(o *Observer) bool { return o.Name == name }) {
		return fmt.Errorf("%w: observer %q is registered already", hoppertype.ErrInvalidInput, name)
	}
	if phase == AfterCommit {
		e.afterCommit = append(e.afterCommit, o)
		return nil
	}
	list := append(slices.Clone(e.inCommit()), o)
	e.inCommitObs.Store(&list)
	if _, wrapped := e.drv.(*observedDriver); !wrapped {
		e.drv = &observedDriver{Executor: e.drv, e: e}
	}
	return nil
}

func (e *Engine) inCommit() []*Observer {
	if p := e.inCommitObs.Load(); p != nil {
		return *p
	}
	return nil
}

// observedDriver is the driver's Executor with the InCommit observers: it
// runs them at the end of every transaction and of every nested scope made
// through it, a scope's own changes listed after its writes and shown to
// the observers in its transaction. Transitions the engine makes in one
// driver call run in a transaction of their own for the purpose.
type observedDriver struct {
	driver.Executor
	e *Engine
}

// commitState tracks, for one transaction, the last change position
// already shown to observers (or written by them).
type commitState struct{ last int64 }

// observedTx is a transaction's executor whose nested scopes run observers.
type observedTx struct {
	driver.Executor
	e  *Engine
	st *commitState
}

func (d *observedDriver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.Executor.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		mark, err := tx.ChangeMark(ctx, &driver.ChangeMarkParams{})
		if err != nil {
			return err
		}
		w := &observedTx{Executor: tx, e: d.e, st: &commitState{last: mark}}
		if err := fn(ctx, w); err != nil {
			return err
		}
		return d.e.runInCommit(ctx, w)
	})
}

func (t *observedTx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	// What the enclosing scope wrote so far is its own: show it before the
	// nested scope begins, so that a veto there is not charged to it.
	if err := t.e.runInCommit(ctx, t); err != nil {
		return err
	}
	saved := t.st.last
	err := t.Executor.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		w := &observedTx{Executor: tx, e: t.e, st: t.st}
		if err := fn(ctx, w); err != nil {
			return err
		}
		return t.e.runInCommit(ctx, w)
	})
	if err != nil {
		// The scope's changes are gone; positions after saved may be
		// handed out again.
		t.st.last = saved
	}
	return err
}

// inTx runs one driver call in a transaction of its own so that its
// changes meet the InCommit observers.
func inTx[T any](ctx context.Context, d *observedDriver, fn func(ctx context.Context, tx driver.Executor) (T, error)) (T, error) {
	var out T
	err := d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		var err error
		out, err = fn(ctx, tx)
		return err
	})
	return out, err
}

func (d *observedDriver) JobInsertMany(ctx context.Context, p *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]driver.JobInsertResult, error) {
		return tx.JobInsertMany(ctx, p)
	})
}

// JobClaim runs the claim in a transaction, for the observers. Its caller
// (the producer) sees a claim through once begun, within its deadline.
func (d *observedDriver) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]*hoppertype.JobRow, error) {
		return tx.JobClaim(ctx, p)
	})
}

func (d *observedDriver) JobPromote(ctx context.Context, p *driver.JobPromoteParams) (int, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) (int, error) { return tx.JobPromote(ctx, p) })
}

func (d *observedDriver) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	if p.Message == "" {
		return d.Executor.JobHeartbeat(ctx, p) // writes no change
	}
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]driver.JobHeartbeatResult, error) {
		return tx.JobHeartbeat(ctx, p)
	})
}

func (d *observedDriver) JobFinishMany(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]driver.JobFinishResult, error) {
		return tx.JobFinishMany(ctx, p)
	})
}

func (d *observedDriver) JobCancel(ctx context.Context, p *driver.JobCancelParams) (*hoppertype.JobRow, error) {
	var row *hoppertype.JobRow
	var cerr error
	err := d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		row, cerr = tx.JobCancel(ctx, p)
		if errors.Is(cerr, hoppertype.ErrStateConflict) {
			return nil // nothing changed; the conflict is the answer
		}
		return cerr
	})
	if err != nil {
		return row, err
	}
	return row, cerr
}

func (d *observedDriver) JobRetry(ctx context.Context, p *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	for try := 0; ; try++ {
		res, err := inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]driver.JobRetryResult, error) {
			return tx.JobRetry(ctx, p)
		})
		// A store may refuse a move when a job took a unique key between its
		// checks and the move (outside a transaction it tries again itself).
		if err == nil || try == 2 || ctx.Err() != nil || errors.Is(err, hoppertype.ErrVetoed) {
			return res, err
		}
	}
}

func (d *observedDriver) JobWake(ctx context.Context, p *driver.JobWakeParams) ([]*hoppertype.JobRow, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]*hoppertype.JobRow, error) { return tx.JobWake(ctx, p) })
}

func (d *observedDriver) GateInsert(ctx context.Context, p *driver.GateInsertParams) ([]*hoppertype.GateRow, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]*hoppertype.GateRow, error) {
		return tx.GateInsert(ctx, p)
	})
}

func (d *observedDriver) GateObserve(ctx context.Context, p *driver.GateObserveParams) error {
	return d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return tx.GateObserve(ctx, p) })
}

func (d *observedDriver) RunInsert(ctx context.Context, p *driver.RunInsertParams) error {
	return d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return tx.RunInsert(ctx, p) })
}

func (d *observedDriver) RunStart(ctx context.Context, p *driver.RunStartParams) (bool, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) (bool, error) { return tx.RunStart(ctx, p) })
}

func (d *observedDriver) RunUpdate(ctx context.Context, p *driver.RunUpdateParams) (*hoppertype.RunRow, error) {
	var row *hoppertype.RunRow
	var uerr error
	err := d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		row, uerr = tx.RunUpdate(ctx, p)
		if errors.Is(uerr, hoppertype.ErrStateConflict) {
			return nil
		}
		return uerr
	})
	if err != nil {
		return row, err
	}
	return row, uerr
}

func (d *observedDriver) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	return d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return tx.RunEventAppend(ctx, p) })
}

func (d *observedDriver) RunEventAppendMany(ctx context.Context, p *driver.RunEventAppendManyParams) ([]error, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]error, error) { return tx.RunEventAppendMany(ctx, p) })
}

// Unwrap returns the driver the observers wrap.
func (d *observedDriver) Unwrap() driver.Executor { return d.Executor }

// ownChangesPage is how many of a transaction's changes one read lists.
const ownChangesPage = 1000

// ownChanges lists the changes tx wrote after its last shown position and
// moves that position past them.
func ownChanges(ctx context.Context, tx *observedTx) ([]*hoppertype.Change, error) {
	var out []*hoppertype.Change
	for {
		page, err := tx.Executor.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: hoppertype.ChangeCursor{Position: tx.st.last}, Limit: ownChangesPage})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) > 0 {
			tx.st.last = page[len(page)-1].Position
		}
		if len(page) < ownChangesPage {
			return out, nil
		}
	}
}

// runInCommit shows the changes a scope wrote to the InCommit observers, in
// order, inside its transaction; the first error vetoes the scope.
func (e *Engine) runInCommit(ctx context.Context, tx *observedTx) error {
	obs := e.inCommit()
	if len(obs) == 0 {
		return nil
	}
	chs, err := ownChanges(ctx, tx)
	if err != nil {
		return err
	}
	octx := ctx
	if h := e.cfg.Hooks.CommitContext; h != nil {
		octx = h(ctx, tx.Executor)
	}
	called := false
	for _, ch := range chs {
		for _, o := range obs {
			if !o.Filter.MatchChange(ch) {
				continue
			}
			called = true
			if err := callObserver(octx, o, ch); err != nil {
				return fmt.Errorf("%w: observer %q refused %s %s (%s to %s): %w", hoppertype.ErrVetoed, o.Name, ch.Kind, ch.EntityID, orNew(ch.Prev), ch.State, err)
			}
		}
	}
	if called {
		// What the observers wrote is not shown to them again.
		if _, err := ownChanges(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

func orNew(prev string) string {
	if prev == "" {
		return "new"
	}
	return prev
}

// callObserver calls an observer, turning a panic into an error.
func callObserver(ctx context.Context, o *Observer, ch *hoppertype.Change) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("observer %q panicked: %w\n%s", o.Name, PanicCause(p), debug.Stack())
		}
	}()
	return o.Fn(ctx, *ch)
}
