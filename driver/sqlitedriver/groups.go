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

const (
	groupCols      = `id, open, state, value, value_set, final, created_at, settled_at`
	insertGroupSQL = `INSERT INTO groups (` + groupCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	getGroupSQL    = `SELECT ` + groupCols + ` FROM groups WHERE id = ?`
	updateGroupSQL = `UPDATE groups SET open = ?2, state = ?3, value = ?4, value_set = ?5, final = ?6,
	settled_at = ?7 WHERE id = ?1`

	// setKeySQL stores a key unless it is held: present and not expired at ?4.
	setKeySQL = `INSERT INTO keys (key, value, created_at, expires_at) VALUES (?1, ?2, ?4, ?3)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at,
	expires_at = excluded.expires_at
	WHERE keys.expires_at IS NOT NULL AND keys.expires_at < ?4`

	getLeaderSQL = `SELECT owner, term, expires_at FROM leaders WHERE name = ?`
	putLeaderSQL = `INSERT INTO leaders (name, owner, term, expires_at) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, term = excluded.term,
	expires_at = excluded.expires_at`
	resignSQL = `UPDATE leaders SET owner = '', expires_at = NULL WHERE name = ? AND owner = ? AND owner <> ''`

	putQueueSQL = `INSERT INTO queues (name, paused, updated_at) VALUES (?1, ?2, ?3)
	ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at`
	listQueuesSQL = `SELECT name, paused, updated_at FROM queues ORDER BY name`
)

// groupInsert stores a new group.
func (r *runner) groupInsert(ctx context.Context, g *hoppertype.GroupRow) error {
	_, err := r.exec(ctx, insertGroupSQL, g.ID, g.Open, string(g.State), g.Value, g.ValueSet, g.Final,
		micros(trunc(g.CreatedAt)), micros(trunc(g.SettledAt)))
	if isPrimaryKeyConflict(err) {
		return fmt.Errorf("insert group %q: %w", g.ID, hoppertype.ErrDuplicateID)
	}
	if err != nil {
		return fmt.Errorf("insert group %q: %w", g.ID, err)
	}
	return nil
}

// groupGet returns a group.
func (r *runner) groupGet(ctx context.Context, id string) (*hoppertype.GroupRow, error) {
	var g hoppertype.GroupRow
	err := r.one(ctx, getGroupSQL, func(rows *sql.Rows) error {
		var state string
		var created, settled sql.NullInt64
		if err := rows.Scan(&g.ID, &g.Open, &state, blob{&g.Value}, &g.ValueSet, &g.Final, &created, &settled); err != nil {
			return err
		}
		g.State = hoppertype.GroupState(state)
		g.CreatedAt = fromMicros(created)
		g.SettledAt = fromMicros(settled)
		return nil
	}, id)
	if err != nil {
		return nil, wrapErr(err, fmt.Sprintf("get group %q", id))
	}
	return &g, nil
}

// groupUpdate applies a contribution and an open delta. It runs in the
// writer's transaction, which holds the database's write lock, so Fold sees
// the latest value and no other update can interleave: folds are exact.
func (r *runner) groupUpdate(ctx context.Context, p *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	cur, err := r.groupGet(ctx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("update group %q: %w", p.ID, errors.Unwrap(err))
	}
	g := *cur
	if p.Contribute && !g.Final {
		v := p.Value
		if p.Fold != nil {
			existing := append([]byte(nil), cur.Value...)
			if v, err = p.Fold(existing, cur.ValueSet); err != nil {
				return nil, fmt.Errorf("update group %q: fold: %w", p.ID, err)
			}
		}
		g.Value = append([]byte(nil), v...)
		g.ValueSet = true
		if p.Final {
			g.Final = true
		}
	}
	g.Open += p.OpenDelta
	settled := false
	switch {
	case g.State != hoppertype.GroupSettled && p.OpenDelta < 0 && g.Open <= 0:
		g.State = hoppertype.GroupSettled
		g.SettledAt = trunc(p.Now)
		settled = true
	case g.State == hoppertype.GroupSettled && g.Open > 0:
		g.State = hoppertype.GroupOpen
		g.SettledAt = time.Time{}
	}
	if _, err := r.exec(ctx, updateGroupSQL, g.ID, g.Open, string(g.State), g.Value, g.ValueSet, g.Final,
		micros(g.SettledAt)); err != nil {
		return nil, fmt.Errorf("update group %q: %w", p.ID, err)
	}
	out := g
	out.Value = append([]byte(nil), g.Value...)
	return &driver.GroupUpdateResult{Group: &out, Settled: settled}, nil
}

