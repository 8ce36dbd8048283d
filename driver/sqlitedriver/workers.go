package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// WorkerUpsert stores or refreshes a worker's row.
func (t *executor) WorkerUpsert(ctx context.Context, params *driver.WorkerUpsertParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.WorkerUpsert(ctx, params) })
	}
	row := params.Row
	if err := t.check(ctx); err != nil {
		return err
	}
	_, err := t.r.exec(ctx, `INSERT INTO workers (id, started_at, seen_at, info) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, seen_at = excluded.seen_at, info = excluded.info`,
		row.ID, trunc(row.StartedAt).UnixMicro(), trunc(row.SeenAt).UnixMicro(), row.Info)
	if err != nil {
		return fmt.Errorf("upsert worker %q: %w", row.ID, err)
	}
	return nil
}

// WorkerList returns the workers seen at or after SeenAfter.
func (t *executor) WorkerList(ctx context.Context, params *driver.WorkerListParams) ([]*driver.WorkerRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.workerList(ctx, params.SeenAfter)
}

func (r *runner) workerList(ctx context.Context, seenAfter time.Time) ([]*driver.WorkerRow, error) {
	out := []*driver.WorkerRow{}
	err := r.each(ctx, `SELECT id, started_at, seen_at, info FROM workers WHERE seen_at >= ? ORDER BY id`, func(rows *sql.Rows) error {
		var w driver.WorkerRow
		var started, seen int64
		if err := rows.Scan(&w.ID, &started, &seen, blob{&w.Info}); err != nil {
			return err
		}
		w.StartedAt, w.SeenAt = fromMicrosNN(started), fromMicrosNN(seen)
		out = append(out, &w)
		return nil
	}, trunc(seenAfter).UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return out, nil
}

// WorkerDelete removes one worker, or those last seen before Before.
func (t *executor) WorkerDelete(ctx context.Context, p *driver.WorkerDeleteParams) (int, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (int, error) { return t.WorkerDelete(ctx, p) })
	}
	if err := t.check(ctx); err != nil {
		return 0, err
	}
	q, arg := `DELETE FROM workers WHERE id = ?`, any(p.ID)
	if p.ID == "" {
		q, arg = `DELETE FROM workers WHERE seen_at < ?`, trunc(p.Before).UnixMicro()
	}
	res, err := t.r.exec(ctx, q, arg)
	if err != nil {
		return 0, fmt.Errorf("delete workers: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if !p.ChangesBefore.IsZero() {
		if _, err := t.r.exec(ctx, `DELETE FROM changes INDEXED BY changes_unowned WHERE kind IN ('worker', 'schedule') AND at < ?`,
			trunc(p.ChangesBefore).UnixMicro()); err != nil {
			return 0, fmt.Errorf("delete worker and schedule changes: %w", err)
		}
	}
	return int(n), nil
}
