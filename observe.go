package hopper

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

// Change is one committed state transition of a job, gate or workflow run,
// from the store's change feed: written in the transition's own
// transaction, so a change exists exactly when its transition does.
type Change = hoppertype.Change

// ChangeKind says what a change is about: a job, a gate or a run.
type ChangeKind = hoppertype.ChangeKind

// ChangeCursor is a position in the change feed's delivery order.
type ChangeCursor = hoppertype.ChangeCursor

// Change kinds.
const (
	ChangeJob  = hoppertype.ChangeJob
	ChangeGate = hoppertype.ChangeGate
	ChangeRun  = hoppertype.ChangeRun
)

// ObserverPhase says when an observer sees a change: inside the
// transition's transaction or after it committed.
type ObserverPhase int

const (
	// InCommit observers (phase 1) run inside the transaction of the
	// transition, after its writes and before its commit. They may add
	// writes to it (CommitFromContext) or veto it by returning an error:
	// the transition then fails as a whole, as if it had never been tried,
	// and its caller gets an error matching ErrVetoed. Their own writes are
	// not shown to InCommit observers again (no re-entry); AfterCommit
	// observers see them. They see every transition the engine makes
	// through the client they are registered on — inserts, claims,
	// finishes, rescues, cancels, retries, wake-ups — but not the jobs a
	// caller inserts through its own transaction (EnqueueTx), and not the
	// transitions other processes make. Keep them quick: the transaction
	// (and on SQLite, every writer) waits for them. While a client has
	// InCommit observers, the transitions a store makes in one statement
	// (claims, single finishes, appends) run in a transaction of their own
	// so the observers can see them, and each finished attempt gets a
	// savepoint of its own so a veto undoes it alone: throughput is lower.
	InCommit ObserverPhase = 1
	// AfterCommit observers (phase 2) receive each committed change at least
	// once, in the feed's order (so in order for each entity), from whichever
	// process holds the observer name's cursor: delivery is tracked by a
	// durable cursor per name, so a restarted process resumes where the
	// last delivery stopped, and two processes never deliver a change to the
	// same name at once in the normal case. A change is delivered again only
	// after a crash or a stall longer than the cursor's lease (Visibility)
	// between delivering it and recording that. A failing delivery is
	// retried, with backoff, before any later change is delivered; it never
	// touches the change. Changes are kept as long as their jobs
	// (Config.Retention): an observer that falls behind by more than that
	// misses the changes of the jobs deleted meanwhile.
	AfterCommit ObserverPhase = 2
)

// String returns "in-commit" or "after-commit".
func (p ObserverPhase) String() string {
	switch p {
	case InCommit:
		return "in-commit"
	case AfterCommit:
		return "after-commit"
	}
	return fmt.Sprintf("ObserverPhase(%d)", int(p))
}

// ChangeFilter selects the changes an observer receives. Empty fields do
// not filter.
type ChangeFilter struct {
	Kinds []ChangeKind
	// Types are job types or workflow names.
	Types []string
	// States keeps changes into one of these states (job states or run
	// statuses).
	States []string
}

// Match reports whether ch passes the filter.
func (f ChangeFilter) Match(ch *Change) bool { return f.scan().MatchChange(ch) }

// scan is the filter as the store applies it.
func (f ChangeFilter) scan() *driver.ChangeScanParams {
	return &driver.ChangeScanParams{Kinds: f.Kinds, Types: f.Types, States: f.States}
}

// ObserverFunc reacts to a change. For an InCommit observer an error vetoes
// the transition; for an AfterCommit observer it asks for the change again
// later.
type ObserverFunc func(ctx context.Context, ch Change) error

// ErrVetoed matches the error of a transition that an InCommit observer
// refused.
var ErrVetoed = errors.New("hopper: vetoed by an observer")

// observer is one registered observer.
type observer struct {
	name   string
	phase  ObserverPhase
	filter ChangeFilter
	fn     ObserverFunc
	// gap is the least time between two reads of the feed that commits
	// nudge (AfterCommit).
	gap time.Duration
}

// nudgeGap is an AfterCommit observer's least time between two reads that
// commits nudge: nudges come with every commit, and under load a read per
// commit would cost the store more than the work it observes.
const nudgeGap = 5 * time.Millisecond

