package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// InsertParams says what Insert stores.
type InsertParams struct {
	// Rows are the jobs, built and validated; ids are unique among them.
	Rows []*hoppertype.JobRow
	// Tx is the caller's transaction (see driver.TxInserter), nil for one
	// of the engine's own.
	Tx any
	// Skip holds the ids of rows inserted already claimed, to run here at
	// once (SkipQueueRows).
	Skip map[string]bool
	// ExplicitID says the one row's id was given by the caller: a stored
	// job of the same id, type and input is then an idempotent repeat.
	ExplicitID bool
}

// Insert stores jobs in one transaction (the caller's tx when given) with
// their gates, then wakes workers and emits queued events.
func (e *Engine) Insert(ctx context.Context, p *InsertParams) ([]driver.JobInsertResult, error) {
	rows, tx := p.Rows, p.Tx
	if len(rows) == 0 {
		return nil, nil
	}
	var res []driver.JobInsertResult
	params := &driver.JobInsertManyParams{Jobs: rows}
	var err error
	notify := false // the queue notifications are still to send
	if tx != nil {
		for _, r := range rows {
			if r.Type == GateTypeName {
				return nil, fmt.Errorf("%w: a gate cannot be enqueued through a caller's transaction (enqueue it with EnqueueMany)", hoppertype.ErrInvalidInput)
			}
		}
		ti, ok := e.base.(driver.TxInserter)
		if !ok {
			return nil, fmt.Errorf("%w: the %s driver has no transactional enqueue", driver.ErrNotImplemented, e.base.Name())
		}
		err = e.InCallerTx(ctx, tx, func(ctx context.Context) error {
			var err error
			res, err = ti.JobInsertManyTx(ctx, tx, params)
			return err
		})
	} else if !slices.ContainsFunc(rows, func(r *hoppertype.JobRow) bool { return r.Type == GateTypeName }) {
		// One atomic call: no transaction to open and commit around it.
		// The notifications follow the commit and this engine's own
		// wake-ups (below).
		res, err = e.drv.JobInsertMany(ctx, params)
		notify = true
	} else {
		err = e.drv.InTx(ctx, func(ctx context.Context, dtx driver.Executor) error {
			var err error
			res, err = e.InsertIn(ctx, dtx, params)
			return err
		})
	}
	if errors.Is(err, hoppertype.ErrDuplicateID) {
		res, err = e.duplicateInsert(ctx, tx, p.ExplicitID, rows)
		notify = false
	}
	if err != nil {
		return nil, fmt.Errorf("hopper: enqueue: %w", err)
	}
	e.afterInsert(res, p.Skip, nil)
	if notify {
		e.notifyAfterInsert(ctx, res)
	}
	return res, nil
}

// duplicateInsert answers an insert that the store refused because an id
// was taken (through tx, the caller's transaction, when given). One job
// with an explicit id whose stored job has the same type and input is an
// idempotent repeat: its result is the stored job, marked Existing (a
// client retrying an enqueue whose reply it lost gets the same job). Any
// other case is an error matching ErrDuplicateID, in hopper's words (the
// store's are left out). When the stored job cannot be read through tx (a
// PostgreSQL transaction that a concurrent insert of the id aborted), the
// error is ErrDuplicateID too.
func (e *Engine) duplicateInsert(ctx context.Context, tx any, explicitID bool, rows []*hoppertype.JobRow) ([]driver.JobInsertResult, error) {
	if len(rows) != 1 || !explicitID {
		return nil, fmt.Errorf("%w: a job id given is taken", hoppertype.ErrDuplicateID)
	}
	row := rows[0]
	var have *hoppertype.JobRow
	var err error
	if tx != nil {
		have, err = e.base.(driver.TxInserter).JobGetTx(ctx, tx, &driver.JobGetParams{ID: row.ID})
	} else {
		have, err = e.drv.JobGet(ctx, &driver.JobGetParams{ID: row.ID})
	}
	switch {
	case err != nil:
		// Deleted since, or unreadable through an aborted transaction.
		return nil, fmt.Errorf("%w: job %q exists", hoppertype.ErrDuplicateID, row.ID)
	case have.Type != row.Type:
		return nil, fmt.Errorf("%w: job %q exists with type %q, not %q", hoppertype.ErrDuplicateID, row.ID, have.Type, row.Type)
	case !bytes.Equal(have.Input, row.Input):
		return nil, fmt.Errorf("%w: job %q exists with another input", hoppertype.ErrDuplicateID, row.ID)
	}
	return []driver.JobInsertResult{{Job: have, Existing: true}}, nil
}

