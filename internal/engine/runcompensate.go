package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// compensate runs the compensations the current attempt registered, in
// reverse order, each once: one whose execution an earlier, interrupted
// execution recorded is skipped. A failing compensation is recorded and
// the rest still run. They run on a context detached from the run's
// cancellation, which ends when the engine's Stop gives up (the hard
// lifetime); each record has the lease's length (see AppendEvent). An
// execution that cannot record (its lease lost) stops there, so the one
// that takes the run over runs each of the others once.
func (e *Engine) compensate(st *RunState) error {
	// A step's record still pending is stored before any compensation
	// runs.
	if err := st.Flush(); err != nil {
		return err
	}
	ctx, cancel := Within(st.ctx, st.a.HardLife(), 0)
	defer cancel()
	done := map[string]bool{}
	for _, ev := range st.Events {
		if ev.Kind == EvCompensationDone || ev.Kind == EvCompensationFail {
			done[ev.Name] = true
		}
	}
	st.Pos = len(st.Events) // what follows is live
	for i := len(st.Comps) - 1; i >= 0; i-- {
		comp := st.Comps[i]
		key := CompKey(comp.Name, i)
		if done[key] {
			continue
		}
		kind, data := EvCompensationDone, EventData{}
		if err := runCompensation(ctx, comp.Fn); err != nil {
			kind, data = EvCompensationFail, EventData{Error: ErrorInfo(err, st.attempt, e.now())}
		}
		if err := st.Record(ctx, nil, kind, key, data); err != nil {
			return err
		}
	}
	return nil
}

// runCompensation calls a compensation; a panic is its failure.
func runCompensation(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %w", hoppertype.ErrPanic, PanicCause(r))
		}
	}()
	return fn(ctx)
}

// CompKey is the name a compensation's execution is recorded under: its
// name and its place among its attempt's registrations ("refund#0").
func CompKey(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// undoneCompensations returns the places (in registration order) of the
// compensations an attempt registered whose execution it never recorded.
func undoneCompensations(events []*hoppertype.RunEvent) []int {
	var names []string
	done := map[string]bool{}
	for _, ev := range events {
		switch ev.Kind {
		case EvCompensationAdded:
			names = append(names, ev.Name)
		case EvCompensationDone, EvCompensationFail:
			done[ev.Name] = true
		}
	}
	var out []int
	for i, name := range names {
		if !done[CompKey(name, i)] {
			out = append(out, i)
		}
	}
	return out
}

// registeredCompensations says whether any attempt of a run registered a
// compensation.
func registeredCompensations(gens []Generation) bool {
	for _, g := range gens {
		if slices.ContainsFunc(g.Events, func(ev *hoppertype.RunEvent) bool { return ev.Kind == EvCompensationAdded }) {
			return true
		}
	}
	return false
}

// undoEarlier runs, before an attempt goes on, the compensations earlier
// attempts registered and never ran: the newest attempt's first, each
// attempt's in reverse order, each recorded in that attempt's history
// (after its failure) so it runs once. An attempt that fails runs its own
// compensations before the next attempt begins, so there are such only in
// runs recorded before hopper did that. The functions are found by
// replaying the earlier attempt's history, offline: none of its operations
// runs again. A replay that diverges from that history makes the run go
// stuck, undoing nothing, as a divergence of the current attempt does.
// They run as compensate runs them.
func (e *Engine) undoEarlier(st *RunState, gens []Generation, body func(*RunState) ([]byte, error)) error {
	ctx, cancel := Within(st.ctx, st.a.HardLife(), 0)
	defer cancel()
	for gi := len(gens) - 1; gi >= 0; gi-- {
		g := gens[gi]
		if !g.Retried || g.Attempt == st.attempt {
			continue
		}
		undone := undoneCompensations(g.Events)
		if len(undone) == 0 {
			continue
		}
		comps, err := replayCompensations(ctx, st, g, body)
		if err != nil {
			return st.Fail(err)
		}
		seq := g.Events[len(g.Events)-1].Seq
		for k := len(undone) - 1; k >= 0; k-- {
			i := undone[k]
			kind, data := EvCompensationDone, EventData{}
			if err := runCompensation(ctx, comps[i].Fn); err != nil {
				kind, data = EvCompensationFail, EventData{Error: ErrorInfo(err, g.Attempt, e.now())}
			}
			seq++
			ev, err := newEvent(st.Run.ID, g.Attempt, seq, kind, CompKey(comps[i].Name, i), data, e.now())
			if err != nil {
				return st.Fail(err)
			}
			if err := st.AppendEvent(ctx, nil, ev); err != nil {
				return st.Fail(err)
			}
			st.markRunning = false
		}
	}
	return nil
}

// replayCompensations replays an earlier attempt's history through the
// workflow function, offline (the end of the history ends the replay; no
// operation runs), and returns the compensations it registered, in order.
func replayCompensations(ctx context.Context, st *RunState, g Generation, body func(*RunState) ([]byte, error)) ([]Compensation, error) {
	var events []*hoppertype.RunEvent
	for _, ev := range g.Events {
		if ReplayTail(ev.Kind) {
			break
		}
		events = append(events, ev)
	}
	rs := NewReplayState(ctx, st.Run, g.Attempt, events)
	rs.e, rs.a = st.e, st.a
	if len(events) > 0 {
		if _, err := rs.Next("", EvWorkflowStarted); err != nil {
			return nil, err
		}
	}
	func() {
		defer func() { _ = recover() }() // the attempt may have ended in a panic
		_, _ = body(rs)
	}()
	if rs.Fatal != nil {
		return nil, rs.Fatal
	}
	n := 0
	for i, ev := range events {
		if ev.Kind != EvCompensationAdded {
			continue
		}
		if n == len(rs.Comps) {
			return nil, &hoppertype.NonDeterminismError{RunID: st.Run.ID, Workflow: st.Run.Workflow, Attempt: g.Attempt, Position: i + 1,
				RecordedKind: ev.Kind, RecordedName: ev.Name, Attempted: "the end of the workflow"}
		}
		n++
	}
	return rs.Comps, nil
}

// cascade cancels a failed run's parent and children, though its attempt
// was cancelled: within CascadeBudget and the attempt's hard lifetime.
func (e *Engine) cascade(ctx context.Context, a *Attempt, run *hoppertype.RunRow) {
	ctx, cancel := Within(ctx, a.HardLife(), CascadeBudget)
	defer cancel()
	if run.ParentID != "" {
		_ = e.CancelRun(ctx, run.ParentID)
	}
	children, err := e.drv.RunList(ctx, &driver.RunListParams{ParentID: run.ID, Limit: 10_000})
	if err != nil {
		e.reportError(fmt.Errorf("cascade from run %s: %w", run.ID, err), hoppertype.PhaseHook)
		return
	}
	for _, ch := range children {
		if !ch.Status.Terminal() {
			_ = e.CancelRun(ctx, ch.ID)
		}
	}
}
