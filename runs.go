package hopper

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// RunInfo is a workflow run as the API shows it.
type RunInfo struct {
	ID          string
	Workflow    string
	Status      RunStatus
	ParentID    string
	CodeVersion string
	Input       json.RawMessage
	Output      json.RawMessage
	Error       *hoppertype.ErrorInfo
	// Attempt is the attempt of the run's job: every execution that
	// failed or was lost to a crash counts (a wait does not). The run's own
	// attempts, which StrategyRetry starts and a crash does not, are
	// WorkflowContext.Attempt, the history's and CompensationInfo's.
	Attempt int
	// Stuck is the stuck slot of a stuck run: its cause (an engine failure,
	// such as a replay that diverged from its history, or executions lost
	// again and again), whether a retry may help, and the detail.
	Stuck     *StuckInfo
	CreatedAt time.Time
	StartedAt time.Time
	EndedAt   time.Time
	// History is the run's latest history generation (RunGet only): a
	// workflow retry starts a new one; a crash continues the last one.
	History []*hoppertype.RunEvent
	// Steps are a view of it (RunGet only).
	Steps []StepInfo
	// Compensations are those of every attempt of the run, each with its
	// attempt (RunGet only): a retried attempt's ran when it failed.
	Compensations []CompensationInfo
	// Hooks are the run's hooks, of every attempt (RunGet only).
	Hooks []*hoppertype.HookRow
	// Activities are the run's activity jobs as they stand (RunGet only).
	Activities []ActivityInfo
	// Timeline is History with each activity's executions told in place
	// (RunGet only): after an activity's activity_scheduled event come its
	// activity_started, activity_heartbeat, activity_failed and
	// activity_retry events, read from its job's changes. Those events are
	// not stored in the history and replay never reads them; their Seq is
	// 0.
	Timeline []*hoppertype.RunEvent
}

// ActivityInfo is one activity of a run: its job, live.
type ActivityInfo struct {
	Name        string
	JobID       string
	State       hoppertype.JobState
	Attempt     int
	MaxAttempts int
	Error       *hoppertype.ErrorInfo
	// RunAt is when the job is due: for a retrying activity, when its next
	// attempt starts.
	RunAt time.Time
	// Attempts are the activity job's executions, from the change feed:
	// when each started and ended, on which worker, and how (the
	// activity's started, retry and completed record).
	Attempts []Attempt
}

// StepInfo is one recorded step (or activity) of a run.
type StepInfo struct {
	Name   string
	Kind   string // "step" or "activity"
	Output json.RawMessage
	Error  *hoppertype.ErrorInfo
	// Attempts is how many tries the step took (an activity's: its job's
	// attempts).
	Attempts int
	At       time.Time
}

// CompensationInfo is one registered compensation and what became of it.
type CompensationInfo struct {
	Name string
	// Attempt is the attempt of the run that registered it.
	Attempt  int
	Executed bool
	Error    string
}

// RunError is the error a waiter gets for a run that did not complete.
type RunError struct {
	RunID   string
	Status  RunStatus
	Kind    hoppertype.ErrorKind
	Message string
}

// Error implements error.
func (e *RunError) Error() string {
	return fmt.Sprintf("hopper: workflow run %s %s: %s", e.RunID, e.Status, e.Message)
}

// Unwrap maps the kind to hopper's sentinels (a cancelled run matches
// ErrCancelled).
func (e *RunError) Unwrap() error {
	if e.Status == hoppertype.RunCancelled {
		return ErrCancelled
	}
	return (&JobError{Kind: e.Kind}).Unwrap()
}

func (r *RunInfo) err() error {
	e := &RunError{RunID: r.ID, Status: r.Status, Message: string(r.Status)}
	if r.Error != nil {
		e.Kind, e.Message = r.Error.Kind, r.Error.Message
	}
	return e
}

