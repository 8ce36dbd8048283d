package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// StartRunRequest is the body of POST /v1/runs.
type StartRunRequest struct {
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input"`
	ID       string          `json:"id,omitempty"`
	// RunAt starts the run at that time; Delay after that long (RunAt wins).
	RunAt *time.Time       `json:"run_at,omitempty"`
	Delay *hopper.Duration `json:"delay,omitempty"`
}

// StartRunResponse is the answer to POST /v1/runs.
type StartRunResponse struct {
	RunID    string `json:"run_id"`
	Existing bool   `json:"existing,omitempty"`
}

// RunJSON is a run as the API returns it.
type RunJSON struct {
	RunID       string          `json:"run_id"`
	Workflow    string          `json:"workflow"`
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       *ErrorJSON      `json:"error"`
	Stuck       *StuckJSON      `json:"stuck,omitempty"`
	ParentID    string          `json:"parent_id,omitempty"`
	CodeVersion string          `json:"code_version,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at"`
	EndedAt     *time.Time      `json:"ended_at"`
	// History is the run's latest history with each activity's executions
	// told in place (hopper.RunInfo.Timeline): events derived from an
	// activity's job have seq 0. GET /v1/runs/{id}/history is the recorded
	// history alone, in the portable form replays read.
	History       []EventEntryJSON   `json:"history,omitempty"`
	Steps         []StepJSON         `json:"steps,omitempty"`
	Compensations []CompensationJSON `json:"compensations,omitempty"`
	Hooks         []HookJSON         `json:"hooks,omitempty"`
	Activities    []ActivityJSON     `json:"activities,omitempty"`
}

// EventEntryJSON is one history event.
type EventEntryJSON struct {
	Seq  int             `json:"seq"`
	Kind string          `json:"kind"`
	Name string          `json:"name,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	At   time.Time       `json:"at"`
}

// StepJSON is one recorded step or activity.
type StepJSON struct {
	Name   string          `json:"name"`
	Kind   string          `json:"kind"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  *ErrorJSON      `json:"error,omitempty"`
	// Attempts is how many tries the step took (an activity: its job's attempts).
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
}

// ActivityJSON is one activity of a run: its job as it stands.
type ActivityJSON struct {
	Name        string        `json:"name"`
	JobID       string        `json:"job_id"`
	State       string        `json:"state,omitempty"`
	Attempt     int           `json:"attempt"`
	MaxAttempts int           `json:"max_attempts"`
	Error       *ErrorJSON    `json:"error,omitempty"`
	Attempts    []AttemptJSON `json:"attempts,omitempty"`
}

// CompensationJSON is one compensation, in the order they ran.
type CompensationJSON struct {
	Name string `json:"name"`
	// Attempt is the attempt of the run that registered it: each failed
	// attempt undoes its own effects before the next one starts.
	Attempt  int    `json:"attempt"`
	Executed bool   `json:"executed"`
	Error    string `json:"error,omitempty"`
}

// HookJSON is one of a run's hooks.
type HookJSON struct {
	Name  string `json:"name"`
	Token string `json:"token,omitempty"`
	State string `json:"state"`
}

func errJSON(e *hoppertype.ErrorInfo) *ErrorJSON {
	if e == nil {
		return nil
	}
	return &ErrorJSON{Kind: string(e.Kind), Message: e.Message, Attempt: e.Attempt, At: e.At, Stack: e.Stack}
}

