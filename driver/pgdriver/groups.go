package pgdriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// GroupInsert stores a new group; an existing id is hoppertype.ErrDuplicateID
// (and, unlike a failed INSERT, leaves a surrounding transaction usable).
func (e *executor) GroupInsert(ctx context.Context, params *driver.GroupInsertParams) error {
	row := params.Row
	if err := e.check(ctx, "insert group"); err != nil {
		return err
	}
	tag, err := e.q.Exec(ctx, e.d.q.groupInsert, row.ID, row.Open, string(row.State), row.ValueSet, row.Final,
		ts(row.CreatedAt), ts(row.SettledAt), row.Value)
	if err != nil {
		return e.d.fail(fmt.Sprintf("insert group %q", row.ID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgdriver: insert group %q: %w", row.ID, hoppertype.ErrDuplicateID)
	}
	return nil
}

// scanGroup reads id, open, state, value_set, final, created_at, settled_at
// and value.
func scanGroup(row pgx.Row) (*hoppertype.GroupRow, error) {
	var g hoppertype.GroupRow
	var state string
	var created, settled pgtype.Timestamptz
	if err := row.Scan(&g.ID, &g.Open, &state, &g.ValueSet, &g.Final, &created, &settled, &g.Value); err != nil {
		return nil, err
	}
	g.State = hoppertype.GroupState(state)
	g.CreatedAt, g.SettledAt = fromTS(created), fromTS(settled)
	return &g, nil
}

// GroupGet returns a group or hoppertype.ErrNotFound.
func (e *executor) GroupGet(ctx context.Context, params *driver.GroupGetParams) (*hoppertype.GroupRow, error) {
	if err := e.check(ctx, "get group"); err != nil {
		return nil, err
	}
	g, err := scanGroup(e.q.QueryRow(ctx, e.d.q.groupGet, params.ID))
	if err != nil {
		return nil, e.d.fail(fmt.Sprintf("get group %q", params.ID), err)
	}
	return g, nil
}

// GroupUpdate changes a group atomically: it locks the row (SELECT … FOR
// UPDATE), calls Fold in Go while it holds the lock when there is one, then
// writes the new value, counter and state in one UPDATE. Without a Fold the
// lock and the update go in one round trip.
func (e *executor) GroupUpdate(ctx context.Context, p *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	if err := e.check(ctx, "update group"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("update group %q", p.ID)
	var res *driver.GroupUpdateResult
	var err error
	if p.Fold == nil {
		b := &pgx.Batch{}
		b.Queue(e.d.q.groupLock, p.ID)
		b.Queue(e.d.q.groupUpdate, p.ID, p.Contribute, p.Value, p.Final, p.OpenDelta, ts(p.Now))
		err = e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
			var old lockedGroup
			if err := old.scan(br.QueryRow()); err != nil {
				return err
			}
			g, err := scanGroup(br.QueryRow())
			if err != nil {
				return err
			}
			res = old.result(g)
			return nil
		})
	} else {
		err = e.withTx(ctx, func(tx *executor) error {
			var old lockedGroup
			if err := old.scan(tx.q.QueryRow(ctx, e.d.q.groupLock, p.ID)); err != nil {
				return err
			}
			value := p.Value
			if p.Contribute && !old.final {
				var err error
				if value, err = p.Fold(old.value, old.valueSet); err != nil {
					return &foldError{err}
				}
			}
			g, err := scanGroup(tx.q.QueryRow(ctx, e.d.q.groupUpdate, p.ID, p.Contribute, value, p.Final, p.OpenDelta, ts(p.Now)))
			if err != nil {
				return err
			}
			res = old.result(g)
			return nil
		})
	}
	if fe := (*foldError)(nil); errors.As(err, &fe) {
		return nil, fmt.Errorf("pgdriver: %s: fold: %w", op, fe.err)
	}
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	return res, nil
}

// foldError carries an error of a Fold function through the transaction.
type foldError struct{ err error }

// Error returns the fold's error message.
func (f *foldError) Error() string { return f.err.Error() }

// Unwrap returns the fold's error.
func (f *foldError) Unwrap() error { return f.err }

// lockedGroup is a group row as GroupUpdate locked it.
type lockedGroup struct {
	state           string
	final, valueSet bool
	value           []byte
}

func (l *lockedGroup) scan(row pgx.Row) error {
	return row.Scan(&l.state, &l.final, &l.valueSet, &l.value)
}

// result reports the updated group g; it settled if this update moved it
// to settled.
func (l *lockedGroup) result(g *hoppertype.GroupRow) *driver.GroupUpdateResult {
	settled := l.state != string(hoppertype.GroupSettled) && g.State == hoppertype.GroupSettled
	return &driver.GroupUpdateResult{Group: g, Settled: settled}
}

// KeySetIfAbsent stores the key unless it exists and has not expired, in one
// upsert; see driver.Executor.
func (e *executor) KeySetIfAbsent(ctx context.Context, p *driver.KeySetIfAbsentParams) (bool, error) {
	if err := e.check(ctx, "set key"); err != nil {
		return false, err
	}
	var stored bool
	err := e.q.QueryRow(ctx, e.d.q.keySet, p.Key, p.Now, ts(p.ExpiresAt), p.Value).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, e.d.fail(fmt.Sprintf("set key %q", p.Key), err)
	}
	return stored, nil
}

