package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// changeColumns are a change's columns; tx is read as a bigint under
// another name, so that ORDER BY tx means the column (and its index).
const changeColumns = `tx::text::bigint AS tx_key, position, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, detail, due_at, seq`

func collectChanges(rows pgx.Rows, err error) ([]*hoppertype.Change, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*hoppertype.Change{}
	for rows.Next() {
		var (
			ch             hoppertype.Change
			kind, fields   string
			prev, detail   pgtype.Text
			errInfo, stuck []byte
			at             time.Time
			due            pgtype.Timestamptz
		)
		if err := rows.Scan(&ch.Tx, &ch.Position, &kind, &ch.EntityID, &ch.Type, &ch.Queue, &prev, &ch.State, &ch.Attempt,
			&ch.Worker, &fields, &errInfo, &stuck, &at, &detail, &due, &ch.Seq); err != nil {
			return nil, err
		}
		ch.Kind, ch.Prev, ch.At, ch.Detail = hoppertype.ChangeKind(kind), prev.String, fromTime(at), detail.String
		if due.Valid {
			ch.DueAt = fromTime(due.Time)
		}
		if fields != "" {
			ch.Fields = strings.Split(fields, ",")
		}
		var err error
		if ch.Error, err = hoppertype.UnmarshalErrorInfo(errInfo); err != nil {
			return nil, fmt.Errorf("change %d: decode error: %w", ch.Position, err)
		}
		if ch.Stuck, err = unmarshalStuck(stuck); err != nil {
			return nil, fmt.Errorf("change %d: decode stuck: %w", ch.Position, err)
		}
		out = append(out, &ch)
	}
	return out, rows.Err()
}

// ChangeList reads the change feed; see driver.Executor. The feed lists
// only changes of transactions older than every transaction still running
// (see the schema's version 6): those are final.
func (e *executor) ChangeList(ctx context.Context, p *driver.ChangeListParams) ([]*hoppertype.Change, error) {
	if err := e.check(ctx, "list changes"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: list changes: limit must be > 0")
	}
	q, args := e.d.q.changeFeed, []any{p.After.Position, p.Limit, p.After.Tx}
	switch {
	case p.EntityID != "":
		q, args[2] = e.d.q.changeEntity, p.EntityID
	case p.Own:
		if e.tx == nil && !e.callerSQLTx {
			return []*hoppertype.Change{}, nil
		}
		q, args = e.d.q.changeOwn, args[:2]
	}
	out, err := collectChanges(e.q.Query(ctx, q, args...))
	if err != nil {
		return nil, e.d.fail("list changes", err)
	}
	return out, nil
}

// ChangeListBefore reads the feed backwards; see driver.Executor. Like
// ChangeList, it lists only final changes.
func (e *executor) ChangeListBefore(ctx context.Context, p *driver.ChangeListBeforeParams) ([]*hoppertype.Change, error) {
	if err := e.check(ctx, "list changes before"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: list changes before: limit must be > 0")
	}
	out, err := collectChanges(e.q.Query(ctx, e.d.q.changeBefore, p.Before.Tx, p.Before.Position, p.Limit))
	if err != nil {
		return nil, e.d.fail("list changes before", err)
	}
	return out, nil
}

