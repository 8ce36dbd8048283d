package pgdriver

import (
	"context"
	"sync"
	"time"
)

// postCommit sends the notifications of the driver's own transactions
// after they commit, instead of in them.
//
// PostgreSQL serializes the commits of transactions that sent a NOTIFY: the
// first takes a database-wide lock and holds it through its commit record's
// flush to disk, and the next waits for it. Many small transactions that
// each notify (workflow starts, enqueues of one job from many goroutines)
// would then commit one at a time. Sent after the commit, by a statement
// that writes nothing (its commit flushes nothing), the lock is held for
// moments, and notifications piled up while one send was on the wire go
// together in the next: the committer that finds no send in flight sends
// everything pending, including what others added meanwhile, and the
// others return at once.
//
// The send runs in the background: the committer returns as soon as its
// commit does, and what waits in this process for the transition (a
// Result, the next step of a workflow) is not held up by a round trip that
// only other processes need. Close waits for a send in flight.
//
// A notification is a hint: one lost because the process stopped between a
// commit and its send is made good by the listeners' poll fallback, as any
// missed notification is. A caller's own transaction (JobInsertManyTx)
// still carries its notifications, since its commit is the caller's.
type postCommit struct {
	mu      sync.Mutex
	pending noteBuf
	busy    bool
	// sending counts the background sends in flight (Close waits for
	// them).
	sending sync.WaitGroup
}

// sendTimeout bounds one send; a send that fails is dropped (see above).
const sendTimeout = 5 * time.Second

// sendLater queues notes and, unless a send is in flight (which sends them
// when it is done), sends them with whatever else is pending in the
// background.
func (d *Driver) sendLater(notes []note) {
	if !d.queueNotes(notes, true) {
		return
	}
	go func() {
		defer d.post.sending.Done()
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		defer cancel()
		_ = d.drain(ctx) // a hint: listeners poll too
	}()
}

// sendNow queues notes and sends them, with whatever else is pending,
// before it returns, unless a send is in flight: that one sends them when
// it is done.
func (d *Driver) sendNow(ctx context.Context, notes []note) error {
	if !d.queueNotes(notes, false) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	return d.drain(ctx)
}

// queueNotes adds notes to what is pending and reports whether the caller
// is to send (no send is in flight; it is then marked busy, and, for a
// background send, counted in sending unless the driver is closed).
func (d *Driver) queueNotes(notes []note, background bool) bool {
	if len(notes) == 0 {
		return false
	}
	p := &d.post
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range notes {
		p.pending.add(n.channel, n.payload)
	}
	if p.busy || background && d.closed.Load() {
		return false
	}
	p.busy = true
	if background {
		p.sending.Add(1)
	}
	return true
}

// drain sends what is pending until nothing is, then clears busy; the
// caller set busy. It returns the first send's error.
func (d *Driver) drain(ctx context.Context) error {
	p := &d.post
	var first error
	p.mu.Lock()
	for len(p.pending.notes) > 0 {
		batch := p.pending
		p.pending = noteBuf{}
		p.mu.Unlock()
		if err := batch.flush(ctx, d.pool, d.q.notifyMany); err != nil && first == nil {
			first = err
		}
		p.mu.Lock()
	}
	p.busy = false
	p.mu.Unlock()
	return first
}
