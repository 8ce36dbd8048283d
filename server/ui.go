package server

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

//go:embed ui/templates/*.html ui/static/*
var uiFS embed.FS

var uiTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":    ago,
	"stamp":  stamp,
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"pretty": prettyJSON,
	"short":  func(id string) string { return shortID(id) },
	// seg escapes an id or a name as one path segment of a URL.
	"seg":    url.PathEscape,
	"states": func() []hoppertype.JobState { return hoppertype.JobStates() },
	// depth prints a queue's count of due or delayed jobs, which stops
	// past hopper.QueueDepthCap.
	"depth": func(n int) string {
		if n > hopper.QueueDepthCap {
			return "over " + strconv.Itoa(hopper.QueueDepthCap)
		}
		return strconv.Itoa(n)
	},
	"roundDur": roundDur,
	"query":    func(v url.Values) template.URL { return template.URL(v.Encode()) },
	// attempts reads "2 of 3" (a workflow run's job: of the run's tries).
	"attempts": func(v any) string {
		j := rowOf(v)
		return strconv.Itoa(j.Attempt) + " of " + strconv.Itoa(hopper.MaxAttempts(j))
	},
	"runOf": func(v any) string {
		if _, run, ok := hopper.RunOf(rowOf(v)); ok {
			return run
		}
		return ""
	},
	"workflowOf": func(v any) string {
		wf, _, _ := hopper.RunOf(rowOf(v))
		return wf
	},
	"isGate":     func(v any) bool { return hopper.IsGate(rowOf(v)) },
	"slotsSteps": slotsSteps,
}).ParseFS(uiFS, "ui/templates/*.html"))

func (s *Server) uiRoutes() {
	static, _ := fs.Sub(uiFS, "ui/static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.Handle("GET /{$}", s.uiAuth(s.uiOverview))
	s.mux.Handle("GET /jobs", s.uiAuth(s.uiJobs))
	s.mux.Handle("GET /jobs/{id}", s.uiAuth(s.uiJob))
	s.mux.Handle("GET /dead", s.uiAuth(s.uiDead))
	s.mux.Handle("GET /runs", s.uiAuth(s.uiRuns))
	s.mux.Handle("GET /runs/{id}", s.uiAuth(s.uiRun))
	s.mux.Handle("GET /search", s.uiAuth(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimSpace(r.URL.Query().Get("id"))
		if _, err := s.c.RunGet(r.Context(), id); err == nil {
			http.Redirect(w, r, "/runs/"+url.PathEscape(id), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, "/jobs/"+url.PathEscape(id), http.StatusSeeOther)
	}))
}

// uiAuth answers an unauthenticated browser with 401 and a login form.
func (s *Server) uiAuth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			s.render(w, r, http.StatusUnauthorized, "login", map[string]any{"Next": r.URL.RequestURI()})
			return
		}
		h(w, r)
	})
}