// textArray is a filter argument: NULL (no filter) for an empty list.
func textArray[T ~string](vs []T) any {
	if len(vs) == 0 {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// ChangeScan reads the feed, returning what passes the filter; see
// driver.Executor. It finds the last of the next Limit final changes, then
// reads the range up to it with the filter: every change in that range is
// final, so the second read sees them all.
func (e *executor) ChangeScan(ctx context.Context, p *driver.ChangeScanParams) (*driver.ChangeScanResult, error) {
	if err := e.check(ctx, "scan changes"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, errors.New("pgdriver: scan changes: limit must be > 0")
	}
	out := &driver.ChangeScanResult{Changes: []*hoppertype.Change{}, Next: p.After}
	if len(p.States) > 0 && !slices.ContainsFunc(p.States, func(s string) bool { return s != string(hoppertype.JobStateStuck) }) {
		return e.scanStuck(ctx, p, out)
	}
	var last hoppertype.ChangeCursor
	err := e.q.QueryRow(ctx, e.d.q.changeScanLast, p.After.Position, p.Limit, p.After.Tx).Scan(&last.Tx, &last.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	} else if err != nil {
		return nil, e.d.fail("scan changes", err)
	}
	chs, err := collectChanges(e.q.Query(ctx, e.d.q.changeScanRange, p.After.Tx, p.After.Position, last.Tx, last.Position,
		textArray(p.Kinds), textArray(p.Types), textArray(p.States), p.Limit))
	if err != nil {
		return nil, e.d.fail("scan changes", err)
	}
	out.Changes, out.Next = chs, last
	return out, nil
}

// scanStuck is ChangeScan for stuck changes only: it reads them from
// changes_stuck up to the feed's last final change, so a reader that wants
// them alone (the retry observer) skips every other change without reading
// it. Next is the last stuck change returned when Limit of them came, the
// last final change otherwise: every change up to it is final, so none
// that passes the filter can still appear before it.
func (e *executor) scanStuck(ctx context.Context, p *driver.ChangeScanParams, out *driver.ChangeScanResult) (*driver.ChangeScanResult, error) {
	tail, err := e.ChangeTail(ctx, &driver.ChangeTailParams{})
	if err != nil {
		return nil, err
	}
	if !p.After.Before(&hoppertype.Change{Tx: tail.Tx, Position: tail.Position}) {
		return out, nil
	}
	chs, err := collectChanges(e.q.Query(ctx, e.d.q.changeScanStuck, p.After.Tx, p.After.Position, tail.Tx, tail.Position,
		textArray(p.Kinds), textArray(p.Types), p.Limit))
	if err != nil {
		return nil, e.d.fail("scan changes", err)
	}
	out.Changes, out.Next = chs, tail
	if len(chs) == p.Limit {
		out.Next = hoppertype.CursorOf(chs[len(chs)-1])
	}
	return out, nil
}

// ChangeTail returns the last final change's cursor; see driver.Executor.
func (e *executor) ChangeTail(ctx context.Context, _ *driver.ChangeTailParams) (hoppertype.ChangeCursor, error) {
	if err := e.check(ctx, "tail changes"); err != nil {
		return hoppertype.ChangeCursor{}, err
	}
	var c hoppertype.ChangeCursor
	err := e.q.QueryRow(ctx, e.d.q.changeTail).Scan(&c.Tx, &c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return hoppertype.ChangeCursor{}, nil
	} else if err != nil {
		return hoppertype.ChangeCursor{}, e.d.fail("tail changes", err)
	}
	return c, nil
}

// ChangeMark returns 0: a transaction's own changes are told apart by its
// transaction id, so any mark will do.
func (e *executor) ChangeMark(ctx context.Context, _ *driver.ChangeMarkParams) (int64, error) {
	return 0, e.check(ctx, "mark changes")
}

const cursorColumns = `name, owner, expires_at, tx, position, updated_at`

func scanCursor(row pgx.Row) (*driver.CursorRow, error) {
	var c driver.CursorRow
	var exp, upd pgtype.Timestamptz
	if err := row.Scan(&c.Name, &c.Owner, &exp, &c.At.Tx, &c.At.Position, &upd); err != nil {
		return nil, err
	}
	c.ExpiresAt, c.UpdatedAt = fromTS(exp), fromTS(upd)
	return &c, nil
}

// CursorLease takes or renews a feed cursor; see driver.Executor.
func (e *executor) CursorLease(ctx context.Context, p *driver.CursorLeaseParams) (*driver.CursorRow, error) {
	if err := e.check(ctx, "lease cursor"); err != nil {
		return nil, err
	}
	if p.Owner == "" || p.Name == "" {
		return nil, fmt.Errorf("pgdriver: lease cursor %q: empty name or owner", p.Name)
	}
	s := e.d.q.schema
	now := trunc(p.Now)
	c, err := scanCursor(e.q.QueryRow(ctx, `INSERT INTO `+s+`.feed_cursors AS f (name, owner, expires_at, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at
	WHERE f.owner = EXCLUDED.owner OR f.owner = '' OR coalesce(f.expires_at, '-infinity') <= $4
RETURNING `+cursorColumns, p.Name, p.Owner, trunc(p.Now.Add(p.TTL)), now))
	if errors.Is(err, pgx.ErrNoRows) {
		// Held by another owner: read it as it is.
		c, err = scanCursor(e.q.QueryRow(ctx, `SELECT `+cursorColumns+` FROM `+s+`.feed_cursors WHERE name = $1`, p.Name))
	}
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("lease cursor %q", p.Name), err)
	}
	return c, nil
}

// CursorAdvance moves a held cursor forward; see driver.Executor.
func (e *executor) CursorAdvance(ctx context.Context, p *driver.CursorAdvanceParams) error {
	if err := e.check(ctx, "advance cursor"); err != nil {
		return err
	}
	tag, err := e.q.Exec(ctx, `UPDATE `+e.d.q.schema+`.feed_cursors SET
	tx = CASE WHEN ($3::bigint, $4::bigint) > (tx, position) THEN $3 ELSE tx END,
	position = CASE WHEN ($3::bigint, $4::bigint) > (tx, position) THEN $4 ELSE position END,
	expires_at = $5, updated_at = $6
WHERE name = $1 AND owner = $2 AND expires_at > $6`,
		p.Name, p.Owner, p.At.Tx, p.At.Position, trunc(p.Now.Add(p.TTL)), trunc(p.Now))
	if err != nil {
		return e.d.fail(fmt.Sprintf("advance cursor %q", p.Name), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgdriver: advance cursor %q: %w", p.Name, hoppertype.ErrLeaseLost)
	}
	return nil
}

// CursorList returns the feed cursors by name; see driver.Executor.
func (e *executor) CursorList(ctx context.Context, _ *driver.CursorListParams) ([]*driver.CursorRow, error) {
	if err := e.check(ctx, "list cursors"); err != nil {
		return nil, err
	}
	rows, err := e.q.Query(ctx, `SELECT `+cursorColumns+` FROM `+e.d.q.schema+`.feed_cursors ORDER BY name`)
	if err != nil {
		return nil, e.d.fail("list cursors", err)
	}
	defer rows.Close()
	out := []*driver.CursorRow{}
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, e.d.fail("list cursors", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, e.d.fail("list cursors", err)
	}
	return out, nil
}
