package driver

// The rules every driver applies the same way: the arguments and counting
// of gates, and the admission of concurrency keys.

import (
	"maps"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// GateInsertParams are the arguments of GateInsert.
type GateInsertParams struct {
	Gates []*GateSpec
	Now   time.Time
}

// GateGetParams are the arguments of GateGet.
type GateGetParams struct {
	ID string
}

// GateWaitListParams are the arguments of GateWaitList.
type GateWaitListParams struct {
	GateID string
}

// GateEdgesParams are the arguments of GateEdges.
type GateEdgesParams struct {
	IDs []string
}

// GateWatcherListParams are the arguments of GateWatcherList.
type GateWatcherListParams struct {
	JobID string
	Limit int
}

// GateObserveParams are the arguments of GateObserve.
type GateObserveParams struct {
	Jobs []GateObservation
	Now  time.Time
}

// GateObservation is a job's current state, for GateObserve.
type GateObservation struct {
	ID    string
	State hoppertype.JobState
}

// GateSpec is a gate to store.
type GateSpec struct {
	ID     string
	Cond   hoppertype.GateCondition
	On     []string
	Queues []string
}

// GateDelta is how one job's observed state change moves a gate's counts.
func GateDelta(old, new hoppertype.JobState) (done, succeeded int) {
	count := func(s hoppertype.JobState) (int, int) {
		d, ok := 0, 0
		if s.Terminal() {
			d = 1
		}
		if s == hoppertype.JobStateSucceeded {
			ok = 1
		}
		return d, ok
	}
	od, os := count(old)
	nd, ns := count(new)
	return nd - od, ns - os
}

// GateObserved is the state a gate records for a job in state s: s when it
// is terminal, "" otherwise.
func GateObserved(s hoppertype.JobState) hoppertype.JobState {
	if s.Terminal() {
		return s
	}
	return ""
}

// GateWakes says whether a gate's job, in the state job is in, is woken now
// that the gate's counts are g's: a waiting (scheduled) gate whose
// condition is met or impossible, so it fires or reports itself stuck; a
// gate stuck on a failed blocker whose condition is possible again (the
// blocker was redriven), so it waits again.
func GateWakes(g *hoppertype.GateRow, job *hoppertype.JobRow) bool {
	switch job.State {
	case hoppertype.JobStateScheduled:
		return g.Cond.Met(g.Total, g.Done, g.Succeeded) || g.Cond.Impossible(g.Total, g.Done, g.Succeeded)
	case hoppertype.JobStateStuck:
		return job.Stuck != nil && job.Stuck.Cause == hoppertype.StuckFailedBlocker &&
			!g.Cond.Impossible(g.Total, g.Done, g.Succeeded)
	}
	return false
}

// GateWake is the transition GateWakes asks for: the gate's job becomes
// pending at now, its stuck slot cleared.
func GateWake(job *hoppertype.JobRow, now time.Time) {
	job.State, job.RunAt, job.Stuck = hoppertype.JobStatePending, now, nil
}

// ConcurrencyOverflow is JobClaim's admission rule for concurrency keys:
// given a claim's jobs in claim order and, per key, how many other jobs of
// the key are running, it returns the ids of the claim's jobs that do not
// fit under their limit (to give back).
func ConcurrencyOverflow(rows []*hoppertype.JobRow, others map[string]int) map[string]bool {
	over := map[string]bool{}
	running := maps.Clone(others)
	for _, j := range rows {
		k := j.ConcurrencyKey
		if k == "" || j.ConcurrencyLimit <= 0 {
			continue
		}
		if running[k] >= j.ConcurrencyLimit {
			over[j.ID] = true
		} else {
			running[k]++
		}
	}
	return over
}
