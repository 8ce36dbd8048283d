package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// EventJSON is a lifecycle event on the wire.
type EventJSON struct {
	Kind       string                  `json:"kind"`
	JobID      string                  `json:"job_id,omitempty"`
	Type       string                  `json:"type,omitempty"`
	Queue      string                  `json:"queue,omitempty"`
	GroupID    string                  `json:"group_id,omitempty"`
	ParentID   string                  `json:"parent_id,omitempty"`
	Dependents []string                `json:"dependents,omitempty"`
	Attempt    int                     `json:"attempt,omitempty"`
	Error      string                  `json:"error,omitempty"`
	WillRetry  bool                    `json:"will_retry,omitempty"`
	RunAt      *time.Time              `json:"run_at,omitempty"`
	Deadline   *time.Time              `json:"deadline,omitempty"`
	Result     json.RawMessage         `json:"result,omitempty"`
	Stuck      *StuckJSON              `json:"stuck,omitempty"`
	RunID      string                  `json:"run_id,omitempty"`
	Status     string                  `json:"status,omitempty"`
	Worker     string                  `json:"worker,omitempty"`
	Scaling    *hoppertype.ScalingInfo `json:"scaling,omitempty"`
	Step       string                  `json:"step,omitempty"`
	Schedule   string                  `json:"schedule,omitempty"`
	// Cursor is the event's place in the change feed (empty for an event
	// of this process only).
	Cursor string    `json:"cursor,omitempty"`
	At     time.Time `json:"at"`
}

func eventJSON(e hopper.Event) EventJSON {
	return EventJSON{Kind: string(e.Kind), JobID: e.JobID, Type: e.Type, Queue: e.Queue, GroupID: e.GroupID, ParentID: e.ParentID,
		Dependents: e.Dependents, Attempt: e.Attempt, Error: e.Error, WillRetry: e.WillRetry, RunAt: timePtr(e.RunAt),
		Deadline: timePtr(e.Deadline), Result: e.Result, Stuck: stuckJSON(e.Stuck), RunID: e.RunID, Step: e.Step, Schedule: e.Schedule, Status: string(e.Status),
		Worker: e.Worker, Scaling: e.Scaling, Cursor: cursorText(e.Cursor), At: e.At}
}

// cursorText is a cursor as the API writes it, empty for the zero cursor.
func cursorText(c hoppertype.ChangeCursor) string {
	if c == (hoppertype.ChangeCursor{}) {
		return ""
	}
	return formatCursor(c)
}

// eventHub fans the client's events out to event streams. A stream that
// does not keep up loses events rather than slowing the engine.
type eventHub struct {
	mu     sync.Mutex
	subs   map[chan hopper.Event]struct{}
	closed bool
	done   chan struct{}
}

func newEventHub() *eventHub {
	return &eventHub{subs: map[chan hopper.Event]struct{}{}, done: make(chan struct{})}
}

