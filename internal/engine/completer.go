package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// maxCompleteBatch caps how many finished attempts one transaction records.
const maxCompleteBatch = 1000

// The completer lingers before recording a batch when the one before it
// showed a busy client (at least lingerAfter attempts): for up to
// completerLinger, finished attempts keep joining the batch. Fewer, larger
// transactions cost the store less per attempt (on PostgreSQL at 100
// workers, 10-15% less server CPU per job), for up to completerLinger
// more before a busy client's outcomes are stored; an idle client (the
// batch before held fewer) records each at once.
const (
	completerLinger = 2 * time.Millisecond
	lingerAfter     = 16
)

// finishItem is one finished attempt waiting to be recorded.
type finishItem struct {
	row     *hoppertype.JobRow
	outcome outcome
	// group is the attempt's effect on its fan-out group (spawned children,
	// a final or folded contribution), applied with the transition.
	group *groupEffect
	// run is a workflow run's effect (its final status, a recheck after it
	// suspends).
	run *RunEffect
	// effects, if set, run in the same transaction as the transition, after
	// its compare-and-set succeeded (gates, history …).
	effects func(ctx context.Context, tx driver.Executor, updated *hoppertype.JobRow) error
	// done, if set, receives the commit's verdict for this item.
	done chan<- error
	// here is the session that counted the attempt as executing here
	// (dispatchItem), nil for an item of a job that was not dispatched
	// (and for an application transaction's outcome, which confirmTx
	// ends): the count ends once the transition is written (or failed),
	// just before the job's waiters are woken (see Engine.WaitJob).
	here *session
}

// leftHere ends the item's count of executing here, if it had one.
func (it *finishItem) leftHere() {
	if it.here != nil {
		it.here.leftHere(it.row)
		it.here = nil
	}
}

// finished is an item's fate after a flush.
type finished struct {
	// item points into the batch being recorded (the caller's slice).
	item    *finishItem
	job     *hoppertype.JobRow // nil if the item lost its lease or failed
	err     error
	spawned []driver.JobInsertResult
	settled []*hoppertype.GroupRow
}

// completer records finished attempts in batches: it takes whatever has
// piled up while the previous transaction committed (group commit), so an
// idle system adds no latency and a busy one writes many attempts per
// transaction, each still all-or-nothing.
type completer struct {
	e *Engine
	// life bounds its calls: the session's hard lifetime, so the last
	// flush is seen through until Stop's ctx is done plus stopGrace.
	life context.Context
	in   chan finishItem
	done chan struct{}
	once sync.Once
	// pending counts the items submitted and not yet recorded.
	pending atomic.Int64
}

func newCompleter(e *Engine, life context.Context) *completer {
	return &completer{e: e, life: life, in: make(chan finishItem, 4*maxCompleteBatch), done: make(chan struct{})}
}

func (cp *completer) start() { go cp.run() }

// submit queues an item; it blocks while the completer is backed up.
func (cp *completer) submit(it finishItem) {
	cp.pending.Add(1)
	cp.in <- it
}

// stop records what is queued and ends the completer. Callers must not
// submit after stop.
func (cp *completer) stop() {
	cp.once.Do(func() { close(cp.in) })
	<-cp.done
}

func (cp *completer) run() {
	defer close(cp.done)
	batch := make([]finishItem, 0, maxCompleteBatch)
	last := 0
	for it := range cp.in {
		linger := time.Duration(0)
		if last >= lingerAfter {
			linger = completerLinger
		}
		batch = gather(cp.in, append(batch[:0], it), linger)
		cp.e.recordFinished(cp.life, batch)
		cp.pending.Add(-int64(len(batch)))
		cp.e.progressed()
		last = len(batch)
	}
}

// gather adds to batch what in holds, up to maxCompleteBatch, and then
// what arrives within linger (wall time: a virtual clock never moves
// while the client waits on its own completer). It returns early when the
// batch is full or in is closed.
func gather(in <-chan finishItem, batch []finishItem, linger time.Duration) []finishItem {
	var timeout <-chan time.Time // nil: take only what is queued
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		timeout = t.C
	}
	for len(batch) < maxCompleteBatch {
		var it finishItem
		ok := true
		select {
		case it, ok = <-in:
		default:
			if timeout == nil {
				return batch
			}
			select {
			case it, ok = <-in:
			case <-timeout:
				return batch
			}
		}
		if !ok {
			return batch
		}
		batch = append(batch, it)
	}
	return batch
}

