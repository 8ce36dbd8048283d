package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// EnqueueRequest is the body of POST /v1/jobs.
type EnqueueRequest struct {
	Type  string          `json:"type"`
	Input json.RawMessage `json:"input"`
	Opts  *OptsJSON       `json:"opts,omitempty"`
}

// EnqueueResponse is the answer to POST /v1/jobs.
type EnqueueResponse struct {
	ID           string `json:"id"`
	GroupID      string `json:"group_id"`
	State        string `json:"state"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	var req EnqueueRequest
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Type == "" {
		s.fail(w, r, badRequest("type is required"))
		return
	}
	opts, err := req.Opts.InsertOpts()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h, err := s.c.EnqueueName(r.Context(), req.Type, req.Input, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The answer is what the insert wrote: a second read that failed
	// would turn a stored job into an error, and a client that retries on
	// errors into a duplicate.
	status := http.StatusCreated
	if h.Deduplicated() {
		status = http.StatusOK
	}
	writeJSON(w, status, EnqueueResponse{ID: h.ID(), GroupID: h.GroupID(), State: string(h.State()), Deduplicated: h.Deduplicated()})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	row, err := s.c.JobGet(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := jobJSON(row)
	if hopper.IsGate(row) {
		g, err := s.c.GateGet(r.Context(), row.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Gate = gateJSON(g)
	}
	writeJSON(w, http.StatusOK, out)
}

// JobListJSON is a page of jobs.
type JobListJSON struct {
	Jobs       []*JobJSON `json:"jobs"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// listParams reads the job filters of a query string.
func listParams(q map[string][]string) (*hopper.ListParams, error) {
	p := &hopper.ListParams{}
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	split := func(k string) []string {
		var out []string
		for _, v := range q[k] {
			for _, part := range strings.Split(v, ",") {
				if part = strings.TrimSpace(part); part != "" {
					out = append(out, part)
				}
			}
		}
		return out
	}
	for _, st := range split("state") {
		js := hoppertype.JobState(st)
		if !js.Valid() {
			return nil, badRequest("unknown state %q", st)
		}
		p.States = append(p.States, js)
	}
	p.Types = split("type")
	p.Queues = split("queue")
	p.GroupID = get("group_id")
	p.ParentID = get("parent_id")
	p.UniqueKey = get("unique_key")
	p.ErrorContains = get("error")
	if v := get("hide_compensated"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("hide_compensated: %q (true or false)", v)
		}
		p.HideCompensated = b
	}
	for _, kv := range q["meta"] {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badRequest("meta %q must be key=value", kv)
		}
		if p.Metadata == nil {
			p.Metadata = map[string]string{}
		}
		p.Metadata[k] = v
	}
	p.Cursor = get("cursor")
	p.ScanLimit = hopper.DefaultScanLimit
	if v := get("scan"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, badRequest("scan must be a positive number of jobs")
		}
		p.ScanLimit = n
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > hopper.MaxListLimit {
			return nil, badRequest("limit must be between 1 and %d", hopper.MaxListLimit)
		}
		p.Limit = n
	}
	for k, dst := range map[string]*time.Time{"queued_after": &p.QueuedAfter, "queued_before": &p.QueuedBefore,
		"ended_after": &p.EndedAfter, "ended_before": &p.EndedBefore} {
		if v := get(k); v != "" {
			t, err := parseFilterTime(v)
			if err != nil {
				return nil, badRequest("%s must be an RFC 3339 time (or 2006-01-02T15:04 in UTC)", k)
			}
			*dst = t
		}
	}
	switch get("order") {
	case "", "desc":
	case "asc":
		p.Ascending = true
	default:
		return nil, badRequest("order must be asc or desc")
	}
	return p, nil
}

// parseFilterTime reads a time filter: RFC 3339, or what a browser's
// datetime-local field sends (minutes or seconds, no zone), read as UTC.
func parseFilterTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a time")
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	p, err := listParams(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writePage(w, r, p)
}