func runJSON(r *hopper.RunInfo, showTokens bool) *RunJSON {
	out := &RunJSON{RunID: r.ID, Workflow: r.Workflow, Status: string(r.Status), Attempt: r.Attempt, Input: payload(r.Input),
		Output: payload(r.Output), Error: errJSON(r.Error), Stuck: stuckJSON(r.Stuck), ParentID: r.ParentID, CodeVersion: r.CodeVersion,
		CreatedAt: r.CreatedAt, StartedAt: timePtr(r.StartedAt), EndedAt: timePtr(r.EndedAt)}
	if r.Status != hopper.RunCompleted {
		out.Output = json.RawMessage("null")
	}
	for _, ev := range r.Timeline {
		out.History = append(out.History, EventEntryJSON{Seq: ev.Seq, Kind: ev.Kind, Name: ev.Name, Data: json.RawMessage(ev.Data), At: ev.At})
	}
	for _, s := range r.Steps {
		out.Steps = append(out.Steps, StepJSON{Name: s.Name, Kind: s.Kind, Output: s.Output, Error: errJSON(s.Error), Attempts: s.Attempts, At: s.At})
	}
	for _, c := range r.Compensations {
		out.Compensations = append(out.Compensations, CompensationJSON{Name: c.Name, Attempt: c.Attempt, Executed: c.Executed, Error: c.Error})
	}
	for _, a := range r.Activities {
		out.Activities = append(out.Activities, ActivityJSON{Name: a.Name, JobID: a.JobID, State: string(a.State),
			Attempt: a.Attempt, MaxAttempts: a.MaxAttempts, Error: errJSON(a.Error), Attempts: attemptsJSON(a.Attempts)})
	}
	for _, h := range r.Hooks {
		hj := HookJSON{Name: h.Name, State: string(h.State)}
		if showTokens {
			hj.Token = h.Token
		}
		out.Hooks = append(out.Hooks, hj)
	}
	return out
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var req StartRunRequest
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Workflow == "" {
		s.fail(w, r, badRequest("workflow is required"))
		return
	}
	opts := &hopper.StartOpts{ID: req.ID}
	if req.RunAt != nil {
		opts.RunAt = *req.RunAt
	}
	if req.Delay != nil {
		opts.Delay = time.Duration(*req.Delay)
	}
	h, err := s.c.StartName(r.Context(), req.Workflow, req.Input, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if h.Existing() {
		status = http.StatusOK
	}
	writeJSON(w, status, StartRunResponse{RunID: h.ID(), Existing: h.Existing()})
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	info, err := s.c.RunGet(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runJSON(info, true))
}

// runHistory serves a run's history in the portable form of hopper.History,
// the input of hopper.ReplayHistory.
func (s *Server) runHistory(w http.ResponseWriter, r *http.Request) {
	h, err := s.c.RunHistory(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// RunListJSON is a page of runs.
type RunListJSON struct {
	Runs []*RunJSON `json:"runs"`
	// NextCursor continues the listing as ?cursor=; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

func runQuery(q map[string][]string) (*hopper.RunQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	rq := &hopper.RunQuery{Workflow: get("workflow"), ParentID: get("parent"), Cursor: get("cursor")}
	for _, st := range splitList(q["status"]) {
		rs := hoppertype.RunStatus(st)
		if !rs.Valid() {
			return nil, badRequest("unknown status %q", st)
		}
		rq.Statuses = append(rq.Statuses, rs)
	}
	for k, dst := range map[string]*int{"limit": &rq.Limit, "offset": &rq.Offset} {
		if v := get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (k == "limit" && (n < 1 || n > hopper.MaxListLimit)) || (k == "offset" && n > 100_000) {
				return nil, badRequest("%s out of range", k)
			}
			*dst = n
		}
	}
	for k, dst := range map[string]*time.Time{"started_after": &rq.StartedAfter, "started_before": &rq.StartedBefore} {
		if v := get(k); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, badRequest("%s must be an RFC 3339 time", k)
			}
			*dst = t
		}
	}
	return rq, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	rq, err := runQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.c.RunList(r.Context(), rq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := RunListJSON{Runs: make([]*RunJSON, len(page.Runs)), NextCursor: page.NextCursor}
	for i, run := range page.Runs {
		out.Runs[i] = runJSON(run, true)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.c.RunCancel(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.c.RunGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runJSON(info, true))
}

// retryRun serves POST /v1/runs/{id}/retry: a run that ended without
// completing runs again as a fresh attempt.
func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.c.RunRetry(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.c.RunGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runJSON(info, true))
}

// resumeHook serves POST /v1/hooks/{token}: the body is the JSON payload.
func (s *Server) resumeHook(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.c.HookResume(r.Context(), r.PathValue("token"), body); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"resumed": true})
}

// webhook serves /v1/webhooks/{token} for any method: the token in the URL
// is the authorisation. A JSON body is the payload as it is; any other body
// arrives as a JSON string; an empty one as null.
//
// Its body is capped by Options.MaxWebhookBytes (read through the cap, never
// whole first).
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var p json.RawMessage
	switch {
	case len(body) == 0:
		p = json.RawMessage("null")
	case json.Valid(body):
		p = body
	default:
		p, _ = json.Marshal(string(body))
	}
	// The workflow reads the request beside the body (Hook.Request): to
	// check a signature, say. The client leaves its credentials out.
	req := &hopper.HookRequest{Method: r.Method, Header: r.Header.Clone(), Query: r.URL.Query()}
	if err := s.c.HookResumeRequest(r.Context(), r.PathValue("token"), p, req); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"resumed": true})
}

// streamRun serves GET /v1/runs/{id}/stream as Server-Sent Events: the
// run's chunks from ?from= (default 0), then new ones as they are written,
// until the run ends.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var from int64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, badRequest("from must be a non-negative offset"))
			return
		}
		from = n
	}
	if accepts(r, "application/json") && !accepts(r, "text/event-stream") {
		s.readStream(w, r, id, from)
		return
	}
	if _, err := s.c.RunGet(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": hopper run stream\n\n")
	fl.Flush()
	ctx := r.Context()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	caughtUp := false
	for {
		chunks, err := s.c.StreamRead(ctx, id, from, 500)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				// The store's text goes to the log, the request id to the reader.
				s.opts.Logger.Error("hopper server: run stream failed", "request_id", requestID(r), "run", id, "err", err)
				b, _ := json.Marshal(map[string]string{"message": "reading the stream failed", "request_id": requestID(r)})
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
			}
			return
		}
		for _, ch := range chunks {
			fmt.Fprintf(w, "id: %d\nevent: chunk\ndata: %s\n\n", ch.Offset, ch.Data)
			from = ch.Offset + 1
		}
		fl.Flush()
		if len(chunks) == 0 {
			info, err := s.c.RunGet(ctx, id)
			if err != nil {
				return
			}
			if info.Status.Terminal() {
				fmt.Fprintf(w, "event: end\ndata: {\"status\":%q}\n\n", info.Status)
				fl.Flush()
				return
			}
			if !caughtUp {
				// Everything written so far is sent: a reader that wants
				// only that (hopper runs tail --follow=false) may stop.
				caughtUp = true
				fmt.Fprintf(w, "event: caught-up\ndata: {\"next\":%d}\n\n", from)
				fl.Flush()
			}
			select {
			case <-ctx.Done():
				return
			case <-s.events.done:
				return
			case <-tick.C:
			}
		}
	}
}

// RunToJSON is a run as the API shows it to an authenticated caller (the
// CLI prints the same with --json).
func RunToJSON(r *hopper.RunInfo) *RunJSON { return runJSON(r, true) }