// errItemLost rolls back one item's savepoint when its compare-and-set lost.
var errItemLost = errors.New("lease lost")

// recordFinished writes a batch of transitions in one transaction, retrying
// the transaction a few times on error (waiting on the client's clock),
// then runs the after-commit work, all until life ends. The writes have
// the lease's length (Visibility) in all: the attempts' leases are not
// renewed any more, so past it the rescuer owns their jobs.
func (e *Engine) recordFinished(life context.Context, items []finishItem) {
	ctx, cancel := call(life, e.cfg.Visibility)
	defer cancel()
	// The store's own notice that these jobs are done would wake their
	// waiters here before the rows below do: they get the rows instead.
	defer e.waiters.finishedAll(e.waiters.finishing(items))
	var out []finished
	var err error
	for try := 0; ; try++ {
		out, err = e.finishTx(ctx, items)
		if err == nil || try >= 4 {
			break
		}
		if hclock.Sleep(ctx, e.clock, time.Duration(10<<try)*time.Millisecond) != nil {
			break
		}
	}
	if err != nil {
		for _, it := range items {
			it.leftHere()
			e.waiters.jobDone(it.row.ID) // (see the lost lease in afterFinish)
			e.reportError(fmt.Errorf("record outcome of job %s: %w", it.row.ID, err), hoppertype.PhaseCommit)
			if it.done != nil {
				it.done <- err
			}
		}
		return
	}
	for _, f := range out {
		e.afterFinish(life, f)
	}
}

// itemScope says how the completer records an item within its batch's
// transaction. scopeOf decides it, in one place.
type itemScope int

const (
	// scopeBatch: the job's transition and nothing else; one statement
	// records every such item of the batch.
	scopeBatch itemScope = iota
	// scopeRun: a workflow run whose writes are its own rows only (its
	// last history events, fenced by the lease, the job's finish, the
	// run's status). The batch's runs are recorded together and need no
	// savepoint: a run whose lease is lost writes nothing to undo, and
	// once its events are written they hold the job, so its finish cannot
	// lose it.
	scopeRun
	// scopeMember: a fan-out group member ending with nothing but its
	// contribution; recorded per group, one finish and one group update,
	// or one by one as scopeOwn should that fail.
	scopeMember
	// scopeOwn: effects beyond the job's row (a group, a gate, a run to
	// wake, a run's status with such effects), or InCommit observers that
	// may veto the item: a savepoint of its own, so a failure or a veto
	// undoes that item alone.
	scopeOwn
)

func (e *Engine) scopeOf(it finishItem) itemScope {
	switch {
	case bulkMember(it):
		return scopeMember
	case len(e.inCommit()) > 0:
		return scopeOwn
	case isRunJob(it.row) && it.effects == nil && it.group == nil && it.row.GroupID == it.row.ID && it.row.Metadata[WakeKey] == "":
		return scopeRun
	case it.effects != nil || it.group != nil || isRunJob(it.row) || it.row.Metadata[WakeKey] != "" ||
		(it.outcome.params.State.Terminal() && it.row.GroupID != it.row.ID):
		return scopeOwn
	}
	return scopeBatch
}

