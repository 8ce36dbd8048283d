package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// scheduleSlack is how late an occurrence still fires on time, whatever
// the schedule's CatchUp: a timer, a busy process or a store slow to answer
// can delay it that much.
const scheduleSlack = 10 * time.Second

// scheduleKeyPrefix starts the key that records an occurrence.
const scheduleKeyPrefix = "hopper.schedule:"

// scheduleKeyKeep is how long an occurrence's key outlives the latest time
// a process could still fire that occurrence; a day, so processes that
// give one schedule different CatchUp windows still share its keys.
const scheduleKeyKeep = 24 * time.Hour

// scheduleRetry bounds the wait between tries of an occurrence whose
// enqueue failed (the store was unreachable); it is retried while it is
// within the schedule's catch-up window.
const scheduleRetry = 5 * time.Second

// Schedule is a schedule as the engine runs it: registered in code, or
// stored with a target this process registers.
type Schedule struct {
	Name string
	// Cron is the schedule's expression (empty for a Next function).
	Cron string
	// Stored is set for a schedule defined in the store, with the version
	// of its definition: its records leave a deleted or redefined one
	// alone.
	Stored  bool
	Version int64
	// NotBefore is when a stored schedule was defined: an occurrence
	// before it does not fire (caught up). Nor does one before the store
	// first saw the schedule (its row's FirstSeenAt), for any schedule.
	NotBefore time.Time
	// Next returns the occurrence after a time (zero: none).
	Next func(after time.Time) time.Time
	// CatchUp is how late an occurrence may still fire (at least
	// scheduleSlack).
	CatchUp time.Duration
	// Occurrence returns what the occurrence at stores (nil: nothing).
	// It runs on the schedule's goroutine.
	Occurrence func(at time.Time) (*Occurrence, error)

	// stuck holds why a Next that did not move forward ended the
	// schedule, for its goroutine to report.
	stuck atomic.Pointer[error]
	// stop ends the goroutine that runs the schedule in the latest
	// session and waits for it (nil before one ran; calling it again
	// returns at once); cancel only ends it. Guarded by Engine.schedMu.
	stop   func()
	cancel func()
	// due is the occurrence the schedule's goroutine waits for or is
	// firing (Unix nanoseconds; 0: none), for Settle: one due and not
	// yet stored is work in flight.
	due atomic.Int64
}

// setDue records the occurrence the schedule's goroutine waits for or is
// firing (zero: none).
func (sc *Schedule) setDue(at time.Time) {
	var n int64
	if !at.IsZero() {
		n = at.UnixNano()
	}
	sc.due.Store(n)
}

// dueAt returns what setDue recorded.
func (sc *Schedule) dueAt() time.Time {
	if n := sc.due.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return time.Time{}
}

// End ends the schedule for err (a Next that did not move forward): its
// goroutine reports err once and stops.
func (sc *Schedule) End(err error) { sc.stuck.CompareAndSwap(nil, &err) }

// Occurrence is what one occurrence of a schedule stores, in the
// transaction that records it: a job (Job) or a run (Start).
type Occurrence struct {
	// Job builds the job at now, and says whether its first attempt asks
	// to skip the queue.
	Job func(now time.Time) (row *hoppertype.JobRow, skipQueue bool, err error)
	// Start starts the run in tx and returns its job's row, nil when the
	// run existed already.
	Start func(ctx context.Context, tx driver.Executor) (*hoppertype.JobRow, error)
}

// schedRun is the schedules' part of a running engine session.
type schedRun struct {
	e *Engine
	s *session
	// ctx ends when Stop begins.
	ctx context.Context
	// schedulesOff is set when Stop has ended the schedules; guarded by
	// Engine.schedMu.
	schedulesOff bool
	// schedReported holds the stored schedules reported as not runnable
	// here, with the definition reported; guarded by syncMu.
	schedReported map[string]driver.ScheduleDef
	// syncMu serialises the reads of the stored schedules.
	syncMu sync.Mutex
	// schedWG counts the schedule goroutines the session started, for
	// stop to wait for (retired and removed ones too).
	schedWG sync.WaitGroup
}

