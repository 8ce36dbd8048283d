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
		return "all " + jobs(n) + " finish, however they end"
	case hoppertype.GateCount:
		verb := "finish"
		if c.Of == hoppertype.GateOfSuccess {
			verb = "succeed"
		}
		return fmt.Sprintf("%d of %s %s", c.Count, jobs(n), verb)
	default:
		if n == 1 {
			return "its job succeeds"
		}
		return "all " + jobs(n) + " succeed"
	}
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
		return &GateInfo{ID: row.ID}, true
	}
	info = &GateInfo{ID: row.ID, Condition: in.Cond.Normalize(), On: in.On}
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
