package pgdriver

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/hoppertype"
)

// jobScanner reads rows of jobColumns (after extra destinations given at
// its making) into new job rows. It keeps the scan's destinations between
// rows, so a query's rows cost one allocation for the job and one for each
// string or byte column it keeps, not one for every destination; the
// columns that are only decoded (retry, metadata, dependents, error, stuck)
// are read into buffers it reuses.
type jobScanner struct {
	dest []any

	id                                     string
	typ, queue, state, worker, fairKey     sharedText
	groupID                                sharedText // most jobs are their own group: their id
	priority, attempt, concLimit           int
	leaseToken, attemptTimeout             int64
	cancelRequested                        bool
	queuedAt, runAt                        time.Time
	startedAt, endedAt, deadline, leaseExp pgtype.Timestamptz
	parentID, uniqueKey, concKey           pgtype.Text
	retry, metadata, deps, errInfo, stuck  scratchBytes
	input, result                          []byte
}

// newJobScanner returns a scanner whose rows start with the columns read
// into pre.
func newJobScanner(pre ...any) *jobScanner {
	s := &jobScanner{}
	s.groupID.or = &s.id
	s.dest = append(make([]any, 0, len(pre)+len(jobColumns)), pre...)
	s.dest = append(s.dest, &s.id, &s.typ, &s.queue, &s.state, &s.priority, &s.attempt, &s.leaseToken, &s.attemptTimeout,
		&s.queuedAt, &s.runAt, &s.startedAt, &s.endedAt, &s.deadline, &s.leaseExp,
		&s.cancelRequested, &s.worker, &s.groupID, &s.parentID, &s.fairKey, &s.uniqueKey,
		&s.retry, &s.metadata, &s.deps, &s.errInfo, &s.stuck, &s.input, &s.result, &s.concKey, &s.concLimit)
	return s
}

// scan reads one row into a new job.
func (s *jobScanner) scan(row pgx.Row) (*hoppertype.JobRow, error) {
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	r := &hoppertype.JobRow{
		ID: s.id, Type: s.typ.s, Queue: s.queue.s, State: hoppertype.JobState(s.state.s),
		Priority: s.priority, Attempt: s.attempt, LeaseToken: s.leaseToken,
		AttemptTimeout: time.Duration(s.attemptTimeout),
		QueuedAt:       fromTime(s.queuedAt), RunAt: fromTime(s.runAt),
		StartedAt: fromTS(s.startedAt), EndedAt: fromTS(s.endedAt),
		Deadline: fromTS(s.deadline), LeaseExpiresAt: fromTS(s.leaseExp),
		CancelRequested: s.cancelRequested, Worker: s.worker.s, GroupID: s.groupID.s,
		ParentID: s.parentID.String, FairKey: s.fairKey.s, UniqueKey: s.uniqueKey.String,
		Input: s.input, Result: s.result,
		ConcurrencyKey: s.concKey.String, ConcurrencyLimit: s.concLimit,
	}
	// The kept byte columns are new slices at every scan (pgx copies
	// them); drop the scanner's references so a NULL next row reads nil.
	s.input, s.result = nil, nil
	var err error
	if r.Retry, err = hoppertype.DecodeRetryPolicy(s.retry.bytes()); err != nil {
		return nil, fmt.Errorf("job %s: decode retry policy: %w", r.ID, err)
	}
	if b := s.metadata.bytes(); b != nil {
		if r.Metadata, err = hoppertype.UnmarshalMetadata(b); err != nil {
			return nil, fmt.Errorf("job %s: decode metadata: %w", r.ID, err)
		}
	}
	if b := s.deps.bytes(); b != nil {
		if err := json.Unmarshal(b, &r.Dependents); err != nil {
			return nil, fmt.Errorf("job %s: decode dependents: %w", r.ID, err)
		}
	}
	if r.Error, err = hoppertype.UnmarshalErrorInfo(s.errInfo.bytes()); err != nil {
		return nil, fmt.Errorf("job %s: decode error: %w", r.ID, err)
	}
	if r.Stuck, err = unmarshalStuck(s.stuck.bytes()); err != nil {
		return nil, fmt.Errorf("job %s: decode stuck: %w", r.ID, err)
	}
	return r, nil
}

