package sqlitedriver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// request states, advanced with compare-and-swap: the writer moves a queued
// request to running before it runs it; a caller whose context ends while
// the request is still queued moves it to abandoned and returns at once.
const (
	reqQueued int32 = iota
	reqRunning
	reqAbandoned
)

// request is one top-level call queued to the writer.
type request struct {
	ctx    context.Context
	fn     func(ctx context.Context, t *executor) error
	single bool // fn is one Driver operation, atomic by its own savepoint
	// lax marks a call whose commit need not reach the disk before it is
	// answered (a claim): see runBatch.
	lax   bool
	state atomic.Int32
	// retried is set once the request was queued again after its batch's
	// transaction was lost; it is not retried twice.
	retried bool

	// Set by the writer before done is closed.
	err      error
	panicVal any
	notes    []note
	done     chan struct{}
}

// writer owns the write connection. One goroutine (loop) runs every write
// transaction; callers queue requests and wait for their answer.
type writer struct {
	d *Driver

	mu     sync.Mutex
	queue  []*request // guarded by mu
	closed bool       // guarded by mu
	// changed, once asked for (queueChanged), is closed at the queue's
	// next change; guarded by mu.
	changed chan struct{}
	wake    chan struct{}
	quit    chan struct{}
	exited  chan struct{}

	// stmts holds statements prepared on the write handle, by query text.
	// Only the writer goroutine uses it until closeStmts.
	stmts map[string]*sql.Stmt

	// lastDataVersion is the write connection's last PRAGMA data_version;
	// foreignAt is when it last showed another connection's commit.
	lastDataVersion int64
	foreignAt       time.Time

	// batches counts the write transactions begun (for tests and stats);
	// laxBatches those of them committed without a sync.
	batches    atomic.Int64
	laxBatches atomic.Int64
}

func newWriter(d *Driver) *writer {
	return &writer{
		d:      d,
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
		stmts:  make(map[string]*sql.Stmt),
	}
}

// inWriterKey marks the context handed to functions running in the writer,
// or in a transaction on the write connection the writer waits for
// (AppTx.Bind), so a write called on the Driver from inside one fails
// instead of deadlocking.
type inWriterKey struct{}

// errReentrant is returned for a write called on the Driver from a function
// already running in the writer, or in a transaction the writer waits for.
var errReentrant = errors.New("sqlitedriver: write called on the Driver from inside a transaction it would wait for (InTx, or a transaction on DB()): write through the transaction")

// do queues fn as one top-level call and waits for the commit that includes
// it. It re-panics in the caller when fn panicked.
func (w *writer) do(ctx context.Context, single, lax bool, fn func(ctx context.Context, t *executor) error) error {
	if v, _ := ctx.Value(inWriterKey{}).(*Driver); v == w.d {
		return errReentrant
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{ctx: ctx, fn: fn, single: single, lax: lax, done: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return driver.ErrClosed
	}
	w.queue = append(w.queue, r)
	w.queueChangedLocked()
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
		<-r.done // already running: its outcome is the answer
	}
	if r.panicVal != nil {
		panic(r.panicVal)
	}
	return r.err
}

// queueChanged returns a channel closed the next time a request joins or
// leaves the queue: what a test waits on for calls to queue up behind a
// writer it holds.
func (w *writer) queueChanged() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// queueChangedLocked closes the channel queueChanged handed out, if any.
func (w *writer) queueChangedLocked() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// queued returns how many requests wait for the writer.
func (w *writer) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// take removes and returns up to maxBatch queued requests.
func (w *writer) take() (reqs []*request, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.queue), maxBatch)
	if n == 0 {
		return nil, w.closed
	}
	reqs = make([]*request, n)
	copy(reqs, w.queue)
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	w.queueChangedLocked()
	return reqs, w.closed
}

// loop is the writer goroutine. It never holds a transaction while it waits
// for work.
func (w *writer) loop() {
	defer close(w.exited)
	w.prepareHot()
	w.lastDataVersion, _ = w.dataVersion()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var busySince time.Time // start of the current run of back-to-back batches
	for {
		if !busySince.IsZero() && w.hogging(busySince) {
			time.Sleep(hogPause)
			busySince = time.Now()
		}
		reqs, closed := w.take()
		if len(reqs) > 0 {
			if busySince.IsZero() {
				busySince = time.Now()
			}
			w.runBatch(reqs)
			w.checkDataVersion()
			continue
		}
		busySince = time.Time{}
		if closed {
			return
		}
		select {
		case <-w.wake:
		case <-ticker.C:
			w.checkDataVersion()
		case <-w.quit:
		}
	}
}

