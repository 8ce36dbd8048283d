package sqlitedriver

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// Storage encodings:
//   - times are INTEGER unix microseconds; a zero time is NULL, except in the
//     NOT NULL columns queued_at and run_at, where it is the zero time's own
//     microseconds (zeroMicros), so every job sorts and compares by them;
//   - durations are INTEGER nanoseconds;
//   - metadata, dependents, retry policy, error and stuck info are JSON text
//     (NULL when empty or nil);
//   - input and result are BLOBs: NULL for nil and a zero-length blob for an
//     empty non-nil slice, so the two stay distinct; so are the workflow
//     payloads (run event data, hook payloads, stream chunks);
//   - empty parent_id and unique_key are NULL (their indexes skip them).

// zeroMicros is time.Time{}.UnixMicro().
var zeroMicros = time.Time{}.UnixMicro()

// jobCols lists the columns of a job row in the order scanJob reads them.
const jobCols = `id, type, queue, state, priority, attempt, input, result, error, group_id, parent_id,
	dependents, fair_key, unique_key, metadata, retry, attempt_timeout, deadline, queued_at, run_at,
	started_at, ended_at, lease_token, lease_expires_at, worker, cancel_requested, stuck,
	concurrency_key, concurrency_limit`

// jobColsQ is jobCols qualified with the table name, for statements whose
// FROM clause names another source.
const jobColsQ = `jobs.id, jobs.type, jobs.queue, jobs.state, jobs.priority, jobs.attempt, jobs.input,
	jobs.result, jobs.error, jobs.group_id, jobs.parent_id, jobs.dependents, jobs.fair_key,
	jobs.unique_key, jobs.metadata, jobs.retry, jobs.attempt_timeout, jobs.deadline, jobs.queued_at,
	jobs.run_at, jobs.started_at, jobs.ended_at, jobs.lease_token, jobs.lease_expires_at,
	jobs.worker, jobs.cancel_requested, jobs.stuck, jobs.concurrency_key, jobs.concurrency_limit`

// micros encodes an optional time: NULL for the zero time.
func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros decodes an optional time.
func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid || v.Int64 == zeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// fromMicrosNN decodes a NOT NULL time.
func fromMicrosNN(v int64) time.Time {
	if v == zeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// nullString encodes an optional string: NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// blob scans a BLOB column keeping NULL (nil) and empty (non-nil) apart.
type blob struct{ dst *[]byte }

// Scan implements sql.Scanner.
func (b blob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*b.dst = nil
	case []byte:
		*b.dst = append([]byte{}, v...)
	case string:
		*b.dst = []byte(v)
	default:
		return fmt.Errorf("sqlitedriver: cannot scan %T into a blob", src)
	}
	return nil
}

// trunc gives a time the microsecond precision the store keeps.
func trunc(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// storedJob returns the row as the store keeps it: a deep copy with every
// time truncated to microseconds.
func storedJob(in *hoppertype.JobRow) *hoppertype.JobRow {
	r := in.Clone()
	r.Deadline = trunc(r.Deadline)
	r.QueuedAt = trunc(r.QueuedAt)
	r.RunAt = trunc(r.RunAt)
	r.StartedAt = trunc(r.StartedAt)
	r.EndedAt = trunc(r.EndedAt)
	r.LeaseExpiresAt = trunc(r.LeaseExpiresAt)
	r.Error = storedError(r.Error)
	r.Stuck = storedStuck(r.Stuck)
	return r
}

// storedError returns a copy of e with its time truncated and in UTC.
func storedError(e *hoppertype.ErrorInfo) *hoppertype.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	if !c.At.IsZero() {
		c.At = trunc(c.At).UTC()
	}
	return &c
}

// storedStuck returns a deep copy of s with its time truncated and in UTC.
func storedStuck(s *hoppertype.StuckInfo) *hoppertype.StuckInfo {
	if s == nil {
		return nil
	}
	c := *s
	if s.Retryable != nil {
		b := *s.Retryable
		c.Retryable = &b
	}
	if s.BlockerIDs != nil {
		c.BlockerIDs = append([]string(nil), s.BlockerIDs...)
	}
	if !c.ObservedAt.IsZero() {
		c.ObservedAt = trunc(c.ObservedAt).UTC()
	}
	return &c
}

// jsonError encodes an error record; nil is NULL.
func jsonError(e *hoppertype.ErrorInfo) any {
	if e == nil {
		return nil
	}
	return string(hoppertype.MarshalErrorInfo(storedError(e)))
}

// jsonStuck encodes stuck info; nil is NULL.
func jsonStuck(s *hoppertype.StuckInfo) (any, error) {
	if s == nil {
		return nil, nil
	}
	b, err := json.Marshal(storedStuck(s))
	if err != nil {
		return nil, fmt.Errorf("encode stuck info: %w", err)
	}
	return string(b), nil
}

