package pgdriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hopper-go/hopper/driver"
)

// querier is what the driver runs statements on: the pool, or a transaction
// (pgx.Tx, which is also how savepoints and a caller's own transaction
// arrive).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// executor runs the driver's operations on a querier. The Driver's own
// executor runs on the pool (each operation atomic on its own); InTx hands
// out executors bound to a transaction.
type executor struct {
	d *Driver
	q querier
	// tx is the transaction the executor is bound to; nil on the pool.
	tx pgx.Tx
	// notes buffers the notifications of the top-level transaction; nil on
	// the pool and in a caller's transaction (JobInsertManyTx).
	notes *noteBuf
	// callerSQLTx marks an executor on a caller's *sql.Tx (tx is nil, but
	// the executor is inside a transaction all the same).
	callerSQLTx bool
}

var _ driver.Executor = (*executor)(nil)

// onPool says each of e's calls runs in a transaction of its own: e is in
// neither one of the driver's transactions nor a caller's.
func (e *executor) onPool() bool { return e.tx == nil && !e.callerSQLTx }

// check refuses work after Close or on a done context.
func (e *executor) check(ctx context.Context, op string) error {
	if e.d.closed.Load() {
		return driverClosed(op)
	}
	return ctx.Err()
}

// InTx runs fn in a transaction. On the pool it begins one at READ
// COMMITTED; on a transaction's executor it opens a savepoint. When fn
// returns an error (or panics) the transaction or savepoint is rolled back
// together with the notifications made in it; otherwise the notifications
// are sent, de-duplicated, just before the commit.
func (e *executor) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) (err error) {
	if err := e.check(ctx, "begin transaction"); err != nil {
		return err
	}
	if e.tx != nil {
		return e.savepoint(ctx, fn)
	}
	tx, err := e.d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return e.d.fail("begin transaction", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the transaction is abandoned either way
		}
	}()
	inner := &executor{d: e.d, q: tx, tx: tx, notes: &noteBuf{}}
	if err := fn(ctx, inner); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(ctx); err != nil {
		return e.d.fail("commit", err)
	}
	// Notifications go after the commit, in the background (see
	// postCommit).
	e.d.sendLater(inner.notes.notes)
	return nil
}

// savepoint runs fn in a nested scope of e's transaction.
func (e *executor) savepoint(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	sp, err := e.tx.Begin(ctx)
	if err != nil {
		return e.d.fail("savepoint", err)
	}
	mark := e.notes.mark()
	done := false
	defer func() {
		if !done {
			sp.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the outer transaction reports a broken connection
			e.notes.truncate(mark)
		}
	}()
	inner := &executor{d: e.d, q: sp, tx: sp, notes: e.notes}
	if err := fn(ctx, inner); err != nil {
		return err
	}
	done = true
	if err := sp.Commit(ctx); err != nil {
		e.notes.truncate(mark)
		return e.d.fail("release savepoint", err)
	}
	return nil
}

// Notify publishes Payload on Topic's channel. Inside a transaction the
// driver made it is buffered and sent just after the commit, once per
// distinct (topic, payload) (see postCommit); inside a caller's transaction
// it is sent in it; outside any it is sent at once, by this call or, when
// another send is on the wire, together with the next (postCommit again:
// many goroutines notifying at once share statements). The error is that
// of the send this call made, if it made one.
func (e *executor) Notify(ctx context.Context, params *driver.NotifyParams) error {
	if err := e.check(ctx, "notify"); err != nil {
		return err
	}
	if len(params.Payload) >= maxPayload {
		return fmt.Errorf("pgdriver: notify %s: payload of %d bytes exceeds PostgreSQL's limit of %d", params.Topic, len(params.Payload), maxPayload-1)
	}
	ch := e.d.channel(params.Topic)
	if e.notes != nil {
		e.notes.add(ch, params.Payload)
		return nil
	}
	if e.tx == nil {
		return e.d.fail("notify", e.d.sendNow(ctx, []note{{channel: ch, payload: params.Payload}}))
	}
	_, err := e.q.Exec(ctx, e.d.q.notify, ch, params.Payload)
	return e.d.fail("notify", err)
}

