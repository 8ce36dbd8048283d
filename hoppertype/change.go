package hoppertype

import (
	"slices"
	"time"
)

// ChangeKind says what kind of entity a change is about.
type ChangeKind string

// Change kinds.
const (
	// ChangeJob is a job's state change.
	ChangeJob ChangeKind = "job"
	// ChangeGate is a gate's state change (a gate is a job of type GateType).
	ChangeGate ChangeKind = "gate"
	// ChangeRun is a workflow run's status change.
	ChangeRun ChangeKind = "run"
	// ChangeWorker is a worker process joining (its row stored: State
	// "joined") or leaving (its row deleted, at Stop or by retention when
	// it died: State "left", Prev "joined"); EntityID is the worker's id.
	ChangeWorker ChangeKind = "worker"
	// ChangeSchedule is a schedule firing an occurrence: EntityID is the
	// schedule's name, State "fired", DueAt the occurrence, Attempt how
	// many occurrences it fired in all.
	ChangeSchedule ChangeKind = "schedule"
)

// Worker and schedule change states.
const (
	ChangeStateJoined = "joined"
	ChangeStateLeft   = "left"
	ChangeStateFired  = "fired"
)

// GateType is the job type of gates.
const GateType = "hopper.gate"

// Change is one committed state transition of a job, gate or workflow run,
// as the store's change feed (its outbox) records it: written in the same
// transaction as the transition, so it exists exactly when the transition
// does.
type Change struct {
	// Position is the change's number in the store: unique, increasing in
	// the order changes were written.
	Position int64
	// Tx orders delivery: changes are delivered by (Tx, Position). On
	// PostgreSQL, where transactions write positions concurrently, it is a
	// transaction id: the writing transaction's, or a later one's that had
	// completed when the change was written (so that an entity's changes
	// keep their order); on stores with one writer at a time it equals
	// Position.
	Tx       int64
	Kind     ChangeKind
	EntityID string
	// Type is the job's type or the run's workflow name.
	Type  string
	Queue string
	// Prev is the state before the change; empty when the entity was
	// created by it.
	Prev string
	// State is the state after the change (a JobState for jobs and gates,
	// a RunStatus for runs).
	State string
	// Attempt is the job's attempt number after the change; for a run,
	// the attempt of the last entry of its history when the change was
	// written (0 when it had none).
	Attempt int
	// Seq is, for a run, the place of the last entry of its history (in
	// attempt Attempt) when the change was written: the entries up to it
	// precede the change. 0 for jobs and gates.
	Seq int
	// Worker is the worker holding the job after the change (set on a
	// change into running).
	Worker string
	// Fields names the other fields the transition changed, among attempt,
	// run_at, started_at, ended_at, worker, result, error and stuck. A
	// heartbeat change (see Detail) names only ChangeFieldHeartbeat.
	Fields []string
	// Error and Stuck are the entity's error and stuck slot after the
	// change.
	Error *ErrorInfo
	Stuck *StuckInfo
	// Detail is a heartbeat's message. A heartbeat that carries a message
	// is recorded as a change of a running job that leaves it running
	// (Prev and State both running, Fields [ChangeFieldHeartbeat]); every
	// other change has no detail.
	Detail string
	// At is when the store wrote the change, by the store's clock.
	At time.Time
	// DueAt is, on a job's change into running, when the job was due (its
	// run_at before the claim): At − DueAt is the start's pickup lag. It
	// is zero on every other change.
	DueAt time.Time
}

// ChangeFieldHeartbeat is the one field a heartbeat change names.
const ChangeFieldHeartbeat = "heartbeat"

// IsHeartbeat reports whether ch records a heartbeat's message rather than
// a state change.
func (ch *Change) IsHeartbeat() bool {
	return len(ch.Fields) == 1 && ch.Fields[0] == ChangeFieldHeartbeat && ch.Prev == ch.State
}

// ChangeCursor is a position in the change feed's delivery order: the
// changes after it are those with a greater (Tx, Position).
type ChangeCursor struct {
	Tx       int64 `json:"tx"`
	Position int64 `json:"position"`
}

// Before reports whether the cursor stands before ch in delivery order
// (ch has not been passed yet).
func (c ChangeCursor) Before(ch *Change) bool {
	return ch.Tx > c.Tx || (ch.Tx == c.Tx && ch.Position > c.Position)
}

// CursorOf returns the cursor that stands at ch.
func CursorOf(ch *Change) ChangeCursor { return ChangeCursor{Tx: ch.Tx, Position: ch.Position} }

// ChangeFieldNames returns the fields Change.Fields may name, in the order
// it names them (a fresh slice at each call).
func ChangeFieldNames() []string { return slices.Clone(changeFieldNames) }

var changeFieldNames = []string{"attempt", "run_at", "started_at", "ended_at", "worker", "result", "error", "stuck"}
