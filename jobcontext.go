package hopper

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/stubs"
)

// JobContext is what a running handler knows about its job. Get it with
// JobFromContext.
type JobContext struct {
	c *Client
	// a is the attempt the engine runs; row is its claimed row.
	a   *engine.Attempt
	row *hoppertype.JobRow
	// ctx is the context the handler was called with (inside the work
	// middleware), for the insert middleware of what it spawns.
	ctx context.Context
}

type jobCtxKey struct{}

// JobFromContext returns the job context of the handler running under ctx,
// or nil outside a handler.
func JobFromContext(ctx context.Context) *JobContext {
	jc, _ := ctx.Value(jobCtxKey{}).(*JobContext)
	return jc
}

func withJobContext(ctx context.Context, jc *JobContext) context.Context {
	return context.WithValue(ctx, jobCtxKey{}, jc)
}

// ID returns the job's id.
func (j *JobContext) ID() string { return j.row.ID }

// Type returns the job's type name.
func (j *JobContext) Type() string { return j.row.Type }

// Queue returns the job's queue.
func (j *JobContext) Queue() string { return j.row.Queue }

// GroupID returns the fan-out group the job belongs to.
func (j *JobContext) GroupID() string { return j.row.GroupID }

// Attempt returns the attempt number, 1 for the first.
func (j *JobContext) Attempt() int { return j.row.Attempt }

// MaxAttempts returns the job's total attempt budget.
func (j *JobContext) MaxAttempts() int { return j.row.Retry.Attempts }

// ParentID returns the id of the job that fanned this one out ("" at top level).
func (j *JobContext) ParentID() string { return j.row.ParentID }

// Dependents returns the ids a gate waited on before it queued this job.
func (j *JobContext) Dependents() []string { return append([]string(nil), j.row.Dependents...) }

// Metadata returns the job's metadata.
func (j *JobContext) Metadata() map[string]string {
	m := make(map[string]string, len(j.row.Metadata))
	for k, v := range j.row.Metadata {
		m[k] = v
	}
	return m
}

// Deadline returns the job's deadline (zero if none).
func (j *JobContext) Deadline() time.Time { return j.row.Deadline }

// Heartbeat renews the job's lease now. Long handlers that might outlive the
// visibility timeout between the engine's own heartbeats may call it; it
// returns ErrLeaseLost if the job was taken from this worker (the handler
// should then stop) and ErrCancelled if a cancel was requested.
func (j *JobContext) Heartbeat(ctx context.Context) error {
	return j.heartbeat(ctx, "")
}

// HeartbeatMessage is Heartbeat that also records message, durably, as
// the attempt's progress (the seeds' activity heartbeat): it lands in the
// change feed as a heartbeat change of the job, in Attempt.Heartbeats, and
// in a workflow run's timeline as activity_heartbeat when the job is an
// activity. An empty message records nothing beyond the heartbeat. Record
// progress, not a stream of data: each message is a row the job keeps
// until retention deletes it.
func (j *JobContext) HeartbeatMessage(ctx context.Context, message string) error {
	return j.heartbeat(ctx, message)
}

func (j *JobContext) heartbeat(ctx context.Context, message string) error {
	if err := checkText("heartbeat message", message); err != nil {
		return err
	}
	err := j.a.Heartbeat(ctx, message)
	stubs.Record(j.c, stubs.JobCall{JobID: j.row.ID, Message: message, Err: err})
	return err
}

// Claim wins a one-time, fleet-wide claim on key: it returns true exactly
// once across every process sharing the store, ever (claim keys do not
// expire). Guard side effects that must not repeat when an attempt runs
// again with it, keyed by something stable such as the job id.
func (j *JobContext) Claim(ctx context.Context, key string) (bool, error) {
	if key == "" {
		return false, errors.New("hopper: Claim with an empty key")
	}
	if err := checkText("claim key", key); err != nil {
		return false, err
	}
	won, err := j.a.Claim(ctx, key)
	stubs.Record(j.c, stubs.JobCall{JobID: j.row.ID, Claim: true, Key: key, Won: won, Err: err})
	return won, err
}

// hardLife is the lifetime of the work that finishes what the attempt
// began: its session's hard lifetime.
func (j *JobContext) hardLife() context.Context {
	var a *engine.Attempt // outside an attempt: only the calls' budgets bound the work
	if j != nil {
		a = j.a
	}
	return a.HardLife()
}