// sharedText is a NOT NULL text column whose value the rows of one result
// mostly repeat (a claim's type, queue, state and worker): a row whose
// value is the last row's, or the string or points at, takes that string
// instead of a new one (five allocations fewer per claimed job).
type sharedText struct {
	s  string
	or *string
}

// ScanBytes implements pgtype.BytesScanner.
func (t *sharedText) ScanBytes(v []byte) error {
	switch {
	case string(v) == t.s:
	case t.or != nil && string(v) == *t.or:
		t.s = *t.or
	default:
		t.s = string(v)
	}
	return nil
}

// Scan implements sql.Scanner, for rows read through database/sql.
func (t *sharedText) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		return t.ScanBytes(nil)
	case []byte:
		return t.ScanBytes(v)
	case string:
		if v != t.s {
			t.s = v
		}
		return nil
	}
	return fmt.Errorf("pgdriver: cannot scan %T into a text column", src)
}

// scratchBytes is a nullable text or bytea column read into a buffer that
// later scans reuse: for columns decoded at once and not kept.
type scratchBytes struct {
	buf   []byte
	valid bool
}

// ScanBytes implements pgtype.BytesScanner; v is only valid until the next
// call, so it is copied.
func (b *scratchBytes) ScanBytes(v []byte) error {
	b.buf, b.valid = append(b.buf[:0], v...), v != nil
	return nil
}

// Scan implements sql.Scanner, for rows read through database/sql (a
// caller's *sql.Tx).
func (b *scratchBytes) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		return b.ScanBytes(nil)
	case []byte:
		return b.ScanBytes(v)
	case string:
		return b.ScanBytes([]byte(v))
	}
	return fmt.Errorf("pgdriver: cannot scan %T into a text column", src)
}

// bytes returns the value read, nil for NULL; valid until the next scan.
func (b *scratchBytes) bytes() []byte {
	if !b.valid {
		return nil
	}
	if b.buf == nil { // an empty value is not NULL
		return []byte{}
	}
	return b.buf
}

// scanJob reads a row of jobColumns, after the extra destinations pre.
func scanJob(row pgx.Row, pre ...any) (*hoppertype.JobRow, error) {
	return newJobScanner(pre...).scan(row)
}