// Observe registers an observer under a name that is unique in the client
// (and, for AfterCommit observers, means the same observer in every process
// sharing the store: its cursor is stored under the name). A new name starts
// at the oldest change the store still holds (changes go with their jobs,
// by retention). Register observers before Start and before the client is
// used; Observe on a started client is an error.
func (c *Client) Observe(name string, phase ObserverPhase, filter ChangeFilter, fn ObserverFunc) error {
	return c.observe(&observer{name: name, phase: phase, filter: filter, fn: fn, gap: nudgeGap})
}

// observe registers o (Observe's checks and all).
func (c *Client) observe(o *observer) error {
	name, phase := o.name, o.phase
	if name == "" || o.fn == nil {
		return fmt.Errorf("%w: an observer needs a name and a function", ErrInvalidInput)
	}
	if phase != InCommit && phase != AfterCommit {
		return fmt.Errorf("%w: unknown observer phase %d", ErrInvalidInput, int(phase))
	}
	for _, err := range []error{checkText("observer name", name), checkTexts("observer kind filter", o.filter.Kinds),
		checkTexts("observer type filter", o.filter.Types), checkTexts("observer state filter", o.filter.States)} {
		if err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt != nil {
		return fmt.Errorf("%w: register observer %q before Start", ErrInvalidInput, name)
	}
	all := slices.Concat(c.inCommit(), c.afterCommit)
	if slices.ContainsFunc(all, func(o *observer) bool { return o.name == name }) {
		return fmt.Errorf("%w: observer %q is registered already", ErrInvalidInput, name)
	}
	if phase == AfterCommit {
		c.afterCommit = append(c.afterCommit, o)
		return nil
	}
	list := append(slices.Clone(c.inCommit()), o)
	c.inCommitObs.Store(&list)
	if _, wrapped := c.drv.(*observedDriver); !wrapped {
		c.drv = &observedDriver{Executor: c.drv, c: c}
	}
	return nil
}

func (c *Client) inCommit() []*observer {
	if p := c.inCommitObs.Load(); p != nil {
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
	c *Client
}

// commitState tracks, for one transaction, the last change position
// already shown to observers (or written by them).
type commitState struct{ last int64 }

// observedTx is a transaction's executor whose nested scopes run observers.
type observedTx struct {
	driver.Executor
	c  *Client
	st *commitState
}

func (d *observedDriver) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.Executor.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		mark, err := tx.ChangeMark(ctx)
		if err != nil {
			return err
		}
		w := &observedTx{Executor: tx, c: d.c, st: &commitState{last: mark}}
		if err := fn(ctx, w); err != nil {
			return err
		}
		return d.c.runInCommit(ctx, w)
	})
}