func (s *Server) writePage(w http.ResponseWriter, r *http.Request, p *hopper.ListParams) {
	page, err := s.c.JobList(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := JobListJSON{Jobs: make([]*JobJSON, len(page.Jobs)), NextCursor: page.NextCursor}
	for i, j := range page.Jobs {
		out.Jobs[i] = jobJSON(j)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) jobResult(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query().Get("wait"), s.opts.MaxWait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	row, err := s.c.JobGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !row.State.Terminal() && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		done, err := s.c.JobWait(ctx, id)
		cancel()
		switch {
		case err == nil:
			row = done
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			if row, err = s.c.JobGet(r.Context(), id); err != nil {
				s.fail(w, r, err)
				return
			}
		default:
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, jobJSON(row))
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	row, err := s.c.JobCancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobJSON(row))
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) {
	row, err := s.c.JobRetry(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobJSON(row))
}

// GroupJSON is a fan-out group's state and value.
type GroupJSON struct {
	GroupID string          `json:"group_id"`
	State   string          `json:"state"`
	Value   json.RawMessage `json:"value"`
	// Open counts the group's jobs that are not terminal yet.
	Open int `json:"open"`
	// Counts counts the group's jobs by state (?counts=true), the first
	// 10,000 in id order at most; CountsCapped says the count stopped
	// there.
	Counts       map[string]int `json:"counts,omitempty"`
	CountsCapped bool           `json:"counts_capped,omitempty"`
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query().Get("wait"), s.opts.MaxWait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withCounts, err := boolParam(r, "counts")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	g, err := s.c.GroupGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !g.Settled && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		done, err := s.c.GroupWait(ctx, id)
		cancel()
		switch {
		case err == nil:
			g = done
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			if g, err = s.c.GroupGet(r.Context(), id); err != nil {
				s.fail(w, r, err)
				return
			}
		default:
			s.fail(w, r, err)
			return
		}
	}
	out := GroupJSON{GroupID: id, State: "open", Value: json.RawMessage("null"), Open: g.Open}
	if g.Settled {
		out.State = "settled"
	}
	if withCounts {
		gc, err := s.c.GroupCount(r.Context(), id, groupCountCap)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Counts, out.CountsCapped = byStateName(gc.ByState), gc.Capped
	}
	if g.Set {
		out.Value = payload(g.Value)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listDead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("state")
	p, err := listParams(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.States = []hopper.JobState{hopper.StateDead}
	if q.Get("hide_compensated") == "" {
		p.HideCompensated = true // a compensated saga is no dead letter
	}
	s.writePage(w, r, p)
}

// RedriveRequest is the body of POST /v1/dead/redrive: ids, a type, or all.
type RedriveRequest struct {
	IDs   []string `json:"ids,omitempty"`
	Type  string   `json:"type,omitempty"`
	All   bool     `json:"all,omitempty"`
	Limit int      `json:"limit,omitempty"`
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	var req RedriveRequest
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.c.JobRedrive(r.Context(), &hopper.RedriveParams{IDs: req.IDs, Type: req.Type, All: req.All, Limit: req.Limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"redriven": n})
}

// QueueJSON is a queue's state, its backlog and, when asked for, its job
// counts.
type QueueJSON struct {
	Name   string         `json:"name"`
	Paused bool           `json:"paused"`
	Depth  QueueDepthJSON `json:"depth"`
	// Counts counts the queue's jobs in every state (GET /v1/queues?counts=true):
	// a read of every job stored.
	Counts map[string]int `json:"counts,omitempty"`
}

// QueueDepthJSON is a queue's backlog (hopper.QueueDepth): due and delayed
// jobs are counted up to hopper.QueueDepthCap, and one more means more.
type QueueDepthJSON struct {
	Due          int        `json:"due"`
	Delayed      int        `json:"delayed"`
	Running      int        `json:"running"`
	OldestDueAt  *time.Time `json:"oldest_due_at,omitempty"`
	OldestDueAge int64      `json:"oldest_due_age_ns"`
}

// QueuesToJSON puts queues on the wire, by name: their depths, with the
// counts of those that have any (nil: none asked for).
func QueuesToJSON(depths []hopper.QueueDepth, counts []hopper.QueueInfo) []QueueJSON {
	byName := map[string]*QueueJSON{}
	get := func(name string) *QueueJSON {
		q := byName[name]
		if q == nil {
			q = &QueueJSON{Name: name}
			byName[name] = q
		}
		return q
	}
	for _, d := range depths {
		q := get(d.Queue)
		q.Paused = d.Paused
		q.Depth = QueueDepthJSON{Due: d.Due, Delayed: d.Delayed, Running: d.Running, OldestDueAt: timePtr(d.OldestDueAt.UTC()),
			OldestDueAge: int64(d.OldestDueAge)}
	}
	for _, c := range counts {
		q := get(c.Name)
		q.Paused = c.Paused
		q.Counts = map[string]int{}
		for st, n := range c.Counts {
			q.Counts[string(st)] = n
		}
	}
	out := make([]QueueJSON, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	slices.SortFunc(out, func(a, b QueueJSON) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// listQueues serves GET /v1/queues: every queue's depth, read at a cost
// that does not grow with the jobs stored, and with ?counts=true its jobs
// counted in every state, a read of every job.
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	withCounts, err := boolParam(r, "counts")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	depths, err := s.c.QueueDepths(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var counts []hopper.QueueInfo
	if withCounts {
		if counts, err = s.c.QueueList(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": QueuesToJSON(depths, counts), "depth_cap": hopper.QueueDepthCap})
}

// createHint and forceHint end the message of a refused unknown name: what
// to send to go ahead anyway.
const (
	createHint = "; add ?create=true to pause it ahead of its first use"
	forceHint  = "; add ?force=true to define it anyway"
)

// queueDemand serves GET /v1/queues/{name}/demand: how many worker
// processes the queue needs (hopper.QueueDemand), for an autoscaler.
func (s *Server) queueDemand(w http.ResponseWriter, r *http.Request) {
	d, err := s.c.QueueDemand(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request) {
	create, err := boolParam(r, "create")
	if err == nil {
		err = s.c.QueuePause(r.Context(), r.PathValue("name"), &hopper.PauseOpts{Create: create})
	}
	if err != nil {
		s.fail(w, r, withHint(err, createHint))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name"), "paused": true})
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request) {
	if err := s.c.QueueResume(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name"), "paused": false})
}

// ScheduleJSON is a schedule on the wire: as the server's client registered
// it, and as the store keeps it.
type ScheduleJSON struct {
	Name string `json:"name"`
	// Cron is empty for a schedule given as a Go function.
	Cron string `json:"cron,omitempty"`
	// Next is the next occurrence; null when the schedule has ended.
	Next *time.Time `json:"next"`
	// CatchUp is how late an occurrence may still fire ("0s": on time
	// only; also for a schedule in code that the server's process does not
	// run).
	CatchUp string `json:"catch_up"`
	// Location is a stored schedule's time zone.
	Location string `json:"location,omitempty"`
	// Registered is set when the server's process runs the schedule.
	Registered bool `json:"registered"`
	Paused     bool `json:"paused"`
	// Occurrences counts the occurrences fired while not paused; Last is
	// the latest of them (null before the first).
	Occurrences int64      `json:"occurrences"`
	Last        *time.Time `json:"last"`
	// UpdatedAt is when the store last heard of the schedule (null when
	// it does not keep it).
	UpdatedAt *time.Time `json:"updated_at"`
	// Stored is set for a schedule defined in the store (POST
	// /v1/schedules): Type or Workflow is what it enqueues or starts, with
	// Input.
	Stored   bool            `json:"stored"`
	Type     string          `json:"type,omitempty"`
	Workflow string          `json:"workflow,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// DefineScheduleJSON is the body of POST /v1/schedules. CatchUp reads as
// listings write it: absent is the default (one minute), "0s" on time only.
type DefineScheduleJSON struct {
	Name     string          `json:"name"`
	Cron     string          `json:"cron"`
	Location string          `json:"location,omitempty"`
	CatchUp  string          `json:"catch_up,omitempty"`
	Type     string          `json:"type,omitempty"`
	Workflow string          `json:"workflow,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// StoredSchedule checks d and returns the schedule it defines.
func (d *DefineScheduleJSON) StoredSchedule() (hopper.StoredSchedule, error) {
	s := hopper.StoredSchedule{Name: d.Name, Cron: d.Cron, Location: d.Location, Type: d.Type, Workflow: d.Workflow, Input: d.Input}
	if d.CatchUp != "" {
		v, err := time.ParseDuration(d.CatchUp)
		if err != nil {
			return s, fmt.Errorf("%w: catch_up %q: %w", hopper.ErrInvalidInput, d.CatchUp, err)
		}
		if v == 0 {
			v = -1 // on time only, as "0s" lists
		}
		s.CatchUp = v
	}
	return s, nil
}

// ScheduleJSONOf puts in on the wire.
func ScheduleJSONOf(in hopper.ScheduleInfo) ScheduleJSON {
	return ScheduleJSON{Name: in.Name, Cron: in.Cron, Next: timePtr(in.Next.UTC()), CatchUp: in.CatchUp.String(),
		Registered: in.Registered, Paused: in.Paused, Occurrences: in.Occurrences, Last: timePtr(in.Last.UTC()), UpdatedAt: timePtr(in.UpdatedAt.UTC()),
		Stored: in.Stored, Type: in.Type, Workflow: in.Workflow, Input: in.Input, Location: in.Location}
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	infos, err := s.c.ScheduleList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]ScheduleJSON, len(infos))
	for i, in := range infos {
		out[i] = ScheduleJSONOf(in)
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": out})
}

func (s *Server) defineSchedule(w http.ResponseWriter, r *http.Request) {
	var req DefineScheduleJSON
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	def, err := req.StoredSchedule()
	force := false
	if err == nil {
		force, err = boolParam(r, "force")
	}
	if err == nil && !force {
		// A typo in the type would define a schedule nothing runs.
		err = withHint(s.c.ScheduleCheckTarget(r.Context(), def), forceHint)
	}
	if err == nil {
		err = s.c.ScheduleDefine(r.Context(), def)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	infos, err := s.c.ScheduleList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, in := range infos {
		if in.Name == req.Name {
			writeJSON(w, http.StatusCreated, ScheduleJSONOf(in))
			return
		}
	}
	s.fail(w, r, fmt.Errorf("schedule %s: %w", req.Name, hopper.ErrNotFound)) // deleted meanwhile
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	create, err := boolParam(r, "create")
	if err == nil {
		err = s.c.SchedulePause(r.Context(), r.PathValue("name"), &hopper.PauseOpts{Create: create})
	}
	if err != nil {
		s.fail(w, r, withHint(err, createHint))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name"), "paused": true})
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.c.ScheduleResume(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name"), "paused": false})
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.c.ScheduleDelete(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"types": s.c.Types(), "workflows": s.c.Workflows()})
}

// boolParam reads an optional boolean query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s=%q is not a boolean", name, v)
	}
	return b, nil
}

// hinted is an error whose message ends with what the caller can do.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + h.hint }
func (h *hinted) Unwrap() error { return h.err }

// withHint adds hint to an unknown name's or target's error.
func withHint(err error, hint string) error {
	var name *hopper.UnknownNameError
	var target *hopper.UnknownTargetError
	if errors.As(err, &name) || errors.As(err, &target) {
		return &hinted{err: err, hint: hint}
	}
	return err
}
