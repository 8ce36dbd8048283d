package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
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
	if err := st.check(); err != nil {
		return zero, err
	}
	if opts != nil && opts.ID != "" {
		// Refused alike on every replay, before the history is read.
		if err := ValidateID(opts.ID); err != nil {
			return zero, fmt.Errorf("hopper: child %s: %w", w.wfName, err)
		}
	}
	ev, err := st.next(w.wfName, evChildStarted)
	if err != nil {
		return zero, err
	}
	var childID string
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		childID = data.Child
	} else {
		if err := st.live(); err != nil {
			return zero, err
		}
		childID = st.scope() + "." + strconv.Itoa(st.nextSeq)
		if opts != nil && opts.ID != "" {
			childID = opts.ID
		}
		var started bool
		err := st.inTx(evChildStarted, w.wfName, evData{Child: childID}, func(ctx context.Context, tx driver.Executor) error {
			_, existing, err := st.c.startRunIn(ctx, tx, w.core(), in, &StartOpts{ID: childID}, st.run.ID)
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
	if ev, err := st.next(w.wfName, evChildCompleted); err != nil {
		return zero, err
	} else if ev != nil {
		return decodeChild[O](st, childID, ev)
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	info, err := st.c.runStatus(st.ctx, childID)
	if err != nil {
		return zero, st.fail(err)
	}
	if !info.Status.Terminal() {
		return zero, st.suspend(farFuture, func(ctx context.Context) bool {
			i, err := st.c.runStatus(ctx, childID)
			return err == nil && i.Status.Terminal()
		})
	}
	data := evData{Child: childID, Status: info.Status}
	if info.Status == hoppertype.RunCompleted {
		data.Output = info.Output
	} else {
		data.Error = info.Error
		if data.Error == nil {
			data.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: string(info.Status)}
		}
	}
	if err := st.record(st.ctx, nil, evChildCompleted, w.wfName, data); err != nil {
		return zero, err
	}
	return decodeChild[O](st, childID, st.events[len(st.events)-1])
}

func decodeChild[O any](st *wfState, childID string, ev *hoppertype.RunEvent) (O, error) {
	var zero O
	var data evData
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
