package hopper

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// Activity runs a job of type t as a step of the workflow: the job is
// queued with its own queue, limits, timeout, retries and heartbeats, and
// the workflow waits (suspended, holding no goroutine) until it finishes.
// Its output, or its final error as a *StepError, is recorded. The job's
// id is derived from the run's, the attempt's and the position
// ("order-1.a3", "order-1@2.a3" in the run's second attempt): opts.ID is
// not used, and no id a caller gives can take it (see ValidateID).
func Activity[I, O any](wf WorkflowContext, t *Type[I, O], in I, opts *InsertOpts) (O, error) {
	st := wf.state()
	var zero O
	if err := st.Check(); err != nil {
		return zero, err
	}
	name := t.Name()
	ev, err := st.Next(name, engine.EvActivityScheduled)
	if err != nil {
		return zero, err
	}
	var jobID string
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		jobID = data.Job
	} else {
		if err := st.Live(); err != nil {
			return zero, err
		}
		jobID = st.Scope() + ".a" + strconv.Itoa(st.NextSeq)
		o := InsertOpts{}
		if opts != nil {
			o = *opts
		}
		o.ID = jobID
		o.Metadata = mergeMeta(o.Metadata, map[string]string{wakeKey: st.Run.ID})
		spec := t.Job(in, &o)
		spec.derivedID = true // the run's id and a position
		row, err := st.c.buildRow(spec, st.c.now())
		if err != nil {
			return zero, err
		}
		row.ParentID = st.Run.ID
		var res []driver.JobInsertResult
		err = st.c.withInsertMiddleware(st.Context(), []*hoppertype.JobRow{row}, func(context.Context) error {
			return st.InTx(engine.EvActivityScheduled, name, engine.EventData{Job: jobID}, func(ctx context.Context, tx driver.Executor) error {
				var err error
				if res, err = tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}}); err != nil {
					return err
				}
				return engine.NotifyQueues(ctx, tx, res)
			})
		})
		if err != nil {
			return zero, err
		}
		st.c.eng.AfterInsert(res, nil)
	}
	if ev, err := st.Next(name, engine.EvActivityCompleted); err != nil {
		return zero, err
	} else if ev != nil {
		return decodeStep[O](st, name, ev)
	}
	if err := st.Live(); err != nil {
		return zero, err
	}
	job, err := st.c.store().JobGet(st.Context(), &driver.JobGetParams{ID: jobID})
	if err != nil {
		return zero, st.Fail(err)
	}
	if !job.State.Terminal() {
		return zero, st.Suspend(engine.FarFuture, func(ctx context.Context) bool {
			j, err := st.c.store().JobGet(ctx, &driver.JobGetParams{ID: jobID})
			return err == nil && j.State.Terminal()
		})
	}
	data := engine.EventData{Attempts: job.Attempt}
	if job.State == hoppertype.JobStateSucceeded {
		data.Output = job.Result
	} else {
		je := jobErrorFromRow(job).(*JobError)
		data.Error = &hoppertype.ErrorInfo{Kind: je.Kind, Message: je.Message, Attempt: job.Attempt, At: st.c.now()}
	}
	if err := st.Record(st.Context(), nil, engine.EvActivityCompleted, name, data); err != nil {
		return zero, err
	}
	return decodeStep[O](st, name, st.Events[len(st.Events)-1])
}

// wakeKey, in a job's metadata, names the run its end wakes (an activity's
// run).
const wakeKey = engine.WakeKey

func mergeMeta(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
