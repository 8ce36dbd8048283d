package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// ScheduleUpsert stores a schedule's registration; see driver.Executor.
func (e *executor) ScheduleUpsert(ctx context.Context, p *driver.ScheduleUpsertParams) (time.Time, error) {
	if err := e.check(ctx, "store schedule"); err != nil {
		return time.Time{}, err
	}
	var seen pgtype.Timestamptz
	var err error
	if p.Stored {
		err = e.q.QueryRow(ctx, e.d.q.scheduleUpsertStored, p.Name, ts(trunc(p.NextAt)), ts(trunc(p.Now)), p.Version).Scan(&seen)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, nil // deleted or defined again: nothing written
		}
	} else {
		err = e.q.QueryRow(ctx, e.d.q.scheduleUpsert, p.Name, p.Spec, ts(trunc(p.NextAt)), ts(trunc(p.Now))).Scan(&seen)
	}
	if err != nil {
		return time.Time{}, e.d.fail(fmt.Sprintf("store schedule %q", p.Name), err)
	}
	return fromTS(seen), nil
}

// ScheduleRecord records a fired occurrence; see driver.Executor.
func (e *executor) ScheduleRecord(ctx context.Context, p *driver.ScheduleRecordParams) (bool, error) {
	if err := e.check(ctx, "record occurrence"); err != nil {
		return false, err
	}
	var paused bool
	var err error
	if p.Stored {
		err = e.q.QueryRow(ctx, e.d.q.scheduleRecordStored, p.Name, ts(trunc(p.At)), ts(trunc(p.NextAt)), ts(trunc(p.Now)), p.Version).Scan(&paused)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, fmt.Errorf("record occurrence of schedule %q: %w", p.Name, hoppertype.ErrNotFound) // deleted or defined again
		}
	} else {
		err = e.q.QueryRow(ctx, e.d.q.scheduleRecord, p.Name, ts(trunc(p.At)), ts(trunc(p.NextAt)), ts(trunc(p.Now)), p.Spec).Scan(&paused)
	}
	if err != nil {
		return false, e.d.fail(fmt.Sprintf("record occurrence of schedule %q", p.Name), err)
	}
	return paused, nil
}

// ScheduleDefine stores a schedule defined in the store; see
// driver.Executor.
func (e *executor) ScheduleDefine(ctx context.Context, p *driver.ScheduleDefineParams) error {
	if err := e.check(ctx, "define schedule"); err != nil {
		return err
	}
	input := p.Def.Input
	if input == nil {
		input = []byte{}
	}
	tag, err := e.q.Exec(ctx, e.d.q.scheduleDefine, p.Name, p.Def.Spec, ts(trunc(p.NextAt)), ts(trunc(p.Now)),
		p.Def.Kind, p.Def.Target, input, p.Def.Location, int64(p.Def.CatchUp), p.Def.Version, ts(trunc(p.Def.DefinedAt)))
	if err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("define schedule %q: a schedule in code has the name: %w", p.Name, hoppertype.ErrStateConflict)
	}
	return e.d.fail(fmt.Sprintf("define schedule %q", p.Name), err)
}

// ScheduleSetPaused stores whether a schedule is paused; see
// driver.Executor.
func (e *executor) ScheduleSetPaused(ctx context.Context, p *driver.ScheduleSetPausedParams) error {
	if err := e.check(ctx, "pause schedule"); err != nil {
		return err
	}
	_, err := e.q.Exec(ctx, e.d.q.schedulePause, p.Name, p.Paused, ts(trunc(p.Now)))
	return e.d.fail(fmt.Sprintf("pause schedule %q", p.Name), err)
}

// ScheduleList returns the stored schedules by name; see driver.Executor.
func (e *executor) ScheduleList(ctx context.Context, _ *driver.ScheduleListParams) ([]*driver.ScheduleRow, error) {
	if err := e.check(ctx, "list schedules"); err != nil {
		return nil, err
	}
	rows, err := e.q.Query(ctx, e.d.q.scheduleList)
	if err != nil {
		return nil, e.d.fail("list schedules", err)
	}
	out := []*driver.ScheduleRow{}
	var s driver.ScheduleRow
	var last, next, updated, firstSeen, definedAt pgtype.Timestamptz
	var def driver.ScheduleDef
	var catchUp int64
	if _, err := pgx.ForEachRow(rows, []any{&s.Name, &s.Spec, &s.Paused, &s.Occurrences, &last, &next, &updated, &firstSeen,
		&def.Kind, &def.Target, &def.Input, &def.Location, &catchUp, &def.Spec, &def.Version, &definedAt}, func() error {
		row := s
		row.LastAt, row.NextAt, row.UpdatedAt, row.FirstSeenAt = fromTS(last), fromTS(next), fromTS(updated), fromTS(firstSeen)
		if def.Kind != "" {
			d := def
			d.Input = slices.Clone(def.Input)
			d.CatchUp = time.Duration(catchUp)
			d.DefinedAt = fromTS(definedAt)
			row.Def = &d
		}
		out = append(out, &row)
		return nil
	}); err != nil {
		return nil, e.d.fail("list schedules", err)
	}
	return out, nil
}

// ScheduleDelete removes a schedule's stored row; see driver.Executor.
func (e *executor) ScheduleDelete(ctx context.Context, params *driver.ScheduleDeleteParams) (bool, error) {
	if err := e.check(ctx, "delete schedule"); err != nil {
		return false, err
	}
	tag, err := e.q.Exec(ctx, e.d.q.scheduleDelete, params.Name)
	if err != nil {
		return false, e.d.fail(fmt.Sprintf("delete schedule %q", params.Name), err)
	}
	return tag.RowsAffected() > 0, nil
}
