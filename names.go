package hopper

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// PauseOpts are the options of QueuePause and SchedulePause. A nil
// *PauseOpts is the default.
type PauseOpts struct {
	// Create pauses a name nothing has used yet, ahead of its first job or
	// deploy. Without it such a name is refused with an *UnknownNameError,
	// so that a typo is not stored for good. Defaults to false.
	Create bool
}

// UnknownNameError is returned by QueuePause, QueueResume, SchedulePause
// and ScheduleResume for a name nothing has used yet: a queue no job,
// worker or earlier pause has named, a schedule neither the store nor the
// client knows. It wraps ErrNotFound.
type UnknownNameError struct {
	// Kind is "queue" or "schedule".
	Kind string
	Name string
	// Known are the names of that kind in use, sorted.
	Known []string
}

// Error names the unknown name and the known ones.
func (e *UnknownNameError) Error() string {
	why := "no job, worker or earlier pause has used it"
	if e.Kind == "schedule" {
		why = "no process registered it and the store does not keep it"
	}
	return fmt.Sprintf("hopper: unknown %s %q: %s (known: %s)", e.Kind, e.Name, why, listOrNone(e.Known))
}

// Unwrap returns ErrNotFound.
func (e *UnknownNameError) Unwrap() error { return ErrNotFound }

// UnknownTargetError is returned by ScheduleCheckTarget for a job type or
// workflow that no worker registers. It wraps ErrUnknownType.
type UnknownTargetError struct {
	// Name is the job type, or the workflow when Workflow is set.
	Name     string
	Workflow bool
	// Registered are the job types (or workflows) workers register, sorted.
	Registered []string
}

// Error names the target and the registered ones.
func (e *UnknownTargetError) Error() string {
	kind := "job type"
	if e.Workflow {
		kind = "workflow"
	}
	return fmt.Sprintf("hopper: no worker registers %s %q (registered: %s)", kind, e.Name, listOrNone(e.Registered))
}

// Unwrap returns ErrUnknownType.
func (e *UnknownTargetError) Unwrap() error { return ErrUnknownType }

// listOrNone joins names for a message, at most 20 of them.
func listOrNone(names []string) string {
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > 20:
		return strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more", len(names)-20)
	}
	return strings.Join(names, ", ")
}

// Registered returns the job types and workflows that workers register:
// this client's, and those of every process whose worker row the store
// keeps (started clients report theirs every heartbeat; a row outlives its
// process by up to an hour, unless the process stopped cleanly), sorted.
func (c *Client) Registered(ctx context.Context) (types, workflows []string, err error) {
	types, workflows = c.Types(), c.Workflows()
	infos, err := c.workerInfos(ctx, c.store())
	if err != nil {
		return nil, nil, err
	}
	for _, w := range infos {
		types = append(types, w.Types...)
		workflows = append(workflows, w.Workflows...)
	}
	slices.Sort(types)
	slices.Sort(workflows)
	return slices.Compact(types), slices.Compact(workflows), nil
}

// ScheduleCheckTarget returns an *UnknownTargetError when no worker
// (Registered) registers the job type or workflow s runs. ScheduleDefine
// does not check, so that a schedule can be defined ahead of the deploy
// that runs it; the HTTP API and the command line check first unless told
// to force it, so that a typo does not define a schedule nothing runs.
func (c *Client) ScheduleCheckTarget(ctx context.Context, s StoredSchedule) error {
	if s.Type == "" && s.Workflow == "" {
		return nil // ScheduleDefine says what is missing
	}
	types, workflows, err := c.Registered(ctx)
	if err != nil {
		return err
	}
	if s.Type != "" && !slices.Contains(types, s.Type) {
		return &UnknownTargetError{Name: s.Type, Registered: types}
	}
	if s.Type == "" && !slices.Contains(workflows, s.Workflow) {
		return &UnknownTargetError{Name: s.Workflow, Workflow: true, Registered: workflows}
	}
	return nil
}

// WorkerSchedule is a schedule a worker runs, as its worker row reports
// it.
type WorkerSchedule struct {
	Name string `json:"name"`
	// CatchUp is how late an occurrence may still fire there (0: on time
	// only).
	CatchUp Duration `json:"catch_up"`
}