// startScheduler starts the engine's schedules in session s, and the
// stored ones before it returns (their reports wait for the sync
// goroutine: Start holds the engine's lock).
func (s *session) startScheduler(ctx context.Context) {
	rt := &schedRun{e: s.e, s: s, ctx: s.ctx}
	rt.startSchedules()
	reports := rt.syncStoredOnce(ctx)
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		rt.syncStoredSchedules(reports)
	}()
}

// stopScheduler ends the schedules of s and waits for their goroutines.
func (s *session) stopScheduler() {
	s.e.schedMu.Lock()
	rt := s.e.sched
	s.e.schedMu.Unlock()
	if rt != nil && rt.s == s {
		rt.stopSchedules()
	}
}

// startSchedules makes rt the client's running schedules and starts them.
func (rt *schedRun) startSchedules() {
	rt.e.schedMu.Lock()
	defer rt.e.schedMu.Unlock()
	rt.e.sched = rt
	for _, sc := range rt.e.schedules {
		rt.startSchedule(sc)
	}
}

// stopSchedules ends the schedules' goroutines of rt and waits for every
// one it started (removed and retired ones too); no schedule starts in rt
// afterwards. The session's context is cancelled already.
func (rt *schedRun) stopSchedules() {
	rt.e.schedMu.Lock()
	rt.schedulesOff = true
	for _, sc := range rt.e.schedules {
		if sc.cancel != nil {
			sc.cancel()
		}
	}
	for _, se := range rt.e.stored {
		se.sc.cancel()
	}
	rt.e.stored = nil // the next session reads the stored schedules again
	rt.e.sched = nil
	rt.e.schedMu.Unlock()
	rt.schedWG.Wait()
}

// retire ends e's goroutine without waiting for it (Client.schedMu held):
// the session's stop waits for it. The caller may be that goroutine (a
// report's handler that defines or deletes a schedule).
func (rt *schedRun) retire(sc *Schedule) {
	if sc.cancel != nil {
		sc.cancel()
	}
}

// startSchedule runs e until the session stops or the schedule is removed
// (Client.schedMu held). Its first timer is armed before it returns, and
// each next one before an occurrence fires, so a virtual clock moved at any
// point finds it.
func (rt *schedRun) startSchedule(sc *Schedule) {
	if rt.schedulesOff {
		return
	}
	ctx, cancel := context.WithCancel(rt.ctx)
	done := make(chan struct{})
	sc.stop = func() {
		cancel()
		<-done
	}
	sc.cancel = cancel
	rt.schedWG.Add(1)
	e := rt.e
	// Timers are armed against the clock's time when they are made, so a
	// clock that moved meanwhile fires them at once.
	arm := func(at time.Time) hclock.Timer {
		if at.IsZero() {
			return nil
		}
		return e.clock.NewTimer(max(0, at.Sub(e.clock.Now())))
	}
	// The first occurrence due: the latest one missed within the window,
	// else the next one. Occurrences from before the store first saw the
	// schedule are left out once the registration says when that was.
	now := e.now()
	notBefore := sc.NotBefore
	at := firstDue(sc, now, notBefore)
	timer := arm(at)
	sc.setDue(at)
	reg := &driver.ScheduleUpsertParams{Name: sc.Name, Spec: sc.Cron, NextAt: at, Stored: sc.Stored, Version: sc.Version}
	rt.s.workerChanged() // the row reports the schedules run here
	go func() {
		defer rt.schedWG.Done()
		defer close(done)
		defer rt.s.workerChanged()
		defer cancel()
		defer e.progressed()
		defer sc.setDue(time.Time{})
		defer func() {
			if err := sc.stuck.Load(); err != nil && ctx.Err() == nil {
				e.reportError(*err, hoppertype.PhaseSchedule)
			}
		}()
		// The store learns of the schedule (its listing, its next
		// occurrence) now, and says when it first saw it: no occurrence
		// from before fires, so a schedule new to the store does not
		// catch up one from before its registration, while one
		// registered earlier (a restart after an outage) catches up what
		// it missed since. Without an answer, this start counts as the
		// first sighting. The registration is dated when the schedule
		// started here, whenever it reaches the store.
		reg.Now = now
		seen, err := e.registerSchedule(ctx, reg)
		if err != nil && ctx.Err() == nil {
			e.reportError(fmt.Errorf("schedule %s: store its registration: %w", sc.Name, err), hoppertype.PhaseSchedule)
		}
		if seen.IsZero() {
			seen = now
		}
		if seen.After(notBefore) {
			notBefore = seen
		}
		if !at.IsZero() && at.Before(notBefore) {
			if timer != nil {
				timer.Stop()
			}
			at = firstDue(sc, now, notBefore)
			timer = arm(at)
			sc.setDue(at)
			// The store was told of the occurrence left out: tell it the
			// one that fires (a listing reads it from there).
			reg.NextAt = at
			if _, err := e.registerSchedule(ctx, reg); err != nil && ctx.Err() == nil {
				e.reportError(fmt.Errorf("schedule %s: store its next occurrence: %w", sc.Name, err), hoppertype.PhaseSchedule)
			}
		}
		for timer != nil {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C():
			}
			if ctx.Err() != nil {
				return
			}
			now := e.now()
			if l := latestWithin(sc, now, notBefore); l.After(at) {
				// Behind (the process was suspended, the clock jumped):
				// only the latest occurrence due fires.
				at = l
			} else if now.Sub(at) > sc.window() {
				// Too late for this one, and none later is due yet.
				at = sc.Next(now)
				timer = arm(at)
				sc.setDue(at)
				e.progressed()
				continue
			}
			fire := at
			// The next one is after now: any between would have been the
			// latest due.
			at = sc.Next(fire)
			timer = arm(at)
			rt.fireOccurrence(ctx, sc, fire, at)
			// Stored (or given up): Settle may move the clock on.
			sc.setDue(at)
			e.progressed()
		}
	}()
}

