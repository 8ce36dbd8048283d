package memdriver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// gateState is what the store keeps of one gate besides its job.
type gateState struct {
	row *hoppertype.GateRow
	// on lists the watched ids, sorted; waits holds the observed states.
	on     []string
	waits  map[string]hoppertype.JobState
	queues []string
}

func cloneGate(g *hoppertype.GateRow) *hoppertype.GateRow {
	c := *g
	return &c
}

// GateInsert stores gates, counting what their watched jobs are now.
func (x *executor) GateInsert(ctx context.Context, params *driver.GateInsertParams) (_ []*hoppertype.GateRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	st := t.st
	seenQueued := map[string]bool{}
	for _, spec := range params.Gates {
		if _, ok := st.gates[spec.ID]; ok {
			return nil, fmt.Errorf("insert gate %q: %w", spec.ID, hoppertype.ErrDuplicateID)
		}
		for _, q := range spec.Queues {
			if _, ok := st.gateQueues[q]; ok || seenQueued[q] {
				return nil, fmt.Errorf("insert gate %q: job %q is queued by another gate: %w", spec.ID, q, hoppertype.ErrDuplicateID)
			}
			seenQueued[q] = true
		}
	}
	now := trunc(params.Now)
	out := make([]*hoppertype.GateRow, 0, len(params.Gates))
	for _, spec := range params.Gates {
		on := slices.Compact(slices.Sorted(slices.Values(spec.On)))
		g := &gateState{
			row:    &hoppertype.GateRow{ID: spec.ID, Cond: spec.Cond.Normalize(), Total: len(on), CreatedAt: now},
			on:     on,
			waits:  make(map[string]hoppertype.JobState, len(on)),
			queues: slices.Clone(spec.Queues),
		}
		for _, id := range on {
			obs := hoppertype.JobState("")
			if e := st.jobs[id]; e != nil {
				obs = driver.GateObserved(e.row.State)
			}
			g.waits[id] = obs
			d, s := driver.GateDelta("", obs)
			g.row.Done += d
			g.row.Succeeded += s
			put(t, st.gatesByJob, id, append(slices.Clip(st.gatesByJob[id]), spec.ID))
		}
		for _, q := range g.queues {
			put(t, st.gateQueues, q, spec.ID)
		}
		put(t, st.gates, spec.ID, g)
		t.wakeGate(g.row, now)
		out = append(out, cloneGate(g.row))
	}
	return out, nil
}

// GateGet returns a copy of a gate's row.
func (x *executor) GateGet(ctx context.Context, params *driver.GateGetParams) (_ *hoppertype.GateRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	g := t.st.gates[params.ID]
	if g == nil {
		return nil, fmt.Errorf("get gate %q: %w", params.ID, hoppertype.ErrNotFound)
	}
	return cloneGate(g.row), nil
}

// GateWaitList returns a gate's watched jobs and observed states.
func (x *executor) GateWaitList(ctx context.Context, params *driver.GateWaitListParams) (_ []*hoppertype.GateWait, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	g := t.st.gates[params.GateID]
	if g == nil {
		return nil, nil
	}
	out := make([]*hoppertype.GateWait, len(g.on))
	for i, id := range g.on {
		out[i] = &hoppertype.GateWait{GateID: params.GateID, JobID: id, State: g.waits[id]}
	}
	return out, nil
}

// GateEdges returns the gate graph's edges out of IDs.
func (x *executor) GateEdges(ctx context.Context, params *driver.GateEdgesParams) (_ map[string][]string, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	out := map[string][]string{}
	for _, id := range params.IDs {
		if g := t.st.gates[id]; g != nil {
			out[id] = slices.Clone(g.on)
		} else if gid, ok := t.st.gateQueues[id]; ok {
			out[id] = []string{gid}
		}
	}
	return out, nil
}

// GateWatcherList returns the gates watching a job.
func (x *executor) GateWatcherList(ctx context.Context, params *driver.GateWatcherListParams) (_ []string, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, fmt.Errorf("list gate watchers: limit %d: %w", params.Limit, hoppertype.ErrInvalidInput)
	}
	out := slices.Sorted(slices.Values(t.st.gatesByJob[params.JobID]))
	return out[:min(len(out), params.Limit)], nil
}

// observeGates records a job's move from old to new state in the gates
// watching it, and wakes those that the move decides.
func (t *executor) observeGates(id string, old, new hoppertype.JobState, now time.Time) {
	st := t.st
	obs := driver.GateObserved(new)
	if driver.GateObserved(old) == obs {
		return
	}
	for _, gid := range st.gatesByJob[id] {
		g := st.gates[gid]
		if g == nil || g.waits[id] == obs {
			continue
		}
		// In place (a gate may watch many jobs: no copy per change), with
		// the undo restoring the wait and the row.
		oldObs, oldRow := g.waits[id], g.row
		d, s := driver.GateDelta(oldObs, obs)
		g.waits[id] = obs
		g.row = cloneGate(oldRow)
		g.row.Done += d
		g.row.Succeeded += s
		t.undo = append(t.undo, func() { g.waits[id], g.row = oldObs, oldRow })
		t.wakeGate(g.row, trunc(now))
	}
}

// wakeGate wakes a gate's job when driver.GateWakes says so.
func (t *executor) wakeGate(g *hoppertype.GateRow, now time.Time) {
	e := t.st.jobs[g.ID]
	if e == nil || !driver.GateWakes(g, e.row) {
		return
	}
	row := e.row.Clone()
	driver.GateWake(row, now)
	t.putJob(row)
	t.notes = append(t.notes, note{topic: driver.TopicJobAvailable, payload: row.Queue})
}

// deleteGateData removes a deleted gate job's gate, recording how to
// restore it.
func (t *executor) deleteGateData(id string) {
	st := t.st
	g := st.gates[id]
	if g == nil {
		return
	}
	for _, j := range g.on {
		put(t, st.gatesByJob, j, slices.DeleteFunc(slices.Clone(st.gatesByJob[j]), func(s string) bool { return s == id }))
	}
	for _, q := range g.queues {
		old := st.gateQueues[q]
		delete(st.gateQueues, q)
		t.undo = append(t.undo, func() { st.gateQueues[q] = old })
	}
	delete(st.gates, id)
	t.undo = append(t.undo, func() { st.gates[id] = g })
}

// GateObserve records the jobs' states in the gates watching them.
func (x *executor) GateObserve(ctx context.Context, params *driver.GateObserveParams) (err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	for _, j := range params.Jobs {
		t.observeGates(j.ID, "", j.State, params.Now)
	}
	return nil
}
