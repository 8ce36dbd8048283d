package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// Workflow runs: the arguments of the run, history, hook and stream
// operations, and the compositions a driver may implement them with.

// RunListParams filter RunList. Empty fields do not filter.
type RunListParams struct {
	Statuses []hoppertype.RunStatus
	Workflow string
	ParentID string
	// CreatedAfter and CreatedBefore bound CreatedAt (inclusive, exclusive).
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// After continues a listing: only runs that come after this key in the
	// listing's order (newest CreatedAt first, then id descending) are
	// returned. The zero key starts at the beginning.
	After  RunKey
	Offset int
	// Limit caps the rows returned; it must be > 0.
	Limit int
}

// RunKey is a run's place in a listing: its creation time (microseconds)
// and id.
type RunKey struct {
	CreatedAt time.Time
	ID        string
}

// IsZero reports whether k is the zero key (the start of a listing).
func (k RunKey) IsZero() bool { return k.ID == "" && k.CreatedAt.IsZero() }

// RunUpdateParams are the arguments of RunUpdate.
type RunUpdateParams struct {
	ID     string
	Status hoppertype.RunStatus
	// Error, when non-nil, replaces the run's error.
	Error *hoppertype.ErrorInfo
	// EndedAt, when set, is stored.
	EndedAt        time.Time
	ExpectStatuses []hoppertype.RunStatus
	Now            time.Time
	// Reset clears the run's error and end (Error and EndedAt are then
	// ignored): a run that ended is started again.
	Reset bool
}

// RunStartParams are the arguments of RunStart.
type RunStartParams struct {
	Run *hoppertype.RunRow
	Job *hoppertype.JobRow
}

// RunStartTx is RunStart made of RunInsert, JobInsertMany and Notify in
// ex.InTx: a transaction of a driver, a savepoint of a transaction.
func RunStartTx(ctx context.Context, ex Executor, p *RunStartParams) (existing bool, err error) {
	if p == nil || p.Run == nil || p.Job == nil || p.Run.ID == "" || p.Job.ID != p.Run.ID {
		return false, fmt.Errorf("start run: %w", errBadRunStart)
	}
	err = ex.InTx(ctx, func(ctx context.Context, tx Executor) error {
		existing = false
		if err := tx.RunInsert(ctx, &RunInsertParams{Row: p.Run}); errors.Is(err, hoppertype.ErrDuplicateID) {
			existing = true
			return nil
		} else if err != nil {
			return err
		}
		res, err := tx.JobInsertMany(ctx, &JobInsertManyParams{Jobs: []*hoppertype.JobRow{p.Job}})
		if err != nil {
			return err
		}
		if len(res) == 1 && !res[0].Existing && res[0].Job.State == hoppertype.JobStatePending {
			return tx.Notify(ctx, &NotifyParams{Topic: TopicJobAvailable, Payload: res[0].Job.Queue})
		}
		return nil
	})
	return existing, err
}

// RunLoadManyParams are the arguments of RunLoadMany.
type RunLoadManyParams struct {
	IDs []string
}

// RunLoaded is a run RunLoadMany found and its history, in (attempt, seq)
// order (empty, not nil, for a run without one).
type RunLoaded struct {
	Run    *hoppertype.RunRow
	Events []*hoppertype.RunEvent
}

// RunBatchLoader is implemented by an executor that reads several runs and
// their histories in one call: the engine reads the runs of the workflow
// jobs a claim returned together, instead of one read per run as each
// executes. RunLoadMany returns the runs it found by id; an id without a
// run is left out.
type RunBatchLoader interface {
	RunLoadMany(ctx context.Context, params *RunLoadManyParams) (map[string]*RunLoaded, error)
}

// RunLoadManySeq is RunLoadMany made of one RunLoad per id on ex.
func RunLoadManySeq(ctx context.Context, ex Executor, params *RunLoadManyParams) (map[string]*RunLoaded, error) {
	out := make(map[string]*RunLoaded, len(params.IDs))
	for _, id := range params.IDs {
		run, events, err := ex.RunLoad(ctx, &RunLoadParams{ID: id})
		if errors.Is(err, hoppertype.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = &RunLoaded{Run: run, Events: events}
	}
	return out, nil
}

// RunLoadSeq is RunLoad made of RunGet then RunEventList on ex.
func RunLoadSeq(ctx context.Context, ex Executor, params *RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	run, err := ex.RunGet(ctx, &RunGetParams{ID: params.ID})
	if err != nil {
		return nil, nil, err
	}
	events, err := ex.RunEventList(ctx, &RunEventListParams{RunID: params.ID})
	if err != nil {
		return nil, nil, err
	}
	return run, events, nil
}

// RunEventAppendManyTx is RunEventAppendMany made of RunEventAppend calls
// in ex.InTx: a transaction of a driver, a savepoint of a transaction.
func RunEventAppendManyTx(ctx context.Context, ex Executor, params *RunEventAppendManyParams) ([]error, error) {
	errs := make([]error, len(params.Events))
	err := ex.InTx(ctx, func(ctx context.Context, tx Executor) error {
		for i, p := range params.Events {
			err := tx.RunEventAppend(ctx, p)
			if err != nil && !errors.Is(err, hoppertype.ErrLeaseLost) && !errors.Is(err, hoppertype.ErrDuplicateID) {
				return err
			}
			errs[i] = err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

var errBadRunStart = errors.New("a run and a job with the run's id are required")

// RunEventAppendParams are the arguments of RunEventAppend.
type RunEventAppendParams struct {
	RunID      string
	LeaseToken int64
	Events     []*hoppertype.RunEvent
	// RunStatus, when set, becomes the run's status (UpdatedAt = Now) in the
	// same write, if the append applies: an execution marks its run
	// running with its first record, saving a write of its own.
	RunStatus hoppertype.RunStatus
	Now       time.Time
	// EndedAt, when set with RunStatus, is stored as the run's end.
	EndedAt time.Time
}

// RunInsertParams are the arguments of RunInsert.
type RunInsertParams struct {
	Row *hoppertype.RunRow
}

// RunGetParams are the arguments of RunGet.
type RunGetParams struct {
	ID string
}

// RunLoadParams are the arguments of RunLoad.
type RunLoadParams struct {
	ID string
}

// RunEventAppendManyParams are the arguments of RunEventAppendMany: the
// appends to make, each to a distinct run.
type RunEventAppendManyParams struct {
	Events []*RunEventAppendParams
}

// RunEventListParams are the arguments of RunEventList.
type RunEventListParams struct {
	RunID   string
	Attempt int
}

// HookInsertParams are the arguments of HookInsert.
type HookInsertParams struct {
	Row *hoppertype.HookRow
}

// HookGetParams are the arguments of HookGet.
type HookGetParams struct {
	Token string
}

// HookListByRunParams are the arguments of HookListByRun.
type HookListByRunParams struct {
	RunID string
}

// HookResumeParams are the arguments of HookResume.
type HookResumeParams struct {
	Token   string
	Payload []byte
	// Request is stored as the hook's Request (nil: none).
	Request []byte
	Now     time.Time
}

// StreamAppendParams are the arguments of StreamAppend.
type StreamAppendParams struct {
	RunID  string
	Chunks [][]byte
	Now    time.Time
}

// StreamReadParams are the arguments of StreamRead.
type StreamReadParams struct {
	RunID string
	From  int64
	// Limit caps the chunks returned; it must be > 0.
	Limit int
}
