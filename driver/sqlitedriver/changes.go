package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

const changeColumns = `position, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, detail, due_at, seq`

func scanChange(rows *sql.Rows) (*hoppertype.Change, error) {
	var (
		ch                 hoppertype.Change
		kind, prev, fields sql.NullString
		errJSON, stuckJSON sql.NullString
		detail             sql.NullString
		at                 int64
		due                sql.NullInt64
	)
	if err := rows.Scan(&ch.Position, &kind, &ch.EntityID, &ch.Type, &ch.Queue, &prev, &ch.State, &ch.Attempt,
		&ch.Worker, &fields, &errJSON, &stuckJSON, &at, &detail, &due, &ch.Seq); err != nil {
		return nil, err
	}
	ch.Detail = detail.String
	ch.Tx = ch.Position
	ch.Kind, ch.Prev = hoppertype.ChangeKind(kind.String), prev.String
	if fields.String != "" {
		ch.Fields = strings.Split(fields.String, ",")
	}
	ch.At = fromMicrosNN(at)
	if due.Valid {
		ch.DueAt = fromMicrosNN(due.Int64)
	}
	if errJSON.Valid && errJSON.String != "" {
		e, err := hoppertype.UnmarshalErrorInfo([]byte(errJSON.String))
		if err != nil {
			return nil, fmt.Errorf("decode error of change %d: %w", ch.Position, err)
		}
		ch.Error = e
	}
	if stuckJSON.Valid && stuckJSON.String != "" {
		var s hoppertype.StuckInfo
		if err := json.Unmarshal([]byte(stuckJSON.String), &s); err != nil {
			return nil, fmt.Errorf("decode stuck info of change %d: %w", ch.Position, err)
		}
		ch.Stuck = &s
	}
	return &ch, nil
}

func (r *runner) changeList(ctx context.Context, p *driver.ChangeListParams) ([]*hoppertype.Change, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("list changes: limit must be > 0")
	}
	q, args := `SELECT `+changeColumns+` FROM changes WHERE position > ?1 ORDER BY position LIMIT ?2`, []any{p.After.Position, p.Limit}
	if p.EntityID != "" {
		q = `SELECT ` + changeColumns + ` FROM changes WHERE entity_id = ?3 AND position > ?1 ORDER BY position LIMIT ?2`
		args = append(args, p.EntityID)
	}
	out := []*hoppertype.Change{}
	err := r.each(ctx, q, func(rows *sql.Rows) error {
		ch, err := scanChange(rows)
		if err != nil {
			return err
		}
		out = append(out, ch)
		return nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	return out, nil
}

// ChangeList reads the change feed. The store has one writer, so inside a
// transaction the changes after its mark are its own, and every committed
// change is final. Outside a transaction, Own lists nothing.
func (t *executor) ChangeList(ctx context.Context, p *driver.ChangeListParams) ([]*hoppertype.Change, error) {
	if p.Own && t.r == nil {
		return nil, ctx.Err()
	}
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.changeList(ctx, p)
}

func (r *runner) changeListBefore(ctx context.Context, p *driver.ChangeListBeforeParams) ([]*hoppertype.Change, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("list changes before: limit must be > 0")
	}
	out := []*hoppertype.Change{}
	err := r.each(ctx, `SELECT `+changeColumns+` FROM changes WHERE position < ?1 ORDER BY position DESC LIMIT ?2`, func(rows *sql.Rows) error {
		ch, err := scanChange(rows)
		if err != nil {
			return err
		}
		out = append(out, ch)
		return nil
	}, p.Before.Position, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list changes before: %w", err)
	}
	return out, nil
}

// ChangeListBefore reads the feed backwards. The store has one writer, so
// every committed change is final.
func (t *executor) ChangeListBefore(ctx context.Context, p *driver.ChangeListBeforeParams) ([]*hoppertype.Change, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.changeListBefore(ctx, p)
}

// jsonOrNull is a JSON array of vs, or NULL when vs is empty (no filter).
func jsonOrNull[T ~string](vs []T) any {
	if len(vs) == 0 {
		return nil
	}
	return jsonList(vs)
}

func (r *runner) changeScan(ctx context.Context, p *driver.ChangeScanParams) (*driver.ChangeScanResult, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("scan changes: limit must be > 0")
	}
	out := &driver.ChangeScanResult{Changes: []*hoppertype.Change{}, Next: p.After}
	var last sql.NullInt64
	err := r.one(ctx, `SELECT max(position) FROM (SELECT position FROM changes WHERE position > ?1 ORDER BY position LIMIT ?2)`,
		func(rows *sql.Rows) error { return rows.Scan(&last) }, p.After.Position, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("scan changes: %w", err)
	}
	if !last.Valid {
		return out, nil
	}
	// One writer: every position up to last is committed already.
	err = r.each(ctx, `SELECT `+changeColumns+` FROM changes WHERE position > ?1 AND position <= ?2
	AND (?3 IS NULL OR kind IN (SELECT value FROM json_each(?3)))
	AND (?4 IS NULL OR type IN (SELECT value FROM json_each(?4)))
	AND (?5 IS NULL OR state IN (SELECT value FROM json_each(?5)))
	ORDER BY position`, func(rows *sql.Rows) error {
		ch, err := scanChange(rows)
		if err != nil {
			return err
		}
		out.Changes = append(out.Changes, ch)
		return nil
	}, p.After.Position, last.Int64, jsonOrNull(p.Kinds), jsonOrNull(p.Types), jsonOrNull(p.States))
	if err != nil {
		return nil, fmt.Errorf("scan changes: %w", err)
	}
	out.Next = hoppertype.ChangeCursor{Tx: last.Int64, Position: last.Int64}
	return out, nil
}