// scanLeader reads name, owner, term and expires_at.
func scanLeader(row pgx.Row) (*driver.LeaderRow, error) {
	var l driver.LeaderRow
	var expires pgtype.Timestamptz
	if err := row.Scan(&l.Name, &l.Owner, &l.Term, &expires); err != nil {
		return nil, err
	}
	l.ExpiresAt = fromTS(expires)
	return &l, nil
}

// LeaderAttempt takes or renews the leadership in one upsert (free, expired
// or already Owner's: take it, with a new term when the owner changes) and
// reads the holder in the same round trip when the upsert did not apply.
func (e *executor) LeaderAttempt(ctx context.Context, p *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	if err := e.check(ctx, "attempt leadership"); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("attempt leadership %q", p.Name)
	if p.Owner == "" {
		return nil, fmt.Errorf("pgdriver: %s: empty owner", op)
	}
	b := &pgx.Batch{}
	b.Queue(e.d.q.leaderAttempt, p.Name, p.Owner, p.Now.Add(p.TTL), p.Now)
	b.Queue(e.d.q.leaderGet, p.Name)
	var row *driver.LeaderRow
	err := e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
		took, err := scanLeader(br.QueryRow())
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		cur, err := scanLeader(br.QueryRow())
		if took != nil {
			row = took
			return nil
		}
		row = cur
		return err
	})
	if err != nil {
		return nil, e.d.fail(op, err)
	}
	return row, nil
}

// LeaderResign gives the leadership up if Owner holds it. The row stays,
// with no owner and no expiry, so the next holder's term is higher.
func (e *executor) LeaderResign(ctx context.Context, p *driver.LeaderResignParams) error {
	if err := e.check(ctx, "resign leadership"); err != nil {
		return err
	}
	_, err := e.q.Exec(ctx, e.d.q.leaderResign, p.Name, p.Owner)
	return e.d.fail(fmt.Sprintf("resign leadership %q", p.Name), err)
}

// QueueSetPaused stores whether a queue is paused.
func (e *executor) QueueSetPaused(ctx context.Context, p *driver.QueueSetPausedParams) error {
	if err := e.check(ctx, "pause queue"); err != nil {
		return err
	}
	_, err := e.q.Exec(ctx, e.d.q.queueSet, p.Name, p.Paused, ts(p.Now))
	return e.d.fail(fmt.Sprintf("pause queue %q", p.Name), err)
}

// QueueList returns the stored queue states by name.
func (e *executor) QueueList(ctx context.Context, _ *driver.QueueListParams) ([]*driver.QueueRow, error) {
	if err := e.check(ctx, "list queues"); err != nil {
		return nil, err
	}
	rows, err := e.q.Query(ctx, e.d.q.queueList)
	if err != nil {
		return nil, e.d.fail("list queues", err)
	}
	out := []*driver.QueueRow{}
	var name string
	var paused bool
	var updated pgtype.Timestamptz
	if _, err := pgx.ForEachRow(rows, []any{&name, &paused, &updated}, func() error {
		out = append(out, &driver.QueueRow{Name: name, Paused: paused, UpdatedAt: fromTS(updated)})
		return nil
	}); err != nil {
		return nil, e.d.fail("list queues", err)
	}
	return out, nil
}

// KeyDeleteExpired deletes keys that expired before p.Before, at most
// p.Limit; see driver.Executor.
func (e *executor) KeyDeleteExpired(ctx context.Context, p *driver.KeyDeleteExpiredParams) (int, error) {
	if err := e.check(ctx, "delete expired keys"); err != nil {
		return 0, err
	}
	tag, err := e.q.Exec(ctx, e.d.q.keyDeleteExpired, ts(p.Before), limitArg(p.Limit))
	if err != nil {
		return 0, e.d.fail("delete expired keys", err)
	}
	return int(tag.RowsAffected()), nil
}
