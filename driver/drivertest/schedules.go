package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// scheduleCases cover the schedules' stored state: registration, recorded
// occurrences, pause and removal.
func scheduleCases() []testCase {
	return []testCase{
		{"UpsertRecordAndList", testScheduleRecord},
		{"PausedOccurrencesAreNotCounted", testSchedulePaused},
		{"Delete", testScheduleDelete},
		{"RecordRollsBack", testScheduleRollback},
		{"Define", testScheduleDefine},
		{"FirstSeen", testScheduleFirstSeen},
	}
}

func (f *fixture) schedules(t *testing.T) []*driver.ScheduleRow {
	t.Helper()
	rows, err := f.x.ScheduleList(f.ctx, &driver.ScheduleListParams{})
	require.NoError(t, err)
	return rows
}

// upsertSchedule stores a registration and returns the row's FirstSeenAt.
func (f *fixture) upsertSchedule(t *testing.T, p driver.ScheduleUpsertParams) time.Time {
	t.Helper()
	seen, err := f.x.ScheduleUpsert(f.ctx, &p)
	require.NoError(t, err)
	return seen
}

// record records the occurrence of the schedule name (spec "@every 1h").
func (f *fixture) record(t *testing.T, name string, occurred, next, now time.Time) bool {
	t.Helper()
	paused, err := f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: name, Spec: "@every 1h", At: occurred, NextAt: next, Now: now})
	require.NoError(t, err)
	return paused
}

func testScheduleRecord(t *testing.T, f *fixture) {
	require.Empty(t, f.schedules(t), "a fresh store has no schedules")

	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "b", Spec: "*/5 * * * *", NextAt: at(5 * time.Minute), Now: nanos(base)})
	rows := f.schedules(t)
	require.Len(t, rows, 1)
	b := rows[0]
	require.Equal(t, "b", b.Name)
	require.Equal(t, "*/5 * * * *", b.Spec)
	require.False(t, b.Paused)
	require.Zero(t, b.Occurrences)
	require.True(t, b.LastAt.IsZero(), "no occurrence yet: %v", b.LastAt)
	requireTime(t, at(5*time.Minute), b.NextAt)
	requireTime(t, base, b.UpdatedAt)

	require.False(t, f.record(t, "b", at(5*time.Minute), at(10*time.Minute), at(5*time.Minute+time.Second)))
	require.Equal(t, "@every 1h", f.schedules(t)[0].Spec, "an occurrence records the spec it fired by")
	require.False(t, f.record(t, "b", at(10*time.Minute), at(15*time.Minute), at(10*time.Minute+time.Second)))
	// An occurrence of a schedule no process registered creates its row.
	require.False(t, f.record(t, "a", at(time.Hour), time.Time{}, at(time.Hour)))
	// Registering again keeps the counts.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "b", Spec: "*/15 * * * *", NextAt: at(15 * time.Minute), Now: at(11 * time.Minute)})

	// A process registering late, with an occurrence recorded already,
	// leaves the newer next occurrence.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "b", Spec: "*/15 * * * *", NextAt: at(10 * time.Minute), Now: at(11 * time.Minute)})

	rows = f.schedules(t)
	require.Len(t, rows, 2)
	a, b := rows[0], rows[1]
	require.Equal(t, "a", a.Name, "schedules are listed by name")
	require.Equal(t, int64(1), a.Occurrences)
	requireTime(t, at(time.Hour), a.LastAt)
	require.True(t, a.NextAt.IsZero(), "no next occurrence: %v", a.NextAt)
	require.Equal(t, "@every 1h", a.Spec)

	require.Equal(t, "b", b.Name)
	require.Equal(t, "*/15 * * * *", b.Spec)
	require.Equal(t, int64(2), b.Occurrences)
	requireTime(t, at(10*time.Minute), b.LastAt)
	requireTime(t, at(15*time.Minute), b.NextAt)
	requireTime(t, at(11*time.Minute), b.UpdatedAt)

	// A new spec takes its own next occurrence, earlier or not.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "b", Spec: "*/1 * * * *", NextAt: at(12 * time.Minute), Now: at(12 * time.Minute)})
	b = f.schedules(t)[1]
	require.Equal(t, "*/1 * * * *", b.Spec)
	requireTime(t, at(12*time.Minute), b.NextAt)
	// An ended schedule has no next occurrence.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "b", Spec: "*/1 * * * *", Now: at(13 * time.Minute)})
	require.True(t, f.schedules(t)[1].NextAt.IsZero())
}