// Another process's writer waiting for the file's write lock retries every
// millisecond or two (see begin); SQLite keeps no queue, so a writer with
// batches always waiting could starve it past its busy timeout. A writer
// that has run batches back to back for hogLimit, while another connection
// has committed to the file within foreignWindow, leaves the lock free for
// hogPause before its next batch. A process alone on its file never pauses.
const (
	hogLimit      = 100 * time.Millisecond
	hogPause      = 5 * time.Millisecond
	foreignWindow = 10 * time.Second
)

// hogging reports whether the writer, busy since busySince, should leave
// the lock to another process for a moment.
func (w *writer) hogging(busySince time.Time) bool {
	now := time.Now()
	return now.Sub(busySince) >= hogLimit && !w.foreignAt.IsZero() && now.Sub(w.foreignAt) < foreignWindow
}

// close refuses new requests, lets the writer finish the queued ones and
// waits for it to exit.
func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	<-w.exited
}

// closeStmts closes the statements prepared on the write handle; the writer
// goroutine has exited.
func (w *writer) closeStmts() {
	for _, s := range w.stmts {
		s.Close()
	}
	w.stmts = nil
}

// stmt returns query prepared on the write handle, preparing it once. It
// must not be called while the writer holds a transaction: preparing on the
// handle needs its only connection.
func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s := w.stmts[query]; s != nil {
		return s, nil
	}
	s, err := w.d.wdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = s
	return s, nil
}

// prepareHot prepares the hot statements on the write connection, once,
// before the first batch. A statement that does not prepare (a database
// opened with NoMigrate has no tables yet) is left to run unprepared.
func (w *writer) prepareHot() {
	for q := range hotStatements {
		w.stmt(context.Background(), q)
	}
}

// dataVersion reads PRAGMA data_version on the write connection. It changes
// only when another connection commits, never for the writer's own commits.
func (w *writer) dataVersion() (int64, error) {
	s, err := w.stmt(context.Background(), "PRAGMA data_version")
	if err != nil {
		return 0, err
	}
	var v int64
	err = s.QueryRowContext(context.Background()).Scan(&v)
	return v, err
}

// checkDataVersion announces, with empty payloads, changes committed by
// other connections (other processes, other Drivers, a caller's own
// *sql.DB). It does nothing while no one listens.
func (w *writer) checkDataVersion() {
	if !w.d.hub.hasSubscribers() {
		return
	}
	v, err := w.dataVersion()
	if err != nil {
		return
	}
	if v != w.lastDataVersion {
		w.lastDataVersion, w.foreignAt = v, time.Now()
		w.d.hub.publish([]note{
			{topic: driver.TopicJobAvailable},
			{topic: driver.TopicJobDone},
			{topic: driver.TopicGroupDone},
		})
	}
}

// batch is one write transaction of the writer.
type batch struct {
	w      *writer
	tx     *sql.Tx
	stmts  map[string]*sql.Stmt // tx-bound statements
	broken error                // set when the transaction can no longer commit
	// rollbacks is the write connection's rollback count at BEGIN: if it
	// moves, SQLite rolled the transaction back.
	rollbacks int64
}

// txGone reports whether the statement error err ended the transaction.
func (b *batch) txGone(err error) bool {
	if connGone(err) {
		return true
	}
	if !b.w.d.hooked.Load() {
		return abortsTx(err)
	}
	return b.w.d.rollbacks.Load() != b.rollbacks
}

// stmt returns query prepared for the batch's transaction, or nil when it
// was not prepared on the write handle before the batch began.
func (b *batch) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s := b.stmts[query]; s != nil {
		return s, nil
	}
	ps := b.w.stmts[query]
	if ps == nil {
		return nil, nil
	}
	s := b.tx.StmtContext(ctx, ps)
	b.stmts[query] = s
	return s, nil
}