// maxPayload bounds a NOTIFY payload (PostgreSQL's limit is 8000 bytes).
const maxPayload = 8000

// maxChannel is the longest channel name PostgreSQL keeps (NAMEDATALEN-1).
const maxChannel = 63

// channel is the notification channel of a topic: the schema, a colon and
// the topic, so two schemas in one database never hear each other. A name
// too long for PostgreSQL is replaced by a digest of it.
func (d *Driver) channel(topic string) string {
	ch := d.schema + ":" + topic
	if len(ch) <= maxChannel {
		return ch
	}
	sum := sha256.Sum256([]byte(ch))
	return d.schema + ":#" + hex.EncodeToString(sum[:])[:maxChannel-len(d.schema)-2]
}

// note is one buffered notification.
type note struct {
	channel, payload string
}

// noteBuf holds a transaction's notifications in order, without duplicates.
type noteBuf struct {
	notes []note
	seen  map[note]struct{}
}

func (b *noteBuf) add(channel, payload string) {
	n := note{channel, payload}
	if _, ok := b.seen[n]; ok {
		return
	}
	if b.seen == nil {
		b.seen = make(map[note]struct{})
	}
	b.seen[n] = struct{}{}
	b.notes = append(b.notes, n)
}

// mark returns a position to truncate back to; a nil buffer has none.
func (b *noteBuf) mark() int {
	if b == nil {
		return 0
	}
	return len(b.notes)
}

// truncate drops the notifications added after mark.
func (b *noteBuf) truncate(mark int) {
	if b == nil {
		return
	}
	for _, n := range b.notes[mark:] {
		delete(b.seen, n)
	}
	b.notes = b.notes[:mark]
}

// flush sends the buffered notifications in one statement.
func (b *noteBuf) flush(ctx context.Context, q querier, sql string) error {
	if len(b.notes) == 0 {
		return nil
	}
	chans := make([]string, len(b.notes))
	payloads := make([]string, len(b.notes))
	for i, n := range b.notes {
		chans[i], payloads[i] = n.channel, n.payload
	}
	_, err := q.Exec(ctx, sql, chans, payloads)
	return err
}