func testSchedulePaused(t *testing.T, f *fixture) {
	// Paused before any process registered it.
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "s", Paused: true, Now: nanos(base)}))
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "s", Spec: "@every 1h", NextAt: at(time.Hour), Now: at(time.Second)})
	rows := f.schedules(t)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Paused, "registering keeps the pause")
	requireTime(t, at(time.Hour), rows[0].NextAt)

	require.True(t, f.record(t, "s", at(time.Hour), at(2*time.Hour), at(time.Hour)), "a paused schedule says so")
	s := f.schedules(t)[0]
	require.Zero(t, s.Occurrences, "a paused occurrence is not counted")
	require.True(t, s.LastAt.IsZero())
	requireTime(t, at(2*time.Hour), s.NextAt, "the next occurrence moves on")
	// A process starting while paused, its first occurrence fired
	// already, leaves the later next occurrence.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "s", Spec: "@every 1h", NextAt: at(time.Hour), Now: at(time.Hour + time.Second)})
	requireTime(t, at(2*time.Hour), f.schedules(t)[0].NextAt)

	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "s", Paused: false, Now: at(90 * time.Minute)}))
	require.False(t, f.record(t, "s", at(2*time.Hour), at(3*time.Hour), at(2*time.Hour)))
	s = f.schedules(t)[0]
	require.False(t, s.Paused)
	require.Equal(t, int64(1), s.Occurrences)
	requireTime(t, at(2*time.Hour), s.LastAt)
	require.Equal(t, "@every 1h", s.Spec, "pausing keeps the spec")
}

func testScheduleDelete(t *testing.T, f *fixture) {
	gone, err := f.x.ScheduleDelete(f.ctx, &driver.ScheduleDeleteParams{Name: "nope"})
	require.NoError(t, err)
	require.False(t, gone, "no such schedule")

	f.record(t, "s", base, at(time.Hour), base)
	f.record(t, "t", base, at(time.Hour), base)
	gone, err = f.x.ScheduleDelete(f.ctx, &driver.ScheduleDeleteParams{Name: "s"})
	require.NoError(t, err)
	require.True(t, gone)
	rows := f.schedules(t)
	require.Len(t, rows, 1)
	require.Equal(t, "t", rows[0].Name)

	// A schedule that fires again starts over.
	f.record(t, "s", at(time.Hour), at(2*time.Hour), at(time.Hour))
	rows = f.schedules(t)
	require.Len(t, rows, 2)
	require.Equal(t, int64(1), rows[0].Occurrences)
}