// InsertIn stores the jobs of p in tx with their gates, and the wake-ups of
// the queues that received due jobs.
func (e *Engine) InsertIn(ctx context.Context, tx driver.Executor, p *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	res, err := tx.JobInsertMany(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := e.insertGates(ctx, tx, res); err != nil {
		return nil, err
	}
	return res, notifyQueues(ctx, tx, res)
}

// notifyAfterInsert announces the queues that received due jobs, after the
// insert committed and this client woke its own workers. Each payload is
// signed with the client's sender id (queue,sender): its own session skips
// the echo, which would only make it claim again and find nothing. A
// notification is a hint (listeners also poll), so a failure to send one
// does not fail the enqueue; it is reported. The caller's ctx ending does
// not cut it (the jobs are stored already); a poll interval does.
func (e *Engine) notifyAfterInsert(ctx context.Context, res []driver.JobInsertResult) {
	queues := pendingQueues(res)
	if len(queues) == 0 {
		return
	}
	ctx, cancel := afterCommit(ctx, e.cfg.PollInterval)
	defer cancel()
	for _, q := range queues {
		if err := e.drv.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: q + "," + e.sender}); err != nil {
			e.reportError(fmt.Errorf("announce queue %q: %w", q, err), hoppertype.PhaseQueue)
			return
		}
	}
}

// NotifyQueues announces the queues that received due jobs, in tx.
func NotifyQueues(ctx context.Context, tx driver.Executor, res []driver.JobInsertResult) error {
	return notifyQueues(ctx, tx, res)
}

// NotifyAfterInsert announces, after the commit, the queues that received
// due jobs (see notifyAfterInsert).
func (e *Engine) NotifyAfterInsert(ctx context.Context, res []driver.JobInsertResult) {
	e.notifyAfterInsert(ctx, res)
}

// notifyQueues announces the queues that received due jobs.
func notifyQueues(ctx context.Context, tx driver.Executor, res []driver.JobInsertResult) error {
	return notifyQueueNames(ctx, tx, pendingQueues(res))
}

// pendingQueues returns, sorted and once each, the queues of the jobs an
// insert stored as pending.
func pendingQueues(res []driver.JobInsertResult) []string {
	var queues []string
	for _, r := range res {
		if !r.Existing && r.Job.State == hoppertype.JobStatePending {
			queues = append(queues, r.Job.Queue)
		}
	}
	slices.Sort(queues)
	return slices.Compact(queues)
}

// notifyQueueNames announces, once each, that the queues have due jobs.
func notifyQueueNames(ctx context.Context, tx driver.Executor, queues []string) error {
	slices.Sort(queues)
	for _, q := range slices.Compact(queues) {
		if err := tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: q}); err != nil {
			return err
		}
	}
	return nil
}

// AfterInsert runs what follows an insert the caller committed itself:
// local wake-ups, queued events, the first attempts of skip's jobs.
func (e *Engine) AfterInsert(res []driver.JobInsertResult, skip map[string]bool) {
	e.afterInsert(res, skip, nil)
}

// AfterRunStart is AfterInsert for the job of a run the caller started
// (run is its row as stored, with no history): a first execution that
// skips the queue begins from run without reading it back.
func (e *Engine) AfterRunStart(job *hoppertype.JobRow, run *hoppertype.RunRow, skip map[string]bool) {
	e.afterInsert([]driver.JobInsertResult{{Job: job}}, skip, run)
}

// afterInsert runs after the insert committed: local wake-ups, events, and
// the in-process first attempt of SkipQueue jobs (with fresh, the run row
// of a run just started, when res is its job).
func (e *Engine) afterInsert(res []driver.JobInsertResult, skip map[string]bool, fresh *hoppertype.RunRow) {
	for _, r := range res {
		if r.Existing {
			continue
		}
		j := r.Job
		e.emit(hoppertype.Event{Kind: hoppertype.EventQueued, JobID: j.ID, Type: j.Type, Queue: j.Queue, GroupID: j.GroupID,
			ParentID: j.ParentID, Dependents: j.Dependents, RunAt: j.RunAt, At: j.QueuedAt})
		switch {
		case skip[j.ID] && j.State == hoppertype.JobStateRunning:
			var run *hoppertype.RunRow
			if fresh != nil && fresh.ID == j.ID {
				run = fresh
			}
			e.runSkipQueue(j, run)
		case j.State == hoppertype.JobStatePending:
			e.wakeQueue(j.Queue, time.Time{})
		case j.State == hoppertype.JobStateScheduled:
			e.wakeQueue(j.Queue, j.RunAt)
		}
	}
}