// registerSchedule stores a schedule's registration, within shortBudget
// (a start without an answer counts as the first sighting).
func (e *Engine) registerSchedule(ctx context.Context, reg *driver.ScheduleUpsertParams) (time.Time, error) {
	ctx, cancel := call(ctx, shortBudget)
	defer cancel()
	return e.drv.ScheduleUpsert(ctx, reg)
}

// window is how late e's occurrence may still fire: its CatchUp, and never
// less than scheduleSlack.
func (sc *Schedule) window() time.Duration { return max(sc.CatchUp, scheduleSlack) }

// latestWithin returns the latest occurrence of e at or before now, within
// e's window and not before notBefore, or zero.
func latestWithin(sc *Schedule, now, notBefore time.Time) time.Time {
	var last time.Time
	for t := sc.Next(now.Add(-sc.window() - time.Nanosecond)); !t.IsZero() && !t.After(now); t = sc.Next(t) {
		if !t.Before(notBefore) {
			last = t
		}
	}
	return last
}

// firstDue is the occurrence e fires first when it starts at now: the
// latest one missed within its window (not before notBefore), else the
// next one (zero when there is none).
func firstDue(sc *Schedule, now, notBefore time.Time) time.Time {
	if at := latestWithin(sc, now, notBefore); !at.IsZero() {
		return at
	}
	at := sc.Next(now)
	for !at.IsZero() && at.Before(notBefore) {
		at = sc.Next(at)
	}
	return at
}

// fireOccurrence enqueues e's job for the occurrence at (next follows it),
// unless another process did or the schedule is paused: the occurrence's
// key, its record and the job are stored in one transaction. A failed
// attempt is retried while the occurrence is within the catch-up window
// (and at least once).
func (rt *schedRun) fireOccurrence(ctx context.Context, sc *Schedule, at, next time.Time) {
	e := rt.e
	occ, err := sc.Occurrence(at)
	if err != nil {
		e.reportError(fmt.Errorf("schedule %s: occurrence %s: %w", sc.Name, at.Format(time.RFC3339), err), hoppertype.PhaseSchedule)
		return
	}
	if occ == nil {
		return
	}
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		err := e.enqueueOccurrence(ctx, sc, at, next, occ)
		if errors.Is(err, errDefinitionGone) {
			// This process runs a stored definition deleted or replaced
			// since it read it: read them again now, so the new one (if
			// any) takes the occurrence while it is still due.
			rt.syncStored()
			return
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.Is(err, hoppertype.ErrInvalidInput) || (try > 0 && e.now().Sub(at) > sc.window()) {
			e.reportError(fmt.Errorf("schedule %s: occurrence %s skipped: %w", sc.Name, at.Format(time.RFC3339), err), hoppertype.PhaseSchedule)
			return
		}
		e.reportError(fmt.Errorf("schedule %s: occurrence %s (retrying): %w", sc.Name, at.Format(time.RFC3339), err), hoppertype.PhaseSchedule)
		t := e.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = min(2*wait, scheduleRetry)
	}
}

