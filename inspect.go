package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// GateInfo is what a gate waits for, what it has seen and what it queues
// when it fires: a gate job as a person reads it (its stored input is
// hopper's own encoding).
type GateInfo struct {
	// ID is the gate's job id.
	ID string
	// Condition is what the watched jobs must reach for the gate to fire.
	Condition Condition
	// On are the ids of the jobs it watches, in the order given.
	On []string
	// Next are the jobs it queues when it fires.
	Next []GateNext
	// Seen is, for each watched job, the terminal state the gate observed
	// ("" while the job is not terminal or missing), in the order of On.
	// Only Client.GateGet fills it, with Total, Done and Succeeded.
	Seen []JobState
	// Total is how many distinct jobs it watches; Done how many it saw
	// terminal; Succeeded how many it saw succeed.
	Total, Done, Succeeded int
	// State is the state of the gate's job: scheduled while it waits,
	// succeeded once it fired, stuck when it cannot fire (Stuck says why),
	// expired past its timeout. ParseGate and GateGet fill it.
	State JobState
	// Stuck is the stuck slot of a stuck gate.
	Stuck *StuckInfo
}

// GateNext is one job a gate queues when it fires.
type GateNext struct {
	ID    string
	Type  string
	Queue string
	// Input is the job's encoded input.
	Input []byte
}

// Describe says the condition in words: "all 3 jobs succeed", "2 of 4
// jobs finish".
func (g *GateInfo) Describe() string {
	c := g.Condition.Normalize()
	n := len(g.On)
	if g.Total > 0 {
		n = g.Total
	}
	jobs := func(k int) string {
		if k == 1 {
			return "1 job"
		}
		return fmt.Sprintf("%d jobs", k)
	}
	switch c.Kind {
	case hoppertype.GateAllDone:
		if n == 1 {
			return "its job finishes, however it ends"
		}
		return "all " + jobs(n) + " finish, however they end"
	case hoppertype.GateCount:
		verb, verbOfOne := "finish", "finishes"
		if c.Of == hoppertype.GateOfSuccess {
			verb, verbOfOne = "succeed", "succeeds"
		}
		if n == 1 {
			verb = verbOfOne
		}
		return fmt.Sprintf("%d of %s %s", c.Count, jobs(n), verb)
	default:
		if n == 1 {
			return "its job succeeds"
		}
		return "all " + jobs(n) + " succeed"
	}
}

// Explain says where the gate stands, in words: "fired", "waits: 1 of 3
// jobs succeeded; 2 more must succeed", "stuck: job x failed, so all 3 jobs
// can no longer succeed". It reads what GateGet filled in.
func (g *GateInfo) Explain() string {
	c := g.Condition.Normalize()
	total := g.Total
	if total == 0 {
		total = len(g.On)
	}
	jobs := func(k int) string {
		if k == 1 {
			return "1 job"
		}
		return fmt.Sprintf("%d jobs", k)
	}
	ids := func(list []string) string {
		if len(list) == 1 {
			return "job " + list[0]
		}
		const most = 5
		shown := list[:min(len(list), most)]
		s := "jobs " + strings.Join(shown, ", ")
		if len(list) > most {
			s += fmt.Sprintf(" and %d more", len(list)-most)
		}
		return s
	}
	switch g.State {
	case hoppertype.JobStateSucceeded:
		return fmt.Sprintf("fired: %s queued when %d of %s had finished (%d succeeded)", jobs(len(g.Next)), g.Done, jobs(total), g.Succeeded)
	case hoppertype.JobStateExpired:
		return "expired before its condition held: the jobs it queues never run"
	case hoppertype.JobStateCancelled:
		return "cancelled: the jobs it queues never run"
	case hoppertype.JobStateDead:
		return "failed (a store error, again and again): retry it to look again"
	case hoppertype.JobStateStuck:
		if g.Stuck == nil {
			return "stuck"
		}
		switch g.Stuck.Cause {
		case hoppertype.StuckFailedBlocker:
			failed := "a job it waits on"
			if len(g.Stuck.BlockerIDs) > 0 {
				failed = ids(g.Stuck.BlockerIDs)
			}
			return fmt.Sprintf("stuck: %s failed, so it can no longer fire (it needs %s); retry or redrive the failed jobs and it waits again", failed, g.Describe())
		case hoppertype.StuckCycle:
			return "stuck: it waits on itself through other gates (" + g.Stuck.Detail + "), so it can never fire"
		default:
			return fmt.Sprintf("stuck (%s): %s", g.Stuck.Cause, g.Stuck.Detail)
		}
	}
	need := func(have, want int, verb string) string {
		if have >= want {
			return "its condition holds: it fires as soon as a worker takes it"
		}
		return fmt.Sprintf("%d more must %s", want-have, verb)
	}
	seen := fmt.Sprintf("waits: %d of %s finished, %d succeeded; ", g.Done, jobs(total), g.Succeeded)
	switch c.Kind {
	case hoppertype.GateAllDone:
		return seen + need(g.Done, total, "finish")
	case hoppertype.GateCount:
		if c.Of == hoppertype.GateOfSuccess {
			return seen + need(g.Succeeded, c.Count, "succeed")
		}
		return seen + need(g.Done, c.Count, "finish")
	default:
		return seen + need(g.Succeeded, total, "succeed")
	}
}

