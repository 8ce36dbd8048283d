package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// ChildOpts configure a child run. A nil *ChildOpts is valid.
type ChildOpts struct {
	// ID is the child's run id (ValidateID's rule holds); empty derives
	// one from the parent's id, its attempt and the position ("parent.5" in
	// the parent's first attempt, "parent@2.5" in its second), stable
	// across replays. An explicit ID is the same in every attempt of the
	// parent: a retried parent finds the child an earlier attempt started
	// (starts are idempotent by id).
	ID string
}

// Child starts a child run of w and waits for it durably (the parent
// suspends, holding no goroutine, and wakes when the child ends). It
// returns the child's output, or its failure as a *RunError. Cancelling
// the parent cancels its children.
func Child[I, O any](wf WorkflowContext, w *WorkflowType[I, O], in I, opts *ChildOpts) (O, error) {
	st := wf.state()
	var zero O
	if err := st.Check(); err != nil {
		return zero, err
	}
	if opts != nil && opts.ID != "" {
		// Refused alike on every replay, before the history is read,
		// unless the history holds the child: started before the rule
		// refused its id, it reads on.
		if err := ValidateID(opts.ID); err != nil && !recordedChild(st, w.wfName, opts.ID) {
			return zero, fmt.Errorf("hopper: child %s: %w", w.wfName, err)
		}
	}
	ev, err := st.Next(w.wfName, engine.EvChildStarted)
	if err != nil {
		return zero, err
	}
	var childID string
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		childID = data.Child
	} else {
		if err := st.Live(); err != nil {
			return zero, err
		}
		childID = st.Scope() + "." + strconv.Itoa(st.NextSeq)
		if opts != nil && opts.ID != "" {
			childID = opts.ID
		}
		var started bool
		err := st.InTx(engine.EvChildStarted, w.wfName, engine.EventData{Child: childID}, func(ctx context.Context, tx driver.Executor) error {
			_, existing, err := st.c.startRunIn(ctx, tx, w.core(), in, &StartOpts{ID: childID}, st.Run.ID)
			started = !existing
			return err
		})
		if err != nil {
			return zero, err
		}
		if started {
			st.c.wakeQueue(w.core().queue(), time.Time{})
			st.c.wakeQueue(st.c.cfg.DefaultQueue, time.Time{})
		}
	}
	if ev, err := st.Next(w.wfName, engine.EvChildCompleted); err != nil {
		return zero, err
	} else if ev != nil {
		return decodeChild[O](st, childID, ev)
	}
	if err := st.Live(); err != nil {
		return zero, err
	}
	info, err := st.c.runStatus(st.Context(), childID)
	if err != nil {
		return zero, st.Fail(err)
	}
	if !info.Status.Terminal() {
		return zero, st.Suspend(engine.FarFuture, func(ctx context.Context) bool {
			i, err := st.c.runStatus(ctx, childID)
			return err == nil && i.Status.Terminal()
		})
	}
	data := engine.EventData{Child: childID, Status: info.Status}
	if info.Status == hoppertype.RunCompleted {
		data.Output = info.Output
	} else {
		data.Error = info.Error
		if data.Error == nil {
			data.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: string(info.Status)}
		}
	}
	if err := st.Record(st.Context(), nil, engine.EvChildCompleted, w.wfName, data); err != nil {
		return zero, err
	}
	return decodeChild[O](st, childID, st.Events[len(st.Events)-1])
}

// recordedChild says whether the history's next event is the start of
// child id of workflow name.
func recordedChild(st *wfState, name, id string) bool {
	ev := st.Peek()
	if ev == nil || ev.Kind != engine.EvChildStarted || ev.Name != name {
		return false
	}
	var data engine.EventData
	return json.Unmarshal(ev.Data, &data) == nil && data.Child == id
}

func decodeChild[O any](st *wfState, childID string, ev *hoppertype.RunEvent) (O, error) {
	var zero O
	var data engine.EventData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return zero, err
	}
	if data.Error != nil {
		return zero, &RunError{RunID: childID, Status: data.Status, Kind: data.Error.Kind, Message: data.Error.Message}
	}
	var v O
	if len(data.Output) > 0 && !isNoValue[O]() {
		if err := st.c.codec.Unmarshal(data.Output, &v); err != nil {
			return zero, fmt.Errorf("hopper: child %s: decode output: %w", childID, err)
		}
	}
	return v, nil
}