func (t *observedTx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	// What the enclosing scope wrote so far is its own: show it before the
	// nested scope begins, so that a veto there is not charged to it.
	if err := t.c.runInCommit(ctx, t); err != nil {
		return err
	}
	saved := t.st.last
	err := t.Executor.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		w := &observedTx{Executor: tx, c: t.c, st: t.st}
		if err := fn(ctx, w); err != nil {
			return err
		}
		return t.c.runInCommit(ctx, w)
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
		if err == nil || try == 2 || ctx.Err() != nil || errors.Is(err, ErrVetoed) {
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

func (d *observedDriver) RunInsert(ctx context.Context, row *hoppertype.RunRow) error {
	return d.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return tx.RunInsert(ctx, row) })
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

func (d *observedDriver) RunEventAppendMany(ctx context.Context, p []*driver.RunEventAppendParams) ([]error, error) {
	return inTx(ctx, d, func(ctx context.Context, tx driver.Executor) ([]error, error) { return tx.RunEventAppendMany(ctx, p) })
}

// Unwrap returns the driver the observers wrap.
func (d *observedDriver) Unwrap() driver.Executor { return d.Executor }

// commitKey carries a Commit in an InCommit observer's context.
type commitKey struct{}

// Commit is the transaction of the transition an InCommit observer is
// called in: what is written through it commits or rolls back with the
// transition.
type Commit struct {
	c  *Client
	tx driver.Executor
}

// CommitFromContext returns the transaction an InCommit observer runs in,
// or nil outside one.
func CommitFromContext(ctx context.Context) *Commit {
	m, _ := ctx.Value(commitKey{}).(*Commit)
	return m
}

// Executor returns the store's transaction, for writes of the store's own
// kinds (see package driver).
func (m *Commit) Executor() driver.Executor { return m.tx }

// Enqueue inserts jobs in the transition's transaction: they exist only if
// it commits. Their queued events are not emitted (AfterCommit observers
// see their changes).
func (m *Commit) Enqueue(ctx context.Context, specs ...*JobSpec) error {
	if len(specs) == 0 {
		return nil
	}
	now := m.c.now()
	rows := make([]*hoppertype.JobRow, len(specs))
	for i, s := range specs {
		row, err := m.c.buildRow(s, now)
		if err != nil {
			return err
		}
		rows[i] = row
	}
	res, err := m.tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
	if err != nil {
		return fmt.Errorf("hopper: enqueue in commit: %w", err)
	}
	if err := m.c.insertGates(ctx, m.tx, res); err != nil {
		return fmt.Errorf("hopper: enqueue in commit: %w", err)
	}
	return notifyQueues(ctx, m.tx, res)
}

// ownChangesPage is how many of a transaction's changes one read lists.
const ownChangesPage = 1000

// ownChanges lists the changes tx wrote after its last shown position and
// moves that position past them.
func ownChanges(ctx context.Context, tx *observedTx) ([]*Change, error) {
	var out []*Change
	for {
		page, err := tx.Executor.ChangeList(ctx, &driver.ChangeListParams{Own: true, After: ChangeCursor{Position: tx.st.last}, Limit: ownChangesPage})
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
func (c *Client) runInCommit(ctx context.Context, tx *observedTx) error {
	obs := c.inCommit()
	if len(obs) == 0 {
		return nil
	}
	chs, err := ownChanges(ctx, tx)
	if err != nil {
		return err
	}
	octx := context.WithValue(ctx, commitKey{}, &Commit{c: c, tx: tx.Executor})
	called := false
	for _, ch := range chs {
		for _, o := range obs {
			if !o.filter.Match(ch) {
				continue
			}
			called = true
			if err := callObserver(octx, o, ch); err != nil {
				return fmt.Errorf("%w: observer %q refused %s %s (%s to %s): %w", ErrVetoed, o.name, ch.Kind, ch.EntityID, orNew(ch.Prev), ch.State, err)
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
func callObserver(ctx context.Context, o *observer, ch *Change) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("observer %q panicked: %v\n%s", o.name, p, debug.Stack())
		}
	}()
	return o.fn(ctx, *ch)
}

// ChangeList returns up to limit (1 to 1000) changes of the feed after the
// cursor, in delivery order: changes no transaction can precede any more
// (see "Change feed" in package driver). Pass the last one's cursor
// (hoppertype.CursorOf) to read on. It is the feed as a poll; observers
// are the feed as a push.
func (c *Client) ChangeList(ctx context.Context, after ChangeCursor, limit int) ([]*Change, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d (use 1 to 1000)", ErrInvalidInput, limit)
	}
	if after.Tx < 0 || after.Position < 0 {
		return nil, fmt.Errorf("%w: a change cursor with a negative part (%d, %d)", ErrInvalidInput, after.Tx, after.Position)
	}
	chs, err := c.drv.ChangeList(ctx, &driver.ChangeListParams{After: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("hopper: read changes: %w", err)
	}
	return chs, nil
}

// ChangeTail returns the cursor of the feed's last change: Changes after it
// are the changes made from now on.
func (c *Client) ChangeTail(ctx context.Context) (ChangeCursor, error) {
	cur, err := c.drv.ChangeTail(ctx)
	if err != nil {
		return ChangeCursor{}, fmt.Errorf("hopper: read changes: %w", err)
	}
	return cur, nil
}

// ObserverList returns the feed cursors of the AfterCommit observers known to
// the store (in any process): name, position, and who delivers them.
func (c *Client) ObserverList(ctx context.Context) ([]*driver.CursorRow, error) {
	rows, err := c.drv.CursorList(ctx)
	if err != nil {
		return nil, fmt.Errorf("hopper: list observers: %w", err)
	}
	return rows, nil
}
