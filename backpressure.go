package hopper

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// BackpressureInfo describes the claim round a producer is about to make
// when it asks Config.Backpressure; BackpressureFromContext returns it.
type BackpressureInfo struct {
	// Queue is the queue the producer claims from.
	Queue string
	// Active is how many attempts this client is running.
	Active int

	outcomes *outcomeCounts
}

// Outcomes returns how many attempts this client has seen succeed and fail
// (EventSucceeded, EventFailed) since it was made, counting only the given
// job types (names as in Event.Type), or every type when none is given.
// The counts only grow: a policy compares them with the last ones it saw.
func (b BackpressureInfo) Outcomes(types ...string) (succeeded, failed uint64) {
	if b.outcomes == nil {
		return 0, 0
	}
	return b.outcomes.sum(types)
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

// builtinTypePrefix starts the names of hopper's own job types (the gate
// type, say). Config.Accept never sees their jobs: declining them on every
// process would stall what they serve.
const builtinTypePrefix = "hopper."

// errDeclined is the attempt result of a job Config.Accept declined.
var errDeclined = errors.New("hopper: job declined by Config.Accept")

// backpressure asks Config.Backpressure how long to wait before the next
// round; a panic is reported and counts as no wait.
func (p *producer) backpressure() (d time.Duration) {
	c := p.rt.c
	if c.cfg.Backpressure == nil {
		return 0
	}
	defer func() {
		if r := recover(); r != nil {
			d = 0
			c.reportError(fmt.Errorf("backpressure panicked for queue %q: %v", p.queue, r), PhaseHook)
		}
	}()
	info := BackpressureInfo{Queue: p.queue, Active: p.rt.activeCount(), outcomes: c.outcomes}
	return c.cfg.Backpressure(context.WithValue(p.rt.ctx, backpressureKey{}, info))
}

// accepted passes claimed rows through Config.Accept and returns those it
// accepted. The others go back to the store as pending, their attempt not
// used, through the completer: the same transition as a job interrupted by
// Stop.
func (p *producer) accepted(rows []*hoppertype.JobRow, now time.Time) []*hoppertype.JobRow {
	accept := p.rt.c.cfg.Accept
	if accept == nil || len(rows) == 0 {
		return rows
	}
	var back []*hoppertype.JobRow
	kept := rows[:0]
	for _, row := range rows {
		if strings.HasPrefix(row.Type, builtinTypePrefix) || p.accepts(accept, row) {
			kept = append(kept, row)
		} else {
			back = append(back, row)
		}
	}
	for i, row := range back {
		it := finishItem{row: row, outcome: decide(row, attemptResult{err: errDeclined, cause: errStopping}, nil, now, nil, nil)}
		if i == len(back)-1 {
			// Announce the queue with the last of them, so that other
			// processes take them now rather than at their next poll.
			it.effects = func(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow) error {
				return tx.Notify(ctx, driver.TopicJobAvailable, job.Queue)
			}
		}
		p.rt.completer.submit(it)
	}
	return kept
}

// accepts calls accept for row; a panic is reported and accepts the job.
func (p *producer) accepts(accept func(AcceptInfo) bool, row *hoppertype.JobRow) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = true
			p.rt.c.reportError(fmt.Errorf("accept panicked for job %s: %v", row.ID, r), PhaseHook)
		}
	}()
	return accept(AcceptInfo{ID: row.ID, Type: row.Type, Queue: row.Queue, Attempt: row.Attempt,
		Priority: row.Priority, Metadata: maps.Clone(row.Metadata)})
}

// activeCount returns how many attempts the runtime runs.
func (rt *runtime) activeCount() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.active)
}

// outcomeCounts counts the attempts a client saw succeed and fail, in all
// and by job type; it is kept only when Config.Backpressure is set.
type outcomeCounts struct {
	all    attemptCounts
	byType sync.Map // type name → *attemptCounts
}

type attemptCounts struct{ succeeded, failed atomic.Uint64 }

// observe counts e if it ends an attempt.
func (o *outcomeCounts) observe(e Event) {
	if e.Kind != EventSucceeded && e.Kind != EventFailed {
		return
	}
	v, ok := o.byType.Load(e.Type)
	if !ok {
		v, _ = o.byType.LoadOrStore(e.Type, new(attemptCounts))
	}
	for _, n := range []*attemptCounts{&o.all, v.(*attemptCounts)} {
		if e.Kind == EventSucceeded {
			n.succeeded.Add(1)
		} else {
			n.failed.Add(1)
		}
	}
}

// sum adds up the counts of types, or returns the total when types is empty.
func (o *outcomeCounts) sum(types []string) (succeeded, failed uint64) {
	if len(types) == 0 {
		return o.all.succeeded.Load(), o.all.failed.Load()
	}
	for i, t := range types {
		if slices.Contains(types[:i], t) {
			continue
		}
		if v, ok := o.byType.Load(t); ok {
			n := v.(*attemptCounts)
			succeeded += n.succeeded.Load()
			failed += n.failed.Load()
		}
	}
	return succeeded, failed
}
