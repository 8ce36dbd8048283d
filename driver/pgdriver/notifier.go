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
// A notification is a hint: one lost because the process stopped between a
// commit and its send is made good by the listeners' poll fallback, as any
// missed notification is. A caller's own transaction (JobInsertManyTx)
// still carries its notifications, since its commit is the caller's.
type postCommit struct {
	mu      sync.Mutex
	pending noteBuf
	busy    bool
}

// sendTimeout bounds one send; a send that fails is dropped (see above).
const sendTimeout = 5 * time.Second

// send queues notes and sends them, with whatever else is pending, unless
// a send is in flight: that one sends them when it is done.
func (d *Driver) sendAfterCommit(ctx context.Context, notes []note) error {
	if len(notes) == 0 {
		return nil
	}
	p := &d.post
	p.mu.Lock()
	for _, n := range notes {
		p.pending.add(n.channel, n.payload)
	}
	if p.busy {
		p.mu.Unlock()
		return nil
	}
	p.busy = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	var first error
	for len(p.pending.notes) > 0 {
		batch := p.pending
		p.pending = noteBuf{}
		p.mu.Unlock()
		if err := batch.flush(ctx, d.pool, d.q.notifyMany); err != nil && first == nil {
			first = err // a hint: listeners poll too
		}
		p.mu.Lock()
	}
	p.busy = false
	p.mu.Unlock()
	return first
}
