package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// The dashboard's bulk actions and searches: the Jobs, Dead letters and
// Runs tables with a checkbox per row and an action bar (templates
// bulk.html; app.js's bulk block posts to /v1/jobs/bulk and /v1/runs/bulk).

// bulkBar is the action bar over a table.
type bulkBar struct {
	// Endpoint is the bulk route, Kind "jobs" or "runs", Noun what a row is.
	Endpoint, Kind, Noun string
	// Query is the page's filter as a query string: "all matching this
	// filter" posts it as the action's filter.
	Query   string
	Actions []bulkAction
}

type bulkAction struct{ Name, Label string }

// selRows is a table of jobs with a checkbox per row; Errors adds the last
// error's column.
type selRows struct {
	Jobs   []jobLine
	Errors bool
}

// filterQuery is q without what pages a listing: the filter alone.
func filterQuery(q url.Values) string {
	f := url.Values{}
	for k, v := range q {
		switch k {
		case "cursor", "limit", "order", "offset":
		default:
			f[k] = v
		}
	}
	return f.Encode()
}

// searchForm is what the search fields of the Jobs and Dead letters pages
// show: the query's values.
func searchForm(q url.Values, types []string) map[string]any {
	return map[string]any{"State": q.Get("state"), "Type": q.Get("type"), "Queue": q.Get("queue"), "Meta": q.Get("meta"),
		"UniqueKey": q.Get("unique_key"), "ErrorText": q.Get("error"), "QueuedAfter": q.Get("queued_after"),
		"QueuedBefore": q.Get("queued_before"), "EndedAfter": q.Get("ended_after"), "EndedBefore": q.Get("ended_before"), "Types": types}
}

// uiDead serves the Dead letters page: the dead jobs matching the search,
// with their errors, to redrive or delete selected or by filter.
func (s *Server) uiDead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("state")
	data := searchForm(q, s.c.Types())
	data["Dead"] = true // the search's end times read "died"
	p, err := listParams(q)
	if err != nil {
		data["Error"] = err.Error()
		s.render(w, r, http.StatusBadRequest, "dead", data)
		return
	}
	p.States = []hopper.JobState{hopper.StateDead}
	if q.Get("hide_compensated") == "" {
		p.HideCompensated = true // a compensated saga is no dead letter
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	pg, err := s.c.JobList(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fq := url.Values{}
	for k, v := range q {
		fq[k] = v
	}
	fq.Set("state", string(hoppertype.JobStateDead))
	fq.Set("hide_compensated", strconv.FormatBool(p.HideCompensated))
	data["Rows"] = selRows{Jobs: s.lines(r.Context(), pg.Jobs), Errors: true}
	data["Bar"] = bulkBar{Endpoint: "/v1/jobs/bulk", Kind: "jobs", Noun: "job", Query: filterQuery(fq),
		Actions: []bulkAction{{"redrive", "Redrive"}, {"delete", "Delete"}}}
	if pg.NextCursor != "" {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("cursor", pg.NextCursor)
		data["HasNext"], data["Next"] = true, next
		data["Searched"] = searched(p, pg)
	}
	s.render(w, r, http.StatusOK, "dead", data)
}

// jobsBar is the Jobs page's action bar for the query q.
func jobsBar(q url.Values) bulkBar {
	return bulkBar{Endpoint: "/v1/jobs/bulk", Kind: "jobs", Noun: "job", Query: filterQuery(q),
		Actions: []bulkAction{{"cancel", "Cancel"}, {"retry", "Retry"}, {"delete", "Delete"}}}
}

// runsBar is the Runs page's action bar for the query q.
func runsBar(q url.Values) bulkBar {
	return bulkBar{Endpoint: "/v1/runs/bulk", Kind: "runs", Noun: "run", Query: filterQuery(q),
		Actions: []bulkAction{{"cancel", "Cancel"}, {"retry", "Retry"}}}
}

// showsErrors says whether a listing of p shows the error column: when it
// searches errors, or lists only states that come with one.
func showsErrors(p *hopper.ListParams) bool {
	if p.ErrorContains != "" {
		return true
	}
	for _, st := range p.States {
		switch st {
		case hopper.StateDead, hopper.StateExpired, hopper.StateCancelled, hopper.StateRetrying, hopper.StateStuck:
		default:
			return false
		}
	}
	return len(p.States) > 0
}
