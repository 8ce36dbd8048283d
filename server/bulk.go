package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
)

// Bulk actions: POST /v1/jobs/bulk and POST /v1/runs/bulk.

func (s *Server) bulkRoutes() {
	s.mux.Handle("POST /v1/jobs/bulk", s.auth(http.HandlerFunc(s.jobBulk)))
	s.mux.Handle("POST /v1/runs/bulk", s.auth(http.HandlerFunc(s.runBulk)))
}

// JobFilterJSON selects jobs as the query of GET /v1/jobs does, field for
// field: lists of states, types and queues; metadata as key → value; times
// as RFC 3339.
type JobFilterJSON struct {
	State        []string          `json:"state,omitempty"`
	Type         []string          `json:"type,omitempty"`
	Queue        []string          `json:"queue,omitempty"`
	GroupID      string            `json:"group_id,omitempty"`
	ParentID     string            `json:"parent_id,omitempty"`
	Metadata     map[string]string `json:"meta,omitempty"`
	UniqueKey    string            `json:"unique_key,omitempty"`
	Error        string            `json:"error,omitempty"`
	QueuedAfter  string            `json:"queued_after,omitempty"`
	QueuedBefore string            `json:"queued_before,omitempty"`
	EndedAfter   string            `json:"ended_after,omitempty"`
	EndedBefore  string            `json:"ended_before,omitempty"`
	// HideCompensated ("true") leaves out compensated sagas' jobs.
	HideCompensated string `json:"hide_compensated,omitempty"`
}

// values is f as a listing's query.
func (f *JobFilterJSON) values() url.Values {
	q := url.Values{"state": f.State, "type": f.Type, "queue": f.Queue}
	for k, v := range map[string]string{"group_id": f.GroupID, "parent_id": f.ParentID, "unique_key": f.UniqueKey,
		"error": f.Error, "queued_after": f.QueuedAfter, "queued_before": f.QueuedBefore, "ended_after": f.EndedAfter,
		"ended_before": f.EndedBefore, "hide_compensated": f.HideCompensated} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range f.Metadata {
		q.Add("meta", k+"="+v)
	}
	return q
}

// BulkRequest is the body of POST /v1/jobs/bulk: an action on the jobs
// named by IDs, or on every job matching Filter (then with DryRun, to
// count them, or with Max, the count confirmed).
type BulkRequest struct {
	Action string         `json:"action"`
	IDs    []string       `json:"ids,omitempty"`
	Filter *JobFilterJSON `json:"filter,omitempty"`
	DryRun bool           `json:"dry_run,omitempty"`
	Max    int            `json:"max,omitempty"`
}

// BulkResultJSON is the answer to a bulk action (hopper.BulkResult).
type BulkResultJSON struct {
	Action  string `json:"action"`
	DryRun  bool   `json:"dry_run"`
	Matched int    `json:"matched"`
	Changed int    `json:"changed"`
	Skipped int    `json:"skipped"`
	More    bool   `json:"more"`
}

func bulkResultJSON(r *hopper.BulkResult) BulkResultJSON {
	return BulkResultJSON{Action: string(r.Action), DryRun: r.DryRun, Matched: r.Matched, Changed: r.Changed, Skipped: r.Skipped, More: r.More}
}

func (s *Server) jobBulk(w http.ResponseWriter, r *http.Request) {
	var req BulkRequest
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p := &hopper.BulkParams{Action: hopper.BulkAction(req.Action), IDs: req.IDs, DryRun: req.DryRun, Max: req.Max}
	if req.Filter != nil {
		lp, err := listParams(req.Filter.values())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p.Filter = lp
	}
	ctx, cancel := bulkContext(r)
	defer cancel()
	res, err := s.c.JobBulk(ctx, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, bulkResultJSON(res))
}

// RunFilterJSON selects runs as the query of GET /v1/runs does.
type RunFilterJSON struct {
	Status        []string `json:"status,omitempty"`
	Workflow      string   `json:"workflow,omitempty"`
	ParentID      string   `json:"parent,omitempty"`
	StartedAfter  string   `json:"started_after,omitempty"`
	StartedBefore string   `json:"started_before,omitempty"`
}

// RunBulkRequest is the body of POST /v1/runs/bulk: "cancel" or "retry"
// the runs named by IDs or matching Filter, as BulkRequest.
type RunBulkRequest struct {
	Action string         `json:"action"`
	IDs    []string       `json:"ids,omitempty"`
	Filter *RunFilterJSON `json:"filter,omitempty"`
	DryRun bool           `json:"dry_run,omitempty"`
	Max    int            `json:"max,omitempty"`
}

func (s *Server) runBulk(w http.ResponseWriter, r *http.Request) {
	var req RunBulkRequest
	if err := decodeBody(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p := &hopper.RunBulkParams{Action: hopper.BulkAction(req.Action), IDs: req.IDs, DryRun: req.DryRun, Max: req.Max}
	if f := req.Filter; f != nil {
		q := url.Values{"status": f.Status}
		for k, v := range map[string]string{"workflow": f.Workflow, "parent": f.ParentID, "started_after": f.StartedAfter, "started_before": f.StartedBefore} {
			if v != "" {
				q.Set(k, v)
			}
		}
		rq, err := runQuery(q)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p.Filter = rq
	}
	ctx, cancel := bulkContext(r)
	defer cancel()
	res, err := s.c.RunBulk(ctx, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, bulkResultJSON(res))
}

// ParseJobFilter reads job filters as GET /v1/jobs takes them (state,
// type, queue, group_id, parent_id, meta=key=value, unique_key, error,
// queued_after, queued_before, and limit, cursor, order and scan: a
// search's ScanLimit, hopper.DefaultScanLimit when absent). A bad value
// is an error wrapping hopper.ErrInvalidInput.
func ParseJobFilter(q url.Values) (*hopper.ListParams, error) {
	p, err := listParams(q)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", hopper.ErrInvalidInput, strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "))
	}
	return p, nil
}

// JobFilterOf is q (as ParseJobFilter reads it) as a bulk action's filter.
func JobFilterOf(q url.Values) *JobFilterJSON {
	f := &JobFilterJSON{State: splitList(q["state"]), Type: splitList(q["type"]), Queue: splitList(q["queue"]),
		GroupID: q.Get("group_id"), ParentID: q.Get("parent_id"), UniqueKey: q.Get("unique_key"), Error: q.Get("error"),
		QueuedAfter: q.Get("queued_after"), QueuedBefore: q.Get("queued_before"), EndedAfter: q.Get("ended_after"),
		EndedBefore: q.Get("ended_before")}
	for _, kv := range q["meta"] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			f.Metadata[k] = v
		}
	}
	return f
}

// bulkMaxDuration bounds a bulk action.
const bulkMaxDuration = time.Hour

// bulkContext is a bulk action's context: it outlives the request, so a
// client that goes away (a proxy's timeout on a million-row action) does
// not stop the action half-way; the pages already done stay done either
// way, and the action ends within bulkMaxDuration.
func bulkContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), bulkMaxDuration)
}
