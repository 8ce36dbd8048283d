package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// Condition says when a gate fires. Done means any terminal state
// (succeeded, dead, expired, cancelled); success means succeeded; a job
// that is missing or not terminal — stuck included — is not done. The zero
// Condition is AllSuccess().
type Condition = hoppertype.GateCondition

// AllSuccess fires when every watched job succeeded (the default).
func AllSuccess() Condition { return Condition{Kind: hoppertype.GateAllSuccess} }

// AllDone fires when every watched job is terminal, however it ended.
func AllDone() Condition { return Condition{Kind: hoppertype.GateAllDone} }

// CountDone fires when at least n watched jobs are terminal.
func CountDone(n int) Condition {
	return Condition{Kind: hoppertype.GateCount, Count: n, Of: hoppertype.GateOfDone}
}

// CountSuccess fires when at least n watched jobs succeeded.
func CountSuccess(n int) Condition {
	return Condition{Kind: hoppertype.GateCount, Count: n, Of: hoppertype.GateOfSuccess}
}

// ConditionMet evaluates cond over the states of the watched jobs ("" for
// a job that does not exist). It is the rule gates apply, exported for
// tests and inspection.
func ConditionMet(cond Condition, states []JobState) bool {
	done, ok := 0, 0
	for _, s := range states {
		d, k := driver.GateDelta("", s)
		done += d
		ok += k
	}
	return cond.Met(len(states), done, ok)
}

// gateTypeName is the built-in job type that fires gates. Every client
// registers it, so whichever worker claims a gate can fire it.
const gateTypeName = engine.GateTypeName

// DefaultGateRecheck is how often a waiting gate looks at its jobs again on
// its own (Config.GateRecheck): a safety net, since the transitions of the
// jobs a gate watches wake it as they happen.
const DefaultGateRecheck = time.Minute

// gateAttempts is a gate's attempt budget: its attempts fail only on store
// errors.
const gateAttempts = 25

// gateType fires gates (engine.RunGate).
var gateType = Define(gateTypeName, runGate, &TypeOpts[engine.GateInput]{
	Codec: JSONCodec{},
	Retry: RetryPolicy{Attempts: gateAttempts, Base: time.Second, Max: time.Minute},
})