// GatesWatching returns the gates that watch the job id (as GateGet reads
// each), in id order, at most limit (1 to MaxListLimit; 0 means 100). A job
// no gate watches has none; the job need not exist.
func (c *Client) GatesWatching(ctx context.Context, id string, limit int) ([]*GateInfo, error) {
	if err := checkText("job id", id); err != nil {
		return nil, err
	}
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > MaxListLimit:
		return nil, fmt.Errorf("%w: limit %d out of range 1..%d", ErrInvalidInput, limit, MaxListLimit)
	}
	ids, err := c.store().GateWatcherList(ctx, &driver.GateWatcherListParams{JobID: id, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("hopper: gates watching %s: %w", id, err)
	}
	out := make([]*GateInfo, 0, len(ids))
	for _, gid := range ids {
		g, err := c.GateGet(ctx, gid)
		if errors.Is(err, ErrNotFound) {
			continue // its job deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// IsGate reports whether row is a gate's job.
func IsGate(row *JobRow) bool { return row != nil && row.Type == gateTypeName }

// ParseGate reads what a gate's job stores: its condition, the jobs it
// watches and the jobs it queues. It reads nothing from the store (Seen
// stays empty); ok is false for a job that is not a gate.
func ParseGate(row *JobRow) (info *GateInfo, ok bool) {
	if !IsGate(row) {
		return nil, false
	}
	var in engine.GateInput
	if err := json.Unmarshal(row.Input, &in); err != nil {
		return &GateInfo{ID: row.ID, State: row.State, Stuck: row.Stuck}, true
	}
	info = &GateInfo{ID: row.ID, Condition: in.Cond.Normalize(), On: in.On, State: row.State, Stuck: row.Stuck}
	for _, n := range in.Next {
		if n == nil {
			continue
		}
		info.Next = append(info.Next, GateNext{ID: n.ID, Type: n.Type, Queue: n.Queue, Input: n.Input})
	}
	return info, true
}

// GateGet returns the gate whose job is id: what it watches, the state it
// observed for each watched job (which outlives the job), and what it
// queues. ErrNotFound for an unknown id; ErrInvalidInput for a job that is
// not a gate.
func (c *Client) GateGet(ctx context.Context, id string) (*GateInfo, error) {
	row, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: gate %s: %w", id, err)
	}
	info, ok := ParseGate(row)
	if !ok {
		return nil, fmt.Errorf("%w: job %s is a %q job, not a gate", ErrInvalidInput, id, row.Type)
	}
	g, err := c.store().GateGet(ctx, &driver.GateGetParams{ID: id})
	switch {
	case errors.Is(err, ErrNotFound):
		return info, nil // not stored yet, or deleted by retention
	case err != nil:
		return nil, fmt.Errorf("hopper: gate %s: %w", id, err)
	}
	info.Condition, info.Total, info.Done, info.Succeeded = g.Cond.Normalize(), g.Total, g.Done, g.Succeeded
	waits, err := c.store().GateWaitList(ctx, &driver.GateWaitListParams{GateID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: gate %s: %w", id, err)
	}
	seen := make(map[string]JobState, len(waits))
	for _, w := range waits {
		seen[w.JobID] = w.State
	}
	info.Seen = make([]JobState, len(info.On))
	for i, on := range info.On {
		info.Seen[i] = seen[on]
	}
	return info, nil
}

// RunOf returns the workflow name and run id when row is the job that
// executes a workflow run ("workflow:<name>", whose id is the run's); ok
// is false for any other job.
func RunOf(row *JobRow) (workflow, runID string, ok bool) {
	if row == nil || !strings.HasPrefix(row.Type, workflowTypePrefix) {
		return "", "", false
	}
	return strings.TrimPrefix(row.Type, workflowTypePrefix), row.ID, true
}

// MaxAttempts is how many attempts a job may use as its user counts them.
// For the job of a workflow run it is the run's own budget (1, or its
// retries plus one), not counting the executions hopper allows for crashes
// on top of them.
func MaxAttempts(row *JobRow) int {
	if row == nil {
		return 0
	}
	if _, _, ok := RunOf(row); ok {
		return max(1, row.Retry.Attempts-runCrashAllowance)
	}
	return row.Retry.Attempts
}
