package pgdriver

import (
	"strings"
	"sync"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// A claim marks the jobs it takes running, and their entries in jobs_claim
// (the index of pending jobs in claim order) stay behind, dead, until
// VACUUM removes them. They sit at the head of the queue's entries, where
// every claim starts: a claim made while a backlog drains walks the dead
// entries of every job claimed since the table was last vacuumed (an index
// page for about each hundred jobs) before it reaches a live one. On a
// run of 100,000 jobs that walk was a fifth of the server's CPU, and it
// grows with the backlog.
//
// A claim cursor keeps where a queue's last full claim ended in this
// process: the next claim takes the queue's jobs of higher priority than
// the cursor's last job, then those of its priority after it, each walk
// starting at its bound in the index. Every pending job before the cursor
// is still claimed, by the claim that looks from the head: a claim that
// comes back short after the cursor takes the rest of its limit from there
// at once, and the cursor goes after a claim that promoted due jobs (they
// keep their RunAt, which may sort before it), after cursorUses claims, and
// cursorLife after the claim that set it; a claim that took a job with a
// concurrency limit sets none (the claim passes by jobs whose keys are
// full, and they must be seen again once a key has room). A job made
// pending behind a cursor while the queue's backlog keeps every claim full
// (a retry whose RunAt sorts before the cursor, a job another claimer held
// when a claim passed it, a job of a full key among jobs without one)
// waits that long at most; jobs of higher priority never wait for it.
type claimCursor struct {
	at    claimPos
	since time.Time // JobClaimParams.Now of the claim that set the cursor
	uses  int       // claims made after it since
}

// claimPos is a pending job's key in jobs_claim, after the queue.
type claimPos struct {
	priority int
	runAt    time.Time
	id       string
}

// The bounds of a claim cursor's life.
const (
	cursorLife = time.Second
	cursorUses = 64
)

func cursorAt(j *hoppertype.JobRow) claimPos {
	return claimPos{priority: j.Priority, runAt: j.RunAt, id: j.ID}
}

// cursorKey names the claims a cursor serves: one queue, one set of types.
func cursorKey(p *driver.JobClaimParams) string {
	if len(p.Types) == 0 {
		return p.Queue
	}
	return p.Queue + "\x00" + strings.Join(p.Types, "\x00")
}

// claimCursors are a driver's claim cursors.
type claimCursors struct {
	mu sync.Mutex
	m  map[string]claimCursor
}

// get returns the cursor for key, or nil when there is none or it has
// run its course by now.
func (c *claimCursors) get(key string, now time.Time) *claimCursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[key]
	if !ok {
		return nil
	}
	if cur.uses >= cursorUses || now.Before(cur.since) || now.Sub(cur.since) >= cursorLife {
		delete(c.m, key)
		return nil
	}
	return &cur
}

func (c *claimCursors) put(key string, cur claimCursor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]claimCursor{}
	}
	c.m[key] = cur
}

func (c *claimCursors) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
