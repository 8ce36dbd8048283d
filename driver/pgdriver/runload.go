package pgdriver

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// RunLoad reads a run and its history in one statement.
func (e *executor) RunLoad(ctx context.Context, params *driver.RunLoadParams) (*hoppertype.RunRow, []*hoppertype.RunEvent, error) {
	if err := e.check(ctx, "load run"); err != nil {
		return nil, nil, err
	}
	op := fmt.Sprintf("load run %q", params.ID)
	rows, err := e.q.Query(ctx, e.d.q.runLoad, params.ID)
	if err != nil {
		return nil, nil, e.d.fail(op, err)
	}
	runs, err := scanRunLoads(rows)
	if err != nil {
		return nil, nil, e.d.fail(op, err)
	}
	l := runs[params.ID]
	if l == nil {
		return nil, nil, fmt.Errorf("pgdriver: %s: %w", op, hoppertype.ErrNotFound)
	}
	return l.Run, l.Events, nil
}

// RunLoadMany reads several runs and their histories in one statement; see
// driver.RunBatchLoader.
func (e *executor) RunLoadMany(ctx context.Context, params *driver.RunLoadManyParams) (map[string]*driver.RunLoaded, error) {
	if err := e.check(ctx, "load runs"); err != nil {
		return nil, err
	}
	if len(params.IDs) == 0 {
		return map[string]*driver.RunLoaded{}, nil
	}
	// On its generic plan, by key (see sqlGenericOn).
	var runs map[string]*driver.RunLoaded
	err := e.queryGeneric(ctx, func(rows pgx.Rows) error {
		var err error
		runs, err = scanRunLoads(rows)
		return err
	}, e.d.q.runLoadMany, params.IDs)
	if err != nil {
		return nil, e.d.fail("load runs", err)
	}
	return runs, nil
}

// scanRunLoads reads the rows of runLoad or runLoadMany (a run's columns
// and one event's, NULLs for a run without history; a run's rows together,
// its events in order) and closes them.
func scanRunLoads(rows pgx.Rows) (map[string]*driver.RunLoaded, error) {
	defer rows.Close()
	out := map[string]*driver.RunLoaded{}
	for rows.Next() {
		var (
			r              hoppertype.RunRow
			status         string
			parentID       pgtype.Text
			errInfo        []byte
			created        time.Time
			updated, ended pgtype.Timestamptz
			attempt, seq   pgtype.Int4
			kind, name     pgtype.Text
			at             pgtype.Timestamptz
			data           []byte
		)
		if err := rows.Scan(&r.ID, &r.Workflow, &status, &parentID, &r.CodeVersion, &errInfo, &created, &updated, &ended,
			&attempt, &seq, &kind, &name, &at, &data); err != nil {
			return nil, err
		}
		l := out[r.ID]
		if l == nil {
			r.Status = hoppertype.RunStatus(status)
			r.ParentID = parentID.String
			r.CreatedAt, r.UpdatedAt, r.EndedAt = fromTime(created), fromTS(updated), fromTS(ended)
			var err error
			if r.Error, err = hoppertype.UnmarshalErrorInfo(errInfo); err != nil {
				return nil, fmt.Errorf("run %q: decode error: %w", r.ID, err)
			}
			l = &driver.RunLoaded{Run: &r, Events: []*hoppertype.RunEvent{}}
			out[r.ID] = l
		}
		if attempt.Valid {
			l.Events = append(l.Events, &hoppertype.RunEvent{RunID: l.Run.ID, Attempt: int(attempt.Int32), Seq: int(seq.Int32),
				Kind: kind.String, Name: name.String, At: fromTS(at), Data: data})
		}
	}
	return out, rows.Err()
}
