package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// A row with a definition (def_kind) keeps the spec its definition set:
// registrations and records of the processes that run it leave it alone.
const (
	upsertScheduleSQL = `INSERT INTO schedules (name, spec, next_at, updated_at, first_seen_at) VALUES (?1, ?2, ?3, ?4, ?4)
	ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at,
		spec = CASE WHEN def_kind = '' THEN excluded.spec ELSE spec END,
		next_at = CASE WHEN (def_kind <> '' OR spec = excluded.spec) AND next_at > excluded.next_at THEN next_at ELSE excluded.next_at END,
		first_seen_at = coalesce(first_seen_at, excluded.first_seen_at)
	RETURNING first_seen_at`
	upsertStoredScheduleSQL = `UPDATE schedules SET updated_at = ?4,
		next_at = CASE WHEN next_at > ?3 THEN next_at ELSE ?3 END, first_seen_at = coalesce(first_seen_at, ?4)
	WHERE name = ?1 AND def_kind <> '' AND def_version = ?5
	RETURNING first_seen_at`
	recordScheduleSQL = `INSERT INTO schedules (name, occurrences, last_at, next_at, updated_at, spec, first_seen_at) VALUES (?1, 1, ?2, ?3, ?4, ?5, ?4)
	ON CONFLICT (name) DO UPDATE SET spec = CASE WHEN def_kind = '' THEN excluded.spec ELSE spec END,
		occurrences = occurrences + (1 - paused),
		last_at = CASE WHEN paused THEN last_at ELSE excluded.last_at END,
		next_at = excluded.next_at, updated_at = excluded.updated_at,
		first_seen_at = coalesce(first_seen_at, excluded.first_seen_at)
	RETURNING paused`
	recordStoredScheduleSQL = `UPDATE schedules SET occurrences = occurrences + (1 - paused),
		last_at = CASE WHEN paused THEN last_at ELSE ?2 END, next_at = ?3, updated_at = ?4,
		first_seen_at = coalesce(first_seen_at, ?4)
	WHERE name = ?1 AND def_kind <> '' AND def_version = ?5
	RETURNING paused`
	pauseScheduleSQL = `INSERT INTO schedules (name, paused, updated_at) VALUES (?1, ?2, ?3)
	ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`
	// A code schedule's row (no definition, and a spec, a next or last
	// occurrence or a count) is not taken over: no row changes.
	defineScheduleSQL = `INSERT INTO schedules (name, spec, next_at, updated_at, def_kind, def_target, def_input, def_location, def_catch_up, def_spec, def_version, def_at, first_seen_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?2, ?10, ?11, ?4)
	ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, next_at = excluded.next_at, updated_at = excluded.updated_at,
		first_seen_at = coalesce(first_seen_at, excluded.first_seen_at),
		def_kind = excluded.def_kind, def_target = excluded.def_target, def_input = excluded.def_input,
		def_location = excluded.def_location, def_catch_up = excluded.def_catch_up, def_spec = excluded.def_spec,
		def_version = excluded.def_version, def_at = excluded.def_at
	WHERE def_kind <> '' OR (spec = '' AND next_at IS NULL AND last_at IS NULL AND occurrences = 0)`
	listSchedulesSQL = `SELECT name, spec, paused, occurrences, last_at, next_at, updated_at, first_seen_at,
	def_kind, def_target, def_input, def_location, def_catch_up, def_spec, def_version, def_at FROM schedules ORDER BY name`
	deleteScheduleSQL = `DELETE FROM schedules WHERE name = ?`
)

func (r *runner) scheduleUpsert(ctx context.Context, p *driver.ScheduleUpsertParams) (time.Time, error) {
	q, args := upsertScheduleSQL, []any{p.Name, p.Spec, micros(trunc(p.NextAt)), micros(trunc(p.Now))}
	if p.Stored {
		q, args = upsertStoredScheduleSQL, append(args, p.Version)
	}
	var seen sql.NullInt64
	err := r.one(ctx, q, func(rows *sql.Rows) error { return rows.Scan(&seen) }, args...)
	if p.Stored && errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil // deleted or defined again: nothing written
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store schedule %q: %w", p.Name, err)
	}
	return fromMicros(seen), nil
}

func (r *runner) scheduleRecord(ctx context.Context, p *driver.ScheduleRecordParams) (bool, error) {
	var paused bool
	q, args := recordScheduleSQL, []any{p.Name, micros(trunc(p.At)), micros(trunc(p.NextAt)), micros(trunc(p.Now)), p.Spec}
	if p.Stored {
		q, args = recordStoredScheduleSQL, append(args[:4], p.Version)
	}
	err := r.one(ctx, q, func(rows *sql.Rows) error { return rows.Scan(&paused) }, args...)
	if p.Stored && errors.Is(err, sql.ErrNoRows) {
		err = hoppertype.ErrNotFound // deleted or defined again
	}
	if err != nil {
		return false, fmt.Errorf("record occurrence of schedule %q: %w", p.Name, err)
	}
	return paused, nil
}