func (e *Engine) finishTx(ctx context.Context, items []finishItem) ([]finished, error) {
	out := make([]finished, len(items))
	for i := range items {
		out[i] = finished{item: &items[i]}
	}
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		for i := range out {
			out[i].job, out[i].err, out[i].spawned, out[i].settled = nil, nil, nil, nil
		}
		var batch, runs, scoped []int
		members := map[string][]int{}
		for i, it := range items {
			switch e.scopeOf(it) {
			case scopeBatch:
				batch = append(batch, i)
			case scopeRun:
				runs = append(runs, i)
			case scopeMember:
				members[it.row.GroupID] = append(members[it.row.GroupID], i)
				scoped = append(scoped, i)
			case scopeOwn:
				scoped = append(scoped, i)
			}
		}
		if len(batch) > 0 {
			params := make([]driver.JobFinishParams, len(batch))
			for k, i := range batch {
				params[k] = items[i].outcome.params
			}
			res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: params})
			if err != nil {
				return err
			}
			for k, i := range batch {
				out[i].job, out[i].err = res[k].Job, res[k].Err
			}
		}
		if len(runs) > 0 {
			if err := e.finishRuns(ctx, tx, items, out, runs); err != nil {
				return err
			}
		}
		// Items with effects lock their groups; taking them in group order
		// keeps two completers (two processes) from deadlocking.
		slices.SortStableFunc(scoped, func(a, b int) int {
			return strings.Compare(items[a].row.GroupID, items[b].row.GroupID)
		})
		done := map[int]bool{}
		tried := map[string]bool{}
		bulk := func(gid string) {
			idx := members[gid]
			tried[gid] = true
			if len(idx) < 2 {
				return
			}
			err := tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
				return e.finishMembers(ctx, tx, gid, items, out, idx)
			})
			if err != nil {
				for _, i := range idx {
					out[i].job, out[i].err, out[i].settled = nil, nil, nil
				}
				e.reportError(fmt.Errorf("record outcomes of group %s together (retried one by one): %w", gid, err), hoppertype.PhaseCommit)
				return
			}
			for _, i := range idx {
				done[i] = true
			}
		}
		for _, i := range scoped {
			if gid := items[i].row.GroupID; !tried[gid] && len(members[gid]) > 0 {
				bulk(gid)
			}
			if done[i] {
				continue
			}
			if err := e.finishOwn(ctx, tx, items[i], &out[i]); err != nil {
				out[i].job, out[i].err, out[i].spawned, out[i].settled = nil, err, nil, nil
				e.reportError(fmt.Errorf("record outcome of job %s: %w", items[i].row.ID, err), hoppertype.PhaseCommit)
			}
		}
		if err := notifyKeyFreed(ctx, tx, out); err != nil {
			return err
		}
		return notifyDone(ctx, tx, out)
	})
	return out, err
}

// finishOwn records one item in a savepoint of its own, with its effects.
// A lost lease sets f.err and writes nothing; any other failure undoes the
// item and is returned.
func (e *Engine) finishOwn(ctx context.Context, tx driver.Executor, it finishItem, f *finished) error {
	err := tx.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if p := lastRecord(it, e.now()); p != nil {
			it.run.ended = p.RunStatus == hoppertype.RunCompleted
			err := tx.RunEventAppend(ctx, p)
			if errors.Is(err, hoppertype.ErrLeaseLost) {
				f.err = err
				return errItemLost
			} else if err != nil {
				return err
			}
		}
		res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{it.outcome.params}})
		if err != nil {
			return err
		}
		if res[0].Err != nil {
			f.err = res[0].Err
			return errItemLost
		}
		job := res[0].Job
		if it.effects != nil {
			if err := it.effects(ctx, tx, job); err != nil {
				return err
			}
		}
		if job.State.Terminal() {
			spawned, settled, err := e.applyGroup(ctx, tx, job, it.group)
			if err != nil {
				return err
			}
			f.spawned, f.settled = spawned, settled
			if runID := job.Metadata[WakeKey]; runID != "" {
				if err := e.wake(ctx, tx, runID, e.now()); err != nil {
					return err
				}
			}
		}
		if isRunJob(job) {
			if err := e.applyRunEffects(ctx, tx, job, it.run); err != nil {
				return err
			}
		}
		f.job = job
		return nil
	})
	if errors.Is(err, errItemLost) {
		return nil
	}
	return err
}

// lastRecord is the append of a run's last history events (nil when it has
// none), fenced by its lease; a run that succeeded stores its end with them.
func lastRecord(it finishItem, now time.Time) *driver.RunEventAppendParams {
	if it.run == nil || len(it.run.Events) == 0 {
		return nil
	}
	p := &driver.RunEventAppendParams{RunID: it.row.ID, LeaseToken: it.row.LeaseToken, Events: it.run.Events}
	switch {
	case it.run.unstarted:
		p.RunStatus, p.Now = hoppertype.RunRunning, now
	case it.outcome.params.State == hoppertype.JobStateSucceeded:
		p.RunStatus, p.Now, p.EndedAt = hoppertype.RunCompleted, now, now
	}
	return p
}