func (h *eventHub) publish(e hopper.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

func (h *eventHub) subscribe() (chan hopper.Event, func()) {
	ch := make(chan hopper.Event, 256)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.subs[ch] = struct{}{}
	}
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// eventFilter is an events request's ?kind= (?state=) and ?type=.
type eventFilter struct {
	kinds map[hopper.EventKind]bool
	types []string
}

func parseEventFilter(q url.Values) (*eventFilter, error) {
	f := &eventFilter{kinds: map[hopper.EventKind]bool{}, types: splitList(q["type"])}
	for _, k := range append(splitList(q["kind"]), splitList(q["state"])...) {
		if !slices.Contains(hopper.EventKinds(), hopper.EventKind(k)) {
			return nil, badRequest("unknown event kind %q", k)
		}
		f.kinds[hopper.EventKind(k)] = true
	}
	return f, nil
}

func (f *eventFilter) match(e hopper.Event) bool {
	return (len(f.kinds) == 0 || f.kinds[e.Kind]) && (len(f.types) == 0 || slices.Contains(f.types, e.Type))
}

// streamEvents serves GET /v1/events as Server-Sent Events: the lifecycle
// events the store records, of every process sharing it, after ?after= (a
// cursor; "end", the default, for only the events to come; a reconnecting
// EventSource's Last-Event-ID wins), each with its cursor as id, then each
// new one as its change becomes final. This process's autoscaling
// decisions (scaled) come in between, without an id: they are not in the
// store. ?kind= (?state= is a synonym) and ?type= filter.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := parseEventFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	from := q.Get("after")
	if from == "" {
		from = "end"
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	cur, err := s.feedStart(r, from)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	local, unsub := s.events.subscribe()
	defer unsub()
	fl, ok := openSSE(w, "hopper events")
	if !ok {
		return
	}
	rd := s.c.NewEventReader(cur, &hopper.EventOpts{Limit: 500, Steps: wantSteps(q)})
	writeEvent := func(e hopper.Event) bool {
		if !filter.match(e) {
			return false
		}
		b, _ := json.Marshal(eventJSON(e))
		if e.Cursor == (hoppertype.ChangeCursor{}) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Kind, b) // this process's only: no place in the feed
		} else {
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", formatCursor(e.Cursor), e.Kind, b)
		}
		return true
	}
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	lastWrite := time.Now()
	for {
		for {
			evs, err := rd.Next(r.Context())
			if err != nil {
				if r.Context().Err() == nil {
					s.opts.Logger.Warn("hopper server: event stream", "err", err)
				}
				return
			}
			wrote := false
			for _, e := range evs {
				wrote = writeEvent(e) || wrote
			}
			if wrote {
				fl.Flush()
				lastWrite = time.Now()
			}
			if !rd.Full() {
				break
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.events.done:
			return
		case e := <-local:
			// This process's scaling decisions are not in the store; its
			// other events say "look now".
			for more := true; more; {
				if e.Kind == hopper.EventScaled && writeEvent(e) {
					fl.Flush()
					lastWrite = time.Now()
				}
				select {
				case e = <-local: // a burst of commits: one read for all
				default:
					more = false
				}
			}
		case <-poll.C:
			if time.Since(lastWrite) > 15*time.Second {
				fmt.Fprint(w, ": keep-alive\n\n")
				fl.Flush()
				lastWrite = time.Now()
			}
		}
	}
}

// wantSteps reports whether an events request asks for run-step events
// (?steps=true).
func wantSteps(q url.Values) bool {
	v, _ := strconv.ParseBool(q.Get("steps"))
	return v
}

// EventListJSON is a page of lifecycle events from the store.
type EventListJSON struct {
	Events []EventJSON `json:"events"`
	// Next is the cursor to read on from (?after=): that of the last
	// change read, which may have recorded no event.
	Next string `json:"next"`
}

// listEvents serves GET /v1/events/list?after=CURSOR&limit=N: the
// lifecycle events of up to N changes of the feed after the cursor, and
// where to read on.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := parseEventFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := s.feedStart(r, q.Get("after"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	evs, next, err := s.c.EventList(r.Context(), after, &hopper.EventOpts{Limit: limit, Steps: wantSteps(q)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := EventListJSON{Events: []EventJSON{}, Next: formatCursor(next)}
	for _, e := range evs {
		if filter.match(e) {
			out.Events = append(out.Events, eventJSON(e))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// openSSE starts a Server-Sent Events response with an opening comment; it
// answers 500 and reports false when w cannot stream.
func openSSE(w http.ResponseWriter, comment string) (http.Flusher, bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]string{"code": "internal", "message": "streaming unsupported"}})
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": %s\n\n", comment)
	fl.Flush()
	return fl, true
}

func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// EventToJSON is a lifecycle event as the API writes it (the CLI prints
// the same with --json).
func EventToJSON(e hopper.Event) EventJSON { return eventJSON(e) }

// ParseCursor reads a change feed cursor as the API writes it
// (TX.POSITION); the empty string is the feed's beginning.
func ParseCursor(s string) (hoppertype.ChangeCursor, error) { return parseCursor(s) }

// FormatCursor writes a change feed cursor as the API does.
func FormatCursor(c hoppertype.ChangeCursor) string { return formatCursor(c) }
