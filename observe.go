package hopper

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
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
	// ChangeWorker and ChangeSchedule record workers joining and leaving
	// and schedules firing (see hoppertype).
	ChangeWorker   = hoppertype.ChangeWorker
	ChangeSchedule = hoppertype.ChangeSchedule
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
	// finishes, rescues, cancels, retries, wake-ups, and the jobs and runs
	// a caller writes through its own transaction (EnqueueTx, StartTx), in
	// that transaction — but not the transitions other processes make.
	// Keep them quick: the transaction (and on SQLite, every writer) waits
	// for them. While a client has InCommit observers, the transitions a
	// store makes in one statement (claims, single finishes, appends) run in
	// a transaction of their own so the observers can see them, and each
	// finished attempt gets a savepoint of its own so a veto undoes it
	// alone: throughput is lower.
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
	// Kinds keeps changes of these kinds. An observer's filter without
	// kinds keeps jobs', gates' and runs' changes: workers' and
	// schedules' go only to observers that name them.
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
var ErrVetoed = hoppertype.ErrVetoed

// Observe registers an observer under a name that is unique in the client
// (and, for AfterCommit observers, means the same observer in every process
// sharing the store: its cursor is stored under the name). A new name starts
// at the oldest change the store still holds (changes go with their jobs,
// by retention). Register observers before Start and before the client is
// used; Observe on a started client is an error.
func (c *Client) Observe(name string, phase ObserverPhase, filter ChangeFilter, fn ObserverFunc) error {
	return c.observe(name, phase, filter, fn, engine.NudgeGap)
}

// observe registers an observer (Observe's checks and all) whose reads of
// the feed that commits nudge are at least gap apart.
func (c *Client) observe(name string, phase ObserverPhase, filter ChangeFilter, fn ObserverFunc, gap time.Duration) error {
	if name == "" || fn == nil {
		return fmt.Errorf("%w: an observer needs a name and a function", ErrInvalidInput)
	}
	if phase != InCommit && phase != AfterCommit {
		return fmt.Errorf("%w: unknown observer phase %d", ErrInvalidInput, int(phase))
	}
	if len(filter.Kinds) == 0 {
		filter.Kinds = []ChangeKind{ChangeJob, ChangeGate, ChangeRun}
	}
	for _, err := range []error{checkText("observer name", name), checkTexts("observer kind filter", filter.Kinds),
		checkTexts("observer type filter", filter.Types), checkTexts("observer state filter", filter.States)} {
		if err != nil {
			return err
		}
	}
	return c.eng.Observe(&engine.Observer{Name: name, Phase: engine.ObserverPhase(phase), Filter: filter.scan(), Fn: fn, Gap: gap})
}

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
	err := m.c.withInsertMiddleware(ctx, rows, func(ctx context.Context) error {
		_, err := m.c.eng.InsertIn(ctx, m.tx, &driver.JobInsertManyParams{Jobs: rows})
		return err
	})
	if err != nil {
		return fmt.Errorf("hopper: enqueue in commit: %w", err)
	}
	return nil
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
	chs, err := c.store().ChangeList(ctx, &driver.ChangeListParams{After: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("hopper: read changes: %w", err)
	}
	return chs, nil
}

// ChangeListBefore returns up to limit (1 to 1000) changes of the feed
// before the cursor, newest first: the feed read backwards, to walk back
// through the history the store kept (a job's changes stay as long as
// retention keeps the job). Pass the last one's cursor to read on; the
// zero cursor lists nothing. The changes' At follow their order only
// roughly: a change's place is its transaction's, its At its statement's.
func (c *Client) ChangeListBefore(ctx context.Context, before ChangeCursor, limit int) ([]*Change, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d (use 1 to 1000)", ErrInvalidInput, limit)
	}
	if before.Tx < 0 || before.Position < 0 {
		return nil, fmt.Errorf("%w: a change cursor with a negative part (%d, %d)", ErrInvalidInput, before.Tx, before.Position)
	}
	chs, err := c.store().ChangeListBefore(ctx, &driver.ChangeListBeforeParams{Before: before, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("hopper: read changes: %w", err)
	}
	return chs, nil
}

// ChangeTail returns the cursor of the feed's last change: Changes after it
// are the changes made from now on.
func (c *Client) ChangeTail(ctx context.Context) (ChangeCursor, error) {
	cur, err := c.store().ChangeTail(ctx, &driver.ChangeTailParams{})
	if err != nil {
		return ChangeCursor{}, fmt.Errorf("hopper: read changes: %w", err)
	}
	return cur, nil
}

// ObserverList returns the feed cursors of the AfterCommit observers known to
// the store (in any process): name, position, and who delivers them.
func (c *Client) ObserverList(ctx context.Context) ([]*driver.CursorRow, error) {
	rows, err := c.store().CursorList(ctx, &driver.CursorListParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: list observers: %w", err)
	}
	return rows, nil
}
