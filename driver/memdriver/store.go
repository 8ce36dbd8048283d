package memdriver

import (
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// store is the driver's state. It is only touched with the driver's lock
// held. Stored rows are never modified in place: a write stores a fresh copy,
// so the undo log can keep the previous pointer.
type store struct {
	// now stamps the change feed (WithClock); the wall clock by default.
	now  func() time.Time
	jobs map[string]*jobEntry
	// unique maps a (type, unique key) to the id of the non-terminal job that
	// holds it.
	unique map[uniqueKey]string
	// queues holds the claim indexes of each queue that ever had a job.
	queues map[string]*queueIndex
	// running is the set of running jobs, scanned for expired leases.
	running map[string]struct{}
	// keyRunning counts the running jobs of each concurrency key.
	keyRunning map[string]int

	groups    map[string]*hoppertype.GroupRow
	keys      map[string]keyRow
	leaders   map[string]*driver.LeaderRow
	workers   map[string]*driver.WorkerRow
	queueRows map[string]*driver.QueueRow
	// schedules holds the schedules' stored states, by name.
	schedules map[string]*driver.ScheduleRow

	// Workflow state, keyed by run id (a run's id is its job's id).
	runs map[string]*hoppertype.RunRow
	// events holds each run's history in (Attempt, Seq) order.
	events map[string][]*hoppertype.RunEvent
	hooks  map[string]*hoppertype.HookRow
	// runHooks indexes the hook tokens of each run.
	runHooks map[string]map[string]struct{}
	// streams holds each run's chunks; a chunk's offset is its index.
	streams map[string][]*hoppertype.StreamChunk

	// Gates, keyed by gate id; gatesByJob indexes the gates watching each
	// job; gateQueues maps a job a gate will queue to that gate.
	gates      map[string]*gateState
	gatesByJob map[string][]string
	gateQueues map[string]string

	// feed is the change feed and its cursors.
	feed *feed

	// version stamps every job write; heap entries carry the version they
	// were pushed for, so a stale entry is recognised and skipped.
	version uint64
	// token is the last lease token handed out.
	token int64
}

type jobEntry struct {
	row     *hoppertype.JobRow
	version uint64
}

type uniqueKey struct {
	typ, key string
}

type keyRow struct {
	value     []byte
	expiresAt time.Time
}

func newStore() *store {
	return &store{
		now:     time.Now,
		jobs:    make(map[string]*jobEntry),
		unique:  make(map[uniqueKey]string),
		queues:  make(map[string]*queueIndex),
		running: make(map[string]struct{}),

		keyRunning: make(map[string]int),
		groups:     make(map[string]*hoppertype.GroupRow),
		keys:       make(map[string]keyRow),
		leaders:    make(map[string]*driver.LeaderRow),
		workers:    make(map[string]*driver.WorkerRow),
		queueRows:  make(map[string]*driver.QueueRow),
		schedules:  make(map[string]*driver.ScheduleRow),
		runs:       make(map[string]*hoppertype.RunRow),
		events:     make(map[string][]*hoppertype.RunEvent),
		hooks:      make(map[string]*hoppertype.HookRow),
		runHooks:   make(map[string]map[string]struct{}),
		streams:    make(map[string][]*hoppertype.StreamChunk),

		gates:      make(map[string]*gateState),
		gatesByJob: make(map[string][]string),
		gateQueues: make(map[string]string),
		feed:       newFeed(),
	}
}

// queueIndex holds one queue's claim indexes. Both heaps are lazily
// invalidated: an entry is live only while its job's version is the one it
// was pushed for.
type queueIndex struct {
	// pending orders pending jobs by priority desc, RunAt asc, id asc.
	pending itemHeap
	// scheduled orders scheduled and retrying jobs by RunAt asc, id asc.
	scheduled itemHeap
	// livePending and liveScheduled count the live entries, to decide when
	// stale ones are worth compacting away.
	livePending, liveScheduled int
}

func newQueueIndex() *queueIndex {
	return &queueIndex{
		pending:   itemHeap{less: pendingLess},
		scheduled: itemHeap{less: scheduledLess},
	}
}

// index returns the queue's index, creating it.
func (s *store) index(queue string) *queueIndex {
	q := s.queues[queue]
	if q == nil {
		q = newQueueIndex()
		s.queues[queue] = q
	}
	return q
}

// live reports whether a heap entry still describes its job.
func (s *store) live(it heapItem) (*jobEntry, bool) {
	e := s.jobs[it.id]
	return e, e != nil && e.version == it.version
}

// setJob stores row (which the store then owns) and updates every index. It
// records no undo: callers go through the executor's putJob.
func (s *store) setJob(row *hoppertype.JobRow) {
	if old := s.jobs[row.ID]; old != nil {
		s.unindex(old.row)
	}
	s.version++
	s.jobs[row.ID] = &jobEntry{row: row, version: s.version}
	it := heapItem{id: row.ID, version: s.version, priority: row.Priority, runAt: row.RunAt}
	if row.UniqueKey != "" && !row.State.Terminal() {
		s.unique[uniqueKey{row.Type, row.UniqueKey}] = row.ID
	}
	switch row.State {
	case hoppertype.JobStatePending:
		q := s.index(row.Queue)
		q.livePending++
		q.pending.push(it)
		s.compact(q)
	case hoppertype.JobStateScheduled, hoppertype.JobStateRetrying:
		q := s.index(row.Queue)
		q.liveScheduled++
		q.scheduled.push(it)
		s.compact(q)
	case hoppertype.JobStateRunning:
		s.running[row.ID] = struct{}{}
		if row.ConcurrencyKey != "" {
			s.keyRunning[row.ConcurrencyKey]++
		}
	}
}

// removeJob deletes a job and its index entries. It records no undo.
func (s *store) removeJob(id string) {
	if old := s.jobs[id]; old != nil {
		s.unindex(old.row)
		delete(s.jobs, id)
	}
}

// unindex drops what row contributed to the indexes; its heap entries become
// stale by the version change or the removal that follows.
func (s *store) unindex(row *hoppertype.JobRow) {
	k := uniqueKey{row.Type, row.UniqueKey}
	if row.UniqueKey != "" && !row.State.Terminal() && s.unique[k] == row.ID {
		delete(s.unique, k)
	}
	switch row.State {
	case hoppertype.JobStatePending:
		s.index(row.Queue).livePending--
	case hoppertype.JobStateScheduled, hoppertype.JobStateRetrying:
		s.index(row.Queue).liveScheduled--
	case hoppertype.JobStateRunning:
		delete(s.running, row.ID)
		if row.ConcurrencyKey != "" {
			if s.keyRunning[row.ConcurrencyKey]--; s.keyRunning[row.ConcurrencyKey] <= 0 {
				delete(s.keyRunning, row.ConcurrencyKey)
			}
		}
	}
}

// compact drops stale heap entries once they outnumber live ones, so heaps
// stay proportional to the waiting jobs.
func (s *store) compact(q *queueIndex) {
	const slack = 64
	if len(q.pending.items) > 2*q.livePending+slack {
		q.pending.filter(func(it heapItem) bool { _, ok := s.live(it); return ok })
	}
	if len(q.scheduled.items) > 2*q.liveScheduled+slack {
		q.scheduled.filter(func(it heapItem) bool { _, ok := s.live(it); return ok })
	}
}

// nextToken returns a lease token that differs from every token handed out
// before and from prev, the job's current token.
func (s *store) nextToken(prev int64) int64 {
	s.token++
	if s.token <= prev {
		s.token = prev + 1
	}
	return s.token
}

// putJob stores row and records how to restore the previous one.
func (t *executor) putJob(row *hoppertype.JobRow) {
	st := t.st
	old := st.jobs[row.ID]
	if old == nil {
		t.jobChanged(nil, row)
	} else {
		t.jobChanged(old.row, row)
	}
	st.setJob(row)
	id := row.ID
	t.undo = append(t.undo, func() {
		if old != nil {
			// Restoring stores the old row under a new version, which also
			// re-pushes its heap entries (the old ones may have been popped).
			st.setJob(old.row)
		} else {
			st.removeJob(id)
		}
	})
}

// deleteJob removes a job and records how to restore it.
func (t *executor) deleteJob(id string) {
	st := t.st
	old := st.jobs[id]
	if old == nil {
		return
	}
	st.removeJob(id)
	t.undo = append(t.undo, func() { st.setJob(old.row) })
	t.dropChanges(id)
}

// putGroup stores a group row and records how to restore the previous one.
func (t *executor) putGroup(row *hoppertype.GroupRow) { put(t, t.st.groups, row.ID, row) }

// deleteGroup removes a group row and records how to restore it.
func (t *executor) deleteGroup(id string) {
	old, had := t.st.groups[id]
	if !had {
		return
	}
	delete(t.st.groups, id)
	t.undo = append(t.undo, func() { t.st.groups[id] = old })
}

// putKey stores a key and records how to restore the previous one.
func (t *executor) putKey(key string, row keyRow) { put(t, t.st.keys, key, row) }

// putLeader stores a leadership row and records how to restore the previous
// one.
func (t *executor) putLeader(row *driver.LeaderRow) { put(t, t.st.leaders, row.Name, row) }

// putQueue stores a queue row and records how to restore the previous one.
func (t *executor) putQueue(row *driver.QueueRow) { put(t, t.st.queueRows, row.Name, row) }

// put stores v under key in m and records how to restore what was there.
func put[V any](t *executor, m map[string]V, key string, v V) {
	old, had := m[key]
	m[key] = v
	t.undo = append(t.undo, func() {
		if had {
			m[key] = old
		} else {
			delete(m, key)
		}
	})
}

// setOrDelete stores vs under key in m, or deletes key when vs is empty,
// and records how to restore what was there.
func setOrDelete[V any](t *executor, m map[string][]V, key string, vs []V) {
	old, had := m[key]
	if len(vs) == 0 {
		delete(m, key)
	} else {
		m[key] = vs
	}
	t.undo = append(t.undo, func() {
		if had {
			m[key] = old
		} else {
			delete(m, key)
		}
	})
}

// trunc gives a time the microsecond precision the driver contract stores.
func trunc(t time.Time) time.Time {
	return t.Truncate(time.Microsecond)
}

// truncJob truncates every time of a row the store owns.
func truncJob(r *hoppertype.JobRow) {
	r.Deadline = trunc(r.Deadline)
	r.QueuedAt = trunc(r.QueuedAt)
	r.RunAt = trunc(r.RunAt)
	r.StartedAt = trunc(r.StartedAt)
	r.EndedAt = trunc(r.EndedAt)
	r.LeaseExpiresAt = trunc(r.LeaseExpiresAt)
	if r.Error != nil {
		r.Error.At = trunc(r.Error.At)
	}
	if r.Stuck != nil {
		r.Stuck.ObservedAt = trunc(r.Stuck.ObservedAt)
	}
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneError(e *hoppertype.ErrorInfo) *hoppertype.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	c.At = trunc(c.At)
	return &c
}

func cloneStuck(s *hoppertype.StuckInfo) *hoppertype.StuckInfo {
	if s == nil {
		return nil
	}
	c := *s
	if s.Retryable != nil {
		b := *s.Retryable
		c.Retryable = &b
	}
	if s.BlockerIDs != nil {
		c.BlockerIDs = append([]string(nil), s.BlockerIDs...)
	}
	c.ObservedAt = trunc(c.ObservedAt)
	return &c
}

func cloneGroup(g *hoppertype.GroupRow) *hoppertype.GroupRow {
	c := *g
	c.Value = cloneBytes(g.Value)
	return &c
}

func stateSet(states []hoppertype.JobState) map[hoppertype.JobState]bool {
	m := make(map[hoppertype.JobState]bool, len(states))
	for _, s := range states {
		m[s] = true
	}
	return m
}
