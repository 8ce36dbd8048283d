package hopper

import (
	"errors"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

// Sentinel errors. A waiter's error from Handle.Result matches the reason a
// job failed with errors.Is, in any process.
var (
	// ErrNotFound is returned for a job, group or type that does not exist.
	ErrNotFound = hoppertype.ErrNotFound
	// ErrAborted matches a job dead-lettered by Abort or by a classifier.
	ErrAborted = hoppertype.ErrAborted
	// ErrExpired matches a job that did not start and finish by its deadline.
	ErrExpired = hoppertype.ErrExpired
	// ErrCancelled matches a cancelled job.
	ErrCancelled = hoppertype.ErrCancelled
	// ErrAttemptTimeout matches an attempt that ran past its attempt timeout.
	ErrAttemptTimeout = hoppertype.ErrAttemptTimeout
	// ErrHeartbeatTimeout matches an attempt that went past its type's
	// HeartbeatTimeout without a heartbeat. It also matches
	// ErrAttemptTimeout, which is what a waiter in another process sees.
	ErrHeartbeatTimeout = hoppertype.ErrHeartbeatTimeout
	// ErrLeaseLost matches an attempt whose lease was lost (its worker died or
	// stalled past the visibility timeout) and which was rescued.
	ErrLeaseLost = hoppertype.ErrLeaseLost
	// ErrDuplicateID is returned when an id given to a new job or run
	// belongs to a stored one that the call cannot take as its own: a job
	// of another type or input, or a run of another workflow (see
	// InsertOpts.ID and StartOpts.ID).
	ErrDuplicateID = hoppertype.ErrDuplicateID
	// ErrUnknownType is returned when enqueueing by name a type the client
	// does not know.
	ErrUnknownType = hoppertype.ErrUnknownType
	// ErrInvalidInput is returned for input that does not decode into the
	// type's input, options that make no sense (a negative delay, a retry
	// policy with fewer than one attempt, an oversized payload, a priority
	// outside 32 bits, a time outside years 1 to 9999), an id that breaks
	// ValidateID's rule, and any string bound for the store (an id, a name,
	// a key, a label, metadata, a filter) that holds a NUL byte or is not
	// valid UTF-8. Nothing is stored then.
	ErrInvalidInput = hoppertype.ErrInvalidInput
	// ErrEncode matches a handler result that could not be encoded.
	ErrEncode = hoppertype.ErrEncode
	// ErrPanic matches a handler that panicked.
	ErrPanic = hoppertype.ErrPanic
	// ErrStuck matches a job that is stuck and needs help (Handle.Result keeps
	// waiting on a stuck job; this is for JobList and events).
	ErrStuck = hoppertype.ErrStuck
	// ErrClientStopped is returned by operations that need a running client.
	ErrClientStopped = errors.New("hopper: client not started")
	// ErrDuplicateType is returned when registering two types of one name.
	ErrDuplicateType = errors.New("hopper: duplicate type name")
	// ErrNonDeterminism matches a workflow whose replay diverged from its history.
	ErrNonDeterminism = hoppertype.ErrNonDeterminism
	// ErrStateConflict is returned when an operation does not apply to the
	// job's current state (cancelling a finished job, say).
	ErrStateConflict = hoppertype.ErrStateConflict
	// ErrTxUnsupported matches the error of CompleteTx and TxStep on a
	// store that cannot write through the application's transaction: the
	// memory store. It also matches driver.ErrNotImplemented.
	ErrTxUnsupported = hoppertype.ErrTxUnsupported
	// ErrPayloadTooLarge matches an input or payload past
	// Config.MaxPayloadBytes. It also matches ErrInvalidInput.
	ErrPayloadTooLarge error = payloadTooLarge{}
)

// payloadTooLarge is ErrPayloadTooLarge: an invalid input of its own kind.
type payloadTooLarge struct{}

func (payloadTooLarge) Error() string        { return "hopper: payload too large" }
func (payloadTooLarge) Is(target error) bool { return target == ErrInvalidInput }

// tooLarge is the error for what of n bytes past the client's payload cap.
func (c *Client) tooLarge(what string, n int) error {
	return fmt.Errorf("%w: %s of %d bytes exceeds the %d-byte limit", ErrPayloadTooLarge, what, n, c.cfg.MaxPayloadBytes)
}

// JobError is the error a waiter receives for a job that ended without
// success. Kind says why; errors.Is(err, ErrAborted), ErrExpired,
// ErrCancelled, … match it by kind, in any process.
type JobError = hoppertype.JobError

// jobErrorFromRow builds the waiter's error for a job in a terminal state
// other than succeeded.
func jobErrorFromRow(row *hoppertype.JobRow) error { return hoppertype.NewJobError(row) }

// Abort wraps err so the job is dead-lettered now, with no further attempts.
// It beats any classifier.
func Abort(err error) error { return hoppertype.Abort(err) }

// SnoozeError is returned by Snooze and SnoozeUntil: the job is deferred to
// RunAt (or by Delay) without using an attempt.
type SnoozeError = hoppertype.SnoozeError

// Snooze defers the job by d without using an attempt. A handler may snooze
// indefinitely (poll-style "not ready yet").
func Snooze(d time.Duration) error { return hoppertype.Snooze(d) }

// SnoozeUntil defers the job to t without using an attempt.
func SnoozeUntil(t time.Time) error { return hoppertype.SnoozeUntil(t) }

// RetryAfter wraps err so the retry that follows uses an attempt and waits at
// least d (a floor under the policy's backoff). Within Retry it works the
// same way.
func RetryAfter(err error, d time.Duration) error { return hoppertype.RetryAfter(err, d) }

// Decision is what a Classifier chooses for a failed attempt. The zero
// Decision is "retry under the policy".
type Decision = hoppertype.Decision

// DecideRetry retries under the job's retry policy (the default).
func DecideRetry() Decision { return hoppertype.DecideRetry() }

// DecideAbort dead-letters the job now.
func DecideAbort() Decision { return hoppertype.DecideAbort() }

// DecideDelay defers the job by d without using an attempt (a rate limit, an
// upstream not ready).
func DecideDelay(d time.Duration) Decision { return hoppertype.DecideDelay(d) }

// DecideRunAt defers the job to t without using an attempt.
func DecideRunAt(t time.Time) Decision { return hoppertype.DecideRunAt(t) }

// FailureInfo describes a failed attempt to a Classifier.
type FailureInfo = hoppertype.FailureInfo

// Classifier chooses, centrally, what a failed attempt leads to. A per-type
// classifier overrides the client's. An explicit Abort, Snooze or RetryAfter
// from the handler beats the classifier; a panicking classifier is reported
// through Config.OnError and the attempt is retried.
type Classifier = hoppertype.Classifier

// NonDeterminismError says a run's replay diverged from its history: the
// workflow code changed, or does not run the same way twice. The run goes
// stuck (engine failure, not retryable) until the code is fixed and it is
// retried.
type NonDeterminismError = hoppertype.NonDeterminismError
