package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
)

// EventJSON is a lifecycle event on the wire.
type EventJSON struct {
	Kind       string          `json:"kind"`
	JobID      string          `json:"job_id,omitempty"`
	Type       string          `json:"type,omitempty"`
	Queue      string          `json:"queue,omitempty"`
	GroupID    string          `json:"group_id,omitempty"`
	ParentID   string          `json:"parent_id,omitempty"`
	Dependents []string        `json:"dependents,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Error      string          `json:"error,omitempty"`
	WillRetry  bool            `json:"will_retry,omitempty"`
	RunAt      *time.Time      `json:"run_at,omitempty"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Stuck      *StuckJSON      `json:"stuck,omitempty"`
	At         time.Time       `json:"at"`
}

func eventJSON(e hopper.Event) EventJSON {
	return EventJSON{Kind: string(e.Kind), JobID: e.JobID, Type: e.Type, Queue: e.Queue, GroupID: e.GroupID, ParentID: e.ParentID,
		Dependents: e.Dependents, Attempt: e.Attempt, Error: e.Error, WillRetry: e.WillRetry, RunAt: timePtr(e.RunAt),
		Deadline: timePtr(e.Deadline), Result: e.Result, Stuck: stuckJSON(e.Stuck), At: e.At}
}

var eventKinds = []hopper.EventKind{
	hopper.EventQueued, hopper.EventStarted, hopper.EventDeferred, hopper.EventSucceeded, hopper.EventFailed,
	hopper.EventExpired, hopper.EventCancelled, hopper.EventStuck, hopper.EventRedriven, hopper.EventGroupDone,
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

// streamEvents serves GET /v1/events as Server-Sent Events, filtered by
// ?type= (job types) and ?kind= (event kinds; ?state= is a synonym).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	types := splitList(q["type"])
	kinds := map[string]bool{}
	for _, k := range append(splitList(q["kind"]), splitList(q["state"])...) {
		valid := false
		for _, ek := range eventKinds {
			valid = valid || string(ek) == k
		}
		if !valid {
			s.fail(w, r, badRequest("unknown event kind %q", k))
			return
		}
		kinds[k] = true
	}
	fl, ok := openSSE(w, "hopper events")
	if !ok {
		return
	}
	ch, unsub := s.events.subscribe()
	defer unsub()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.events.done:
			return
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case e := <-ch:
			if len(kinds) > 0 && !kinds[string(e.Kind)] {
				continue
			}
			if len(types) > 0 && !slices.Contains(types, e.Type) {
				continue
			}
			b, _ := json.Marshal(eventJSON(e))
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Kind, b)
			fl.Flush()
		}
	}
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