// runBatch runs reqs in one transaction, each in its own savepoint, commits
// once, publishes the notifications of the calls that succeeded and answers
// every caller.
//
// When SQLite rolls the whole transaction back in the middle of a call (it
// does so after some disk-full, I/O and lock errors), that call fails and the
// batch's other calls, whose writes were lost with it, are queued again once
// for the next batch instead of failing for their neighbour's fault. When
// COMMIT fails, every call fails.
//
// A batch of lax calls only (claims), under synchronous=FULL, commits with
// synchronous=NORMAL: its commit is not synced. The write-ahead log is one
// file written in commit order, and the next synced commit syncs every frame
// before it, so what survives a power loss is always a prefix of the commits:
// a claim can be lost only together with everything committed after it.
// Losing a claim loses nothing a caller was promised (the job is pending
// again, its attempt not counted) and only a power loss or OS crash can do
// it, which also ends every process that saw the claim. An application crash
// loses nothing either way.
func (w *writer) runBatch(reqs []*request) {
	var requeue []*request
	defer func() {
		for _, r := range reqs {
			if !slices.Contains(requeue, r) {
				close(r.done)
			}
		}
		w.requeue(requeue)
	}()
	var ran []*request
	for _, r := range reqs {
		if r.state.CompareAndSwap(reqQueued, reqRunning) {
			ran = append(ran, r)
		}
	}
	if len(ran) == 0 {
		return
	}
	w.batches.Add(1)
	lax := w.d.opts.Synchronous == "FULL"
	for _, r := range ran {
		lax = lax && r.lax
	}
	conn, tx, err := w.begin(lax)
	if err != nil {
		err = fmt.Errorf("sqlitedriver: begin: %w", err)
		for _, r := range ran {
			r.err = err
		}
		return
	}
	defer w.release(conn, lax) // after the transaction ends
	b := &batch{w: w, tx: tx, stmts: make(map[string]*sql.Stmt), rollbacks: w.d.rollbacks.Load()}
	var culprit *request
	for _, r := range ran {
		if b.broken != nil {
			break
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		b.runCall(r)
		if b.broken != nil {
			culprit = r
		}
	}
	if b.broken != nil {
		tx.Rollback()
		for _, r := range ran {
			switch {
			case r == culprit:
				if r.err == nil && r.panicVal == nil {
					r.err = b.broken
				}
			case r.err != nil || r.panicVal != nil:
				// Failed on its own; its writes were undone either way.
			case r.retried:
				r.err = b.broken
			default:
				r.retried = true
				r.notes = nil
				requeue = append(requeue, r)
			}
		}
		return
	}
	if err := tx.Commit(); err != nil {
		err = fmt.Errorf("sqlitedriver: commit: %w", err)
		for _, r := range ran {
			if r.err == nil && r.panicVal == nil {
				r.err = err
			}
		}
		return
	}
	if lax {
		w.laxBatches.Add(1)
	}
	w.d.ckpt.kick()
	var notes []note
	for _, r := range ran {
		if r.err == nil && r.panicVal == nil {
			notes = append(notes, r.notes...)
		}
	}
	w.d.hub.publish(notes)
}

// release gives the write connection back to the handle's pool, restoring
// synchronous=FULL after a lax batch: the handle is also DB(), on which
// callers run their own transactions.
func (w *writer) release(conn *sql.Conn, lax bool) {
	if lax {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous=FULL"); err != nil {
			// A connection that may not sync must not serve another commit.
			conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		}
	}
	conn.Close()
}

