package hopper

import (
	"context"

	"github.com/hopper-go/hopper/internal/engine"
)

// BackpressureInfo describes the claim round a producer is about to make
// when it asks Config.Backpressure; BackpressureFromContext returns it.
type BackpressureInfo struct {
	// Queue is the queue the producer claims from.
	Queue string
	// Active is how many jobs this client holds: attempts running, and
	// jobs it claimed that wait for a limiter or, claimed ahead, for a
	// worker slot (see Config.DisableClaimAhead).
	Active int

	outcomes *engine.OutcomeCounts
}

// Outcomes returns how many attempts this client has seen succeed and fail
// (EventSucceeded, EventFailed) since it was made, counting only the given
// job types (names as in Event.Type), or every type when none is given.
// The counts only grow: a policy compares them with the last ones it saw.
func (b BackpressureInfo) Outcomes(types ...string) (succeeded, failed uint64) {
	if b.outcomes == nil {
		return 0, 0
	}
	return b.outcomes.Sum(types)
}

type backpressureKey struct{}

// BackpressureFromContext returns the BackpressureInfo carried by the ctx a
// producer passes to Config.Backpressure; ok is false for any other ctx.
func BackpressureFromContext(ctx context.Context) (info BackpressureInfo, ok bool) {
	info, ok = ctx.Value(backpressureKey{}).(BackpressureInfo)
	return info, ok
}

// AcceptInfo describes a claimed job that Config.Accept may decline.
type AcceptInfo struct {
	ID string
	// Type is the job's type name as in Event.Type (a workflow run's is
	// "workflow:" and the workflow's name).
	Type  string
	Queue string
	// Attempt is the attempt the job would run as: 1 for its first.
	Attempt  int
	Priority int
	// Metadata is a copy of the job's metadata.
	Metadata map[string]string
}