type page struct {
	Title string
	Nav   string
	// SignedIn is set when the page was served on a session cookie: the
	// header offers to sign out.
	SignedIn bool
	Data     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	p := page{Title: s.opts.Title, Nav: name, SignedIn: s.cookieAuthenticated(r), Data: data}
	if err := uiTemplates.ExecuteTemplate(&buf, name, p); err != nil {
		s.opts.Logger.Error("hopper server: render", "request_id", requestID(r), "template", name, "err", err)
		http.Error(w, "render error (request "+requestID(r)+"; the server's log has its cause)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) uiOverview(w http.ResponseWriter, r *http.Request) {
	qs, err := s.c.QueueDepths(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recent, err := s.c.JobList(r.Context(), &hopper.ListParams{Limit: 15})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := s.c.RunList(r.Context(), &hopper.RunQuery{Limit: 10})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	workers, err := s.c.WorkerList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	schedules, err := s.c.ScheduleList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", map[string]any{
		"Queues": qs, "Recent": s.lines(r.Context(), recent.Jobs), "Types": s.c.Types(), "Started": s.c.Started(), "Active": len(s.c.Active()),
		"Workflows": s.c.Workflows(), "Runs": runs.Runs, "Workers": workers, "Schedules": schedules,
	})
}

const runsPage = 50

func (s *Server) uiRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := map[string]any{"Status": q.Get("status"), "Workflow": q.Get("workflow"), "Workflows": s.c.Workflows(),
		"Statuses": hoppertype.RunStatuses()}
	rq, err := runQuery(q)
	if err != nil {
		data["Error"] = err.Error()
		s.render(w, r, http.StatusBadRequest, "runs", data)
		return
	}
	rq.Limit = runsPage
	page, err := s.c.RunList(r.Context(), rq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs := page.Runs
	if page.NextCursor != "" {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Del("offset")
		next.Set("cursor", page.NextCursor)
		data["HasNext"], data["Next"] = true, next
	}
	data["Runs"], data["Bar"] = runs, runsBar(q) // bulk actions: ui_bulk.go
	s.render(w, r, http.StatusOK, "runs", data)
}

func (s *Server) uiRun(w http.ResponseWriter, r *http.Request) {
	tl, err := s.c.RunTimeline(r.Context(), r.PathValue("id"))
	if err != nil {
		if errorsIsNotFound(err) {
			s.render(w, r, http.StatusNotFound, "notfound", map[string]any{"ID": r.PathValue("id")})
			return
		}
		s.fail(w, r, err)
		return
	}
	info := tl.Run
	chunks, err := s.c.StreamRead(r.Context(), info.ID, 0, hopper.MaxListLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "run", map[string]any{"Run": info, "Chunks": chunks,
		"Timeline": layoutTimeline(buildTimeline(tl, time.Now()))}) // timeline.go
}

func (s *Server) uiJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := listParams(q)
	if err != nil {
		data := searchForm(q, s.c.Types())
		data["Error"], data["Q"] = err.Error(), q
		s.render(w, r, http.StatusBadRequest, "jobs", data)
		return
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	pg, err := s.c.JobList(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("cursor", pg.NextCursor)
	data := searchForm(q, s.c.Types())
	data["Q"], data["Next"], data["HasNext"] = q, next, pg.NextCursor != ""
	data["Searched"] = searched(p, pg)
	data["Rows"], data["Bar"] = selRows{Jobs: s.lines(r.Context(), pg.Jobs), Errors: showsErrors(p)}, jobsBar(q) // bulk and search: ui_bulk.go
	s.render(w, r, http.StatusOK, "jobs", data)
}

func (s *Server) uiJob(w http.ResponseWriter, r *http.Request) {
	row, err := s.c.JobGet(r.Context(), r.PathValue("id"))
	if err != nil {
		if errorsIsNotFound(err) {
			s.render(w, r, http.StatusNotFound, "notfound", map[string]any{"ID": r.PathValue("id")})
			return
		}
		s.fail(w, r, err)
		return
	}
	attempts, err := s.c.JobAttempts(r.Context(), row.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := map[string]any{"Job": row, "JSON": jobJSON(row), "Attempts": attempts}
	if hopper.IsGate(row) {
		g, err := s.c.GateGet(r.Context(), row.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		data["Gate"] = g
		data["Watched"] = watchedPage(g, r.URL.Query().Get("watched"))
	}
	if wf, run, ok := hopper.RunOf(row); ok {
		data["Workflow"], data["RunID"] = wf, run
	}
	data["Line"] = s.lines(r.Context(), []*hopper.JobRow{row})[0]
	if err := s.jobPipeline(r.Context(), row, r.URL.Query(), data); err != nil { // pipeline.go
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "job", data)
}

// slotsSteps draws a worker's slots over its autoscaler's latest
// decisions as the points of an SVG polyline in a 120×24 box: a step at
// each decision, on a time axis from the first decision to the worker's
// last report, slots from 0 to the most it had.
func slotsSteps(w *hopper.WorkerInfo) string {
	if len(w.Scalings) == 0 {
		return ""
	}
	t0, t1 := w.Scalings[0].At, w.SeenAt
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	top := 1
	for _, sc := range w.Scalings {
		top = max(top, sc.Before, sc.After)
	}
	x := func(t time.Time) float64 { return 120 * float64(t.Sub(t0)) / float64(t1.Sub(t0)) }
	y := func(n int) float64 { return 24 - 22*float64(n)/float64(top) }
	var b strings.Builder
	fmt.Fprintf(&b, "0,%.1f", y(w.Scalings[0].Before))
	for _, sc := range w.Scalings {
		fmt.Fprintf(&b, " %.1f,%.1f %.1f,%.1f", x(sc.At), y(sc.Before), x(sc.At), y(sc.After))
	}
	fmt.Fprintf(&b, " 120,%.1f", y(w.Scalings[len(w.Scalings)-1].After))
	return b.String()
}

// stamp is the one format of a time the dashboard shows in full, with its
// zone (UTC).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 MST") }

// ago says how long before now t was, as people say it: "just now",
// "42 s ago", "27 min ago", "3 h ago", "2 days ago"; "in 5 min" ahead.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	switch {
	case d < 0 && -d >= time.Second:
		return "in " + spoken(-d)
	case d < time.Second:
		return "just now"
	default:
		return spoken(d) + " ago"
	}
}

// spoken is d rounded down to its largest unit.
func spoken(d time.Duration) string {
	n := func(u time.Duration) int64 { return int64(d / u) }
	switch {
	case d < time.Minute:
		return strconv.FormatInt(n(time.Second), 10) + " s"
	case d < time.Hour:
		return strconv.FormatInt(n(time.Minute), 10) + " min"
	case d < 48*time.Hour:
		return strconv.FormatInt(n(time.Hour), 10) + " h"
	default:
		return strconv.FormatInt(n(24*time.Hour), 10) + " days"
	}
}

// roundDur reads a length of time, rounded to its unit, as ago does
// without "ago": "42 s", "27 min", "3 h".
func roundDur(d time.Duration) string {
	r := max(d, 0).Round(time.Second)
	for _, unit := range []time.Duration{time.Minute, time.Hour} {
		if r >= unit {
			r = max(d, 0).Round(unit)
		}
	}
	return spoken(r)
}

func prettyJSON(b []byte) string {
	if b == nil {
		return "—"
	}
	var buf bytes.Buffer
	if err := jsonIndent(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// shortID is an id as a table shows it: a UUID's random tail, an id a
// person chose whole up to 24 bytes, the end of a longer one.
func shortID(id string) string {
	switch {
	case len(id) == 36 && id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-': // a UUID: its random tail
		return id[len(id)-12:]
	case len(id) > 24:
		return "…" + id[len(id)-20:]
	}
	return id
}

// jobLine is a job as a table shows it: with whether it is the job of a
// workflow run that ended compensated, which ends dead but is no dead
// letter (its run undid its work on purpose).
type jobLine struct {
	*hopper.JobRow
	Compensated bool
}

// rowOf is the job of a table's line or the job itself.
func rowOf(v any) *hopper.JobRow {
	if l, ok := v.(jobLine); ok {
		return l.JobRow
	}
	return v.(*hopper.JobRow)
}

// lines reads, for the dead jobs of workflow runs among jobs, whether their
// runs ended compensated (a read of one run each). A run that cannot be
// read leaves its job shown as it is.
func (s *Server) lines(ctx context.Context, jobs []*hopper.JobRow) []jobLine {
	out := make([]jobLine, len(jobs))
	for i, j := range jobs {
		out[i].JobRow = j
		if _, run, ok := hopper.RunOf(j); ok && j.State == hopper.StateDead {
			if info, err := s.c.RunGet(ctx, run); err == nil && info.Status == hopper.RunCompensated {
				out[i].Compensated = true
			}
		}
	}
	return out
}

// watchedPageSize is how many of a gate's watched jobs its page lists at
// a time.
const watchedPageSize = 50

// watched is one page of the jobs a gate watches, with what it saw of
// each; From (1-based) and To number them, Next is the next page's offset
// (0: none), Prev whether there is a page before.
type watched struct {
	Rows     []watchedRow
	From, To int
	Next     int
	Prev     bool
}

type watchedRow struct {
	ID   string
	Seen hopper.JobState
}

// watchedPage pages g.On from the offset in the query (its start when the
// offset is missing or not a number in range).
func watchedPage(g *hopper.GateInfo, offset string) watched {
	start, err := strconv.Atoi(offset)
	if err != nil || start < 0 || start >= len(g.On) {
		start = 0
	}
	end := min(start+watchedPageSize, len(g.On))
	out := watched{From: start + 1, To: end, Prev: start > 0}
	for i := start; i < end; i++ {
		row := watchedRow{ID: g.On[i]}
		if i < len(g.Seen) {
			row.Seen = g.Seen[i]
		}
		out.Rows = append(out.Rows, row)
	}
	if end < len(g.On) {
		out.Next = end
	}
	return out
}

// searched says how far a page of a search by what no index serves
// (metadata, unique key, error text) looked when its window ended before
// the page filled ("" otherwise): the page is short, and its next page
// searches on.
func searched(p *hopper.ListParams, pg *hopper.JobPage) string {
	if pg.NextCursor == "" || len(pg.Jobs) >= p.Limit || p.ScanLimit == 0 ||
		len(p.Metadata) == 0 && p.UniqueKey == "" && p.ErrorContains == "" {
		return ""
	}
	which := "newest"
	switch {
	case p.Cursor != "":
		which = "next"
	case p.Ascending:
		which = "oldest"
	}
	n := strconv.Itoa(p.ScanLimit)
	for i := len(n) - 3; i > 0; i -= 3 {
		n = n[:i] + "," + n[i:]
	}
	return fmt.Sprintf("Searched the %s %s jobs", which, n)
}
