package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Redrive moves jobs back to pending in one transaction with their group
// bookkeeping, then announces them. The job of a workflow run that ended
// compensated is never moved: the saga undid its work on purpose, it is no
// dead letter, and moving its job alone would leave the run compensated
// (RetryRun runs it again).
func (e *Engine) Redrive(ctx context.Context, p *driver.JobRetryParams) ([]driver.JobRetryResult, error) {
	p.Now = e.now()
	if !slices.Contains(p.SkipRunStatuses, hoppertype.RunCompensated) {
		p.SkipRunStatuses = append(slices.Clip(p.SkipRunStatuses), hoppertype.RunCompensated)
	}
	var res []driver.JobRetryResult
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		var err error
		res, err = tx.JobRetry(ctx, p)
		if err != nil {
			return err
		}
		queues := make([]string, 0, len(res))
		for _, r := range res {
			j := r.Job
			if r.PrevState.Terminal() && j.GroupID != j.ID {
				if _, err := tx.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: j.GroupID, OpenDelta: 1, Now: p.Now}); err != nil && !errors.Is(err, hoppertype.ErrNotFound) {
					return err
				}
			}
			queues = append(queues, j.Queue)
		}
		return notifyQueueNames(ctx, tx, queues)
	})
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		j := r.Job
		e.emit(hoppertype.Event{Kind: hoppertype.EventRedriven, JobID: j.ID, Type: j.Type, Queue: j.Queue, GroupID: j.GroupID, ParentID: j.ParentID, At: p.Now})
		e.wakeQueue(j.Queue, time.Time{})
	}
	return res, nil
}

// CancelJob cancels a job: a waiting or stuck one at once (its group and
// run told in the same transaction), a running one by asking the process
// that runs it. A job in any other state is returned with an error
// matching ErrStateConflict.
func (e *Engine) CancelJob(ctx context.Context, id string) (*hoppertype.JobRow, error) {
	now := e.now()
	var (
		row     *hoppertype.JobRow
		settled []*hoppertype.GroupRow
	)
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		var err error
		row, settled, err = e.cancelIn(ctx, tx, id, now)
		return err
	})
	if err != nil {
		if errors.Is(err, hoppertype.ErrStateConflict) {
			return row, err
		}
		return nil, err
	}
	e.cancelled(ctx, row, settled, now)
	return row, nil
}

// CancelJobs cancels the jobs ids in one transaction, as CancelJob cancels
// one, and returns those it cancelled or asked to stop. A job that is
// finished or gone is passed over.
func (e *Engine) CancelJobs(ctx context.Context, ids []string) ([]*hoppertype.JobRow, error) {
	now := e.now()
	var (
		rows    []*hoppertype.JobRow
		settled [][]*hoppertype.GroupRow
	)
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		rows, settled = rows[:0], settled[:0]
		for _, id := range ids {
			row, st, err := e.cancelIn(ctx, tx, id, now)
			switch {
			case errors.Is(err, hoppertype.ErrStateConflict), errors.Is(err, hoppertype.ErrNotFound):
				continue
			case err != nil:
				return err
			}
			rows, settled = append(rows, row), append(settled, st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, row := range rows {
		e.cancelled(ctx, row, settled[i], now)
	}
	return rows, nil
}

// cancelIn cancels the job id through tx: see CancelJob.
func (e *Engine) cancelIn(ctx context.Context, tx driver.Executor, id string, now time.Time) (*hoppertype.JobRow, []*hoppertype.GroupRow, error) {
	row, err := tx.JobCancel(ctx, &driver.JobCancelParams{ID: id, Now: now,
		Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancelled", At: now}})
	if err != nil {
		return row, nil, err
	}
	var settled []*hoppertype.GroupRow
	switch row.State {
	case hoppertype.JobStateCancelled:
		if _, settled, err = e.applyGroup(ctx, tx, row, nil); err != nil {
			return nil, nil, err
		}
		if isRunJob(row) {
			if err := e.applyRunEffects(ctx, tx, row, nil); err != nil {
				return nil, nil, err
			}
		}
		return row, settled, tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobDone, Payload: row.ID})
	case hoppertype.JobStateRunning:
		return row, nil, tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobCancel, Payload: row.ID})
	}
	return row, nil, nil
}

// cancelled tells this process of a committed cancel.
func (e *Engine) cancelled(ctx context.Context, row *hoppertype.JobRow, settled []*hoppertype.GroupRow, now time.Time) {
	switch row.State {
	case hoppertype.JobStateCancelled:
		e.waiters.jobDone(row.ID)
		e.emit(hoppertype.Event{Kind: hoppertype.EventCancelled, JobID: row.ID, Type: row.Type, Queue: row.Queue, GroupID: row.GroupID,
			ParentID: row.ParentID, Attempt: row.Attempt, Error: "cancelled", At: now})
		for _, g := range settled {
			e.groupSettled(ctx, g, now)
		}
	case hoppertype.JobStateRunning:
		e.CancelLocal(row.ID)
	}
}