// errDefinitionGone rolls back an occurrence of a stored schedule deleted
// or defined again since this process read it.
var errDefinitionGone = errors.New("hopper: the stored schedule's definition is gone")

// scheduleKey is the key that records e's occurrence at.
func scheduleKey(name string, at time.Time) string {
	return scheduleKeyPrefix + name + ":" + at.UTC().Format(time.RFC3339Nano)
}

// enqueueOccurrence stores the occurrence's key, its record and its job (or
// its run) in one transaction; when the key is held already it stores
// nothing, and when the schedule is paused only the key and the record.
// A stored schedule's definition gone since this process read it stores
// nothing and is errDefinitionGone. One try has the occurrence's catch-up
// window, up to occurrenceBudget.
func (e *Engine) enqueueOccurrence(ctx context.Context, sc *Schedule, at, next time.Time, occ *Occurrence) error {
	ctx, cancel := call(ctx, min(sc.window(), occurrenceBudget))
	defer cancel()
	now := e.now()
	key := &driver.KeySetIfAbsentParams{Key: scheduleKey(sc.Name, at), Now: now, ExpiresAt: at.Add(sc.window() + scheduleKeyKeep)}
	// claim takes the occurrence for this process: false when another
	// process took it or the schedule is paused.
	claim := func(ctx context.Context, tx driver.Executor) (bool, error) {
		fresh, err := tx.KeySetIfAbsent(ctx, key)
		if err != nil || !fresh {
			return false, err
		}
		paused, err := tx.ScheduleRecord(ctx, &driver.ScheduleRecordParams{Name: sc.Name, Spec: sc.Cron, At: at, NextAt: next, Now: now,
			Stored: sc.Stored, Version: sc.Version})
		if sc.Stored && errors.Is(err, hoppertype.ErrNotFound) {
			// Deleted or defined again since this process read it: the
			// occurrence is not this definition's (its key goes back too).
			return false, errDefinitionGone
		}
		return err == nil && !paused, err
	}
	if occ.Start != nil {
		// The run's start notifies its queue itself, after the commit.
		var row *hoppertype.JobRow
		err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			row = nil
			mine, err := claim(ctx, tx)
			if err != nil || !mine {
				return err
			}
			row, err = occ.Start(ctx, tx)
			return err
		})
		if errors.Is(err, errDefinitionGone) {
			return err
		}
		if err != nil {
			return fmt.Errorf("hopper: start run: %w", err)
		}
		if row != nil {
			e.afterInsert([]driver.JobInsertResult{{Job: row}}, nil, nil)
		}
		return nil
	}
	row, skipQueue, err := occ.Job(now)
	if err != nil {
		return err
	}
	skip := e.SkipQueueRows([]*hoppertype.JobRow{row}, []bool{skipQueue}, now)
	var res []driver.JobInsertResult
	store := func(ctx context.Context) error {
		return e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			res = nil
			mine, err := claim(ctx, tx)
			if err != nil || !mine {
				return err
			}
			res, err = e.InsertIn(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}})
			return err
		})
	}
	if mw := e.cfg.Hooks.InsertMiddleware; mw != nil {
		err = mw(ctx, []*hoppertype.JobRow{row}, store)
	} else {
		err = store(ctx)
	}
	if errors.Is(err, errDefinitionGone) {
		return err
	}
	if err != nil {
		return fmt.Errorf("hopper: enqueue: %w", err)
	}
	if len(res) > 0 {
		e.afterInsert(res, skip, nil)
	}
	return nil
}

