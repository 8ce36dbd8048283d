package pgdriver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
)

// WorkerUpsert stores or refreshes a worker's row; see driver.Executor.
func (e *executor) WorkerUpsert(ctx context.Context, params *driver.WorkerUpsertParams) error {
	row := params.Row
	if err := e.check(ctx, "upsert worker"); err != nil {
		return err
	}
	_, err := e.q.Exec(ctx, `INSERT INTO `+e.d.q.schema+`.workers (id, started_at, seen_at, info) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET started_at = EXCLUDED.started_at, seen_at = EXCLUDED.seen_at, info = EXCLUDED.info`,
		row.ID, trunc(row.StartedAt), trunc(row.SeenAt), row.Info)
	return e.d.fail(fmt.Sprintf("upsert worker %q", row.ID), err)
}

// WorkerList returns the workers seen at or after SeenAfter; see
// driver.Executor.
func (e *executor) WorkerList(ctx context.Context, params *driver.WorkerListParams) ([]*driver.WorkerRow, error) {
	if err := e.check(ctx, "list workers"); err != nil {
		return nil, err
	}
	rows, err := e.q.Query(ctx, `SELECT id, started_at, seen_at, info FROM `+e.d.q.schema+`.workers WHERE seen_at >= $1 ORDER BY id`, trunc(params.SeenAfter))
	if err != nil {
		return nil, e.d.fail("list workers", err)
	}
	out := []*driver.WorkerRow{}
	var w driver.WorkerRow
	var started, seen pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&w.ID, &started, &seen, &w.Info}, func() error {
		c := w
		c.StartedAt, c.SeenAt = fromTS(started), fromTS(seen)
		c.Info = append([]byte(nil), w.Info...)
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, e.d.fail("list workers", err)
	}
	return out, nil
}

// WorkerDelete removes one worker, or those last seen before Before; see
// driver.Executor.
func (e *executor) WorkerDelete(ctx context.Context, p *driver.WorkerDeleteParams) (int, error) {
	if err := e.check(ctx, "delete workers"); err != nil {
		return 0, err
	}
	q, arg := `DELETE FROM `+e.d.q.schema+`.workers WHERE id = $1`, any(p.ID)
	if p.ID == "" {
		q, arg = `DELETE FROM `+e.d.q.schema+`.workers WHERE seen_at < $1`, any(trunc(p.Before))
	}
	tag, err := e.q.Exec(ctx, q, arg)
	if err != nil {
		return 0, e.d.fail("delete workers", err)
	}
	if !p.ChangesBefore.IsZero() {
		if _, err := e.q.Exec(ctx, `DELETE FROM `+e.d.q.schema+`.changes WHERE kind IN ('worker', 'schedule') AND at < $1`,
			trunc(p.ChangesBefore)); err != nil {
			return 0, e.d.fail("delete worker and schedule changes", err)
		}
	}
	if p.TransitionsOlderThan != nil {
		// Change sets go by age (schema 23), by the server's clock that
		// stamped them: one holds many jobs' transitions, so it cannot go
		// with each job. At most 1,000 a call (each holds up to 4,096
		// transitions); retention calls again.
		s := e.d.q.schema
		if _, err := e.q.Exec(ctx, `DELETE FROM `+s+`.change_sets WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM `+s+`.change_sets WHERE at < statement_timestamp() - make_interval(secs => $1) LIMIT 1000))`,
			p.TransitionsOlderThan.Seconds()); err != nil {
			return 0, e.d.fail("delete change sets", err)
		}
	}
	return int(tag.RowsAffected()), nil
}
