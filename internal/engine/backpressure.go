package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// errDeclined is the attempt result of a job Config.Accept declined.
var errDeclined = errors.New("hopper: job declined by Config.Accept")

// backpressure asks Config.Backpressure how long to wait before the next
// round; a panic is reported and counts as no wait.
func (p *producer) backpressure() (d time.Duration) {
	e := p.s.e
	if e.cfg.Hooks.Backpressure == nil {
		return 0
	}
	defer func() {
		if r := recover(); r != nil {
			d = 0
			e.reportError(fmt.Errorf("backpressure panicked for queue %q: %w", p.queue, PanicCause(r)), hoppertype.PhaseHook)
		}
	}()
	return e.cfg.Hooks.Backpressure(p.s.ctx, p.queue, p.s.activeCount())
}

// accepted passes claimed rows through Config.Accept and returns those it
// accepted. The others go back to the store as pending, their attempt not
// used, through the completer: the same transition as a job interrupted by
// Stop.
func (p *producer) accepted(rows []*hoppertype.JobRow, now time.Time) []*hoppertype.JobRow {
	accept := p.s.e.cfg.Hooks.Accept
	if accept == nil || len(rows) == 0 {
		return rows
	}
	var back []*hoppertype.JobRow
	kept := rows[:0]
	for _, row := range rows {
		if strings.HasPrefix(row.Type, BuiltinTypePrefix) || p.accepts(accept, row) {
			kept = append(kept, row)
		} else {
			back = append(back, row)
		}
	}
	for i, row := range back {
		it := finishItem{row: row, outcome: decide(row, attemptResult{err: errDeclined, cause: ErrStopping}, nil, now, nil, nil)}
		if i == len(back)-1 {
			// Announce the queue with the last of them, so that other
			// processes take them now rather than at their next poll.
			it.effects = func(ctx context.Context, tx driver.Executor, job *hoppertype.JobRow) error {
				return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: job.Queue})
			}
		}
		p.s.completer.submit(it)
	}
	return kept
}

// accepts calls accept for row; a panic is reported and accepts the job.
func (p *producer) accepts(accept func(*hoppertype.JobRow) bool, row *hoppertype.JobRow) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = true
			p.s.e.reportError(fmt.Errorf("accept panicked for job %s: %w", row.ID, PanicCause(r)), hoppertype.PhaseHook)
		}
	}()
	return accept(row)
}

// activeCount returns how many attempts the session runs.
func (s *session) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// OutcomeCounts counts the attempts an engine saw succeed and fail, in all
// and by job type; it is kept only when Config.Backpressure is set.
type OutcomeCounts struct {
	all    attemptCounts
	byType sync.Map // type name → *attemptCounts
}

type attemptCounts struct{ succeeded, failed atomic.Uint64 }

// Observe counts e if it ends an attempt.
func (o *OutcomeCounts) Observe(e hoppertype.Event) {
	if e.Kind != hoppertype.EventSucceeded && e.Kind != hoppertype.EventFailed {
		return
	}
	v, ok := o.byType.Load(e.Type)
	if !ok {
		v, _ = o.byType.LoadOrStore(e.Type, new(attemptCounts))
	}
	for _, n := range []*attemptCounts{&o.all, v.(*attemptCounts)} {
		if e.Kind == hoppertype.EventSucceeded {
			n.succeeded.Add(1)
		} else {
			n.failed.Add(1)
		}
	}
}

// Sum adds up the counts of types, or returns the total when types is empty.
func (o *OutcomeCounts) Sum(types []string) (succeeded, failed uint64) {
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