// storedEntry is a stored schedule this client runs: its definition as
// last read, and the entry that runs it.
type storedEntry struct {
	def driver.ScheduleDef
	sc  *Schedule
}

// sameDef reports whether a and b define the same schedule.
func sameDef(a, b *driver.ScheduleDef) bool {
	return a.Version == b.Version && a.Spec == b.Spec && a.Kind == b.Kind && a.Target == b.Target && bytes.Equal(a.Input, b.Input) &&
		a.Location == b.Location && a.CatchUp == b.CatchUp
}

// syncStoredSchedules reports what the session's first read of the stored
// schedules could not run, then rereads them every few poll intervals (on
// the wall clock: a definition comes from outside) until the session stops.
func (rt *schedRun) syncStoredSchedules(reports []error) {
	for _, err := range reports {
		rt.e.reportError(err, hoppertype.PhaseSchedule)
	}
	tick := time.NewTicker(min(scheduleSyncEvery*rt.e.cfg.PollInterval, scheduleSyncMax))
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
		}
		rt.syncStored()
	}
}

// syncStored reads the stored schedules and reports what it could not run,
// once per definition, after letting go of every lock (a report's handler
// may define or delete one).
func (rt *schedRun) syncStored() { rt.syncStoredCtx(rt.ctx) }

// syncStoredCtx is syncStored reading the store within ctx too.
func (rt *schedRun) syncStoredCtx(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(rt.ctx, cancel)
	defer stop()
	for _, err := range rt.syncStoredOnce(ctx) {
		rt.e.reportError(err, hoppertype.PhaseSchedule)
	}
}

// syncStoredOnce reads the stored schedules once (within ctx) and starts,
// restarts or stops this client's runs of them, returning the errors to
// report. Calls are serialised, so a later read is never undone by an
// earlier one. Nothing here waits for a schedule's goroutine: a replaced
// or deleted schedule's is only cancelled (its records would be refused:
// they name the definition's version), since the caller may be that
// goroutine.
func (rt *schedRun) syncStoredOnce(ctx context.Context) []error {
	rt.syncMu.Lock()
	defer rt.syncMu.Unlock()
	e := rt.e
	lctx, cancel := call(ctx, shortBudget) // the next read comes soon enough
	rows, err := e.drv.ScheduleList(lctx, &driver.ScheduleListParams{})
	cancel()
	if err != nil {
		if ctx.Err() != nil || rt.ctx.Err() != nil {
			return nil
		}
		return []error{fmt.Errorf("read stored schedules: %w", err)}
	}
	want := map[string]*driver.ScheduleRow{}
	for _, r := range rows {
		if r.Def != nil {
			want[r.Name] = r
		}
	}
	var reports []error
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	if rt.schedulesOff {
		return nil // a stopped session's read: the next session's are its own
	}
	for name, se := range e.stored {
		if r := want[name]; r == nil || !sameDef(&se.def, r.Def) {
			rt.retire(se.sc)
			delete(e.stored, name)
		}
	}
	for name, r := range want {
		if _, running := e.stored[name]; running {
			continue
		}
		var why error
		if _, inCode := e.schedules[name]; inCode {
			why = fmt.Errorf("schedule %s is registered in code and defined in the store: the code's runs here; delete the stored one", name)
		} else if sc, err := e.storedSchedule(name, r.Def); errors.Is(err, ErrScheduleNotHere) {
			continue // another process's to run
		} else if err != nil {
			why = fmt.Errorf("stored schedule %s: this process cannot run it: %w", name, err)
		} else {
			if e.stored == nil {
				e.stored = map[string]*storedEntry{}
			}
			e.stored[name] = &storedEntry{def: *r.Def, sc: sc}
			rt.startSchedule(sc)
			continue
		}
		if prev, ok := rt.schedReported[name]; !ok || !sameDef(&prev, r.Def) {
			if rt.schedReported == nil {
				rt.schedReported = map[string]driver.ScheduleDef{}
			}
			rt.schedReported[name] = *r.Def
			reports = append(reports, why)
		}
	}
	return reports
}