// keySetIfAbsent stores the key unless it exists and has not expired.
func (r *runner) keySetIfAbsent(ctx context.Context, p *driver.KeySetIfAbsentParams) (bool, error) {
	value := p.Value
	if value == nil {
		value = []byte{}
	}
	res, err := r.exec(ctx, setKeySQL, p.Key, value, micros(trunc(p.ExpiresAt)), trunc(p.Now).UnixMicro())
	if err != nil {
		return false, fmt.Errorf("set key %q: %w", p.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("set key %q: %w", p.Key, err)
	}
	return n > 0, nil
}

// leaderAttempt takes the leadership when it is free or expired (a new term)
// or renews it for its holder (the same term), and returns the holder.
func (r *runner) leaderAttempt(ctx context.Context, p *driver.LeaderAttemptParams) (*driver.LeaderRow, error) {
	if p.Owner == "" {
		return nil, fmt.Errorf("attempt leadership %q: empty owner", p.Name)
	}
	now := trunc(p.Now)
	expires := trunc(p.Now.Add(p.TTL))
	var cur *driver.LeaderRow
	err := r.one(ctx, getLeaderSQL, func(rows *sql.Rows) error {
		c := driver.LeaderRow{Name: p.Name}
		var exp sql.NullInt64
		if err := rows.Scan(&c.Owner, &c.Term, &exp); err != nil {
			return err
		}
		c.ExpiresAt = fromMicros(exp)
		cur = &c
		return nil
	}, p.Name)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("attempt leadership %q: %w", p.Name, err)
	}
	next := &driver.LeaderRow{Name: p.Name, Owner: p.Owner, ExpiresAt: expires}
	switch {
	case cur == nil:
		next.Term = 1
	case cur.Owner == p.Owner:
		next.Term = cur.Term
	case cur.Owner == "" || !cur.ExpiresAt.After(now):
		next.Term = cur.Term + 1
	default:
		return cur, nil
	}
	if _, err := r.exec(ctx, putLeaderSQL, next.Name, next.Owner, next.Term, micros(next.ExpiresAt)); err != nil {
		return nil, fmt.Errorf("attempt leadership %q: %w", p.Name, err)
	}
	return next, nil
}

// leaderResign frees the leadership if Owner holds it. The term is kept, so
// the next holder's term is still higher.
func (r *runner) leaderResign(ctx context.Context, p *driver.LeaderResignParams) error {
	if _, err := r.exec(ctx, resignSQL, p.Name, p.Owner); err != nil {
		return fmt.Errorf("resign leadership %q: %w", p.Name, err)
	}
	return nil
}

// queueSetPaused stores the queue's paused flag.
func (r *runner) queueSetPaused(ctx context.Context, p *driver.QueueSetPausedParams) error {
	if _, err := r.exec(ctx, putQueueSQL, p.Name, p.Paused, micros(trunc(p.Now))); err != nil {
		return fmt.Errorf("set queue %q paused: %w", p.Name, err)
	}
	return nil
}

// queueList returns the stored queue rows ordered by name.
func (r *runner) queueList(ctx context.Context) ([]*driver.QueueRow, error) {
	out := []*driver.QueueRow{}
	err := r.each(ctx, listQueuesSQL, func(rows *sql.Rows) error {
		var q driver.QueueRow
		var updated sql.NullInt64
		if err := rows.Scan(&q.Name, &q.Paused, &updated); err != nil {
			return err
		}
		q.UpdatedAt = fromMicros(updated)
		out = append(out, &q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}

// keyDeleteExpired deletes keys that expired before p.Before, at most
// p.Limit.
func (r *runner) keyDeleteExpired(ctx context.Context, p *driver.KeyDeleteExpiredParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	res, err := r.exec(ctx, `DELETE FROM keys WHERE key IN (SELECT key FROM keys WHERE expires_at IS NOT NULL AND expires_at < ? ORDER BY expires_at LIMIT ?)`,
		trunc(p.Before).UnixMicro(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired keys: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