// runningSchedules returns the schedules this client runs, by name.
func (c *Client) runningSchedules() []WorkerSchedule {
	entries := c.eng.Schedules()
	out := make([]WorkerSchedule, 0, len(entries))
	for _, e := range entries {
		out = append(out, WorkerSchedule{Name: e.Name, CatchUp: Duration(e.CatchUp)})
	}
	slices.SortFunc(out, func(a, b WorkerSchedule) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// markRunElsewhere sets Registered, and the catch-up window, on the
// schedules that other started clients report they run (their worker rows,
// seen within three heartbeat intervals), so that every client lists the
// same, whether or not it runs a schedule itself.
func (c *Client) markRunElsewhere(ctx context.Context, byName map[string]*ScheduleInfo) error {
	rows, err := c.store().WorkerList(ctx, &driver.WorkerListParams{SeenAfter: c.now().Add(-WorkerDeadAfter * c.cfg.HeartbeatInterval)})
	if err != nil {
		return fmt.Errorf("hopper: list workers: %w", err)
	}
	for _, r := range rows {
		var w WorkerInfo
		if r.ID == c.eng.WorkerID() || len(r.Info) == 0 || json.Unmarshal(r.Info, &w) != nil {
			continue // this client knows its own; a row it cannot read tells nothing
		}
		for _, s := range w.Schedules {
			in := byName[s.Name]
			if in == nil || in.Registered {
				continue // the store forgot it, or this client's own entry says it all
			}
			in.Registered, in.CatchUp = true, time.Duration(s.CatchUp)
		}
	}
	return nil
}

// workerInfos returns what the store's worker rows report, including rows
// of processes not seen lately (retention removes them after an hour).
func (c *Client) workerInfos(ctx context.Context, ex driver.Executor) ([]WorkerInfo, error) {
	rows, err := ex.WorkerList(ctx, &driver.WorkerListParams{SeenAfter: c.now().Add(-workerRetained)})
	if err != nil {
		return nil, fmt.Errorf("hopper: list workers: %w", err)
	}
	out := make([]WorkerInfo, 0, len(rows))
	for _, r := range rows {
		var w WorkerInfo
		if len(r.Info) > 0 && json.Unmarshal(r.Info, &w) != nil {
			continue // a row this binary cannot read names nothing it can use
		}
		out = append(out, w)
	}
	return out, nil
}

// checkQueueKnown returns an *UnknownNameError unless a job, a worker, this
// client or a stored state names queue.
func (c *Client) checkQueueKnown(ctx context.Context, ex driver.Executor, queue string) error {
	known := c.queues()
	if slices.Contains(known, queue) {
		return nil
	}
	jobs, err := ex.JobList(ctx, &driver.JobListParams{Queues: []string{queue}, Limit: 1})
	if err != nil {
		return fmt.Errorf("hopper: list jobs of queue %q: %w", queue, err)
	}
	if len(jobs) > 0 {
		return nil
	}
	stored, err := ex.QueueList(ctx, &driver.QueueListParams{})
	if err != nil {
		return fmt.Errorf("hopper: list queues: %w", err)
	}
	for _, q := range stored {
		if q.Name == queue {
			return nil
		}
		known = append(known, q.Name)
	}
	infos, err := c.workerInfos(ctx, ex)
	if err != nil {
		return err
	}
	for _, w := range infos {
		if slices.Contains(w.Queues, queue) {
			return nil
		}
		known = append(known, w.Queues...)
	}
	counts, err := ex.JobCountByState(ctx, &driver.JobCountParams{})
	if err != nil {
		return fmt.Errorf("hopper: count jobs: %w", err)
	}
	for _, n := range counts {
		known = append(known, n.Queue)
	}
	slices.Sort(known)
	return &UnknownNameError{Kind: "queue", Name: queue, Known: slices.Compact(known)}
}

// checkScheduleKnown returns an *UnknownNameError unless this client
// registered the schedule name or the store keeps it.
func (c *Client) checkScheduleKnown(ctx context.Context, ex driver.Executor, name string) error {
	names := c.eng.CodeSchedules()
	if slices.Contains(names, name) {
		return nil
	}
	stored, err := ex.ScheduleList(ctx, &driver.ScheduleListParams{})
	if err != nil {
		return fmt.Errorf("hopper: list schedules: %w", err)
	}
	for _, r := range stored {
		if r.Name == name {
			return nil
		}
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return &UnknownNameError{Kind: "schedule", Name: name, Known: slices.Compact(names)}
}