// collectJobs reads every row of rows as a job; err is the error of the
// query that made rows, returned as is.
func collectJobs(rows pgx.Rows, err error) ([]*hoppertype.JobRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*hoppertype.JobRow
	s := newJobScanner()
	for rows.Next() {
		r, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// fromTime returns a stored time in UTC (the zero time stays zero).
func fromTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// fromTS returns a nullable stored time; NULL is the zero time.
func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return fromTime(t.Time)
}

// ts is a nullable time argument: the zero time is NULL.
func ts(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// trunc gives a time the microsecond precision the store keeps.
func trunc(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// text is a nullable text argument: nil is NULL.
func text(b []byte) pgtype.Text {
	if b == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: string(b), Valid: true}
}

// optText is a nullable text argument: "" is NULL.
func optText(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}

// marshalError encodes an error record with its time truncated.
func marshalError(e *hoppertype.ErrorInfo) []byte {
	if e == nil {
		return nil
	}
	c := *e
	c.At = trunc(c.At)
	return hoppertype.MarshalErrorInfo(&c)
}

// marshalStuck encodes a stuck record with its time truncated; nil stays nil.
func marshalStuck(s *hoppertype.StuckInfo) []byte {
	if s == nil {
		return nil
	}
	c := *s
	c.ObservedAt = trunc(c.ObservedAt)
	b, _ := json.Marshal(&c)
	return b
}

func unmarshalStuck(b []byte) (*hoppertype.StuckInfo, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var s hoppertype.StuckInfo
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// marshalOpt encodes a map or slice as JSON, or nil when it is empty.
func marshalOpt[T any](v T, empty bool) ([]byte, error) {
	if empty {
		return nil, nil
	}
	return json.Marshal(v)
}

// storedJob returns a copy of r as the store keeps it: times truncated to
// microseconds and in UTC, and nothing shared with r.
func storedJob(r *hoppertype.JobRow) *hoppertype.JobRow {
	c := r.Clone()
	c.QueuedAt = fromTime(trunc(c.QueuedAt))
	c.RunAt = fromTime(trunc(c.RunAt))
	c.StartedAt = fromTime(trunc(c.StartedAt))
	c.EndedAt = fromTime(trunc(c.EndedAt))
	c.Deadline = fromTime(trunc(c.Deadline))
	c.LeaseExpiresAt = fromTime(trunc(c.LeaseExpiresAt))
	if c.Error != nil {
		c.Error.At = trunc(c.Error.At)
	}
	if c.Stuck != nil {
		c.Stuck.ObservedAt = trunc(c.Stuck.ObservedAt)
	}
	return c
}

// jobArrays are the column arrays of a batch insert, in jobColumns order.
// Columns of nullable values are FlatArrays: pgx encodes a slice of such
// elements by reflection, and a FlatArray through its index.
type jobArrays struct {
	ids, types, queues, states                             []string
	priorities, attempts                                   []int32
	tokens, timeouts                                       []int64
	queuedAt, runAt, startedAt, endedAt, deadline, leaseAt pgtype.FlatArray[pgtype.Timestamptz]
	cancel                                                 []bool
	worker, groupID, parentID, fairKey, uniqueKey          pgtype.FlatArray[pgtype.Text]
	retry, metadata, deps, errInfo, stuck                  pgtype.FlatArray[pgtype.Text]
	input, result                                          pgtype.FlatArray[[]byte]
	concKey                                                pgtype.FlatArray[pgtype.Text]
	concLimit                                              []int32
}

// newJobArrays encodes rows into column arrays.
func newJobArrays(rows []*hoppertype.JobRow) (*jobArrays, error) {
	n := len(rows)
	a := &jobArrays{
		ids: make([]string, n), types: make([]string, n), queues: make([]string, n), states: make([]string, n),
		priorities: make([]int32, n), attempts: make([]int32, n), tokens: make([]int64, n), timeouts: make([]int64, n),
		queuedAt: make(pgtype.FlatArray[pgtype.Timestamptz], n), runAt: make(pgtype.FlatArray[pgtype.Timestamptz], n), startedAt: make(pgtype.FlatArray[pgtype.Timestamptz], n),
		endedAt: make(pgtype.FlatArray[pgtype.Timestamptz], n), deadline: make(pgtype.FlatArray[pgtype.Timestamptz], n), leaseAt: make(pgtype.FlatArray[pgtype.Timestamptz], n),
		cancel: make([]bool, n), worker: make(pgtype.FlatArray[pgtype.Text], n), groupID: make(pgtype.FlatArray[pgtype.Text], n), parentID: make(pgtype.FlatArray[pgtype.Text], n),
		fairKey: make(pgtype.FlatArray[pgtype.Text], n), uniqueKey: make(pgtype.FlatArray[pgtype.Text], n), retry: make(pgtype.FlatArray[pgtype.Text], n),
		metadata: make(pgtype.FlatArray[pgtype.Text], n), deps: make(pgtype.FlatArray[pgtype.Text], n), errInfo: make(pgtype.FlatArray[pgtype.Text], n), stuck: make(pgtype.FlatArray[pgtype.Text], n),
		input: make(pgtype.FlatArray[[]byte], n), result: make(pgtype.FlatArray[[]byte], n),
		concKey: make(pgtype.FlatArray[pgtype.Text], n), concLimit: make([]int32, n),
	}
	for i, r := range rows {
		if r.Priority != int(int32(r.Priority)) || r.Attempt != int(int32(r.Attempt)) {
			return nil, fmt.Errorf("job %s: priority %d or attempt %d out of range", r.ID, r.Priority, r.Attempt)
		}
		retry, err := hoppertype.EncodeRetryPolicy(r.Retry)
		if err != nil {
			return nil, fmt.Errorf("job %s: encode retry policy: %w", r.ID, err)
		}
		meta, err := marshalOpt(r.Metadata, len(r.Metadata) == 0)
		if err != nil {
			return nil, fmt.Errorf("job %s: encode metadata: %w", r.ID, err)
		}
		deps, err := marshalOpt(r.Dependents, len(r.Dependents) == 0)
		if err != nil {
			return nil, fmt.Errorf("job %s: encode dependents: %w", r.ID, err)
		}
		a.ids[i], a.types[i], a.queues[i], a.states[i] = r.ID, r.Type, r.Queue, string(r.State)
		a.priorities[i], a.attempts[i] = int32(r.Priority), int32(r.Attempt)
		a.tokens[i], a.timeouts[i] = r.LeaseToken, int64(r.AttemptTimeout)
		a.queuedAt[i] = pgtype.Timestamptz{Time: r.QueuedAt, Valid: true}
		a.runAt[i] = pgtype.Timestamptz{Time: r.RunAt, Valid: true}
		a.startedAt[i], a.endedAt[i], a.deadline[i], a.leaseAt[i] = ts(r.StartedAt), ts(r.EndedAt), ts(r.Deadline), ts(r.LeaseExpiresAt)
		a.cancel[i] = r.CancelRequested
		a.worker[i] = pgtype.Text{String: r.Worker, Valid: true}
		a.groupID[i] = pgtype.Text{String: r.GroupID, Valid: true}
		a.fairKey[i] = pgtype.Text{String: r.FairKey, Valid: true}
		a.parentID[i], a.uniqueKey[i] = optText(r.ParentID), optText(r.UniqueKey)
		a.retry[i], a.metadata[i], a.deps[i] = pgtype.Text{String: retry, Valid: true}, text(meta), text(deps)
		a.errInfo[i], a.stuck[i] = text(marshalError(r.Error)), text(marshalStuck(r.Stuck))
		a.input[i], a.result[i] = r.Input, r.Result
		if r.ConcurrencyLimit != int(int32(r.ConcurrencyLimit)) {
			return nil, fmt.Errorf("job %s: concurrency limit %d out of range", r.ID, r.ConcurrencyLimit)
		}
		a.concKey[i], a.concLimit[i] = optText(r.ConcurrencyKey), int32(r.ConcurrencyLimit)
	}
	return a, nil
}

// args returns the arrays as statement arguments, in jobColumns order.
func (a *jobArrays) args() []any {
	return []any{
		a.ids, a.types, a.queues, a.states, a.priorities, a.attempts, a.tokens, a.timeouts,
		a.queuedAt, a.runAt, a.startedAt, a.endedAt, a.deadline, a.leaseAt,
		a.cancel, a.worker, a.groupID, a.parentID, a.fairKey, a.uniqueKey,
		a.retry, a.metadata, a.deps, a.errInfo, a.stuck, a.input, a.result,
		a.concKey, a.concLimit,
	}
}

// row returns row i as COPY values, in jobColumns order.
func (a *jobArrays) row(i int) []any {
	return []any{
		a.ids[i], a.types[i], a.queues[i], a.states[i], a.priorities[i], a.attempts[i], a.tokens[i], a.timeouts[i],
		a.queuedAt[i], a.runAt[i], a.startedAt[i], a.endedAt[i], a.deadline[i], a.leaseAt[i],
		a.cancel[i], a.worker[i], a.groupID[i], a.parentID[i], a.fairKey[i], a.uniqueKey[i],
		a.retry[i], a.metadata[i], a.deps[i], a.errInfo[i], a.stuck[i], a.input[i], a.result[i],
		a.concKey[i], a.concLimit[i],
	}
}
