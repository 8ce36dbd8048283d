package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobJSON is a job as the API returns it.
type JobJSON struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	Queue       string   `json:"queue"`
	State       string   `json:"state"`
	Attempt     int      `json:"attempt"`
	MaxAttempts int      `json:"max_attempts"`
	Priority    int      `json:"priority"`
	Group       string   `json:"group,omitempty"`
	GroupID     string   `json:"group_id"`
	ParentID    string   `json:"parent_id,omitempty"`
	Dependents  []string `json:"dependents,omitempty"`
	UniqueKey   string   `json:"unique_key,omitempty"`
	// ConcurrencyKey and ConcurrencyLimit cap the jobs of a key running at
	// once, fleet-wide.
	ConcurrencyKey   string            `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int               `json:"concurrency_limit,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Input            json.RawMessage   `json:"input"`
	Result           json.RawMessage   `json:"result"`
	Error            *ErrorJSON        `json:"error"`
	Stuck            *StuckJSON        `json:"stuck,omitempty"`
	QueuedAt         time.Time         `json:"queued_at"`
	RunAt            time.Time         `json:"run_at"`
	StartedAt        *time.Time        `json:"started_at"`
	EndedAt          *time.Time        `json:"ended_at"`
	Deadline         *time.Time        `json:"deadline,omitempty"`
	Worker           string            `json:"worker,omitempty"`
	// Workflow and RunID are set on the job that executes a workflow run
	// (its type is "workflow:<name>"): the run's own page and status are at
	// /v1/runs/{run_id}.
	Workflow string `json:"workflow,omitempty"`
	RunID    string `json:"run_id,omitempty"`
	// Gate is set on a gate's job, whose input is then null: what the gate
	// waits for and what it queues.
	Gate *GateJSON `json:"gate,omitempty"`
}

// GateJSON is a gate as the API shows it.
type GateJSON struct {
	// ID and State are the gate's job's; Explain says where the gate
	// stands in words ("waits: 1 of 3 jobs finished, …", "stuck: job x
	// failed, so …"). GET /v1/jobs/{id} of a gate and GET
	// /v1/jobs/{id}/gates set them; lists leave them out.
	ID        string           `json:"id,omitempty"`
	State     string           `json:"state,omitempty"`
	Explain   string           `json:"explain,omitempty"`
	Condition hopper.Condition `json:"condition"`
	// WaitsUntil says the condition in words ("all 3 jobs succeed").
	WaitsUntil string `json:"waits_until"`
	// On are the ids of the jobs it watches.
	On []string `json:"on"`
	// Seen is, for each job of On, the terminal state the gate observed ("" while
	// it is not terminal); Done and Succeeded count them. GET
	// /v1/jobs/{id} sets them; lists leave them out.
	Seen      []string `json:"seen,omitempty"`
	Done      *int     `json:"done,omitempty"`
	Succeeded *int     `json:"succeeded,omitempty"`
	// Next are the jobs it queues when it fires.
	Next []GateNextJSON `json:"next"`
}

// GateNextJSON is a job a gate queues when it fires.
type GateNextJSON struct {
	ID    string          `json:"id"`
	Type  string          `json:"type"`
	Queue string          `json:"queue"`
	Input json.RawMessage `json:"input"`
}

func gateJSON(g *hopper.GateInfo) *GateJSON {
	out := &GateJSON{Condition: g.Condition, WaitsUntil: g.Describe(), On: g.On, Next: []GateNextJSON{}}
	if out.On == nil {
		out.On = []string{}
	}
	for _, n := range g.Next {
		out.Next = append(out.Next, GateNextJSON{ID: n.ID, Type: n.Type, Queue: n.Queue, Input: payload(n.Input)})
	}
	if g.Seen != nil {
		out.Seen = make([]string, len(g.Seen))
		for i, st := range g.Seen {
			out.Seen[i] = string(st)
		}
		out.Done, out.Succeeded = &g.Done, &g.Succeeded
		out.ID, out.State, out.Explain = g.ID, string(g.State), g.Explain()
	}
	return out
}

