package sqlitedriver

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// SQLite copies the write-ahead log back into the database file in
// checkpoints. Left to itself it checkpoints inside the COMMIT that takes the
// log past 1,000 pages, so now and then one batch's callers wait for a whole
// checkpoint: syncing the log, copying pages, syncing the database file. The
// checkpointer runs them on a connection of its own instead, at most every
// checkpointGap while the writer commits. A PASSIVE checkpoint neither
// blocks nor waits for the writer or the readers; once one has copied the
// whole log, the writer's next transaction starts the log over from its
// beginning. The writer still checkpoints inline if the log outgrows
// writerCheckpointPages (a checkpointer held back by a long read, say).
const (
	checkpointGap         = 100 * time.Millisecond
	writerCheckpointPages = 16384 // 64 MiB of 4 KiB pages
)

// checkpointer runs PASSIVE checkpoints in the background after commits.
type checkpointer struct {
	db     *sql.DB
	kicks  chan struct{}
	quit   chan struct{}
	exited chan struct{}

	// runs counts the checkpoints made (for tests and stats).
	runs atomic.Int64
}

func newCheckpointer(db *sql.DB) *checkpointer {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &checkpointer{
		db:     db,
		kicks:  make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
}

// kick tells the checkpointer that the writer committed. It never blocks.
func (c *checkpointer) kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// loop checkpoints after each kick, then rests for checkpointGap: the
// commits made meanwhile wait for the next checkpoint.
func (c *checkpointer) loop() {
	defer close(c.exited)
	rest := time.NewTimer(0)
	defer rest.Stop()
	for {
		select {
		case <-c.kicks:
		case <-c.quit:
			return
		}
		// An error (a lock held past the busy timeout, a disk error) leaves
		// the log to the next checkpoint, or to the writer's own.
		if _, err := c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)"); err == nil {
			c.runs.Add(1)
		}
		rest.Reset(checkpointGap)
		select {
		case <-rest.C:
		case <-c.quit:
			return
		}
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	close(c.quit)
	<-c.exited
	return c.db.Close()
}
