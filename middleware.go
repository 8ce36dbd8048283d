package hopper

import (
	"context"

	"github.com/hopper-go/hopper/hoppertype"
)

// InsertMiddleware intercepts a client's inserts (Enqueue, EnqueueMany,
// EnqueueTx, EnqueueName, a workflow run's start, a handler's Spawn, a
// workflow's Activity): InsertMany gets the rows about to be stored and
// doInner, which stores them. It may read and change the rows' Metadata
// (to carry a trace context, a tenant, …), do work around doInner (a span,
// a metric), or refuse the insert by returning an error without calling
// doInner. Middleware run in the order Config.InsertMiddleware lists them,
// each around the next, then, inside them, each type's own
// (TypeOpts.InsertMiddleware, WorkflowOpts.InsertMiddleware) with that
// type's rows. Every insert a client makes goes through them: enqueues,
// run starts, Spawn, Activity, Commit.Enqueue in an observer and the jobs
// a schedule enqueues.
type InsertMiddleware interface {
	InsertMany(ctx context.Context, rows []*JobRow, doInner func(ctx context.Context) error) error
}

// WorkMiddleware intercepts the attempts a client runs: Work gets the
// attempt's context (JobFromContext works in it), the job's row as claimed
// (read it, do not change it) and doInner, which runs the handler (and,
// for a workflow run, one execution of it). What Work returns is the
// attempt's outcome: doInner's error passed on, or its own; a Work that
// returns nil without calling doInner ends the attempt a success with no
// output. An attempt that defers its job without using an attempt (a
// handler's Snooze, or a workflow run's execution that ends waiting on a
// sleep, a hook, a child or an activity) returns an error matching
// *SnoozeError (errors.As), which is not a failure. A handler's panic
// reaches Work as an error matching ErrPanic. The client's
// Config.WorkMiddleware run first, in order, then the type's
// TypeOpts.WorkMiddleware, each around the next.
type WorkMiddleware interface {
	Work(ctx context.Context, job *JobRow, doInner func(ctx context.Context) error) error
}

// StepMiddleware intercepts each try of a workflow step's function (not
// a replay of a recorded step, which runs nothing): Step gets the try's
// context (StepFromContext works in it), the step's metadata and doInner,
// which calls the function. What it returns is the try's error; a Step
// that returns nil without calling doInner makes the step's result its
// zero value. A panic in the function unwinds through Step (it is
// recovered outside the step middleware, into a try's error matching
// ErrPanic): a Step that defers its bookkeeping sees it. Config.StepMiddleware
// run in order, each around the next.
type StepMiddleware interface {
	Step(ctx context.Context, step StepMetadata, doInner func(ctx context.Context) error) error
}

// StepMiddlewareFunc is a StepMiddleware made of a function.
type StepMiddlewareFunc func(ctx context.Context, step StepMetadata, doInner func(ctx context.Context) error) error

// Step calls f.
func (f StepMiddlewareFunc) Step(ctx context.Context, step StepMetadata, doInner func(ctx context.Context) error) error {
	return f(ctx, step, doInner)
}

// InsertMiddlewareFunc is an InsertMiddleware made of a function.
type InsertMiddlewareFunc func(ctx context.Context, rows []*JobRow, doInner func(ctx context.Context) error) error

// InsertMany calls f.
func (f InsertMiddlewareFunc) InsertMany(ctx context.Context, rows []*JobRow, doInner func(ctx context.Context) error) error {
	return f(ctx, rows, doInner)
}

// WorkMiddlewareFunc is a WorkMiddleware made of a function.
type WorkMiddlewareFunc func(ctx context.Context, job *JobRow, doInner func(ctx context.Context) error) error

// Work calls f.
func (f WorkMiddlewareFunc) Work(ctx context.Context, job *JobRow, doInner func(ctx context.Context) error) error {
	return f(ctx, job, doInner)
}

// withInsertMiddleware runs store inside c's insert middleware, then
// inside each type's own with that type's rows (in the order the types
// first appear in rows); what they changed of the rows is held to the
// rules of any row first.
func (c *Client) withInsertMiddleware(ctx context.Context, rows []*hoppertype.JobRow, store func(ctx context.Context) error) error {
	inner := store
	typed := c.typeInsertMiddleware(rows)
	if len(c.cfg.InsertMiddleware) == 0 && len(typed) == 0 {
		return store(ctx)
	}
	inner = func(ctx context.Context) error {
		for _, row := range rows {
			if err := checkRow(row); err != nil {
				return err
			}
		}
		return store(ctx)
	}
	for i := len(typed) - 1; i >= 0; i-- {
		inner = chainInsert(typed[i].mws, typed[i].rows, inner)
	}
	return chainInsert(c.cfg.InsertMiddleware, rows, inner)(ctx)
}

// typedInsert is a type's own insert middleware and its rows of a batch.
type typedInsert struct {
	mws  []InsertMiddleware
	rows []*hoppertype.JobRow
}

// typeInsertMiddleware groups rows by type, for the types registered here
// with insert middleware of their own.
func (c *Client) typeInsertMiddleware(rows []*hoppertype.JobRow) []typedInsert {
	var out []typedInsert
	index := map[string]int{}
	for _, row := range rows {
		i, seen := index[row.Type]
		if !seen {
			i = -1
			if t := c.lookupType(row.Type); t != nil && len(t.insertMiddleware()) > 0 {
				i = len(out)
				out = append(out, typedInsert{mws: t.insertMiddleware()})
			}
			index[row.Type] = i
		}
		if i >= 0 {
			out[i].rows = append(out[i].rows, row)
		}
	}
	return out
}

// chainInsert wraps inner in mws, the first outermost, each given rows.
func chainInsert(mws []InsertMiddleware, rows []*hoppertype.JobRow, inner func(ctx context.Context) error) func(ctx context.Context) error {
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], inner
		inner = func(ctx context.Context) error { return mw.InsertMany(ctx, rows, next) }
	}
	return inner
}

// withWorkMiddleware runs do inside c's and the type's work middleware.
func (c *Client) withWorkMiddleware(ctx context.Context, t typeCore, row *hoppertype.JobRow, do func(ctx context.Context) error) error {
	own := t.workMiddleware()
	if len(c.cfg.WorkMiddleware) == 0 && len(own) == 0 {
		return do(ctx)
	}
	mws := append(append([]WorkMiddleware(nil), c.cfg.WorkMiddleware...), own...)
	inner := do
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], inner
		inner = func(ctx context.Context) error { return mw.Work(ctx, row.Clone(), next) }
	}
	return inner(ctx)
}

// stepMiddleware wraps a step's function in c's step middleware.
func stepMiddleware[T any](mws []StepMiddleware, meta StepMetadata, fn func(ctx context.Context) (T, error)) func(ctx context.Context) (T, error) {
	if len(mws) == 0 {
		return fn
	}
	return func(ctx context.Context) (T, error) {
		var v T
		inner := func(ctx context.Context) error {
			var err error
			v, err = fn(ctx)
			return err
		}
		for i := len(mws) - 1; i >= 0; i-- {
			mw, next := mws[i], inner
			inner = func(ctx context.Context) error { return mw.Step(ctx, meta, next) }
		}
		err := inner(ctx)
		return v, err
	}
}
