package driver

import "time"

// ScheduleUpsertParams are the arguments of ScheduleUpsert.
type ScheduleUpsertParams struct {
	Name string
	// Spec describes the schedule for listings (its cron expression).
	Spec string
	// NextAt is the schedule's next occurrence (zero for none).
	NextAt time.Time
	Now    time.Time
	// Stored is set by a process running a schedule defined in the
	// store, with the Version of the definition it runs.
	Stored  bool
	Version int64
}

// ScheduleDefineParams are the arguments of ScheduleDefine.
type ScheduleDefineParams struct {
	Name   string
	Def    ScheduleDef
	NextAt time.Time
	Now    time.Time
}

// ScheduleDef is what a schedule defined in the store runs: the processes
// that register Target run it.
type ScheduleDef struct {
	// Spec is the schedule's cron expression; ScheduleDefine also stores
	// it as the row's Spec.
	Spec string
	// Kind is "job" (Target is a job type) or "run" (a workflow).
	Kind   string
	Target string
	// Input is the JSON input of each occurrence's job or run.
	Input []byte
	// Location is the IANA time zone the spec is read in.
	Location string
	// CatchUp is how late an occurrence may still fire (negative: on time
	// only).
	CatchUp time.Duration
	// DefinedAt is when the definition was made: no earlier occurrence
	// fires.
	DefinedAt time.Time
	// Version identifies the definition: the caller picks one no other
	// definition of the name had (a random number), so a process running
	// an older one, or one deleted and defined again, is told apart.
	Version int64
}

// ScheduleRecordParams are the arguments of ScheduleRecord.
type ScheduleRecordParams struct {
	Name string
	Spec string
	// At is the occurrence that fired; NextAt the one after it (zero for
	// none).
	At     time.Time
	NextAt time.Time
	Now    time.Time
	// Stored is set by a process running a schedule defined in the
	// store, with the Version of the definition it runs.
	Stored  bool
	Version int64
}

// ScheduleSetPausedParams are the arguments of ScheduleSetPaused.
type ScheduleSetPausedParams struct {
	Name   string
	Paused bool
	Now    time.Time
}

// ScheduleListParams are the arguments of ScheduleList (none yet).
type ScheduleListParams struct{}

// ScheduleDeleteParams are the arguments of ScheduleDelete.
type ScheduleDeleteParams struct {
	Name string
}

// ScheduleRow is a schedule's stored state.
type ScheduleRow struct {
	Name   string
	Spec   string
	Paused bool
	// Occurrences counts the occurrences that fired while not paused.
	Occurrences int64
	// LastAt is the latest occurrence counted, NextAt the next one known
	// (zero for none).
	LastAt    time.Time
	NextAt    time.Time
	UpdatedAt time.Time
	// FirstSeenAt is when the store first heard of the schedule: a process
	// registered it (ScheduleUpsert), fired it (ScheduleRecord) or defined
	// it (ScheduleDefine). It stays until the row is deleted; no occurrence
	// before it fires. Zero for a row that was only paused.
	FirstSeenAt time.Time
	// Def is set for a schedule defined in the store (ScheduleDefine); nil
	// for one registered in code.
	Def *ScheduleDef
}