// finishRuns records the outcomes of workflow runs that need no savepoint
// (scopeRun): their last history events in one append, each fenced
// by its run's lease, then their finishes in one statement, then each run's
// status. A run whose lease was lost writes nothing; any other failure
// fails the batch, which is retried whole.
func (e *Engine) finishRuns(ctx context.Context, tx driver.Executor, items []finishItem, out []finished, idx []int) error {
	now := e.now()
	var appends []*driver.RunEventAppendParams
	var appended []int
	for _, i := range idx {
		it := items[i]
		if it.run != nil {
			it.run.ended = false // set again below if this try stores the end
		}
		p := lastRecord(it, now)
		if p == nil {
			continue
		}
		appends = append(appends, p)
		appended = append(appended, i)
	}
	lost := map[int]bool{}
	if len(appends) > 0 {
		var errs []error
		if len(appends) == 1 {
			// One statement either way; the many form costs a savepoint
			// on some stores.
			err := tx.RunEventAppend(ctx, appends[0])
			if err != nil && !errors.Is(err, hoppertype.ErrLeaseLost) {
				return err
			}
			errs = []error{err}
		} else {
			var err error
			if errs, err = tx.RunEventAppendMany(ctx, &driver.RunEventAppendManyParams{Events: appends}); err != nil {
				return err
			}
		}
		for k, i := range appended {
			switch {
			case errors.Is(errs[k], hoppertype.ErrLeaseLost):
				out[i].err, lost[i] = errs[k], true
			case errs[k] != nil:
				return errs[k]
			case appends[k].RunStatus == hoppertype.RunCompleted:
				items[i].run.ended = true
			}
		}
	}
	var params []driver.JobFinishParams
	var finishing []int
	for _, i := range idx {
		if !lost[i] {
			params = append(params, items[i].outcome.params)
			finishing = append(finishing, i)
		}
	}
	if len(params) == 0 {
		return nil
	}
	res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: params})
	if err != nil {
		return err
	}
	for k, i := range finishing {
		if res[k].Err != nil {
			if items[i].run != nil && items[i].run.ended {
				// Its append held the job: the finish cannot lose it.
				return fmt.Errorf("finish run %s after its last record: %w", items[i].row.ID, res[k].Err)
			}
			out[i].err = res[k].Err
			continue
		}
		if err := e.applyRunEffects(ctx, tx, res[k].Job, items[i].run); err != nil {
			return err
		}
		out[i].job = res[k].Job
	}
	return nil
}

// notifyKeyFreed announces the queues of jobs with a concurrency key that
// stopped running: a job of the same key held back by the limit may now be
// claimed, by any process.
func notifyKeyFreed(ctx context.Context, tx driver.Executor, out []finished) error {
	var queues []string
	for _, f := range out {
		if f.job != nil && f.job.ConcurrencyKey != "" {
			queues = append(queues, f.job.Queue)
		}
	}
	return notifyQueueNames(ctx, tx, queues)
}

// notifyDone announces the jobs that reached a terminal state, in payloads
// of bounded size.
func notifyDone(ctx context.Context, tx driver.Executor, out []finished) error {
	var ids []string
	for _, f := range out {
		if f.job != nil && f.job.State.Terminal() {
			ids = append(ids, f.job.ID)
		}
	}
	return notifyIDs(ctx, tx, driver.TopicJobDone, ids)
}

func notifyIDs(ctx context.Context, tx driver.Executor, topic string, ids []string) error {
	const maxPayload = 7000
	var b strings.Builder
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		err := tx.Notify(ctx, &driver.NotifyParams{Topic: topic, Payload: b.String()})
		b.Reset()
		return err
	}
	for _, id := range ids {
		if b.Len() > 0 && b.Len()+len(id)+1 > maxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	return flush()
}