// withTx runs fn in a transaction: e's own when it has one, else a new one
// at READ COMMITTED that commits when fn returns nil.
func (e *executor) withTx(ctx context.Context, fn func(tx *executor) error) error {
	if e.tx != nil || e.callerSQLTx {
		return fn(e)
	}
	tx, err := e.d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(&executor{d: e.d, q: tx, tx: tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// sendAtomic sends the statements of b as one transaction in one round trip
// and calls read to consume their results in order. On the pool it wraps
// them in BEGIN ISOLATION LEVEL READ COMMITTED … COMMIT on one connection;
// in a transaction it pipelines them into it.
func (e *executor) sendAtomic(ctx context.Context, b *pgx.Batch, read func(br pgx.BatchResults) error) error {
	if e.tx != nil {
		br := e.q.SendBatch(ctx, b)
		err := read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	}
	conn, err := e.d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	full := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+2)}
	full.Queue(sqlBegin)
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	full.Queue(sqlCommit)
	br := conn.SendBatch(ctx, full)
	_, err = br.Exec()
	if err == nil {
		err = read(br)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		pc := conn.Conn().PgConn()
		if !pc.IsClosed() && pc.TxStatus() != 'I' {
			// Leave the connection idle for the pool rather than have it
			// destroyed for an open transaction.
			conn.Exec(context.WithoutCancel(ctx), sqlRollback) //nolint:errcheck // the pool drops a broken connection
		}
	}
	return err
}

// Transaction control for sendAtomic.
const (
	// sqlClaimPlan holds a claim to its index (see JobClaim), for the
	// claim's own transaction only, and keeps its statements on their
	// generic plans (see sqlGenericOn).
	sqlClaimPlan = "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), " +
		"set_config('plan_cache_mode', 'force_generic_plan', true)"
	// sqlGenericOn and sqlGenericOff put the statements between them on
	// their generic plans, planned to look each row up by its key, in any
	// transaction: the first keeps the transaction's settings aside, the
	// second gives them back.
	//
	// PostgreSQL plans a prepared statement anew at each of its first five
	// runs on a connection, then keeps the generic plan only when it does
	// not look dearer than those custom plans. The hot statements whose
	// generic plan is the one they want anyway would otherwise be planned
	// at every call: a statement of arrays (a finish of several jobs, its
	// generic plan guessing 100 rows per array), or a claim (one statement
	// per LIMIT, and a short benchmark's claims are mostly first runs).
	// Planning cost as much as a small claim.
	//
	// The statements so wrapped find their rows by key, a few among many
	// (a finish's jobs, a history append's runs and events). A connection
	// keeps a generic plan until the table's statistics change: one made
	// while the table was small (a new schema; no statistics until
	// autovacuum's first analyze) hashed the whole table with a sequential
	// scan, and kept doing so at every call as the table grew, so a run of
	// thousands of workflows slowed as it went. With sequential scans and
	// hash and merge joins off while they are planned, the only plan left
	// is a nested loop over the arrays, each row by its index.
	sqlGenericOn = "SELECT set_config('hopper.plan_cache_mode', current_setting('plan_cache_mode'), true), " +
		"set_config('hopper.enable_seqscan', current_setting('enable_seqscan'), true), " +
		"set_config('hopper.enable_hashjoin', current_setting('enable_hashjoin'), true), " +
		"set_config('hopper.enable_mergejoin', current_setting('enable_mergejoin'), true)"
	sqlGenericOn2 = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), " +
		"set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"
	sqlGenericOff = "SELECT set_config('plan_cache_mode', current_setting('hopper.plan_cache_mode'), true), " +
		"set_config('enable_seqscan', current_setting('hopper.enable_seqscan'), true), " +
		"set_config('enable_hashjoin', current_setting('hopper.enable_hashjoin'), true), " +
		"set_config('enable_mergejoin', current_setting('hopper.enable_mergejoin'), true)"
	sqlBegin    = "BEGIN ISOLATION LEVEL READ COMMITTED"
	sqlCommit   = "COMMIT"
	sqlRollback = "ROLLBACK"
)

// withClaimPlan queues sqlClaimPlan ahead of the statements of b when e is
// not in a transaction (sendAtomic then makes it the claim's own), and
// reports whether it did: the reader skips its result first. A statement in
// a caller's transaction leaves the caller's settings alone.
func (e *executor) withClaimPlan(b *pgx.Batch) bool {
	if !e.onPool() {
		return false
	}
	b.Queue(sqlClaimPlan)
	return true
}

// queueGeneric queues the statements queue adds to b on their generic plans,
// which look each row up by its key (see sqlGenericOn); the reader skips
// two results before them and one after.
func queueGeneric(b *pgx.Batch, queue func()) {
	b.Queue(sqlGenericOn)
	b.Queue(sqlGenericOn2)
	queue()
	b.Queue(sqlGenericOff)
}

// queryGeneric runs one query on its generic plan, by key (see
// queueGeneric), and hands its rows to read, which consumes them.
//
// On the pool the batch is one implicit transaction, which ends the
// settings with it: one statement sets them, and none gives them back.
func (e *executor) queryGeneric(ctx context.Context, read func(pgx.Rows) error, sql string, args ...any) error {
	b := &pgx.Batch{}
	before, after := 2, 1
	if e.onPool() {
		b.Queue(sqlGenericOn2) // nothing kept aside: the settings end with the batch
		b.Queue(sql, args...)
		before, after = 1, 0
	} else {
		queueGeneric(b, func() { b.Queue(sql, args...) })
	}
	br := e.q.SendBatch(ctx, b)
	err := func() error {
		if err := skip(br, before); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if err := read(rows); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return skip(br, after)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// skip consumes n results of br that carry nothing to read.
func skip(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}
