package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// AttemptJSON is one attempt of a job as the API returns it.
type AttemptJSON struct {
	Generation int        `json:"generation"`
	Number     int        `json:"number"`
	Worker     string     `json:"worker,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	Outcome    string     `json:"outcome,omitempty"`
	Error      *ErrorJSON `json:"error,omitempty"`
	Stuck      *StuckJSON `json:"stuck,omitempty"`
	// Heartbeats are the messages the attempt recorded.
	Heartbeats []HeartbeatJSON `json:"heartbeats,omitempty"`
}

// HeartbeatJSON is a message an attempt recorded with its heartbeat.
type HeartbeatJSON struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}

// AttemptListJSON is a job's attempts.
type AttemptListJSON struct {
	Attempts []AttemptJSON `json:"attempts"`
}

func attemptsJSON(as []hopper.Attempt) []AttemptJSON {
	out := make([]AttemptJSON, len(as))
	for i, a := range as {
		out[i] = AttemptJSON{Generation: a.Generation, Number: a.Number, Worker: a.Worker, StartedAt: a.StartedAt,
			EndedAt: timePtr(a.EndedAt), Outcome: string(a.Outcome), Error: errJSON(a.Error), Stuck: stuckJSON(a.Stuck)}
		for _, hb := range a.Heartbeats {
			out[i].Heartbeats = append(out[i].Heartbeats, HeartbeatJSON{At: hb.At, Message: hb.Message})
		}
	}
	return out
}

// AttemptsToJSON is a job's attempts as the API shows them (the CLI prints
// the same with --json).
func AttemptsToJSON(as []hopper.Attempt) []AttemptJSON { return attemptsJSON(as) }

// jobAttempts serves GET /v1/jobs/{id}/attempts.
func (s *Server) jobAttempts(w http.ResponseWriter, r *http.Request) {
	as, err := s.c.JobAttempts(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AttemptListJSON{Attempts: attemptsJSON(as)})
}

// ChangeJSON is a change of the feed as the API returns it.
type ChangeJSON struct {
	// Cursor names the change's place in the feed: pass it as ?after= to
	// read the changes after it.
	Cursor   string     `json:"cursor"`
	Position int64      `json:"position"`
	Kind     string     `json:"kind"`
	EntityID string     `json:"entity_id"`
	Type     string     `json:"type"`
	Queue    string     `json:"queue,omitempty"`
	Prev     string     `json:"prev,omitempty"`
	State    string     `json:"state"`
	Attempt  int        `json:"attempt"`
	Worker   string     `json:"worker,omitempty"`
	Fields   []string   `json:"fields,omitempty"`
	Error    *ErrorJSON `json:"error,omitempty"`
	Stuck    *StuckJSON `json:"stuck,omitempty"`
	// Detail is a heartbeat change's message.
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// ChangeListJSON is a page of the feed.
type ChangeListJSON struct {
	Changes []*ChangeJSON `json:"changes"`
	// Next is the cursor to read on from (the last change's, or the one
	// given when there were none).
	Next string `json:"next"`
}

func formatCursor(c hoppertype.ChangeCursor) string {
	return strconv.FormatInt(c.Tx, 10) + "." + strconv.FormatInt(c.Position, 10)
}

func parseCursor(s string) (hoppertype.ChangeCursor, error) {
	if s == "" {
		return hoppertype.ChangeCursor{}, nil
	}
	tx, pos, ok := strings.Cut(s, ".")
	t, err1 := strconv.ParseInt(tx, 10, 64)
	p, err2 := strconv.ParseInt(pos, 10, 64)
	if !ok || err1 != nil || err2 != nil || t < 0 || p < 0 {
		return hoppertype.ChangeCursor{}, badRequest("after: %q is not a feed cursor (TX.POSITION, as a change's cursor)", s)
	}
	return hoppertype.ChangeCursor{Tx: t, Position: p}, nil
}

func changeJSON(ch *hoppertype.Change) *ChangeJSON {
	return &ChangeJSON{Cursor: formatCursor(hoppertype.CursorOf(ch)), Position: ch.Position, Kind: string(ch.Kind),
		EntityID: ch.EntityID, Type: ch.Type, Queue: ch.Queue, Prev: ch.Prev, State: ch.State, Attempt: ch.Attempt,
		Worker: ch.Worker, Fields: ch.Fields, Error: errJSON(ch.Error), Stuck: stuckJSON(ch.Stuck), Detail: ch.Detail, At: ch.At}
}

// streamChanges serves GET /v1/changes/stream as Server-Sent Events: every
// change after ?after= (a cursor, or "end" for only the changes to come; a
// reconnecting EventSource's Last-Event-ID wins), then each new one as it
// becomes final, from every process sharing the store. Each event's id is its cursor. ?kind=, ?type= and
// ?state= filter (comma-separated lists).
func (s *Server) streamChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from := q.Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		from = id
	}
	cur, err := s.feedStart(r, from)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	filter := hopper.ChangeFilter{Types: splitList(q["type"]), States: splitList(q["state"])}
	for _, k := range splitList(q["kind"]) {
		switch hoppertype.ChangeKind(k) {
		case hoppertype.ChangeJob, hoppertype.ChangeGate, hoppertype.ChangeRun, hoppertype.ChangeWorker, hoppertype.ChangeSchedule:
			filter.Kinds = append(filter.Kinds, hoppertype.ChangeKind(k))
		default:
			s.fail(w, r, badRequest("unknown change kind %q (job, gate, run, worker, schedule)", k))
			return
		}
	}
	// This process's own events say "look now"; a poll finds the others'.
	nudge, unsub := s.events.subscribe()
	defer unsub()
	fl, ok := openSSE(w, "hopper changes")
	if !ok {
		return
	}
	s.followFeed(w, r, fl, cur, nudge, func(ch *hoppertype.Change) bool {
		if !filter.Match(ch) {
			return false
		}
		b, _ := json.Marshal(changeJSON(ch))
		fmt.Fprintf(w, "id: %s\nevent: change\ndata: %s\n\n", formatCursor(hoppertype.CursorOf(ch)), b)
		return true
	}, nil)
}

// feedStart is where a read of the feed starts: from, a cursor, or "end"
// for the feed's tail (only what comes next).
func (s *Server) feedStart(r *http.Request, from string) (hoppertype.ChangeCursor, error) {
	if from == "end" {
		return s.c.ChangeTail(r.Context())
	}
	return parseCursor(from)
}

// pageLimit is a page's ?limit=: 1 to 1000, 100 when absent.
func pageLimit(v string) (int, error) {
	if v == "" {
		return 100, nil
	}
	limit, err := strconv.Atoi(v)
	if err != nil || limit < 1 || limit > 1000 {
		return 0, badRequest("limit: %q (use 1 to 1000)", v)
	}
	return limit, nil
}

// followFeed writes the feed's changes after cur to an event stream, with
// write (which reports whether it wrote anything), as they become final,
// until the request or the server ends. Local carries this process's
// events: each says "look now" (the others' changes are found by a poll),
// and writeLocal, when set, may write it to the stream too.
func (s *Server) followFeed(w http.ResponseWriter, r *http.Request, fl http.Flusher, cur hoppertype.ChangeCursor,
	local <-chan hopper.Event, write func(*hoppertype.Change) bool, writeLocal func(hopper.Event) bool) {
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	lastWrite := time.Now()
	for {
		for {
			chs, err := s.c.ChangeList(r.Context(), cur, 500)
			if err != nil {
				if r.Context().Err() == nil {
					s.opts.Logger.Warn("hopper server: change stream", "err", err)
				}
				return
			}
			wrote := false
			for _, ch := range chs {
				cur = hoppertype.CursorOf(ch)
				wrote = write(ch) || wrote
			}
			if wrote {
				fl.Flush()
				lastWrite = time.Now()
			}
			if len(chs) < 500 {
				break
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.events.done:
			return
		case e := <-local:
			if writeLocal != nil && writeLocal(e) {
				fl.Flush()
				lastWrite = time.Now()
			}
			// Let a burst of commits land before reading again.
			time.Sleep(20 * time.Millisecond)
			for len(local) > 0 {
				e := <-local
				if writeLocal != nil && writeLocal(e) {
					fl.Flush()
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

// listChanges serves GET /v1/changes?after=CURSOR&limit=N: the change feed
// as pages.
func (s *Server) listChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := parseCursor(q.Get("after"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chs, err := s.c.ChangeList(r.Context(), after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := ChangeListJSON{Changes: make([]*ChangeJSON, len(chs)), Next: formatCursor(after)}
	for i, ch := range chs {
		out.Changes[i] = changeJSON(ch)
		out.Next = out.Changes[i].Cursor
	}
	writeJSON(w, http.StatusOK, out)
}

// ObserverJSON is a phase-2 observer's cursor.
type ObserverJSON struct {
	Name      string     `json:"name"`
	Cursor    string     `json:"cursor"`
	Owner     string     `json:"owner,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// listObservers serves GET /v1/observers.
func (s *Server) listObservers(w http.ResponseWriter, r *http.Request) {
	rows, err := s.c.ObserverList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Observers []ObserverJSON `json:"observers"`
	}{Observers: make([]ObserverJSON, len(rows))}
	for i, row := range rows {
		out.Observers[i] = ObserverJSON{Name: row.Name, Cursor: formatCursor(row.At), Owner: row.Owner,
			ExpiresAt: timePtr(row.ExpiresAt), UpdatedAt: timePtr(row.UpdatedAt)}
	}
	writeJSON(w, http.StatusOK, out)
}