// runStatus reads a run's row and job, without history.
func (c *Client) runStatus(ctx context.Context, id string) (*RunInfo, error) {
	if err := checkText("run id", id); err != nil {
		return nil, err
	}
	run, err := c.store().RunGet(ctx, &driver.RunGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: run %s: %w", id, err)
	}
	return c.withJob(ctx, run)
}

// loadRun reads a run with its job and its latest history generation
// (History), and returns all of its events too.
func (c *Client) loadRun(ctx context.Context, id string) (*RunInfo, int, []*hoppertype.RunEvent, error) {
	if err := checkText("run id", id); err != nil {
		return nil, 0, nil, err
	}
	run, all, err := c.store().RunLoad(ctx, &driver.RunLoadParams{ID: id})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("hopper: run %s: %w", id, err)
	}
	info, err := c.withJob(ctx, run)
	if err != nil {
		return nil, 0, nil, err
	}
	attempt, history := engine.LastGeneration(all)
	info.History = history
	return info, attempt, all, nil
}

// withJob completes a run's view with its job (gone after retention).
func (c *Client) withJob(ctx context.Context, run *hoppertype.RunRow) (*RunInfo, error) {
	job, err := c.store().JobGet(ctx, &driver.JobGetParams{ID: run.ID})
	if err != nil && !errors.Is(err, hoppertype.ErrNotFound) {
		return nil, err
	}
	return runInfo(run, job), nil
}

func runInfo(run *hoppertype.RunRow, job *hoppertype.JobRow) *RunInfo {
	info := &RunInfo{ID: run.ID, Workflow: run.Workflow, Status: run.Status, ParentID: run.ParentID, CodeVersion: run.CodeVersion,
		Error: run.Error, CreatedAt: run.CreatedAt, EndedAt: run.EndedAt}
	if job != nil && job.State == hoppertype.JobStateRunning && (run.Status == hoppertype.RunPending || run.Status == hoppertype.RunWaiting) {
		// Executing, before its first record marks it running.
		info.Status = hoppertype.RunRunning
	}
	if job != nil {
		// A waiting run gives its attempt back; it has still begun one.
		info.Input, info.Output, info.Attempt, info.StartedAt = job.Input, job.Result, max(job.Attempt, 1), job.StartedAt
		if job.State == hoppertype.JobStateStuck {
			info.Stuck = job.Stuck
		}
		if info.Error == nil && job.Error != nil && run.Status.Terminal() && run.Status != hoppertype.RunCompleted {
			info.Error = job.Error
		}
	}
	return info
}

// RunGet returns a run with its status, output, error, its current
// attempt's history, steps and activities, its hooks, and the
// compensations of all of its attempts.
func (c *Client) RunGet(ctx context.Context, id string) (*RunInfo, error) {
	info, _, all, err := c.loadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Activities, err = c.activities(ctx, info.History); err != nil {
		return nil, err
	}
	if err := c.completeRun(ctx, info, engine.Generations(all)); err != nil {
		return nil, err
	}
	return info, nil
}

// completeRun fills in the views of a run read with its history and
// activities: its hooks, timeline, steps and the compensations of every
// attempt (gens).
func (c *Client) completeRun(ctx context.Context, info *RunInfo, gens []engine.Generation) error {
	var err error
	if info.Hooks, err = c.store().HookListByRun(ctx, &driver.HookListByRunParams{RunID: info.ID}); err != nil {
		return err
	}
	info.Timeline = timeline(info.History, info.Activities)
	for _, ev := range info.History {
		if ev.Kind != engine.EvStep && ev.Kind != engine.EvActivityCompleted {
			continue
		}
		var data engine.EventData
		_ = json.Unmarshal(ev.Data, &data)
		kind := "step"
		if ev.Kind == engine.EvActivityCompleted {
			kind = "activity"
		}
		info.Steps = append(info.Steps, StepInfo{Name: ev.Name, Kind: kind, Output: data.Output, Error: data.Error, Attempts: data.Attempts, At: ev.At})
	}
	info.Compensations = compensations(gens)
	return nil
}