// jobArgs returns the values of a job's columns in jobCols order.
func jobArgs(j *hoppertype.JobRow) ([]any, error) {
	var deps, meta any
	if len(j.Dependents) > 0 {
		b, err := json.Marshal(j.Dependents)
		if err != nil {
			return nil, fmt.Errorf("encode dependents: %w", err)
		}
		deps = string(b)
	}
	if len(j.Metadata) > 0 {
		b, err := json.Marshal(j.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encode metadata: %w", err)
		}
		meta = string(b)
	}
	retry, err := hoppertype.EncodeRetryPolicy(j.Retry)
	if err != nil {
		return nil, err
	}
	stuck, err := jsonStuck(j.Stuck)
	if err != nil {
		return nil, err
	}
	return []any{
		j.ID, j.Type, j.Queue, string(j.State), j.Priority, j.Attempt, j.Input, j.Result,
		jsonError(j.Error), j.GroupID, nullString(j.ParentID), deps, j.FairKey, nullString(j.UniqueKey),
		meta, retry, int64(j.AttemptTimeout), micros(j.Deadline), j.QueuedAt.UnixMicro(),
		j.RunAt.UnixMicro(), micros(j.StartedAt), micros(j.EndedAt), j.LeaseToken,
		micros(j.LeaseExpiresAt), j.Worker, j.CancelRequested, stuck,
		nullString(j.ConcurrencyKey), j.ConcurrencyLimit,
	}, nil
}

// scanJob reads a row whose columns are jobCols.
func scanJob(rows *sql.Rows) (*hoppertype.JobRow, error) {
	var (
		j                                              hoppertype.JobRow
		state                                          string
		errJSON, parent, deps, unique, meta, stuckJSON sql.NullString
		concKey                                        sql.NullString
		retry                                          string
		timeout                                        int64
		deadline, started, ended, leaseExp             sql.NullInt64
		queued, runAt                                  int64
	)
	err := rows.Scan(&j.ID, &j.Type, &j.Queue, &state, &j.Priority, &j.Attempt, blob{&j.Input},
		blob{&j.Result}, &errJSON, &j.GroupID, &parent, &deps, &j.FairKey, &unique, &meta, &retry,
		&timeout, &deadline, &queued, &runAt, &started, &ended, &j.LeaseToken, &leaseExp, &j.Worker,
		&j.CancelRequested, &stuckJSON, &concKey, &j.ConcurrencyLimit)
	if err != nil {
		return nil, fmt.Errorf("scan job: %w", err)
	}
	j.State = hoppertype.JobState(state)
	j.ParentID = parent.String
	j.UniqueKey = unique.String
	j.ConcurrencyKey = concKey.String
	j.AttemptTimeout = time.Duration(timeout)
	j.Deadline = fromMicros(deadline)
	j.QueuedAt = fromMicrosNN(queued)
	j.RunAt = fromMicrosNN(runAt)
	j.StartedAt = fromMicros(started)
	j.EndedAt = fromMicros(ended)
	j.LeaseExpiresAt = fromMicros(leaseExp)
	if errJSON.Valid {
		if j.Error, err = hoppertype.UnmarshalErrorInfo([]byte(errJSON.String)); err != nil {
			return nil, fmt.Errorf("decode error of job %s: %w", j.ID, err)
		}
	}
	if deps.Valid && deps.String != "" {
		if err := json.Unmarshal([]byte(deps.String), &j.Dependents); err != nil {
			return nil, fmt.Errorf("decode dependents of job %s: %w", j.ID, err)
		}
	}
	if meta.Valid && meta.String != "" {
		if j.Metadata, err = hoppertype.UnmarshalMetadata([]byte(meta.String)); err != nil {
			return nil, fmt.Errorf("decode metadata of job %s: %w", j.ID, err)
		}
	}
	if j.Retry, err = hoppertype.DecodeRetryPolicy(retry); err != nil {
		return nil, fmt.Errorf("decode retry policy of job %s: %w", j.ID, err)
	}
	if stuckJSON.Valid && stuckJSON.String != "" {
		var s hoppertype.StuckInfo
		if err := json.Unmarshal([]byte(stuckJSON.String), &s); err != nil {
			return nil, fmt.Errorf("decode stuck info of job %s: %w", j.ID, err)
		}
		j.Stuck = &s
	}
	return &j, nil
}

// jsonList encodes a list for json_each: a JSON array.
func jsonList[T ~string](vs []T) string {
	b, _ := json.Marshal(vs)
	return string(b)
}