// requeue puts requests back at the head of the queue, for the next batch.
func (w *writer) requeue(reqs []*request) {
	if len(reqs) == 0 {
		return
	}
	for _, r := range reqs {
		r.state.Store(reqQueued) // its caller may abandon it again
	}
	w.mu.Lock()
	w.queue = append(reqs, w.queue...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// runCall runs one request inside its own savepoint.
func (b *batch) runCall(r *request) {
	ctx := context.WithValue(context.WithoutCancel(r.ctx), inWriterKey{}, b.w.d)
	rn := &runner{q: b.tx, prep: b.stmt, b: b, d: b.w.d}
	if err := rn.execNoArgs(ctx, "SAVEPOINT hopper_call"); err != nil {
		b.fail(err)
		r.err = b.broken
		return
	}
	t := &executor{r: rn, single: r.single}
	err, p := callFn(ctx, t, r.fn)
	t.done.Store(true)
	if err == nil && p == nil {
		if rerr := rn.execNoArgs(ctx, "RELEASE hopper_call"); rerr != nil {
			b.fail(rerr)
			r.err = b.broken
			return
		}
		r.notes = t.notes
		return
	}
	r.err, r.panicVal = err, p
	if rerr := rn.rollbackTo(ctx, "hopper_call"); rerr != nil {
		b.fail(rerr)
	}
}

// fail marks the batch's transaction as unusable.
func (b *batch) fail(err error) {
	if b.broken == nil {
		b.broken = fmt.Errorf("sqlitedriver: write transaction aborted: %w", err)
	}
}

// callFn calls fn, turning a panic into a value for the caller to re-raise.
func callFn(ctx context.Context, t *executor, fn func(ctx context.Context, t *executor) error) (err error, panicVal any) {
	defer func() {
		if p := recover(); p != nil {
			panicVal = p
		}
	}()
	return fn(ctx, t), nil
}

// errTxDone is returned by a transaction's executor used after its InTx
// returned.
var errTxDone = errors.New("sqlitedriver: transaction has already ended")

// executor runs the store's operations, each implemented once on it.
//
// The Driver's own executor (Driver.Executor) is in no transaction (r is
// nil): a write called on it queues itself to the writer as a call of its
// own (group commit), where it runs on the executor the writer hands it; a
// read runs on the read pool (reader). The executor the writer hands to a
// call or an InTx function runs everything on the writer's transaction,
// inside the call's savepoint; joined (TxJoiner), it runs on an
// application's own transaction, with no batch.
type executor struct {
	// d is set on the Driver's own executor only.
	d      *Driver
	r      *runner
	single bool
	notes  []note
	done   atomic.Bool
}

var _ driver.Executor = (*executor)(nil)

// check refuses work on an ended transaction, a broken batch or a done
// context.
func (t *executor) check(ctx context.Context) error {
	if t.done.Load() {
		return errTxDone
	}
	if err := t.r.before(); err != nil {
		return err
	}
	return ctx.Err()
}

// reader returns the runner a read runs on: the transaction's, or one on
// the read pool for the Driver's own executor.
func (t *executor) reader(ctx context.Context) (*runner, error) {
	if t.r == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return t.d.reader(ctx)
	}
	return t.r, t.check(ctx)
}

// atomic runs an operation that writes more than once so that an error
// leaves nothing behind: inside a one-operation call the call's savepoint
// does that already; otherwise the operation gets a savepoint of its own.
func (t *executor) atomic(ctx context.Context, fn func() error) error {
	if t.single {
		return fn()
	}
	return t.r.savepoint(ctx, "hopper_op", fn)
}

// InTx runs fn in a transaction; see driver.Executor.InTx.
//
// On the Driver's executor it is a write transaction, queued to the writer
// and committed with the other calls of its batch. fn runs on the writer
// goroutine while it holds the database's write lock: it must use tx, never
// the Driver (a write on the Driver from inside fn fails), and should be
// quick. When fn returns an error or panics, its writes are rolled back and
// its notifications dropped; a panic is re-raised in the caller. fn may run
// twice: when SQLite aborts the batch's whole transaction because of
// another call (a disk-full error, say), the calls that had succeeded in it
// are run once more in the next batch, so fn should have no effects outside
// tx. InTx returns only after the commit that includes fn's writes, or with
// an error and none of them.
//
// On a transaction's executor it opens a nested scope (a savepoint): an
// error from fn undoes only the writes and drops only the notifications
// made inside it.
func (t *executor) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	if t.r == nil {
		return t.d.write(ctx, false, func(ctx context.Context, t *executor) error { return fn(ctx, t) })
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	mark := len(t.notes)
	single := t.single
	t.single = false
	defer func() { t.single = single }()
	err := t.r.savepoint(ctx, "hopper_tx", func() error { return fn(ctx, t) })
	if err != nil {
		t.notes = t.notes[:mark]
	}
	return err
}

// Notify publishes Payload on Topic. On the Driver's executor it is
// delivered at once to the subscribers of every Driver open on this file in
// this process. In a transaction it is buffered, delivered after the
// transaction commits and dropped if the scope it was made in rolls back.
func (t *executor) Notify(ctx context.Context, params *driver.NotifyParams) error {
	if t.r == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if t.d.closed.Load() {
			return driver.ErrClosed
		}
		t.d.hub.publish([]note{{topic: params.Topic, payload: params.Payload}})
		return nil
	}
	if err := t.check(ctx); err != nil {
		return err
	}
	t.notes = append(t.notes, note{topic: params.Topic, payload: params.Payload})
	return nil
}