func testScheduleRollback(t *testing.T, f *fixture) {
	f.record(t, "s", base, at(time.Hour), base)
	err := f.x.InTx(f.ctx, func(ctx context.Context, tx driver.Executor) error {
		paused, err := tx.ScheduleRecord(ctx, &driver.ScheduleRecordParams{Name: "s", At: at(time.Hour), NextAt: at(2 * time.Hour), Now: at(time.Hour)})
		require.NoError(t, err)
		require.False(t, paused)
		require.NoError(t, tx.ScheduleSetPaused(ctx, &driver.ScheduleSetPausedParams{Name: "s", Paused: true, Now: at(time.Hour)}))
		_, err = tx.ScheduleUpsert(ctx, &driver.ScheduleUpsertParams{Name: "new", Spec: "x", Now: at(time.Hour)})
		require.NoError(t, err)
		require.NoError(t, tx.ScheduleDefine(ctx, &driver.ScheduleDefineParams{Name: "defined", Now: at(time.Hour),
			Def: driver.ScheduleDef{Spec: "y", Kind: "job", Target: "t"}}))
		gone, err := tx.ScheduleDelete(ctx, &driver.ScheduleDeleteParams{Name: "s"})
		require.NoError(t, err)
		require.True(t, gone)
		rows, err := tx.ScheduleList(ctx, &driver.ScheduleListParams{})
		require.NoError(t, err)
		require.Len(t, rows, 2, "the transaction reads its own writes")
		require.Equal(t, "defined", rows[0].Name)
		require.Equal(t, "new", rows[1].Name)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	rows := f.schedules(t)
	require.Len(t, rows, 1, "schedule writes rolled back")
	s := rows[0]
	require.Equal(t, "s", s.Name)
	require.False(t, s.Paused)
	require.Equal(t, int64(1), s.Occurrences)
	requireTime(t, base, s.LastAt)
	requireTime(t, at(time.Hour), s.NextAt)
}

func testScheduleDefine(t *testing.T, f *fixture) {
	def := driver.ScheduleDef{Spec: "0 3 * * *", Kind: "job", Target: "report", Input: []byte(`{"day":1}`), Location: "Europe/Paris", CatchUp: 5 * time.Minute, Version: 11, DefinedAt: base}
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "d", Def: def, NextAt: at(3 * time.Hour), Now: nanos(base)}))
	f.record(t, "code", base, at(time.Hour), base)
	rows := f.schedules(t)
	require.Len(t, rows, 2)
	code, d := rows[0], rows[1]
	require.Nil(t, code.Def, "a schedule registered in code has no definition")
	require.NotNil(t, d.Def)
	require.Equal(t, def, *d.Def)
	require.Equal(t, "0 3 * * *", d.Spec)
	requireTime(t, at(3*time.Hour), d.NextAt)
	requireTime(t, base, d.UpdatedAt)

	// A process running it registers it and records its occurrences: the
	// definition and its spec stay, even from a process that registers a
	// schedule of that name in code.
	for _, stored := range []bool{true, false} {
		f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "d", Spec: "@yearly", NextAt: at(3 * time.Hour), Now: at(time.Second), Stored: stored, Version: 11})
		paused, err := f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: "d", Spec: "@yearly", At: at(3 * time.Hour), NextAt: at(27 * time.Hour), Now: at(3 * time.Hour), Stored: stored, Version: 11})
		require.NoError(t, err)
		require.False(t, paused)
	}
	// A late registration keeps the later next occurrence.
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "d", NextAt: at(3 * time.Hour), Now: at(4 * time.Hour), Stored: true, Version: 11})
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "d", Paused: true, Now: at(4 * time.Hour)}))
	d = f.schedules(t)[1]
	require.Equal(t, def, *d.Def)
	require.Equal(t, "0 3 * * *", d.Spec)
	require.Equal(t, int64(2), d.Occurrences)
	requireTime(t, at(27*time.Hour), d.NextAt)
	requireTime(t, at(4*time.Hour), d.UpdatedAt)

	// Defining it again replaces the definition and keeps the rest.
	def2 := driver.ScheduleDef{Spec: "@hourly", Kind: "run", Target: "nightly", Location: "UTC", CatchUp: -1, Version: 22, DefinedAt: at(4 * time.Hour)}
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "d", Def: def2, NextAt: at(5 * time.Hour), Now: at(4 * time.Hour)}))
	d = f.schedules(t)[1]
	require.Empty(t, d.Def.Input, "no input")
	d.Def.Input = nil
	require.Equal(t, def2, *d.Def)
	require.Equal(t, "@hourly", d.Spec)
	require.True(t, d.Paused)
	require.Equal(t, int64(2), d.Occurrences)
	requireTime(t, at(3*time.Hour), d.LastAt)
	requireTime(t, at(5*time.Hour), d.NextAt)

	// A process still running the first definition neither fires it nor
	// moves the schedule.
	_, err := f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: "d", At: at(27 * time.Hour), NextAt: at(51 * time.Hour), Now: at(27 * time.Hour), Stored: true, Version: 11})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "a stale definition")
	f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "d", NextAt: at(51 * time.Hour), Now: at(27 * time.Hour), Stored: true, Version: 11})
	d = f.schedules(t)[1]
	require.Equal(t, int64(2), d.Occurrences)
	requireTime(t, at(5*time.Hour), d.NextAt)

	gone, err := f.x.ScheduleDelete(f.ctx, &driver.ScheduleDeleteParams{Name: "d"})
	require.NoError(t, err)
	require.True(t, gone)
	require.Len(t, f.schedules(t), 1)

	// A process still running the deleted schedule neither brings it back
	// nor fires it; nor one of a code schedule's name.
	for _, name := range []string{"d", "code"} {
		f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: name, Spec: "@hourly", NextAt: at(6 * time.Hour), Now: at(5 * time.Hour), Stored: true, Version: 22})
		_, err := f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: name, Spec: "@hourly", At: at(6 * time.Hour), NextAt: at(7 * time.Hour), Now: at(6 * time.Hour), Stored: true, Version: 22})
		require.ErrorIs(t, err, hoppertype.ErrNotFound, "%s: no definition, no occurrence", name)
	}
	rows = f.schedules(t)
	require.Len(t, rows, 1, "no row brought back")
	require.Equal(t, "code", rows[0].Name)
	require.Equal(t, int64(1), rows[0].Occurrences, "the code schedule's row untouched")
	requireTime(t, at(time.Hour), rows[0].NextAt)

	// A code schedule's row is not taken over; a name only paused is.
	err = f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "code", Def: def, Now: at(time.Hour)})
	require.ErrorIs(t, err, hoppertype.ErrStateConflict)
	require.Nil(t, f.schedules(t)[0].Def)
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "p", Paused: true, Now: base}))
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "p", Def: def, Now: at(time.Hour)}))
	p := f.schedules(t)[1]
	require.Equal(t, "p", p.Name)
	require.True(t, p.Paused)
	require.Equal(t, def, *p.Def)

	// Deleted and defined again: the first definition's process is told
	// apart by the version.
	_, err = f.x.ScheduleDelete(f.ctx, &driver.ScheduleDeleteParams{Name: "p"})
	require.NoError(t, err)
	def3 := def
	def3.Version = 33
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "p", Def: def3, Now: at(2 * time.Hour)}))
	_, err = f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: "p", At: at(3 * time.Hour), Now: at(3 * time.Hour), Stored: true, Version: 11})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	_, err = f.x.ScheduleRecord(f.ctx, &driver.ScheduleRecordParams{Name: "p", At: at(3 * time.Hour), Now: at(3 * time.Hour), Stored: true, Version: 33})
	require.NoError(t, err)
	require.Equal(t, int64(1), f.schedules(t)[1].Occurrences)
}

