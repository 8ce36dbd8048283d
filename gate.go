package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
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
const gateTypeName = "hopper.gate"

// DefaultGateRecheck is how often a waiting gate looks at its jobs again on
// its own (Config.GateRecheck): a safety net, since the transitions of the
// jobs a gate watches wake it as they happen.
const DefaultGateRecheck = time.Minute

// gateAttempts is a gate's attempt budget: its attempts fail only on store
// errors.
const gateAttempts = 25

// gateType fires gates: see runGate.
var gateType = Define(gateTypeName, runGate, &TypeOpts[gateInput]{
	Codec: JSONCodec{},
	Retry: RetryPolicy{Attempts: gateAttempts, Base: time.Second, Max: time.Minute},
})

// gateInput is what a gate's job stores: the jobs it watches, its
// condition, and the jobs it queues when it fires (built and validated when
// the gate was enqueued).
type gateInput struct {
	On   []string             `json:"on"`
	Cond Condition            `json:"cond"`
	Next []*hoppertype.JobRow `json:"next"`
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
	in := gateInput{On: slices.Compact(slices.Sorted(slices.Values(g.on))), Cond: g.cond.Normalize()}
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

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// insertGates stores the gates among freshly inserted jobs, beside them in
// tx, and wakes any that close a cycle so they report it.
func (c *Client) insertGates(ctx context.Context, tx driver.Executor, res []driver.JobInsertResult) error {
	var specs []*driver.GateSpec
	for _, r := range res {
		if r.Existing || r.Job.Type != gateTypeName {
			continue
		}
		var in gateInput
		if err := json.Unmarshal(r.Job.Input, &in); err != nil {
			return fmt.Errorf("gate %s: %w", r.Job.ID, err)
		}
		spec := &driver.GateSpec{ID: r.Job.ID, Cond: in.Cond, On: in.On}
		for _, n := range in.Next {
			spec.Queues = append(spec.Queues, n.ID)
		}
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		return nil
	}
	if _, err := tx.GateInsert(ctx, &driver.GateInsertParams{Gates: specs, Now: c.now()}); err != nil {
		return fmt.Errorf("store gates: %w", err)
	}
	for _, s := range specs {
		cycle, err := gateCycle(ctx, tx, s.ID)
		if err != nil {
			return err
		}
		if len(cycle) > 0 {
			if _, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: cycle, Now: c.now()}); err != nil {
				return err
			}
			if err := tx.Notify(ctx, driver.TopicJobAvailable, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxCycleWalk bounds how many ids cycle detection visits.
const maxCycleWalk = 10000

// gateCycle returns the ids on a cycle of waits through gate id (id first),
// or nil: the gate waits, through other gates and the jobs they queue, on
// itself, so it can never fire.
func gateCycle(ctx context.Context, ex driver.Executor, id string) ([]string, error) {
	from := map[string]string{id: ""}
	frontier := []string{id}
	for len(frontier) > 0 && len(from) < maxCycleWalk {
		edges, err := ex.GateEdges(ctx, frontier)
		if err != nil {
			return nil, fmt.Errorf("gate %s: cycle check: %w", id, err)
		}
		var next []string
		for _, n := range frontier {
			for _, to := range edges[n] {
				if to == id {
					path := []string{id}
					for p := n; p != id; p = from[p] {
						path = append(path, p)
					}
					return path, nil
				}
				if _, seen := from[to]; !seen {
					from[to] = n
					next = append(next, to)
				}
			}
		}
		slices.Sort(next)
		frontier = next
	}
	return nil, nil
}

// repairGate reads the states of the jobs a gate has not seen done and
// records those that are (a job committed and finished while the gate's
// insert was in flight is counted by no transition). It returns the gate
// as it is then.
func (c *Client) repairGate(ctx context.Context, id string, g *hoppertype.GateRow) (*hoppertype.GateRow, error) {
	waits, err := c.drv.GateWaitList(ctx, id)
	if err != nil {
		return nil, err
	}
	var open []string
	for _, w := range waits {
		if w.State == "" {
			open = append(open, w.JobID)
		}
	}
	if len(open) == 0 {
		return g, nil
	}
	jobs, err := c.drv.JobGetMany(ctx, open)
	if err != nil {
		return nil, err
	}
	var seen []driver.GateObservation
	for _, job := range jobs {
		if job.State.Terminal() {
			seen = append(seen, driver.GateObservation{ID: job.ID, State: job.State})
		}
	}
	if len(seen) == 0 {
		return g, nil
	}
	if err := c.drv.GateObserve(ctx, &driver.GateObserveParams{Jobs: seen, Now: c.now()}); err != nil {
		return nil, err
	}
	return c.drv.GateGet(ctx, id)
}

// stuckError is what a handler returns to leave its job stuck.
type stuckError struct {
	info *hoppertype.StuckInfo
}

func (e *stuckError) Error() string {
	return fmt.Sprintf("stuck (%s): %s", e.info.Cause, e.info.Detail)
}

// runGate is the gate type's handler: it fires the gate when its condition
// holds, reports it stuck when it cannot, and otherwise waits again until
// the next recheck (a transition of a watched job wakes it earlier).
func runGate(ctx context.Context, in gateInput) (None, error) {
	j := JobFromContext(ctx)
	c := j.c
	now := c.now()
	g, err := c.drv.GateGet(ctx, j.ID())
	if errors.Is(err, hoppertype.ErrNotFound) {
		return None{}, Abort(fmt.Errorf("gate %s: no gate is stored for this job", j.ID()))
	} else if err != nil {
		return None{}, err
	}
	if !g.Cond.Met(g.Total, g.Done, g.Succeeded) && !g.Cond.Impossible(g.Total, g.Done, g.Succeeded) {
		// Not decided (a recheck): repair what no transition could count.
		if g, err = c.repairGate(ctx, j.ID(), g); err != nil {
			return None{}, err
		}
	}
	cycle, err := gateCycle(ctx, c.drv, j.ID())
	if err != nil {
		return None{}, err
	}
	if len(cycle) > 0 {
		return None{}, &stuckError{info: &hoppertype.StuckInfo{Cause: hoppertype.StuckCycle, BlockerIDs: cycle[1:], ObservedAt: now,
			Detail: "the gate waits on itself: " + strings.Join(append(cycle, cycle[0]), " → ")}}
	}
	switch {
	case g.Cond.Met(g.Total, g.Done, g.Succeeded):
		for _, n := range in.Next {
			row := n.Clone()
			delay := row.RunAt.Sub(row.QueuedAt)
			row.QueuedAt, row.RunAt = now, now.Add(delay)
			row.State = hoppertype.JobStatePending
			if delay > 0 {
				row.State = hoppertype.JobStateScheduled
			}
			row.GroupID, row.ParentID, row.Dependents = j.row.GroupID, j.row.ID, slices.Clone(in.On)
			j.group.mu.Lock()
			j.group.eff.children = append(j.group.eff.children, row)
			j.group.mu.Unlock()
		}
		return None{}, nil
	case g.Cond.Impossible(g.Total, g.Done, g.Succeeded):
		waits, err := c.drv.GateWaitList(ctx, j.ID())
		if err != nil {
			return None{}, err
		}
		var failed []string
		for _, w := range waits {
			if w.State.Terminal() && w.State != hoppertype.JobStateSucceeded {
				failed = append(failed, w.JobID)
			}
		}
		detail := fmt.Sprintf("condition %s cannot hold: %d of %d jobs done, %d succeeded", g.Cond, g.Done, g.Total, g.Succeeded)
		// A blocker redriven while this ran finds the gate running: look
		// again in the transaction that records it stuck.
		j.effects = c.recheckGate
		return None{}, &stuckError{info: &hoppertype.StuckInfo{Cause: hoppertype.StuckFailedBlocker, BlockerIDs: failed, Detail: detail, ObservedAt: now}}
	}
	// Not decided: wait again. A transition that decides the gate while it
	// runs finds it running and cannot wake it, so the wait is recorded with
	// a look at the counts in the same transaction (recheckGate).
	j.effects = c.recheckGate
	at := now.Add(c.cfg.GateRecheck)
	if !j.row.Deadline.IsZero() {
		at = minTime(at, j.row.Deadline)
	}
	return None{}, SnoozeUntil(at)
}

// recheckGate runs in the transaction that records a gate's wait or its
// stuck state: a transition of a watched job that committed while the
// gate ran found it running and could not wake it, so the counts are read
// again here and the gate woken if they now decide it (or, stuck on a
// failed blocker, if the blocker was redriven).
func (c *Client) recheckGate(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow) error {
	g, err := tx.GateGet(ctx, job.ID)
	if err != nil {
		return err
	}
	if !driver.GateWakes(g, job) {
		return nil
	}
	var queues []string
	switch job.State {
	case hoppertype.JobStateScheduled:
		woken, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{job.ID}, Now: c.now()})
		if err != nil {
			return err
		}
		for _, w := range woken {
			queues = append(queues, w.Queue)
		}
	case hoppertype.JobStateStuck:
		res, err := tx.JobRetry(ctx, &driver.JobRetryParams{IDs: []string{job.ID}, States: []hoppertype.JobState{hoppertype.JobStateStuck}, Now: c.now()})
		if err != nil {
			return err
		}
		for _, r := range res {
			queues = append(queues, r.Job.Queue)
		}
	}
	return notifyQueueNames(ctx, tx, queues)
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
	j.group.mu.Lock()
	var cohort []string
	for _, ch := range j.group.eff.children {
		if ch.Type != gateTypeName {
			cohort = append(cohort, ch.ID)
		}
	}
	j.group.mu.Unlock()
	return (&Chain{j: j, cohort: cohort}).Then(cond, next...)
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
func (j *JobContext) fail(err error) {
	j.group.mu.Lock()
	if j.group.err == nil {
		j.group.err = err
	}
	j.group.mu.Unlock()
}