// runGate is the gate type's handler: the engine's.
func runGate(ctx context.Context, in engine.GateInput) (None, error) {
	return None{}, engine.RunGate(ctx, JobFromContext(ctx).a, in)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// gateSpec is the gate part of a JobSpec made by Gate.
type gateSpec struct {
	on      []string
	next    []*JobSpec
	cond    Condition
	timeout time.Duration
}

// Gate builds a gate: a job that waits until the jobs named by on meet cond
// and then queues next (into the gate's own fan-out group; they see the ids
// of on as JobContext.Dependents). Enqueue it like any job — usually beside
// the jobs it waits on, in one EnqueueMany, with their ids taken from
// JobSpec.ID before enqueue. A gate holds no worker while it waits: the
// transition that completes its condition wakes it, in that transition's
// transaction, and it fires exactly once across every process.
//
// A gate whose condition can no longer hold (all-success with a job that
// failed, or a count the remaining jobs cannot reach) goes stuck with cause
// failed-blocker and the failed ids; redriving a failed job lets it wait
// again. A gate that waits, directly or through other gates, on itself goes
// stuck with cause cycle. With timeout > 0, a gate that has not fired by
// then expires and its jobs never run.
//
// The handle of a gate resolves (Result) when it fires; its Group resolves
// once the jobs it queued have settled. Delays of the jobs in next count
// from the moment the gate fires; deadlines are absolute (a Timeout counts
// from the gate's enqueue).
func Gate(on []string, next []*JobSpec, cond Condition, timeout time.Duration) *JobSpec {
	s := &JobSpec{t: gateType.core(), gate: &gateSpec{on: slices.Clone(on), next: slices.Clone(next), cond: cond, timeout: timeout}}
	switch {
	case cond.Validate() != nil:
		s.err = fmt.Errorf("%w: gate: %w", ErrInvalidInput, cond.Validate())
	case timeout < 0:
		s.err = fmt.Errorf("%w: gate: negative timeout %v", ErrInvalidInput, timeout)
	case len(next) == 0:
		s.err = fmt.Errorf("%w: gate: nothing to queue", ErrInvalidInput)
	}
	for _, id := range on {
		if id == "" {
			s.err = fmt.Errorf("%w: gate: empty id to wait on", ErrInvalidInput)
		}
	}
	return s
}

// buildGateRow forms a gate's job row: the jobs it queues are built (and
// validated) now and stored in its input.
func (c *Client) buildGateRow(s *JobSpec, now time.Time) (*hoppertype.JobRow, error) {
	g := s.gate
	if err := checkTexts("gate: id to wait on", g.on); err != nil {
		return nil, err
	}
	in := engine.GateInput{On: slices.Compact(slices.Sorted(slices.Values(g.on))), Cond: g.cond.Normalize()}
	seen := map[string]bool{}
	for _, n := range g.next {
		if n == s {
			return nil, fmt.Errorf("%w: gate: queues itself", ErrInvalidInput)
		}
		row, err := c.buildRow(n, now)
		if err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
		if seen[row.ID] {
			return nil, fmt.Errorf("%w: gate: id %q given twice", ErrInvalidInput, row.ID)
		}
		seen[row.ID] = true
		in.Next = append(in.Next, row)
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%w: gate: %w", ErrInvalidInput, err)
	}
	if len(input) > c.cfg.MaxPayloadBytes {
		return nil, c.tooLarge("gate", len(input))
	}
	if s.id == "" {
		s.id = c.newID()
	}
	row := &hoppertype.JobRow{
		ID:       s.id,
		Type:     gateTypeName,
		Queue:    in.Next[0].Queue,
		State:    hoppertype.JobStateScheduled,
		Priority: in.Next[0].Priority,
		Input:    input,
		GroupID:  s.id,
		Retry:    RetryPolicy{Attempts: gateAttempts, Base: time.Second, Max: time.Minute}.stored(),
		QueuedAt: now,
		RunAt:    now.Add(c.cfg.GateRecheck),
	}
	if g.timeout > 0 {
		row.Deadline = now.Add(g.timeout)
		row.RunAt = minTime(row.RunAt, row.Deadline)
	}
	if err := checkRow(row); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	return row, nil
}

// Chain is a sequence of gates built from a handler with JobContext.Then:
// each link queues its jobs once the previous link's jobs meet its
// condition. The seeds call it ".next".
type Chain struct {
	j      *JobContext
	cohort []string
}

// Then queues next, into this job's group, once the jobs this attempt has
// spawned so far (Spawn) meet cond, and returns the chain so a further
// Then can wait on next in turn. The gates are stored with the attempt's
// success, like spawned jobs. A Then whose jobs cannot be built fails the
// attempt (with ErrInvalidInput) when the handler returns.
func (j *JobContext) Then(cond Condition, next ...*JobSpec) *Chain {
	return (&Chain{j: j, cohort: j.a.Spawned()}).Then(cond, next...)
}

// Then queues next once the previous link's jobs meet cond.
func (ch *Chain) Then(cond Condition, next ...*JobSpec) *Chain {
	ids := make([]string, len(next))
	for i, n := range next {
		if n == nil {
			ch.j.fail(fmt.Errorf("%w: then: nil job spec", ErrInvalidInput))
			return ch
		}
		ids[i] = n.ID()
	}
	if err := ch.j.Spawn(Gate(ch.cohort, next, cond, 0)); err != nil {
		ch.j.fail(err)
	}
	return &Chain{j: ch.j, cohort: ids}
}

// fail records an error that fails the attempt when its handler returns.
func (j *JobContext) fail(err error) { j.a.Fail(err) }