// testScheduleFirstSeen: a row's FirstSeenAt is the first registration,
// record or definition; later ones, and a pause, keep it; a row only
// paused has none until registered; a deleted row starts again.
func testScheduleFirstSeen(t *testing.T, f *fixture) {
	byName := func() map[string]*driver.ScheduleRow {
		out := map[string]*driver.ScheduleRow{}
		for _, r := range f.schedules(t) {
			out[r.Name] = r
		}
		return out
	}
	requireTime(t, at(time.Minute), f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "a", Spec: "@hourly", NextAt: at(time.Hour), Now: at(time.Minute)}))
	requireTime(t, at(time.Minute), f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "a", Spec: "@hourly", NextAt: at(time.Hour), Now: at(2 * time.Minute)}),
		"a later registration keeps the first")
	f.record(t, "a", at(time.Hour), at(2*time.Hour), at(time.Hour))
	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "a", Paused: true, Now: at(3 * time.Minute)}))
	requireTime(t, at(time.Minute), byName()["a"].FirstSeenAt)

	f.record(t, "r", at(time.Hour), at(2*time.Hour), at(time.Hour+time.Second))
	requireTime(t, at(time.Hour+time.Second), byName()["r"].FirstSeenAt, "a record creating the row")

	require.NoError(t, f.x.ScheduleSetPaused(f.ctx, &driver.ScheduleSetPausedParams{Name: "p", Paused: true, Now: at(time.Minute)}))
	require.True(t, byName()["p"].FirstSeenAt.IsZero(), "a pause is not a registration")
	requireTime(t, at(4*time.Minute), f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "p", Spec: "@hourly", NextAt: at(time.Hour), Now: at(4 * time.Minute)}))

	def := driver.ScheduleDef{Spec: "@hourly", Kind: "job", Target: "t", Version: 5, DefinedAt: at(5 * time.Minute)}
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "d", Def: def, NextAt: at(time.Hour), Now: at(5 * time.Minute)}))
	requireTime(t, at(5*time.Minute), byName()["d"].FirstSeenAt)
	def.Version, def.DefinedAt = 6, at(6*time.Minute)
	require.NoError(t, f.x.ScheduleDefine(f.ctx, &driver.ScheduleDefineParams{Name: "d", Def: def, NextAt: at(time.Hour), Now: at(6 * time.Minute)}))
	requireTime(t, at(5*time.Minute), byName()["d"].FirstSeenAt, "a new definition keeps it")
	require.True(t, f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "d", NextAt: at(time.Hour), Now: at(7 * time.Minute), Stored: true, Version: 5}).IsZero(),
		"an old definition's registration writes nothing")
	requireTime(t, at(5*time.Minute), f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "d", NextAt: at(time.Hour), Now: at(7 * time.Minute), Stored: true, Version: 6}))

	gone, err := f.x.ScheduleDelete(f.ctx, &driver.ScheduleDeleteParams{Name: "a"})
	require.NoError(t, err)
	require.True(t, gone)
	requireTime(t, at(8*time.Minute), f.upsertSchedule(t, driver.ScheduleUpsertParams{Name: "a", Spec: "@hourly", NextAt: at(time.Hour), Now: at(8 * time.Minute)}),
		"deleted, the schedule is seen anew")
}