// compensations lists the compensations a run's attempts registered: those
// that ran, in the order they ran (as the history has them), then those
// that did not, in the order they were registered.
func compensations(gens []engine.Generation) []CompensationInfo {
	type ranComp struct {
		at int
		ci CompensationInfo
	}
	var ran []ranComp
	var pending []CompensationInfo
	at := 0
	for _, g := range gens {
		// Registered in order: the i-th is recorded as "name#i" when it
		// runs.
		var added []string
		ranAt := map[string]int{}
		errs := map[string]string{}
		for _, ev := range g.Events {
			at++
			switch ev.Kind {
			case engine.EvCompensationAdded:
				added = append(added, ev.Name)
			case engine.EvCompensationDone, engine.EvCompensationFail:
				ranAt[ev.Name] = at
				var data engine.EventData
				_ = json.Unmarshal(ev.Data, &data)
				if data.Error != nil {
					errs[ev.Name] = data.Error.Message
				}
			}
		}
		for i, name := range added {
			ci := CompensationInfo{Name: name, Attempt: g.Attempt}
			key := engine.CompKey(name, i)
			if at, ok := ranAt[key]; ok {
				ci.Executed, ci.Error = true, errs[key]
				ran = append(ran, ranComp{at, ci})
				continue
			}
			pending = append(pending, ci)
		}
	}
	slices.SortFunc(ran, func(a, b ranComp) int { return a.at - b.at })
	out := make([]CompensationInfo, 0, len(ran)+len(pending))
	for _, r := range ran {
		out = append(out, r.ci)
	}
	return append(out, pending...)
}