// ChangeScan reads the feed, returning what passes the filter.
func (t *executor) ChangeScan(ctx context.Context, p *driver.ChangeScanParams) (*driver.ChangeScanResult, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.changeScan(ctx, p)
}

func (r *runner) changeTail(ctx context.Context) (hoppertype.ChangeCursor, error) {
	var last sql.NullInt64
	if err := r.one(ctx, `SELECT max(position) FROM changes`, func(rows *sql.Rows) error { return rows.Scan(&last) }); err != nil {
		return hoppertype.ChangeCursor{}, fmt.Errorf("tail changes: %w", err)
	}
	return hoppertype.ChangeCursor{Tx: last.Int64, Position: last.Int64}, nil
}

// ChangeTail returns the last change's cursor.
func (t *executor) ChangeTail(ctx context.Context, _ *driver.ChangeTailParams) (hoppertype.ChangeCursor, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return hoppertype.ChangeCursor{}, err
	}
	return r.changeTail(ctx)
}

func (r *runner) changeMark(ctx context.Context) (int64, error) {
	var mark int64
	err := r.one(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0)`, func(rows *sql.Rows) error {
		return rows.Scan(&mark)
	})
	if err != nil {
		return 0, fmt.Errorf("mark changes: %w", err)
	}
	return mark, nil
}

// ChangeMark returns the last position handed out.
func (t *executor) ChangeMark(ctx context.Context, _ *driver.ChangeMarkParams) (int64, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return 0, err
	}
	return r.changeMark(ctx)
}

func scanCursor(rows *sql.Rows) (*driver.CursorRow, error) {
	var c driver.CursorRow
	var exp, upd sql.NullInt64
	if err := rows.Scan(&c.Name, &c.Owner, &exp, &c.At.Tx, &c.At.Position, &upd); err != nil {
		return nil, err
	}
	c.ExpiresAt, c.UpdatedAt = fromMicros(exp), fromMicros(upd)
	return &c, nil
}

const cursorColumns = `name, owner, expires_at, tx, position, updated_at`

// CursorLease takes or renews a feed cursor.
func (t *executor) CursorLease(ctx context.Context, p *driver.CursorLeaseParams) (*driver.CursorRow, error) {
	if t.r == nil {
		return call(ctx, t.d, func(ctx context.Context, t *executor) (*driver.CursorRow, error) { return t.CursorLease(ctx, p) })
	}
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	if p.Owner == "" || p.Name == "" {
		return nil, fmt.Errorf("lease cursor %q: empty name or owner", p.Name)
	}
	now := trunc(p.Now).UnixMicro()
	var out *driver.CursorRow
	err := t.r.one(ctx, `INSERT INTO feed_cursors (name, owner, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, updated_at = excluded.updated_at
		WHERE feed_cursors.owner = excluded.owner OR feed_cursors.owner = '' OR coalesce(feed_cursors.expires_at, 0) <= ?4
	RETURNING `+cursorColumns, func(rows *sql.Rows) error {
		var err error
		out, err = scanCursor(rows)
		return err
	}, p.Name, p.Owner, trunc(p.Now.Add(p.TTL)).UnixMicro(), now)
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lease cursor %q: %w", p.Name, err)
	}
	// Held by another owner: the upsert changed nothing and returned nothing.
	err = t.r.one(ctx, `SELECT `+cursorColumns+` FROM feed_cursors WHERE name = ?`, func(rows *sql.Rows) error {
		var err error
		out, err = scanCursor(rows)
		return err
	}, p.Name)
	if err != nil {
		return nil, fmt.Errorf("lease cursor %q: %w", p.Name, err)
	}
	return out, nil
}

// CursorAdvance moves a held cursor forward.
func (t *executor) CursorAdvance(ctx context.Context, p *driver.CursorAdvanceParams) error {
	if t.r == nil {
		return t.d.write(ctx, true, func(ctx context.Context, t *executor) error { return t.CursorAdvance(ctx, p) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	now := trunc(p.Now).UnixMicro()
	res, err := t.r.exec(ctx, `UPDATE feed_cursors SET
		tx = CASE WHEN ?3 > tx OR (?3 = tx AND ?4 > position) THEN ?3 ELSE tx END,
		position = CASE WHEN ?3 > tx OR (?3 = tx AND ?4 > position) THEN ?4 ELSE position END,
		expires_at = ?5, updated_at = ?6
	WHERE name = ?1 AND owner = ?2 AND expires_at > ?6`,
		p.Name, p.Owner, p.At.Tx, p.At.Position, trunc(p.Now.Add(p.TTL)).UnixMicro(), now)
	if err != nil {
		return fmt.Errorf("advance cursor %q: %w", p.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("advance cursor %q: %w", p.Name, err)
	} else if n == 0 {
		return fmt.Errorf("advance cursor %q: %w", p.Name, hoppertype.ErrLeaseLost)
	}
	return nil
}

func (r *runner) cursorList(ctx context.Context) ([]*driver.CursorRow, error) {
	out := []*driver.CursorRow{}
	err := r.each(ctx, `SELECT `+cursorColumns+` FROM feed_cursors ORDER BY name`, func(rows *sql.Rows) error {
		c, err := scanCursor(rows)
		if err != nil {
			return err
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list cursors: %w", err)
	}
	return out, nil
}

// CursorList returns the feed cursors by name.
func (t *executor) CursorList(ctx context.Context, _ *driver.CursorListParams) ([]*driver.CursorRow, error) {
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	return r.cursorList(ctx)
}