// ErrorJSON is a job's last failure.
type ErrorJSON struct {
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Stack   string    `json:"stack,omitempty"`
}

// StuckJSON is why a job is stuck.
type StuckJSON struct {
	Cause      string    `json:"cause"`
	Retryable  *bool     `json:"retryable,omitempty"`
	BlockerIDs []string  `json:"blocker_ids,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	ObservedAt time.Time `json:"observed_at"`
}

// payload renders stored bytes as JSON: as they are when they are JSON, as
// a JSON string otherwise (a non-JSON codec), null when absent.
func payload(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func jobJSON(j *hoppertype.JobRow) *JobJSON {
	out := &JobJSON{
		ID: j.ID, Type: j.Type, Queue: j.Queue, State: string(j.State), Attempt: j.Attempt, MaxAttempts: hopper.MaxAttempts(j),
		Priority: j.Priority, Group: j.FairKey, GroupID: j.GroupID, ParentID: j.ParentID, Dependents: j.Dependents,
		UniqueKey: j.UniqueKey, ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, Metadata: j.Metadata, Input: payload(j.Input), Result: payload(j.Result),
		QueuedAt: j.QueuedAt, RunAt: j.RunAt, StartedAt: timePtr(j.StartedAt), EndedAt: timePtr(j.EndedAt),
		Deadline: timePtr(j.Deadline), Worker: j.Worker,
	}
	if e := j.Error; e != nil {
		out.Error = &ErrorJSON{Kind: string(e.Kind), Message: e.Message, Attempt: e.Attempt, At: e.At, Stack: e.Stack}
	}
	if st := j.Stuck; st != nil {
		out.Stuck = stuckJSON(st)
	}
	if wf, run, ok := hopper.RunOf(j); ok {
		out.Workflow, out.RunID = wf, run
	}
	if g, ok := hopper.ParseGate(j); ok {
		out.Gate, out.Input = gateJSON(g), json.RawMessage("null")
	}
	return out
}

// OptsJSON are job options on the wire. Durations are Go duration strings
// ("2s") or numbers of milliseconds; times are RFC 3339.
type OptsJSON struct {
	ID             string           `json:"id,omitempty"`
	Delay          *hopper.Duration `json:"delay,omitempty"`
	RunAt          *time.Time       `json:"run_at,omitempty"`
	Priority       int              `json:"priority,omitempty"`
	Queue          string           `json:"queue,omitempty"`
	Group          string           `json:"group,omitempty"`
	Retry          *RetryJSON       `json:"retry,omitempty"`
	Deadline       *time.Time       `json:"deadline,omitempty"`
	Timeout        *hopper.Duration `json:"timeout,omitempty"`
	AttemptTimeout *hopper.Duration `json:"attempt_timeout,omitempty"`
	UniqueKey      string           `json:"unique_key,omitempty"`
	// ConcurrencyKey and ConcurrencyLimit: see hopper.InsertOpts.
	ConcurrencyKey   string            `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int               `json:"concurrency_limit,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// RetryJSON is a retry policy on the wire; absent fields inherit.
type RetryJSON struct {
	Attempts int              `json:"attempts,omitempty"`
	Backoff  string           `json:"backoff,omitempty"`
	Base     *hopper.Duration `json:"base,omitempty"`
	Factor   float64          `json:"factor,omitempty"`
	Max      *hopper.Duration `json:"max,omitempty"`
	Jitter   *float64         `json:"jitter,omitempty"`
}

// InsertOpts converts wire options to the client's.
func (o *OptsJSON) InsertOpts() (*hopper.InsertOpts, error) {
	if o == nil {
		return nil, nil
	}
	io := &hopper.InsertOpts{ID: o.ID, Priority: o.Priority, Queue: o.Queue, Group: o.Group, UniqueKey: o.UniqueKey,
		ConcurrencyKey: o.ConcurrencyKey, ConcurrencyLimit: o.ConcurrencyLimit, Metadata: o.Metadata}
	if o.Delay != nil {
		io.Delay = time.Duration(*o.Delay)
	}
	if o.RunAt != nil {
		io.RunAt = *o.RunAt
	}
	if o.Deadline != nil {
		io.Deadline = *o.Deadline
	}
	if o.Timeout != nil {
		io.Timeout = time.Duration(*o.Timeout)
	}
	if o.AttemptTimeout != nil {
		io.AttemptTimeout = time.Duration(*o.AttemptTimeout)
	}
	if r := o.Retry; r != nil {
		if r.Attempts < 0 {
			return nil, badRequest("retry.attempts must be at least 1")
		}
		io.Retry = hopper.RetryPolicy{Attempts: r.Attempts, Backoff: r.Backoff, Factor: r.Factor}
		if r.Base != nil {
			io.Retry.Base = time.Duration(*r.Base)
		}
		if r.Max != nil {
			io.Retry.Max = time.Duration(*r.Max)
		}
		if r.Jitter != nil {
			if *r.Jitter == 0 {
				io.Retry.Jitter = hopper.NoJitter
			} else {
				io.Retry.Jitter = *r.Jitter
			}
		}
	}
	return io, nil
}

// decodeBody decodes a JSON request body strictly: unknown fields and
// trailing data are refused.
func decodeBody(r io.Reader, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("empty request body")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	if dec.More() {
		return badRequest("request body: unexpected data after the JSON value")
	}
	return nil
}

// readBody reads a request body through its cap. A body past the cap is
// the *http.MaxBytesError (a 413); one that could not be read (sent too
// slowly, cut off) is a bad request that does not repeat the network's text.
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	var mbe *http.MaxBytesError
	switch {
	case err == nil, errors.As(err, &mbe):
		return data, err
	default:
		return nil, badRequest("the request body could not be read (sent too slowly, or cut off)")
	}
}

// parseWait reads a ?wait= duration, capped at max.
func parseWait(s string, max time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := hopper.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("wait: %w", err)
	}
	return min(d, max), nil
}

func jsonIndent(buf *bytes.Buffer, b []byte) error { return json.Indent(buf, b, "", "  ") }

func errorsIsNotFound(err error) bool { return errors.Is(err, hopper.ErrNotFound) }

// stuckJSON is a stuck slot on the wire; nil stays nil.
func stuckJSON(st *hopper.StuckInfo) *StuckJSON {
	if st == nil {
		return nil
	}
	return &StuckJSON{Cause: string(st.Cause), Retryable: st.Retryable, BlockerIDs: st.BlockerIDs, Detail: st.Detail, ObservedAt: st.ObservedAt}
}

// JobToJSON is a job as the API shows it (the CLI prints the same with
// --json).
func JobToJSON(j *hopper.JobRow) *JobJSON { return jobJSON(j) }

// ChunkJSON is one chunk of a run's stream, as GET /v1/runs/{id}/stream
// lists it with Accept: application/json (and hopper runs tail --json
// prints it, either way).
type ChunkJSON struct {
	Offset int64           `json:"offset"`
	Data   json.RawMessage `json:"data"`
	At     time.Time       `json:"at"`
}

// ChunkToJSON puts a stream chunk on the wire.
func ChunkToJSON(ch *hoppertype.StreamChunk) ChunkJSON {
	return ChunkJSON{Offset: ch.Offset, Data: payload(ch.Data), At: ch.At}
}

// ChunkListJSON is a page of a run's stream: the chunks from the offset
// asked for, the offset to ask for next, and the run's status as read just
// before the chunks (a terminal status means the page holds every chunk
// left when Next is not moved by a full page).
type ChunkListJSON struct {
	Chunks []ChunkJSON `json:"chunks"`
	Next   int64       `json:"next"`
	Status string      `json:"status"`
}
