package engine

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

// GateTypeName is the job type of gates.
const GateTypeName = BuiltinTypePrefix + "gate"

// GateInput is what a gate's job stores: the jobs it watches, its
// condition, and the jobs it queues when it fires (built and validated when
// the gate was enqueued).
type GateInput struct {
	On   []string                 `json:"on"`
	Cond hoppertype.GateCondition `json:"cond"`
	Next []*hoppertype.JobRow     `json:"next"`
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// insertGates stores the gates among freshly inserted jobs, beside them in
// tx, and wakes any that close a cycle so they report it.
func (e *Engine) insertGates(ctx context.Context, tx driver.Executor, res []driver.JobInsertResult) error {
	var specs []*driver.GateSpec
	for _, r := range res {
		if r.Existing || r.Job.Type != GateTypeName {
			continue
		}
		var in GateInput
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
	if _, err := tx.GateInsert(ctx, &driver.GateInsertParams{Gates: specs, Now: e.now()}); err != nil {
		return fmt.Errorf("store gates: %w", err)
	}
	for _, s := range specs {
		cycle, err := gateCycle(ctx, tx, s.ID)
		if err != nil {
			return err
		}
		if len(cycle) > 0 {
			if _, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: cycle, Now: e.now()}); err != nil {
				return err
			}
			if err := tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable}); err != nil {
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
		edges, err := ex.GateEdges(ctx, &driver.GateEdgesParams{IDs: frontier})
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
func (e *Engine) repairGate(ctx context.Context, id string, g *hoppertype.GateRow) (*hoppertype.GateRow, error) {
	waits, err := e.drv.GateWaitList(ctx, &driver.GateWaitListParams{GateID: id})
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
	jobs, err := e.drv.JobGetMany(ctx, &driver.JobGetManyParams{IDs: open})
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
	if err := e.drv.GateObserve(ctx, &driver.GateObserveParams{Jobs: seen, Now: e.now()}); err != nil {
		return nil, err
	}
	return e.drv.GateGet(ctx, &driver.GateGetParams{ID: id})
}

// stuckError is what a handler returns to leave its job stuck.
type stuckError struct {
	info *hoppertype.StuckInfo
}

func (e *stuckError) Error() string {
	return fmt.Sprintf("stuck (%s): %s", e.info.Cause, e.info.Detail)
}

// RunGate is the gate type's handler: it fires the gate when its condition
// holds, reports it stuck when it cannot, and otherwise waits again until
// the next recheck (a transition of a watched job wakes it earlier).
func RunGate(ctx context.Context, j *Attempt, in GateInput) error {
	e := j.e
	now := e.now()
	g, err := e.drv.GateGet(ctx, &driver.GateGetParams{ID: j.row.ID})
	if errors.Is(err, hoppertype.ErrNotFound) {
		return hoppertype.Abort(fmt.Errorf("gate %s: no gate is stored for this job", j.row.ID))
	} else if err != nil {
		return err
	}
	if !g.Cond.Met(g.Total, g.Done, g.Succeeded) && !g.Cond.Impossible(g.Total, g.Done, g.Succeeded) {
		// Not decided (a recheck): repair what no transition could count.
		if g, err = e.repairGate(ctx, j.row.ID, g); err != nil {
			return err
		}
	}
	cycle, err := gateCycle(ctx, e.drv, j.row.ID)
	if err != nil {
		return err
	}
	if len(cycle) > 0 {
		return &stuckError{info: &hoppertype.StuckInfo{Cause: hoppertype.StuckCycle, BlockerIDs: cycle[1:], ObservedAt: now,
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
		return nil
	case g.Cond.Impossible(g.Total, g.Done, g.Succeeded):
		waits, err := e.drv.GateWaitList(ctx, &driver.GateWaitListParams{GateID: j.row.ID})
		if err != nil {
			return err
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
		j.effects = e.recheckGate
		return &stuckError{info: &hoppertype.StuckInfo{Cause: hoppertype.StuckFailedBlocker, BlockerIDs: failed, Detail: detail, ObservedAt: now}}
	}
	// Not decided: wait again. A transition that decides the gate while it
	// runs finds it running and cannot wake it, so the wait is recorded with
	// a look at the counts in the same transaction (recheckGate).
	j.effects = e.recheckGate
	at := now.Add(e.cfg.GateRecheck)
	if !j.row.Deadline.IsZero() {
		at = minTime(at, j.row.Deadline)
	}
	return hoppertype.SnoozeUntil(at)
}

// recheckGate runs in the transaction that records a gate's wait or its
// stuck state: a transition of a watched job that committed while the
// gate ran found it running and could not wake it, so the counts are read
// again here and the gate woken if they now decide it (or, stuck on a
// failed blocker, if the blocker was redriven).
func (e *Engine) recheckGate(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow) error {
	g, err := tx.GateGet(ctx, &driver.GateGetParams{ID: job.ID})
	if err != nil {
		return err
	}
	if !driver.GateWakes(g, job) {
		return nil
	}
	var queues []string
	switch job.State {
	case hoppertype.JobStateScheduled:
		woken, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{job.ID}, Now: e.now()})
		if err != nil {
			return err
		}
		for _, w := range woken {
			queues = append(queues, w.Queue)
		}
	case hoppertype.JobStateStuck:
		res, err := tx.JobRetry(ctx, &driver.JobRetryParams{IDs: []string{job.ID}, States: []hoppertype.JobState{hoppertype.JobStateStuck}, Now: e.now()})
		if err != nil {
			return err
		}
		for _, r := range res {
			queues = append(queues, r.Job.Queue)
		}
	}
	return notifyQueueNames(ctx, tx, queues)
}