func (r *runner) scheduleDefine(ctx context.Context, p *driver.ScheduleDefineParams) error {
	input := p.Def.Input
	if input == nil {
		input = []byte{}
	}
	res, err := r.exec(ctx, defineScheduleSQL, p.Name, p.Def.Spec, micros(trunc(p.NextAt)), micros(trunc(p.Now)),
		p.Def.Kind, p.Def.Target, input, p.Def.Location, int64(p.Def.CatchUp), p.Def.Version, micros(trunc(p.Def.DefinedAt)))
	if err != nil {
		return fmt.Errorf("define schedule %q: %w", p.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("define schedule %q: %w", p.Name, err)
	}
	if n == 0 {
		return fmt.Errorf("define schedule %q: a schedule in code has the name: %w", p.Name, hoppertype.ErrStateConflict)
	}
	return nil
}

func (r *runner) scheduleSetPaused(ctx context.Context, p *driver.ScheduleSetPausedParams) error {
	if _, err := r.exec(ctx, pauseScheduleSQL, p.Name, p.Paused, micros(trunc(p.Now))); err != nil {
		return fmt.Errorf("set schedule %q paused: %w", p.Name, err)
	}
	return nil
}

func (r *runner) scheduleList(ctx context.Context) ([]*driver.ScheduleRow, error) {
	out := []*driver.ScheduleRow{}
	err := r.each(ctx, listSchedulesSQL, func(rows *sql.Rows) error {
		var s driver.ScheduleRow
		var last, next, updated, firstSeen, definedAt sql.NullInt64
		var def driver.ScheduleDef
		var catchUp int64
		if err := rows.Scan(&s.Name, &s.Spec, &s.Paused, &s.Occurrences, &last, &next, &updated, &firstSeen,
			&def.Kind, &def.Target, &def.Input, &def.Location, &catchUp, &def.Spec, &def.Version, &definedAt); err != nil {
			return err
		}
		s.LastAt, s.NextAt, s.UpdatedAt, s.FirstSeenAt = fromMicros(last), fromMicros(next), fromMicros(updated), fromMicros(firstSeen)
		if def.Kind != "" {
			def.CatchUp = time.Duration(catchUp)
			def.DefinedAt = fromMicros(definedAt)
			s.Def = &def
		}
		out = append(out, &s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

func (r *runner) scheduleDelete(ctx context.Context, name string) (bool, error) {
	res, err := r.exec(ctx, deleteScheduleSQL, name)
	if err != nil {
		return false, fmt.Errorf("delete schedule %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ScheduleUpsert stores a schedule's registration.
func (t *executor) ScheduleUpsert(ctx context.Context, params *driver.ScheduleUpsertParams) (time.Time, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (time.Time, error) { return t.ScheduleUpsert(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return time.Time{}, err
	}
	return t.r.scheduleUpsert(ctx, params)
}

// ScheduleRecord records a fired occurrence.
func (t *executor) ScheduleRecord(ctx context.Context, params *driver.ScheduleRecordParams) (bool, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (bool, error) { return t.ScheduleRecord(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return false, err
	}
	return t.r.scheduleRecord(ctx, params)
}

// ScheduleDefine stores a schedule defined in the store.
func (t *executor) ScheduleDefine(ctx context.Context, params *driver.ScheduleDefineParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.ScheduleDefine(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.scheduleDefine(ctx, params)
}

// ScheduleSetPaused stores whether a schedule is paused.
func (t *executor) ScheduleSetPaused(ctx context.Context, params *driver.ScheduleSetPausedParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.ScheduleSetPaused(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	return t.r.scheduleSetPaused(ctx, params)
}

// ScheduleList returns the stored schedules.
func (t *executor) ScheduleList(ctx context.Context, _ *driver.ScheduleListParams) ([]*driver.ScheduleRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.scheduleList(ctx)
}

// ScheduleDelete removes a schedule's stored row.
func (t *executor) ScheduleDelete(ctx context.Context, params *driver.ScheduleDeleteParams) (bool, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (bool, error) { return t.ScheduleDelete(ctx, params) })
	}
	if err := t.check(ctx); err != nil {
		return false, err
	}
	return t.r.scheduleDelete(ctx, params.Name)
}