// afterFinish runs once a transition committed: waiters, events, wake-ups
// (its calls end with life).
func (e *Engine) afterFinish(life context.Context, f finished) {
	it := f.item
	it.leftHere()
	if it.done != nil {
		it.done <- f.err
	}
	if f.job == nil {
		if f.err != nil && !errors.Is(f.err, hoppertype.ErrLeaseLost) {
			e.reportError(fmt.Errorf("record outcome of job %s: %w", it.row.ID, f.err), hoppertype.PhaseCommit)
		}
		// Another process may have finished it meanwhile, its notice
		// passed over (see finishing): its waiters look again.
		e.waiters.jobDone(it.row.ID)
		return
	}
	job := f.job
	switch {
	case job.State == hoppertype.JobStateSucceeded:
		e.completed.Add(1)
	case job.State == hoppertype.JobStateRetrying || job.State == hoppertype.JobStateDead ||
		job.State == hoppertype.JobStateExpired || job.State == hoppertype.JobStateStuck:
		e.failed.Add(1)
	}
	if job.State.Terminal() {
		e.waiters.jobFinished(job)
	}
	e.emit(it.outcome.event)
	if len(f.spawned) > 0 {
		e.afterInsert(f.spawned, nil, nil)
	}
	for _, g := range f.settled {
		e.groupSettled(life, g, g.SettledAt)
	}
	if it.run != nil && it.run.Recheck != nil && (job.State == hoppertype.JobStateScheduled || job.State == hoppertype.JobStatePending) {
		// The run waits for something that may have happened before its
		// wait was committed: look again now that it is, and wake it if so.
		ctx, cancel := call(life, shortBudget)
		defer cancel()
		if it.run.Recheck(ctx) {
			if err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error { return e.wake(ctx, tx, job.ID, e.now()) }); err != nil {
				e.reportError(fmt.Errorf("wake run %s: %w", job.ID, err), hoppertype.PhaseCommit)
			}
			job.State = hoppertype.JobStatePending
		}
	}
	if job.ConcurrencyKey != "" {
		e.wakeQueue(job.Queue, time.Time{}) // its key has room again
	}
	switch job.State {
	case hoppertype.JobStatePending:
		e.wakeQueue(job.Queue, time.Time{})
	case hoppertype.JobStateScheduled, hoppertype.JobStateRetrying:
		e.wakeQueue(job.Queue, job.RunAt)
	}
}

// bulkMember says whether an item is a group member's terminal transition
// whose only effect is its contribution to the group (no children, no
// workflow or activity side, no effects hook), so it can be recorded with
// the other members of its group.
func bulkMember(it finishItem) bool {
	return it.outcome.params.State.Terminal() && it.row.GroupID != it.row.ID && it.effects == nil &&
		it.run == nil && !isRunJob(it.row) && it.row.Metadata[WakeKey] == "" &&
		(it.group == nil || len(it.group.children) == 0)
}

// finishMembers records the transitions of members of group gid (items at
// idx) with one finish and one group update: the group's open count drops
// by the members that applied, and their contributions are applied in
// order, as each would have been on its own (a final one ends the run of
// contributions).
func (e *Engine) finishMembers(ctx context.Context, tx driver.Executor, gid string, items []finishItem, out []finished, idx []int) error {
	params := make([]driver.JobFinishParams, len(idx))
	for k, i := range idx {
		params[k] = items[i].outcome.params
	}
	res, err := tx.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: params})
	if err != nil {
		return err
	}
	type contribution struct {
		value []byte
		final bool
		fold  func(existing []byte, set bool) ([]byte, error)
	}
	var contribs []contribution
	applied, last := 0, -1
	for k, i := range idx {
		out[i].job, out[i].err = res[k].Job, res[k].Err
		job := res[k].Job
		if job == nil {
			continue
		}
		applied++
		last = i
		eff := items[i].group
		if eff == nil {
			eff = &groupEffect{}
		}
		if job.State == hoppertype.JobStateSucceeded && (job.Result != nil || eff.fold != nil) {
			contribs = append(contribs, contribution{value: job.Result, final: eff.final, fold: eff.fold})
		}
	}
	if applied == 0 {
		return nil
	}
	p := &driver.GroupUpdateParams{ID: gid, OpenDelta: -applied, Now: e.now()}
	if len(contribs) > 0 {
		p.Contribute = true
		for _, ct := range contribs {
			p.Final = p.Final || ct.final
		}
		p.Fold = func(existing []byte, set bool) ([]byte, error) {
			v, s := existing, set
			for _, ct := range contribs {
				if ct.fold != nil {
					nv, err := ct.fold(v, s)
					if err != nil {
						return nil, err
					}
					v = nv
				} else {
					v = ct.value
				}
				s = true
				if ct.final {
					break
				}
			}
			return v, nil
		}
	}
	gr, err := tx.GroupUpdate(ctx, p)
	if errors.Is(err, hoppertype.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("update group %s: %w", gid, err)
	}
	if gr.Settled {
		if err := tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicGroupDone, Payload: gid}); err != nil {
			return err
		}
		out[last].settled = []*hoppertype.GroupRow{gr.Group}
	}
	return nil
}
