package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
)

// A run's timeline: every attempt of the run, each step, activity (with
// every try of its job), sleep, hook wait, child and compensation as a bar
// on one time axis, and the executions of the run's job above them. The
// API serves it as JSON (GET /v1/runs/{id}/timeline) and the run page
// draws it as SVG.

// TimelineJSON is a run's timeline: rows of bars on a time axis from
// Start to End.
type TimelineJSON struct {
	RunID  string    `json:"run_id"`
	Status string    `json:"status"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Rows are in the order drawn: the run's executions, then each attempt
	// (a header row) followed by what it did, in the order it did it.
	Rows []TimelineRowJSON `json:"rows"`
	// Truncated says rows past MaxTimelineRows were left out.
	Truncated bool `json:"truncated,omitempty"`
}

// TimelineRowJSON is one row of a timeline.
type TimelineRowJSON struct {
	// Kind is executions, attempt, step, activity, sleep, hook, child,
	// compensation or end.
	Kind    string `json:"kind"`
	Label   string `json:"label"`
	Attempt int    `json:"attempt,omitempty"`
	// Link is the dashboard path of what the row is about: an activity's
	// job, a child's run.
	Link string `json:"link,omitempty"`
	// Note is a word on the row: "retried", "3 tries", an error.
	Note string            `json:"note,omitempty"`
	Bars []TimelineBarJSON `json:"bars"`
}

// TimelineBarJSON is one interval of a row. A bar still going ends at the
// timeline's end with Open set; a point (an end marker) has End = Start.
type TimelineBarJSON struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Open  bool      `json:"open,omitempty"`
	// Class is how it ended: ok, failed, wait, retry, comp, exec, run
	// (running), span (an activity from scheduled to done) or attempt.
	Class string `json:"class"`
	Title string `json:"title"`
}

// MaxTimelineRows caps a timeline's rows.
const MaxTimelineRows = 400

// eventData is what a timeline reads of an event's data.
type eventData struct {
	Until    time.Time `json:"until"`
	Job      string    `json:"job"`
	Child    string    `json:"child"`
	Attempts int       `json:"attempts"`
	Status   string    `json:"status"`
	Error    *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// buildTimeline lays a run's attempts out as rows; now ends what is still
// going.
func buildTimeline(tl *hopper.RunTimeline, now time.Time) *TimelineJSON {
	run := tl.Run
	out := &TimelineJSON{RunID: run.ID, Status: string(run.Status), Start: run.CreatedAt}
	end := now
	if run.Status.Terminal() && !run.EndedAt.IsZero() {
		end = run.EndedAt
	}
	var rows []*TimelineRowJSON
	var open []*TimelineBarJSON // bars that end at the timeline's end

	execs := &TimelineRowJSON{Kind: "executions", Label: "executions", Bars: []TimelineBarJSON{}}
	for _, ex := range tl.Executions {
		b := TimelineBarJSON{Start: ex.StartedAt, End: ex.EndedAt, Class: execClass(ex)}
		b.Title = fmt.Sprintf("execution %d", ex.Number)
		if ex.Generation > 1 {
			b.Title = fmt.Sprintf("life %d, execution %d", ex.Generation, ex.Number)
		}
		if ex.Worker != "" {
			b.Title += " on " + ex.Worker
		}
		switch {
		case ex.EndedAt.IsZero():
			b.Title += ": running"
		default:
			b.Title += ": " + durLabel(ex.EndedAt.Sub(ex.StartedAt)) + ", then " + execOutcome(ex)
		}
		if ex.Error != nil {
			b.Title += " — " + ex.Error.Message
		}
		execs.Bars = append(execs.Bars, b)
	}
	if len(execs.Bars) > 0 {
		rows = append(rows, execs)
	}

	for _, a := range tl.Attempts {
		head := &TimelineRowJSON{Kind: "attempt", Label: fmt.Sprintf("attempt %d", a.Attempt), Attempt: a.Attempt}
		switch {
		case a.Retried:
			head.Note = "failed, undone and retried"
		case a.Ended:
			head.Note = "ended the run (" + string(run.Status) + ")"
		}
		rows = append(rows, head)
		acts := map[string]hopper.ActivityInfo{}
		for _, act := range a.Activities {
			acts[act.JobID] = act
		}
		var aStart, aEnd time.Time
		var cursor time.Time
		var attemptOpen []*TimelineBarJSON
		waiting := map[string]*TimelineRowJSON{} // by kind and name: hooks, children, activities
		add := func(r *TimelineRowJSON) *TimelineRowJSON {
			r.Attempt = a.Attempt
			rows = append(rows, r)
			return r
		}
		for _, ev := range a.Timeline {
			if ev.Seq == 0 {
				continue // an activity's execution: drawn from its job below
			}
			if aStart.IsZero() {
				aStart, cursor = ev.At, ev.At
			}
			aEnd = ev.At
			var d eventData
			_ = json.Unmarshal(ev.Data, &d)
			errMsg := ""
			if d.Error != nil {
				errMsg = d.Error.Message
			}
			barClass := "ok"
			if errMsg != "" {
				barClass = "failed"
			}
			switch ev.Kind {
			case "workflow_started":
				cursor = ev.At
			case "step", "side_effect":
				r := add(&TimelineRowJSON{Kind: "step", Label: ev.Name, Note: errMsg})
				if d.Attempts > 1 {
					r.Note = strings.TrimPrefix(fmt.Sprintf("%d tries %s", d.Attempts, errMsg), " ")
				}
				r.Bars = []TimelineBarJSON{{Start: cursor, End: ev.At, Class: barClass,
					Title: titled(ev.Name, cursor, ev.At, errMsg)}}
				cursor = ev.At
			case "sleep":
				r := add(&TimelineRowJSON{Kind: "sleep", Label: "sleep"})
				b := TimelineBarJSON{Start: ev.At, End: d.Until, Class: "wait", Title: "sleep until " + d.Until.UTC().Format("15:04:05.000 UTC")}
				r.Bars = []TimelineBarJSON{b}
				if d.Until.After(now) {
					r.Bars[0].End, r.Bars[0].Open = now, true
				}
				if d.Until.After(cursor) {
					cursor = d.Until
				}
			case "hook_wait":
				r := add(&TimelineRowJSON{Kind: "hook", Label: "hook " + ev.Name, Note: "waiting"})
				r.Bars = []TimelineBarJSON{{Start: ev.At, Class: "wait", Open: true, Title: "waits for hook " + ev.Name}}
				attemptOpen = append(attemptOpen, &r.Bars[0])
				waiting["hook:"+ev.Name] = r
			case "hook_received", "hook_timeout":
				if r := waiting["hook:"+ev.Name]; r != nil {
					delete(waiting, "hook:"+ev.Name)
					b := &r.Bars[0]
					b.End, b.Open, r.Note = ev.At, false, "resumed"
					b.Title = titled("hook "+ev.Name+" resumed", b.Start, ev.At, "")
					if ev.Kind == "hook_timeout" {
						b.Class, r.Note, b.Title = "failed", "timed out", titled("hook "+ev.Name+" timed out", b.Start, ev.At, "")
					}
				}
				cursor = ev.At
			case "child_started":
				r := add(&TimelineRowJSON{Kind: "child", Label: "child " + ev.Name, Note: "running"})
				if d.Child != "" {
					r.Link = "/runs/" + url.PathEscape(d.Child)
				}
				r.Bars = []TimelineBarJSON{{Start: ev.At, Class: "wait", Open: true, Title: "child run " + d.Child}}
				attemptOpen = append(attemptOpen, &r.Bars[0])
				waiting["child:"+ev.Name] = r
			case "child_completed":
				if r := waiting["child:"+ev.Name]; r != nil {
					delete(waiting, "child:"+ev.Name)
					b := &r.Bars[0]
					b.End, b.Open, b.Class, r.Note = ev.At, false, barClass, errMsg
					b.Title = titled("child run "+strings.TrimPrefix(r.Link, "/runs/"), b.Start, ev.At, errMsg)
				}
				cursor = ev.At
			case "activity_scheduled":
				r := add(&TimelineRowJSON{Kind: "activity", Label: ev.Name})
				if d.Job != "" {
					r.Link = "/jobs/" + url.PathEscape(d.Job)
				}
				r.Bars = []TimelineBarJSON{{Start: ev.At, Class: "span", Open: true, Title: "activity " + ev.Name + " (job " + d.Job + ")"}}
				act, ok := acts[d.Job]
				if ok {
					r.Bars = append(r.Bars, tryBars(act, now)...)
					if len(act.Attempts) > 1 {
						r.Note = fmt.Sprintf("%d tries", len(act.Attempts))
					}
					if act.State == "" {
						r.Note = strings.TrimSpace(r.Note + " (job deleted)")
					}
				}
				waiting["activity:"+ev.Name] = r
			case "activity_completed":
				if r := waiting["activity:"+ev.Name]; r != nil {
					delete(waiting, "activity:"+ev.Name)
					b := &r.Bars[0]
					b.End, b.Open = ev.At, false
					b.Title = titled("activity "+ev.Name, b.Start, ev.At, errMsg)
					if errMsg != "" {
						r.Note = strings.TrimSpace(r.Note + " " + errMsg)
					}
				}
				cursor = ev.At
			case "compensation_executed", "compensation_failed":
				name := ev.Name
				if i := strings.LastIndexByte(name, '#'); i > 0 {
					name = name[:i]
				}
				cls := "comp"
				if ev.Kind == "compensation_failed" || errMsg != "" {
					cls = "failed"
				}
				r := add(&TimelineRowJSON{Kind: "compensation", Label: "undo: " + name, Note: errMsg})
				r.Bars = []TimelineBarJSON{{Start: cursor, End: ev.At, Class: cls, Title: titled("compensation "+name, cursor, ev.At, errMsg)}}
				cursor = ev.At
			case "workflow_completed", "workflow_failed", "workflow_cancelled":
				label, cls := strings.TrimPrefix(ev.Kind, "workflow_"), "ok"
				switch ev.Kind {
				case "workflow_failed":
					cls = "failed"
					if a.Retried {
						label = "failed: retried"
					}
				case "workflow_cancelled":
					cls = "failed"
				}
				add(&TimelineRowJSON{Kind: "end", Label: label, Note: errMsg,
					Bars: []TimelineBarJSON{{Start: ev.At, End: ev.At, Class: cls, Title: label + " at " + ev.At.UTC().Format("15:04:05.000 UTC") + errSuffix(errMsg)}}})
			}
		}
		// What is still going: until now, or until the attempt's last
		// record once it is over.
		for _, r := range waiting {
			if r.Kind == "activity" {
				attemptOpen = append(attemptOpen, &r.Bars[0])
			}
		}
		over := a.Retried || a.Ended || run.Status.Terminal()
		for _, b := range attemptOpen {
			if !b.Open {
				continue
			}
			if over {
				b.End, b.Open = aEnd, false
			} else {
				open = append(open, b)
			}
		}
		if !aStart.IsZero() {
			head.Bars = []TimelineBarJSON{{Start: aStart, End: aEnd, Class: "attempt", Title: head.Label + ": " + durLabel(aEnd.Sub(aStart))}}
			if !over {
				head.Bars[0].Open = true
				open = append(open, &head.Bars[0])
			}
		}
	}

	// The axis: from the run's creation to its end (now while it goes).
	start := run.CreatedAt
	for _, r := range rows {
		for _, b := range r.Bars {
			if !b.Start.IsZero() && (start.IsZero() || b.Start.Before(start)) {
				start = b.Start
			}
			if b.End.After(end) {
				end = b.End
			}
		}
	}
	for _, b := range open {
		b.End = end
	}
	for _, r := range rows {
		for i := range r.Bars {
			if r.Bars[i].End.IsZero() { // an execution still running
				r.Bars[i].End, r.Bars[i].Open = end, true
			}
		}
	}
	out.Start, out.End = start, end
	if len(rows) > MaxTimelineRows {
		rows, out.Truncated = rows[:MaxTimelineRows], true
	}
	out.Rows = make([]TimelineRowJSON, len(rows))
	for i, r := range rows {
		if r.Bars == nil {
			r.Bars = []TimelineBarJSON{}
		}
		out.Rows[i] = *r
	}
	return out
}

// tryBars draws an activity's tries: each execution of its job, and the
// backoff between a failed one and the next.
func tryBars(act hopper.ActivityInfo, now time.Time) []TimelineBarJSON {
	var out []TimelineBarJSON
	for i, at := range act.Attempts {
		b := TimelineBarJSON{Start: at.StartedAt, End: at.EndedAt, Class: "ok"}
		switch at.Outcome {
		case "":
			b.Class = "run"
		case hopper.StateSucceeded:
		default:
			b.Class = "failed"
		}
		msg := ""
		if at.Error != nil {
			msg = at.Error.Message
		}
		b.Title = fmt.Sprintf("%s try %d", act.Name, at.Number)
		if at.Worker != "" {
			b.Title += " on " + at.Worker
		}
		if !at.EndedAt.IsZero() {
			b.Title += ": " + durLabel(at.EndedAt.Sub(at.StartedAt))
		}
		b.Title += errSuffix(msg)
		out = append(out, b)
		if at.Outcome == hopper.StateRetrying {
			next := act.RunAt
			if i+1 < len(act.Attempts) {
				next = act.Attempts[i+1].StartedAt
			}
			r := TimelineBarJSON{Start: at.EndedAt, End: next, Class: "retry", Title: "backoff before try " + fmt.Sprint(at.Number+1) + ": " + durLabel(next.Sub(at.EndedAt))}
			if next.After(now) {
				r.End, r.Open = now, true
			}
			out = append(out, r)
		}
	}
	return out
}

func execClass(ex hopper.Attempt) string {
	switch ex.Outcome {
	case "":
		return "run"
	case hopper.StateSucceeded:
		return "ok"
	case hopper.StateScheduled, hopper.StatePending:
		return "exec"
	default:
		return "failed"
	}
}

func execOutcome(ex hopper.Attempt) string {
	switch ex.Outcome {
	case hopper.StateScheduled:
		return "waited"
	case hopper.StatePending:
		return "handed back"
	case hopper.StateRetrying:
		return "retried (crash or failure)"
	}
	return string(ex.Outcome)
}

func titled(what string, a, b time.Time, errMsg string) string {
	return what + ": " + durLabel(b.Sub(a)) + errSuffix(errMsg)
}

func errSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return " — " + msg
}

// runTimeline serves GET /v1/runs/{id}/timeline.
func (s *Server) runTimeline(w http.ResponseWriter, r *http.Request) {
	tl, err := s.c.RunTimeline(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, buildTimeline(tl, time.Now()))
}

// timelineSVG is a timeline laid out for the run page's SVG.
type timelineSVG struct {
	Width, Height    float64
	PlotX0, PlotX1   float64
	AxisY            float64
	Ticks            []axisTick
	Rows             []timelineSVGRow
	From, Span       string
	Truncated        bool
	LabelW, RowH, Y0 float64
}

type timelineSVGRow struct {
	TimelineRowJSON
	Y, TextY, MidY float64
	Shown          string
	SVGBars        []timelineSVGBar
}

type timelineSVGBar struct {
	TimelineBarJSON
	X, W, Y, H float64
	Point      bool
}

// layoutTimeline places a timeline's rows and bars in a 1000-wide SVG.
func layoutTimeline(t *TimelineJSON) *timelineSVG {
	const (
		width  = 1000.0
		labelW = 200.0
		rowH   = 22.0
		axisH  = 26.0
	)
	v := &timelineSVG{Width: width, PlotX0: labelW + 10, PlotX1: width - 10, AxisY: axisH - 6, LabelW: labelW, RowH: rowH, Y0: axisH,
		Truncated: t.Truncated}
	sc := newTimeScale(t.Start, t.End, v.PlotX0, v.PlotX1)
	v.Ticks = sc.Ticks(8)
	v.From = t.Start.UTC().Format("2006-01-02 15:04:05.000 UTC")
	v.Span = durLabel(t.End.Sub(t.Start))
	for i, r := range t.Rows {
		y := axisH + float64(i)*rowH
		row := timelineSVGRow{TimelineRowJSON: r, Y: y, TextY: y + rowH/2 + 4, MidY: y + rowH/2, Shown: r.Label}
		if len([]rune(row.Shown)) > 28 {
			row.Shown = string([]rune(row.Shown)[:27]) + "…"
		}
		for _, b := range r.Bars {
			h, by := rowH-8, y+4
			if b.Class == "span" || b.Class == "attempt" {
				h, by = rowH-14, y+7
			}
			x, w := sc.Span(b.Start, b.End, 2)
			sb := timelineSVGBar{TimelineBarJSON: b, X: x, W: w, Y: round1(by), H: h}
			if b.End.Equal(b.Start) && (r.Kind == "end") {
				sb.Point, sb.X, sb.Y = true, sc.X(b.Start), row.MidY
			}
			row.SVGBars = append(row.SVGBars, sb)
		}
		v.Rows = append(v.Rows, row)
	}
	v.Height = axisH + float64(len(t.Rows))*rowH + 4
	return v
}
