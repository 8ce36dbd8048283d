package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
)

// History is one attempt of a workflow run's recorded history in a portable
// form: Client.RunHistory exports it, ReplayHistory checks workflow code
// against it. Saved as JSON (testdata/histories/*.json is the convention),
// histories of real runs make replay tests that catch a code change that
// would break the runs in flight.
type History struct {
	// Version is the format's version, HistoryVersion when written by
	// this hopper (0, in files written before it was recorded, reads as
	// 1). ReadHistoryFile refuses a version it does not know.
	Version     int             `json:"version"`
	RunID       string          `json:"run_id"`
	Workflow    string          `json:"workflow"`
	CodeVersion string          `json:"code_version,omitempty"`
	Attempt     int             `json:"attempt"`
	Status      RunStatus       `json:"status,omitempty"`
	Input       json.RawMessage `json:"input"`
	Events      []HistoryEvent  `json:"events"`
}

// HistoryVersion is the version of the History format this hopper writes
// and reads. A change that older readers would misread bumps it.
const HistoryVersion = 1

// HistoryEvent is one event of a History.
type HistoryEvent struct {
	Seq  int             `json:"seq"`
	Kind string          `json:"kind"`
	Name string          `json:"name,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	At   time.Time       `json:"at"`
}

// RunHistory exports a run's current history: its latest generation (a
// workflow retry starts a new one; a crash does not).
func (c *Client) RunHistory(ctx context.Context, runID string) (*History, error) {
	info, attempt, _, err := c.loadRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	h := &History{Version: HistoryVersion, RunID: runID, Workflow: info.Workflow, CodeVersion: info.CodeVersion, Attempt: max(attempt, 1), Status: info.Status, Input: info.Input}
	for _, ev := range info.History {
		he := HistoryEvent{Seq: ev.Seq, Kind: ev.Kind, Name: ev.Name, At: ev.At}
		if len(ev.Data) > 0 && string(ev.Data) != "{}" {
			he.Data = json.RawMessage(ev.Data)
		}
		h.Events = append(h.Events, he)
	}
	return h, nil
}

// ReadHistoryFile reads a History saved as JSON.
func ReadHistoryFile(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("hopper: history %s: %w", path, err)
	}
	if h.Version > HistoryVersion {
		return nil, fmt.Errorf("%w: history %s is of format version %d; this hopper reads up to %d (upgrade hopper)", ErrInvalidInput, path, h.Version, HistoryVersion)
	}
	if h.Version == 0 {
		h.Version = 1
	}
	return &h, nil
}

// ErrHistoryMismatch is returned by ReplayHistory for a history that is not
// one of w's (another workflow's, or not a history at all).
var ErrHistoryMismatch = errors.New("hopper: history does not belong to this workflow")

// ReplayHistory runs workflow w's current code against a recorded history,
// offline (no store, no workers, nothing runs: steps, activities and
// children answer from the history), and reports whether the code still
// takes the path the history recorded. It returns nil when every recorded
// operation is met, in order, until the code reaches the end of the history
// (where the run was, or ended); a *NonDeterminismError (matching
// ErrNonDeterminism) naming the first event the code diverges from; or
// another error for a history that cannot be read.
//
// Run it in tests over histories exported from real runs (Client.RunHistory)
// before deploying a change to a workflow with runs in flight.
func ReplayHistory[I, O any](ctx context.Context, w *WorkflowType[I, O], h *History) error {
	// Reaching the end of the history on its path, or the workflow's own
	// failure on it, is a replay that holds.
	_, _, _, err := replay(ctx, w, h)
	return err
}

// ErrHistoryEnded is returned by ReplayOutput when the workflow's code
// needs more than the history holds: an operation past its last event.
var ErrHistoryEnded = errors.New("hopper: the history ends before the workflow does")

// ReplayOutput runs workflow w's code against h as ReplayHistory does —
// inline, offline, every step, activity, child, sleep and hook answered by
// the history — and returns what the code returned: its output, or its own
// error. A history written by hand is a fake one: a test can give a
// workflow the step results, activity outputs and hook payloads it wants
// and check what the workflow makes of them, without a store or a worker.
// A history that ends before the code does is an error matching
// ErrHistoryEnded; one the code diverges from, a *NonDeterminismError.
func ReplayOutput[I, O any](ctx context.Context, w *WorkflowType[I, O], h *History) (O, error) {
	var zero O
	out, suspended, own, err := replay(ctx, w, h)
	switch {
	case err != nil:
		return zero, err
	case suspended:
		return zero, fmt.Errorf("%w: run %s's code asks for an operation past its %d events", ErrHistoryEnded, h.RunID, len(h.Events))
	case own != nil:
		return zero, own
	}
	var o O
	if err := json.Unmarshal(out, &o); err != nil {
		return zero, fmt.Errorf("hopper: history of run %s: decode output: %w", h.RunID, err)
	}
	return o, nil
}

// replay runs w's code against h: the code's output (JSON) when it
// finished within the history, whether it reached the history's end
// instead (suspended), the error the code itself returned on the
// history's path (own), or why the replay failed (err: a divergence, a
// panic, a history that cannot be read).
func replay[I, O any](ctx context.Context, w *WorkflowType[I, O], h *History) (out json.RawMessage, suspended bool, own, err error) {
	if h == nil {
		return nil, false, nil, fmt.Errorf("%w: no history", ErrHistoryMismatch)
	}
	if h.Workflow != w.wfName {
		return nil, false, nil, fmt.Errorf("%w: the history is of workflow %q, not %q", ErrHistoryMismatch, h.Workflow, w.wfName)
	}
	var in I
	if len(h.Input) > 0 {
		if err := json.Unmarshal(h.Input, &in); err != nil {
			return nil, false, nil, fmt.Errorf("hopper: history of run %s: decode input: %w", h.RunID, err)
		}
	}
	c := &Client{cfg: Config{IDGenerator: func() string { return "" }}, clock: hclock.Real{}, codec: JSONCodec{}}
	attempt := max(h.Attempt, 1)
	run := &hoppertype.RunRow{ID: h.RunID, Workflow: h.Workflow, CodeVersion: h.CodeVersion, Status: RunRunning}
	events := make([]*hoppertype.RunEvent, 0, len(h.Events))
	for _, ev := range h.Events {
		// The engine's own closing events (the end of the run, the
		// compensations it ran) are not answers to workflow code.
		if engine.ReplayTail(ev.Kind) {
			break
		}
		events = append(events, &hoppertype.RunEvent{RunID: h.RunID, Attempt: attempt, Seq: ev.Seq, Kind: ev.Kind, Name: ev.Name, Data: ev.Data, At: ev.At})
	}
	st := &wfState{RunState: engine.NewReplayState(ctx, run, attempt, events), c: c, opts: w.opts}
	if len(events) > 0 {
		if _, err := st.Next("", engine.EvWorkflowStarted); err != nil {
			return nil, false, nil, err
		}
	}
	var o O
	func() {
		defer func() {
			if r := recover(); r != nil {
				own = fmt.Errorf("%w: replaying run %s: %w", ErrPanic, h.RunID, engine.PanicCause(r))
			}
		}()
		o, own = w.fn(st, in)
	}()
	switch {
	case st.Fatal != nil:
		return nil, false, nil, st.Fatal
	case st.Suspended:
		return nil, true, nil, nil
	case errors.Is(own, ErrPanic):
		return nil, false, nil, own
	case st.Pos < len(st.Events):
		ev := st.Events[st.Pos]
		return nil, false, nil, &NonDeterminismError{RunID: h.RunID, Workflow: h.Workflow, Attempt: attempt, Position: st.Pos + 1,
			RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: "the end of the workflow"}
	case own != nil:
		return nil, false, own, nil
	}
	b, merr := json.Marshal(o)
	if merr != nil {
		return nil, false, nil, fmt.Errorf("hopper: history of run %s: encode output: %w", h.RunID, merr)
	}
	return b, false, nil, nil
}
