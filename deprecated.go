package hopper

import (
	"context"
	"encoding/json"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// The Client methods below are the old names of methods that now follow one
// scheme, noun first (JobGet, RunList, QueuePause, …). Each calls its new
// name and behaves exactly as it does.

// Get is the old name of JobGet.
//
// Deprecated: use JobGet.
func (c *Client) Get(ctx context.Context, id string) (*JobRow, error) { return c.JobGet(ctx, id) }

// List is the old name of JobList.
//
// Deprecated: use JobList.
func (c *Client) List(ctx context.Context, p *ListParams) (*JobPage, error) { return c.JobList(ctx, p) }

// Cancel is the old name of JobCancel.
//
// Deprecated: use JobCancel.
func (c *Client) Cancel(ctx context.Context, id string) (*JobRow, error) { return c.JobCancel(ctx, id) }

// Retry is the old name of JobRetry.
//
// Deprecated: use JobRetry.
func (c *Client) Retry(ctx context.Context, id string) (*JobRow, error) { return c.JobRetry(ctx, id) }

// Reopen is the old name of JobReopen.
//
// Deprecated: use JobReopen.
func (c *Client) Reopen(ctx context.Context, id string) (*JobRow, error) { return c.JobReopen(ctx, id) }

// Redrive is the old name of JobRedrive.
//
// Deprecated: use JobRedrive.
func (c *Client) Redrive(ctx context.Context, p *RedriveParams) (int, error) {
	return c.JobRedrive(ctx, p)
}

// Wait is the old name of JobWait.
//
// Deprecated: use JobWait.
func (c *Client) Wait(ctx context.Context, id string) (*JobRow, error) { return c.JobWait(ctx, id) }

// Attempts is the old name of JobAttempts.
//
// Deprecated: use JobAttempts.
func (c *Client) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	return c.JobAttempts(ctx, id)
}

// Generations is the old name of JobGenerations.
//
// Deprecated: use JobGenerations.
func (c *Client) Generations(ctx context.Context, id string) (int, error) {
	return c.JobGenerations(ctx, id)
}

// WaitGroup is the old name of GroupWait.
//
// Deprecated: use GroupWait.
func (c *Client) WaitGroup(ctx context.Context, groupID string) (*GroupValue, error) {
	return c.GroupWait(ctx, groupID)
}

// GroupStatus is the old name of GroupGet.
//
// Deprecated: use GroupGet.
func (c *Client) GroupStatus(ctx context.Context, groupID string) (*GroupValue, error) {
	return c.GroupGet(ctx, groupID)
}

// GateInfo is the old name of GateGet.
//
// Deprecated: use GateGet.
func (c *Client) GateInfo(ctx context.Context, id string) (*GateInfo, error) {
	return c.GateGet(ctx, id)
}

// GetRun is the old name of RunGet.
//
// Deprecated: use RunGet.
func (c *Client) GetRun(ctx context.Context, id string) (*RunInfo, error) { return c.RunGet(ctx, id) }

// ListRuns is the old name of RunList.
//
// Deprecated: use RunList.
func (c *Client) ListRuns(ctx context.Context, q *RunQuery) (*RunPage, error) {
	return c.RunList(ctx, q)
}

// QueryRuns returns runs matching q, newest first, without their history:
// the runs of RunList's page.
//
// Deprecated: use RunList, whose RunPage.Runs are these runs.
func (c *Client) QueryRuns(ctx context.Context, q *RunQuery) ([]*RunInfo, error) {
	page, err := c.RunList(ctx, q)
	if err != nil {
		return nil, err
	}
	return page.Runs, nil
}

// WaitRun is the old name of RunWait.
//
// Deprecated: use RunWait.
func (c *Client) WaitRun(ctx context.Context, id string) (*RunInfo, error) { return c.RunWait(ctx, id) }