// activities reads the jobs of the activities a history scheduled.
func (c *Client) activities(ctx context.Context, history []*hoppertype.RunEvent) ([]ActivityInfo, error) {
	var ids, names []string
	for _, ev := range history {
		if ev.Kind != engine.EvActivityScheduled {
			continue
		}
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err == nil && data.Job != "" {
			ids, names = append(ids, data.Job), append(names, ev.Name)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	jobs, err := c.store().JobGetMany(ctx, &driver.JobGetManyParams{IDs: ids})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*hoppertype.JobRow, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
	}
	out := make([]ActivityInfo, 0, len(ids))
	for i, id := range ids {
		a := ActivityInfo{Name: names[i], JobID: id}
		if j := byID[id]; j != nil { // a finished job may have been deleted by retention
			a.State, a.Attempt, a.MaxAttempts, a.Error, a.RunAt = j.State, j.Attempt, j.Retry.Attempts, j.Error, j.RunAt
			chs, err := c.changesOf(ctx, id)
			if err != nil {
				return nil, err
			}
			a.Attempts, _ = AttemptsOf(chs)
		}
		out = append(out, a)
	}
	return out, nil
}

// RunWait blocks until the run is finished (or ctx is done) and returns it.
func (c *Client) RunWait(ctx context.Context, id string) (*RunInfo, error) {
	job, jerr := c.waitJob(ctx, id)
	return c.runWaitAfter(ctx, id, job, jerr)
}

// runWaitAfter is RunWait once the wait for the run's job returned job and
// jerr.
func (c *Client) runWaitAfter(ctx context.Context, id string, job *hoppertype.JobRow, jerr error) (*RunInfo, error) {
	if jerr != nil && !errors.Is(jerr, hoppertype.ErrNotFound) {
		return nil, jerr
	}
	// The run's row is written in its job's transitions: read after the
	// job ended, it holds the run's end.
	run, err := c.store().RunGet(ctx, &driver.RunGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("hopper: run %s: %w", id, err)
	}
	if jerr != nil && !run.Status.Terminal() {
		return nil, fmt.Errorf("hopper: run %s: %w", id, jerr)
	}
	return runInfo(run, job), nil
}

// RunQuery filters RunList. Empty fields do not filter.
type RunQuery struct {
	Statuses      []RunStatus
	Workflow      string
	ParentID      string
	StartedAfter  time.Time
	StartedBefore time.Time
	// Limit caps the runs returned. Defaults to 100; at most 1000.
	Limit int
	// Cursor continues a listing from a RunPage's NextCursor. It cannot be
	// combined with Offset.
	Cursor string
	// Offset skips runs (newest first); at most 100,000. Prefer Cursor:
	// an offset re-reads the runs it skips, and runs created between two
	// pages shift it.
	Offset int
}

// RunPage is one page of a run listing.
type RunPage struct {
	Runs []*RunInfo
	// NextCursor continues the listing as RunQuery.Cursor; empty on the
	// last page.
	NextCursor string
}

// RunList returns runs matching q (nil lists the newest), newest first, a
// page at a time, without their history. Pass a page's NextCursor as
// q.Cursor for the next: a cursor neither skips nor repeats a run, whatever
// is created meanwhile, and costs the same on every page.
func (c *Client) RunList(ctx context.Context, q *RunQuery) (*RunPage, error) {
	if q == nil {
		q = &RunQuery{}
	}
	for _, s := range q.Statuses {
		if !s.Valid() {
			return nil, fmt.Errorf("%w: unknown run status %q", ErrInvalidInput, s)
		}
	}
	for _, err := range []error{
		checkText("workflow filter", q.Workflow), checkText("parent id filter", q.ParentID), checkText("cursor", q.Cursor),
		checkTime("started-after filter", q.StartedAfter), checkTime("started-before filter", q.StartedBefore),
	} {
		if err != nil {
			return nil, err
		}
	}
	limit := q.Limit
	switch {
	case limit < 0 || q.Offset < 0 || q.Offset > 100_000:
		return nil, fmt.Errorf("%w: limit and offset must be positive (offset at most 100000)", ErrInvalidInput)
	case q.Offset > 0 && q.Cursor != "":
		return nil, fmt.Errorf("%w: a run listing takes a cursor or an offset, not both", ErrInvalidInput)
	case limit == 0:
		limit = 100
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	after, err := decodeRunCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	rows, err := c.store().RunList(ctx, &driver.RunListParams{Statuses: q.Statuses, Workflow: q.Workflow, ParentID: q.ParentID,
		CreatedAfter: q.StartedAfter, CreatedBefore: q.StartedBefore, After: after, Offset: q.Offset, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("hopper: list runs: %w", err)
	}
	page := &RunPage{}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeRunCursor(driver.RunKey{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	// The runs' jobs in one read, not one per run.
	jobs := map[string]*hoppertype.JobRow{}
	if len(rows) > 0 {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		js, err := c.store().JobList(ctx, &driver.JobListParams{IDs: ids, Limit: len(ids)})
		if err != nil {
			return nil, fmt.Errorf("hopper: list runs: %w", err)
		}
		for _, j := range js {
			jobs[j.ID] = j
		}
	}
	page.Runs = make([]*RunInfo, len(rows))
	for i, r := range rows {
		page.Runs[i] = runInfo(r, jobs[r.ID])
	}
	return page, nil
}

// encodeRunCursor and decodeRunCursor turn a run's place in a listing into
// an opaque cursor and back.
func encodeRunCursor(k driver.RunKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte("r1|" + strconv.FormatInt(k.CreatedAt.UnixMicro(), 10) + "|" + k.ID))
}

func decodeRunCursor(s string) (driver.RunKey, error) {
	if s == "" {
		return driver.RunKey{}, nil
	}
	bad := fmt.Errorf("%w: run cursor %q is not one a run listing gave", ErrInvalidInput, s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return driver.RunKey{}, bad
	}
	parts := strings.SplitN(string(b), "|", 3)
	if len(parts) != 3 || parts[0] != "r1" || parts[2] == "" {
		return driver.RunKey{}, bad
	}
	us, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return driver.RunKey{}, bad
	}
	k := driver.RunKey{CreatedAt: time.UnixMicro(us).UTC(), ID: parts[2]}
	if err := checkText("cursor", k.ID); err != nil {
		return driver.RunKey{}, bad
	}
	if err := checkTime("cursor", k.CreatedAt); err != nil {
		return driver.RunKey{}, bad
	}
	return k, nil
}

// runRetryable are the statuses RunRetry starts again from.
var runRetryable = []hoppertype.RunStatus{hoppertype.RunFailed, hoppertype.RunCompensated, hoppertype.RunCancelled,
	hoppertype.RunQuarantined, hoppertype.RunStuck}

// RunRetry runs again a run that ended without completing — failed,
// compensated, cancelled or quarantined: a new attempt from the beginning,
// with a fresh history and its whole retry budget (MaxRetries counts anew).
// The earlier attempts' history and compensations stay, and what they
// undid stays undone. A stuck run is reopened where it was, as a retry of
// its job does. Waiters see the run end again. A run that is still going or
// completed is an error matching ErrStateConflict, an unknown one
// ErrNotFound; a run whose job retention deleted cannot be retried.
func (c *Client) RunRetry(ctx context.Context, id string) error {
	if err := checkText("run id", id); err != nil {
		return err
	}
	if err := c.eng.RetryRun(ctx, id, runRetryable); err != nil {
		return fmt.Errorf("hopper: retry run %s: %w", id, err)
	}
	return nil
}

// RunCancel asks a run to stop: its context is cancelled and its
// operations return ErrCancelled; the compensations registered so far run;
// it ends cancelled. A waiting run is woken to do so. Its children are
// cancelled too. Cancelling a finished run is an error matching
// ErrStateConflict.
func (c *Client) RunCancel(ctx context.Context, id string) error {
	if err := checkText("run id", id); err != nil {
		return err
	}
	return c.eng.CancelRun(ctx, id)
}

// HookResume delivers payload (JSON) to the hook with this token and wakes
// its run. An unknown token matches ErrNotFound; a hook already resumed,
// whose run has finished or is being cancelled, or created by an attempt of
// its run that failed and was retried, matches ErrStateConflict — nothing
// changes then.
func (c *Client) HookResume(ctx context.Context, token string, payload json.RawMessage) error {
	return c.HookResumeRequest(ctx, token, payload, nil)
}

// HookResumeRequest is HookResume for a payload that came as an HTTP
// request: req (nil: none) is stored with the payload, without its
// credentials (Authorization, Proxy-Authorization and Cookie headers), and
// the workflow reads it with Hook.Request. The server's webhook route
// calls it.
func (c *Client) HookResumeRequest(ctx context.Context, token string, payload json.RawMessage, req *HookRequest) error {
	if token == "" {
		return fmt.Errorf("%w: empty hook token", ErrInvalidInput)
	}
	if err := checkText("hook token", token); err != nil {
		return err
	}
	if len(payload) > c.cfg.MaxPayloadBytes {
		return c.tooLarge("payload", len(payload))
	}
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if !json.Valid(payload) {
		return fmt.Errorf("%w: hook payload is not JSON", ErrInvalidInput)
	}
	reqJSON, err := hookRequestJSON(req)
	if err != nil {
		return err
	}
	if len(payload)+len(reqJSON) > c.cfg.MaxPayloadBytes {
		return c.tooLarge("payload with its request", len(payload)+len(reqJSON))
	}
	err = c.eng.ResumeHook(ctx, engine.HookResume{Token: token, Payload: payload, Request: reqJSON})
	var pm *engine.HookPayloadMismatch
	if errors.As(err, &pm) {
		err = &HookPayloadError{Hook: pm.Hook, Reason: pm.Reason}
	}
	if err != nil {
		return fmt.Errorf("hopper: resume hook: %w", err)
	}
	return nil
}

// hookRequestJSON encodes req for the store without its credentials; nil
// for none.
func hookRequestJSON(req *HookRequest) ([]byte, error) {
	if req == nil {
		return nil, nil
	}
	r := HookRequest{Method: req.Method, Query: req.Query}
	if len(req.Header) > 0 {
		r.Header = http.Header{}
		for k, v := range req.Header {
			switch http.CanonicalHeaderKey(k) {
			case "Authorization", "Proxy-Authorization", "Cookie":
				continue
			}
			r.Header[k] = v
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: hook request: %w", ErrInvalidInput, err)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return nil, fmt.Errorf("%w: hook request holds invalid text", ErrInvalidInput)
	}
	return b, nil
}

// StreamRead returns a run's stream chunks from offset from, at most limit
// (1..1000).
func (c *Client) StreamRead(ctx context.Context, runID string, from int64, limit int) ([]*hoppertype.StreamChunk, error) {
	if from < 0 || limit < 1 || limit > MaxListLimit {
		return nil, fmt.Errorf("%w: stream read from %d limit %d", ErrInvalidInput, from, limit)
	}
	if err := checkText("run id", runID); err != nil {
		return nil, err
	}
	return c.store().StreamRead(ctx, &driver.StreamReadParams{RunID: runID, From: from, Limit: limit})
}

// timeline returns history with each activity's executions after its
// activity_scheduled event (see RunInfo.Timeline).
func timeline(history []*hoppertype.RunEvent, activities []ActivityInfo) []*hoppertype.RunEvent {
	byJob := make(map[string]*ActivityInfo, len(activities))
	for i := range activities {
		byJob[activities[i].JobID] = &activities[i]
	}
	out := make([]*hoppertype.RunEvent, 0, len(history))
	for _, ev := range history {
		out = append(out, ev)
		if ev.Kind != engine.EvActivityScheduled {
			continue
		}
		var data engine.EventData
		if json.Unmarshal(ev.Data, &data) != nil {
			continue
		}
		if a := byJob[data.Job]; a != nil {
			out = append(out, activityEvents(ev, a)...)
		}
	}
	return out
}

// activityEvents tells an activity's executions as timeline events.
func activityEvents(scheduled *hoppertype.RunEvent, a *ActivityInfo) []*hoppertype.RunEvent {
	var out []*hoppertype.RunEvent
	add := func(kind string, at time.Time, d engine.EventData) {
		d.Job = a.JobID
		b, _ := json.Marshal(d)
		out = append(out, &hoppertype.RunEvent{RunID: scheduled.RunID, Attempt: scheduled.Attempt, Kind: kind, Name: a.Name, Data: b, At: at})
	}
	for i, at := range a.Attempts {
		add(engine.EvActivityStarted, at.StartedAt, engine.EventData{Attempt: at.Number, Worker: at.Worker})
		for _, hb := range at.Heartbeats {
			add(engine.EvActivityHeartbeat, hb.At, engine.EventData{Attempt: at.Number, Message: hb.Message})
		}
		switch at.Outcome {
		case "", hoppertype.JobStateSucceeded, hoppertype.JobStatePending, hoppertype.JobStateScheduled:
			// Running, done (activity_completed follows in the history),
			// or handed back unused.
			continue
		}
		add(engine.EvActivityFailed, at.EndedAt, engine.EventData{Attempt: at.Number, Error: at.Error})
		if at.Outcome != hoppertype.JobStateRetrying {
			continue
		}
		// When the next attempt was due: the job's due time while it
		// waits; once it began, when it began.
		until := a.RunAt
		if i+1 < len(a.Attempts) {
			until = a.Attempts[i+1].StartedAt
		}
		add(engine.EvActivityRetry, at.EndedAt, engine.EventData{Attempt: at.Number + 1, Until: until})
	}
	return out
}
