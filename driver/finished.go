package driver

import (
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// FinishedRow is the row a finish of it leaves, built from it.Claimed (which
// must be set) without reading the row back, for a driver that honours
// JobFinishParams.Claimed: the columns the transition writes (state,
// attempt, run-at, result, error, end, stuck) as a store keeping
// microseconds in UTC decodes them, the lease's expiry and worker cleared,
// cancelRequested as the driver read it, and every other column as
// claimed (they change only at insert and at claim). A driver whose store
// keeps times differently must not use it.
func FinishedRow(it *JobFinishParams, cancelRequested bool) *hoppertype.JobRow {
	j := it.Claimed.Clone()
	// A claimed row read from the store has these as read already; one
	// the caller kept from its insert may not.
	j.Deadline, j.QueuedAt, j.StartedAt = asStored(j.Deadline), asStored(j.QueuedAt), asStored(j.StartedAt)
	j.State = it.State
	j.Attempt = it.Attempt
	j.RunAt = asStored(it.RunAt)
	j.Result = nil
	if it.Result != nil {
		j.Result = append([]byte{}, it.Result...)
	}
	j.Error = nil
	if it.Error != nil {
		e := *it.Error
		e.At = asStored(e.At)
		j.Error = &e
	}
	j.EndedAt = asStored(it.EndedAt)
	j.Stuck = nil
	if s := it.Stuck; s != nil {
		c := *s
		if s.Retryable != nil {
			b := *s.Retryable
			c.Retryable = &b
		}
		c.BlockerIDs = nil
		if len(s.BlockerIDs) > 0 {
			c.BlockerIDs = append([]string(nil), s.BlockerIDs...)
		}
		c.ObservedAt = asStored(c.ObservedAt)
		j.Stuck = &c
	}
	j.LeaseExpiresAt = time.Time{}
	j.Worker = ""
	j.CancelRequested = cancelRequested
	return j
}

// asStored returns t as a store keeping microseconds in UTC returns it: the
// zero time for the zero time.
func asStored(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}