// CancelRun is the old name of RunCancel.
//
// Deprecated: use RunCancel.
func (c *Client) CancelRun(ctx context.Context, id string) error { return c.RunCancel(ctx, id) }

// RetryRun is the old name of RunRetry.
//
// Deprecated: use RunRetry.
func (c *Client) RetryRun(ctx context.Context, id string) error { return c.RunRetry(ctx, id) }

// History is the old name of RunHistory.
//
// Deprecated: use RunHistory.
func (c *Client) History(ctx context.Context, runID string) (*History, error) {
	return c.RunHistory(ctx, runID)
}

// ResumeHook is the old name of HookResume.
//
// Deprecated: use HookResume.
func (c *Client) ResumeHook(ctx context.Context, token string, payload json.RawMessage) error {
	return c.HookResume(ctx, token, payload)
}

// ResumeHookRequest is the old name of HookResumeRequest.
//
// Deprecated: use HookResumeRequest.
func (c *Client) ResumeHookRequest(ctx context.Context, token string, payload json.RawMessage, req *HookRequest) error {
	return c.HookResumeRequest(ctx, token, payload, req)
}

// ReadStream is the old name of StreamRead.
//
// Deprecated: use StreamRead.
func (c *Client) ReadStream(ctx context.Context, runID string, from int64, limit int) ([]*hoppertype.StreamChunk, error) {
	return c.StreamRead(ctx, runID, from, limit)
}

// Queues is the old name of QueueList.
//
// Deprecated: use QueueList.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) { return c.QueueList(ctx) }

// PauseQueue is the old name of QueuePause.
//
// Deprecated: use QueuePause.
func (c *Client) PauseQueue(ctx context.Context, queue string, opts *PauseOpts) error {
	return c.QueuePause(ctx, queue, opts)
}

// ResumeQueue is the old name of QueueResume.
//
// Deprecated: use QueueResume.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	return c.QueueResume(ctx, queue)
}

// Schedules is the old name of ScheduleList.
//
// Deprecated: use ScheduleList.
func (c *Client) Schedules(ctx context.Context) ([]ScheduleInfo, error) { return c.ScheduleList(ctx) }

// PauseSchedule is the old name of SchedulePause.
//
// Deprecated: use SchedulePause.
func (c *Client) PauseSchedule(ctx context.Context, name string, opts *PauseOpts) error {
	return c.SchedulePause(ctx, name, opts)
}

// ResumeSchedule is the old name of ScheduleResume.
//
// Deprecated: use ScheduleResume.
func (c *Client) ResumeSchedule(ctx context.Context, name string) error {
	return c.ScheduleResume(ctx, name)
}

// DefineSchedule is the old name of ScheduleDefine.
//
// Deprecated: use ScheduleDefine.
func (c *Client) DefineSchedule(ctx context.Context, s StoredSchedule) error {
	return c.ScheduleDefine(ctx, s)
}

// DeleteSchedule is the old name of ScheduleDelete.
//
// Deprecated: use ScheduleDelete.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.ScheduleDelete(ctx, name)
}

// CheckScheduleTarget is the old name of ScheduleCheckTarget.
//
// Deprecated: use ScheduleCheckTarget.
func (c *Client) CheckScheduleTarget(ctx context.Context, s StoredSchedule) error {
	return c.ScheduleCheckTarget(ctx, s)
}

// Workers is the old name of WorkerList.
//
// Deprecated: use WorkerList.
func (c *Client) Workers(ctx context.Context) ([]*WorkerInfo, error) { return c.WorkerList(ctx) }

// Changes is the old name of ChangeList.
//
// Deprecated: use ChangeList.
func (c *Client) Changes(ctx context.Context, after ChangeCursor, limit int) ([]*Change, error) {
	return c.ChangeList(ctx, after, limit)
}

// Observers is the old name of ObserverList.
//
// Deprecated: use ObserverList.
func (c *Client) Observers(ctx context.Context) ([]*driver.CursorRow, error) {
	return c.ObserverList(ctx)
}