// ErrScheduleNotHere says a stored schedule's target is not registered
// here (Hooks.StoredSchedule).
var ErrScheduleNotHere = errors.New("hopper: the stored schedule's target is not registered here")

// storedSchedule is the schedule that runs the stored schedule name as def
// defines it (Hooks.StoredSchedule).
func (e *Engine) storedSchedule(name string, def *driver.ScheduleDef) (*Schedule, error) {
	if e.cfg.Hooks.StoredSchedule == nil {
		return nil, ErrScheduleNotHere
	}
	sc, err := e.cfg.Hooks.StoredSchedule(name, def)
	if err != nil {
		return nil, err
	}
	sc.Stored, sc.Version = true, def.Version
	return sc, nil
}

// scheduleSyncEvery is how many poll intervals pass between two reads of
// the stored schedules, and scheduleSyncMax the longest wait between two.
const (
	scheduleSyncEvery = 5
	scheduleSyncMax   = 30 * time.Second
)

// AddSchedule registers sc in code; a started engine runs it at once (in
// place of a stored schedule of its name). The returned function removes
// it, waiting for an occurrence being stored, then reads the stored
// schedules again (one of its name may run here now). A name registered
// already is an error wrapping ErrInvalidInput.
func (e *Engine) AddSchedule(sc *Schedule) (remove func(), err error) {
	e.schedMu.Lock()
	if e.schedules == nil {
		e.schedules = map[string]*Schedule{}
	}
	if _, dup := e.schedules[sc.Name]; dup {
		e.schedMu.Unlock()
		return nil, fmt.Errorf("%w: schedule %q is registered already", hoppertype.ErrInvalidInput, sc.Name)
	}
	e.schedules[sc.Name] = sc
	if rt := e.sched; rt != nil {
		// The code's schedule replaces a stored one of its name here.
		if se := e.stored[sc.Name]; se != nil {
			rt.retire(se.sc)
			delete(e.stored, sc.Name)
		}
		rt.startSchedule(sc)
	}
	e.schedMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.schedMu.Lock()
			if e.schedules[sc.Name] == sc {
				delete(e.schedules, sc.Name)
			}
			stop := sc.stop // Stop may have called it too: it waits all the same
			e.schedMu.Unlock()
			if stop != nil {
				stop()
			}
			e.syncStored() // a stored schedule of its name may run here now
		})
	}, nil
}

// Schedules returns the schedules this engine runs or will run when
// started: the ones registered in code, then the stored ones it runs.
func (e *Engine) Schedules() []*Schedule {
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	out := make([]*Schedule, 0, len(e.schedules)+len(e.stored))
	for _, sc := range e.schedules {
		out = append(out, sc)
	}
	for _, se := range e.stored {
		out = append(out, se.sc)
	}
	return out
}

// SyncSchedules makes a started engine run the stored schedules as they
// are now, before it returns, reading them within ctx (a stopped one
// reads them when it starts); a failed read is reported to Hooks.OnError
// on the caller's goroutine.
func (e *Engine) SyncSchedules(ctx context.Context) {
	e.schedMu.Lock()
	rt := e.sched
	e.schedMu.Unlock()
	if rt != nil {
		rt.syncStoredCtx(ctx)
	}
}

// syncStored is SyncSchedules within the session's life.
func (e *Engine) syncStored() {
	e.schedMu.Lock()
	rt := e.sched
	e.schedMu.Unlock()
	if rt != nil {
		rt.syncStored()
	}
}

// CodeSchedules returns the names of the schedules registered in code,
// sorted.
func (e *Engine) CodeSchedules() []string {
	e.schedMu.Lock()
	names := make([]string, 0, len(e.schedules))
	for n := range e.schedules {
		names = append(names, n)
	}
	e.schedMu.Unlock()
	slices.Sort(names)
	return names
}

// ScheduleKeyKeep is how long an occurrence's key outlives the latest time
// a process could still fire that occurrence: the longest catch-up a
// stored schedule may have.
const ScheduleKeyKeep = scheduleKeyKeep