// RetryRun runs a run that ended without completing again from the start
// (its status one of retryable): a new attempt with a fresh history.
func (e *Engine) RetryRun(ctx context.Context, id string, retryable []hoppertype.RunStatus) error {
	now := e.now()
	var job *hoppertype.JobRow
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if _, err := tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: id, Status: hoppertype.RunPending, Reset: true,
			ExpectStatuses: retryable, Now: now}); err != nil {
			return err
		}
		res, err := tx.JobRetry(ctx, &driver.JobRetryParams{IDs: []string{id}, Now: now, States: []hoppertype.JobState{
			hoppertype.JobStateDead, hoppertype.JobStateExpired, hoppertype.JobStateCancelled, hoppertype.JobStateStuck}})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("its job is not one that ended (or retention deleted it): %w", hoppertype.ErrStateConflict)
		}
		job = res[0].Job
		if res[0].PrevState.Terminal() && job.GroupID != job.ID {
			if _, err := tx.GroupUpdate(ctx, &driver.GroupUpdateParams{ID: job.GroupID, OpenDelta: 1, Now: now}); err != nil && !errors.Is(err, hoppertype.ErrNotFound) {
				return err
			}
		}
		return notifyQueueNames(ctx, tx, []string{job.Queue})
	})
	if err != nil {
		return err
	}
	e.emit(hoppertype.Event{Kind: hoppertype.EventRedriven, JobID: job.ID, Type: job.Type, Queue: job.Queue, GroupID: job.GroupID, ParentID: job.ParentID, At: now})
	e.wakeQueue(job.Queue, time.Time{})
	return nil
}

// RunLive are the statuses of a run still going.
var RunLive = []hoppertype.RunStatus{hoppertype.RunPending, hoppertype.RunRunning, hoppertype.RunWaiting, hoppertype.RunCompensating, hoppertype.RunStuck}

// CancelRun asks a run and its children to stop (see Client.RunCancel).
func (e *Engine) CancelRun(ctx context.Context, id string) error {
	now := e.now()
	var job *hoppertype.JobRow
	var (
		settled    []*hoppertype.GroupRow
		endedStuck bool
	)
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		settled, endedStuck = nil, false
		run, err := tx.RunGet(ctx, &driver.RunGetParams{ID: id})
		if err != nil {
			return err
		}
		if run.Status.Terminal() {
			return fmt.Errorf("run is %s: %w", run.Status, hoppertype.ErrStateConflict)
		}
		if _, err := tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: id, Status: run.Status, ExpectStatuses: RunLive, Now: now,
			Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancel requested", At: now}}); err != nil {
			return err
		}
		if job, err = tx.JobGet(ctx, &driver.JobGetParams{ID: id}); err != nil {
			return err
		}
		switch job.State {
		case hoppertype.JobStateRunning:
			_, err = tx.JobCancel(ctx, &driver.JobCancelParams{ID: id, Now: now})
			if err == nil {
				err = tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobCancel, Payload: id})
			}
		case hoppertype.JobStateStuck:
			// Nothing can run it: it ends cancelled now, with what a
			// cancelled job's end brings (its group, its waiters).
			var row *hoppertype.JobRow
			row, err = tx.JobCancel(ctx, &driver.JobCancelParams{ID: id, Now: now,
				Error: &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindCancelled, Message: "cancelled", At: now}})
			if err == nil {
				_, err = tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: id, Status: hoppertype.RunCancelled, EndedAt: now, Now: now})
			}
			if err == nil {
				_, settled, err = e.applyGroup(ctx, tx, row, nil)
			}
			if err == nil {
				err = tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobDone, Payload: id})
			}
			if err == nil {
				job, endedStuck = row, true
			}
		default:
			_, err = tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{id}, Now: now})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("hopper: cancel run %s: %w", id, err)
	}
	if endedStuck {
		e.waiters.jobDone(id)
		e.emit(hoppertype.Event{Kind: hoppertype.EventCancelled, JobID: id, Type: job.Type, Queue: job.Queue, GroupID: job.GroupID,
			ParentID: job.ParentID, Attempt: job.Attempt, Error: "cancelled", At: now})
		for _, g := range settled {
			e.groupSettled(ctx, g, now)
		}
	}
	if job != nil {
		e.wakeQueue(job.Queue, time.Time{})
		if job.State == hoppertype.JobStateRunning {
			e.CancelLocal(id)
		}
	}
	children, err := e.drv.RunList(ctx, &driver.RunListParams{ParentID: id, Statuses: RunLive, Limit: 10_000})
	if err != nil {
		return fmt.Errorf("hopper: cancel run %s: children: %w", id, err)
	}
	for _, ch := range children {
		if err := e.CancelRun(ctx, ch.ID); err != nil && !errors.Is(err, hoppertype.ErrStateConflict) {
			return err
		}
	}
	return nil
}
