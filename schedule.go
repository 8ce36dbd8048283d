package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// Schedule is a recurring enqueue: at each occurrence of Cron (or of Next)
// the job that Job makes for it is enqueued once across the fleet, however
// many processes run the schedule. Register it with Client.Schedule.
//
// Each occurrence is recorded under a key of the schedule's name and the
// occurrence's time, in the same transaction as the job's insert: a process
// that comes second finds the key and enqueues nothing, and a crash leaves
// either both or neither.
type Schedule struct {
	// Name identifies the schedule across the fleet: processes that
	// register a schedule of the same name share its occurrences. It is
	// held to ValidateID's rule (it names the schedule in URLs).
	Name string
	// Cron is a standard 5-field cron expression, read in Location:
	// minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
	// JAN-DEC), day of week (0-6, 0 is Sunday, or SUN-SAT); each field takes
	// *, a value, a range a-b, a step */n or a-b/n, and comma lists. When
	// both day fields are restricted, a day matching either fires. The
	// descriptors @yearly, @monthly, @weekly, @daily, @hourly and
	// @every <duration> are accepted too, and a CRON_TZ=<zone> prefix
	// overrides Location. Cron and Next are exclusive.
	Cron string
	// Next, instead of Cron, returns the occurrence that follows after (a
	// later time); a zero time ends the schedule. Every process must find
	// the same occurrences, so derive them from the time alone (every ten
	// minutes: after.Truncate(10*time.Minute).Add(10*time.Minute)), never
	// from when a process started.
	Next func(after time.Time) time.Time
	// Location is the time zone Cron is read in: nil is time.Local, as
	// cron's own convention.
	Location *time.Location
	// CatchUp is how late an occurrence may still fire. When no process
	// ran the schedule at an occurrence (a deploy, a restart) or the
	// process fell behind, the latest occurrence missed fires when it
	// catches up, if that is within CatchUp of it; earlier ones are
	// skipped. Zero means one minute; a negative value fires occurrences
	// only on time (within ten seconds of it). Whatever CatchUp says, no
	// occurrence from before the store first saw the schedule (its first
	// registration by any process, ScheduleInfo.FirstSeen) fires.
	CatchUp time.Duration
	// Job returns the job to enqueue for the occurrence at (build it with
	// Type.Job); nil skips the occurrence. Jobs that share an
	// InsertOpts.UniqueKey do not overlap: an occurrence enqueues nothing
	// while the previous one's job is queued or running. An error skips it too and is
	// reported to Config.OnError. Every process running the schedule calls
	// Job for each occurrence and only one stores its job, so Job should
	// only build it.
	Job func(at time.Time) (*JobSpec, error)
	// Run, instead of Job, returns the workflow run to start for the
	// occurrence at (build it with WorkflowType.RunSpec), under the same
	// rules. Job and Run are exclusive.
	Run func(at time.Time) (*RunSpec, error)
}

// defaultCatchUp is Schedule.CatchUp's zero value.
const defaultCatchUp = time.Minute

// catchUpWindow is how late an occurrence fires under a schedule's CatchUp:
// zero is the default, negative none (on time only).
func catchUpWindow(catchUp time.Duration) time.Duration {
	if catchUp == 0 {
		return defaultCatchUp
	}
	return max(catchUp, 0)
}

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

// ParseCron reads a cron expression as Schedule.Cron does, in loc (nil is
// time.Local), and returns the function that gives the occurrence after a
// time (zero when there is none). A malformed expression is an error
// wrapping ErrInvalidInput.
func ParseCron(expr string, loc *time.Location) (func(after time.Time) time.Time, error) {
	spec, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %w", ErrInvalidInput, expr, err)
	}
	switch s := spec.(type) {
	case *cron.SpecSchedule:
		trimmed := strings.TrimSpace(expr)
		if loc != nil && !strings.HasPrefix(trimmed, "CRON_TZ=") && !strings.HasPrefix(trimmed, "TZ=") {
			s.Location = loc
		}
	case cron.ConstantDelaySchedule:
		// @every d counts from the time given; every process must find the
		// same occurrences, so they are the multiples of d from a fixed
		// origin (Go's zero time, which Time.Truncate counts from).
		d := s.Delay
		return func(after time.Time) time.Time { return after.Truncate(d).Add(d) }, nil
	}
	return spec.Next, nil
}

// ScheduleInfo describes a schedule: as this client registered it, and as
// the store keeps it for the fleet.
type ScheduleInfo struct {
	Name string
	// Cron is the schedule's expression; empty for a Next function.
	Cron string
	// Next is the next occurrence after now (as the store last heard of
	// it when this client does not run the schedule); zero when there is
	// none.
	Next time.Time
	// CatchUp is how late an occurrence may still fire (see
	// Schedule.CatchUp; 0 for on time only). It is 0 for a schedule
	// registered in code that no started client runs.
	CatchUp time.Duration
	// Location is the time zone of a stored schedule's expression (empty
	// for one registered in code).
	Location string
	// Registered is set when a started client runs the schedule (registered
	// in its code, or stored with a target it registers): this client, or
	// another whose worker row reports it (rows are refreshed every
	// heartbeat interval), so every client lists the same. A schedule
	// registered in code that only the store knows was run by a process
	// that stopped (or stopped registering it).
	Registered bool
	// Stored is set for a schedule defined in the store (ScheduleDefine);
	// Type or Workflow is what it enqueues or starts, with Input.
	Stored   bool
	Type     string
	Workflow string
	Input    json.RawMessage
	// Paused is set while the schedule is paused (SchedulePause): its
	// occurrences enqueue nothing, on every process.
	Paused bool
	// Occurrences counts the occurrences that fired while not paused (one
	// whose job a UniqueKey merged with the previous one's counts too); Last
	// is the latest of them (zero before the first).
	Occurrences int64
	Last        time.Time
	// UpdatedAt is when the store last heard of the schedule: it was
	// defined, a process started it or fired an occurrence, or it was
	// paused or resumed.
	UpdatedAt time.Time
	// FirstSeen is when the store first heard of the schedule: a process
	// started it, fired it or defined it (a pause does not count). No
	// occurrence from before it fires, caught up or not. Zero while the
	// store has not seen it.
	FirstSeen time.Time
}

// ScheduleList lists the schedules this client registered and the ones the
// store keeps (registered by any process, or paused by name), by name.
func (c *Client) ScheduleList(ctx context.Context) ([]ScheduleInfo, error) {
	stored, err := c.drv.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("hopper: list schedules: %w", err)
	}
	now := c.now()
	c.schedMu.Lock()
	entries := make([]*scheduleEntry, 0, len(c.schedules)+len(c.stored))
	for _, e := range c.schedules {
		entries = append(entries, e)
	}
	for _, se := range c.stored {
		entries = append(entries, se.e)
	}
	c.schedMu.Unlock()
	byName := make(map[string]*ScheduleInfo, len(entries)+len(stored))
	for _, e := range entries {
		byName[e.name] = &ScheduleInfo{Name: e.name, Cron: e.cron, Next: e.next(now), CatchUp: e.catchUp, Registered: true}
	}
	for _, r := range stored {
		in := byName[r.Name]
		if in == nil {
			in = &ScheduleInfo{Name: r.Name, Cron: r.Spec, Next: r.NextAt}
			byName[r.Name] = in
		}
		in.Paused, in.Occurrences, in.Last, in.UpdatedAt, in.FirstSeen = r.Paused, r.Occurrences, r.LastAt, r.UpdatedAt, r.FirstSeenAt
		if d := r.Def; d != nil {
			in.Stored, in.Input, in.Location = true, json.RawMessage(d.Input), d.Location
			if d.Kind == scheduleDefRun {
				in.Workflow = d.Target
			} else {
				in.Type = d.Target
			}
			if !in.Registered {
				in.CatchUp = catchUpWindow(d.CatchUp)
			}
		}
	}
	if err := c.markRunElsewhere(ctx, byName); err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, 0, len(byName))
	for _, in := range byName {
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b ScheduleInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SchedulePause stops the named schedule's occurrences from enqueueing
// anything, on every process that runs it, until ScheduleResume. An
// occurrence while paused is skipped, not kept for later. A name that
// neither the store nor this client knows is refused with an
// *UnknownNameError (wrapping ErrNotFound), unless opts.Create pauses it
// ahead of the deploy that registers it.
func (c *Client) SchedulePause(ctx context.Context, name string, opts *PauseOpts) error {
	return c.setSchedulePaused(ctx, name, true, opts != nil && opts.Create)
}

// ScheduleResume lets a paused schedule's next occurrences fire again. A
// name that neither the store nor this client knows is refused as
// SchedulePause refuses it.
func (c *Client) ScheduleResume(ctx context.Context, name string) error {
	return c.setSchedulePaused(ctx, name, false, false)
}

func (c *Client) setSchedulePaused(ctx context.Context, name string, paused, create bool) error {
	if name == "" {
		return fmt.Errorf("%w: empty schedule name", ErrInvalidInput)
	}
	if err := checkText("schedule name", name); err != nil {
		return err
	}
	err := c.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if !create {
			// A name nobody knows is a typo, not a new row.
			if err := c.checkScheduleKnown(ctx, tx, name); err != nil {
				return err
			}
		}
		return tx.ScheduleSetPaused(ctx, &driver.ScheduleSetPausedParams{Name: name, Paused: paused, Now: c.now()})
	})
	var unknown *UnknownNameError
	if errors.As(err, &unknown) {
		return err
	}
	if err != nil {
		return fmt.Errorf("hopper: set schedule %s paused=%v: %w", name, paused, err)
	}
	return nil
}

// ScheduleDelete removes what the store keeps of the named schedule: its
// pause, its counts and, for a stored schedule (ScheduleDefine), its
// definition, so every process stops running it. A schedule registered in
// code is not stopped: the processes that still run it store it again, not
// paused, when they next start it or fire an occurrence (so deleting a
// paused one that still runs resumes it); delete those once retired from
// the code. A name the store does not keep is an error wrapping
// ErrNotFound.
func (c *Client) ScheduleDelete(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty schedule name", ErrInvalidInput)
	}
	if err := checkText("schedule name", name); err != nil {
		return err
	}
	gone, err := c.drv.ScheduleDelete(ctx, name)
	if err != nil {
		return fmt.Errorf("hopper: delete schedule %s: %w", name, err)
	}
	if !gone {
		return fmt.Errorf("hopper: delete schedule %s: %w", name, ErrNotFound)
	}
	c.syncSchedulesNow(ctx)
	return nil
}

// scheduleEntry is a registered schedule.
type scheduleEntry struct {
	name string
	cron string
	// stored is set for a schedule defined in the store, with the version
	// of its definition: its records leave a deleted or redefined one
	// alone.
	stored  bool
	version int64
	// notBefore is when a stored schedule was defined: an occurrence
	// before it does not fire (caught up). Nor does one before the store
	// first saw the schedule (its row's FirstSeenAt), for any schedule.
	notBefore time.Time
	next      func(after time.Time) time.Time
	catchUp   time.Duration
	job       func(at time.Time) (*JobSpec, error)
	run       func(at time.Time) (*RunSpec, error)
	// stuck holds why a Next that did not move forward ended the
	// schedule, for its goroutine to report.
	stuck atomic.Pointer[error]
	// lastJob is the spec Job returned for the previous occurrence (read
	// and written by the schedule's goroutine only).
	lastJob *JobSpec

	// stop ends the goroutine that runs the schedule in the latest
	// runtime and waits for it (nil before one ran; calling it again
	// returns at once); cancel only ends it. Guarded by Client.schedMu.
	stop   func()
	cancel func()
}

// Schedule registers s; the client runs it while started (it may be
// registered before or after Start). The returned function removes it,
// waiting for an occurrence being enqueued (so it must not be called from
// s.Job), then reads the stored schedules again (a stored schedule of the
// name may run here now; a failed read is reported to Config.OnError on
// the caller's goroutine). A stored schedule of the same name that this
// client ran stops; an occurrence it was enqueueing may still land.
// A malformed schedule (no name, both or neither of Cron and Next, both or
// neither of Job and Run, a bad cron expression) or a name already
// registered on this client is refused with an error wrapping
// ErrInvalidInput.
//
// Job, Run and Next are called on the schedule's own goroutine (Next also
// where the schedule starts and in ScheduleList), so they must not call the
// returned function or Client.Stop, and Next must be a function of time
// alone. The same holds for Config.OnError when it handles PhaseSchedule.
func (c *Client) Schedule(s Schedule) (cancel func(), err error) {
	if s.Name == "" {
		return nil, fmt.Errorf("%w: a schedule needs a name", ErrInvalidInput)
	}
	if err := ValidateID(s.Name); err != nil {
		return nil, fmt.Errorf("schedule name: %w", err)
	}
	if err := checkText("cron expression", s.Cron); err != nil {
		return nil, err
	}
	if (s.Job == nil) == (s.Run == nil) {
		return nil, fmt.Errorf("%w: schedule %q needs one of Job and Run", ErrInvalidInput, s.Name)
	}
	e := &scheduleEntry{name: s.Name, cron: s.Cron, next: s.Next, catchUp: s.CatchUp, job: s.Job, run: s.Run}
	switch {
	case s.Cron != "" && s.Next != nil:
		return nil, fmt.Errorf("%w: schedule %q has both Cron and Next", ErrInvalidInput, s.Name)
	case s.Cron != "":
		next, err := ParseCron(s.Cron, s.Location)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %w", s.Name, err)
		}
		e.next = next
	case s.Next == nil:
		return nil, fmt.Errorf("%w: schedule %q needs Cron or Next", ErrInvalidInput, s.Name)
	default:
		// A Next that does not move forward would fire one time forever:
		// it ends the schedule instead; the schedule's goroutine reports
		// it (not here: this may run under the client's locks).
		next := s.Next
		e.next = func(after time.Time) time.Time {
			at := next(after)
			if !at.IsZero() && !at.After(after) {
				err := fmt.Errorf("schedule %s: Next(%s) returned %s, not a later time: the schedule ends",
					s.Name, after.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
				e.stuck.CompareAndSwap(nil, &err)
				return time.Time{}
			}
			return at
		}
	}
	e.catchUp = catchUpWindow(e.catchUp)
	c.mu.Lock() // before schedMu: Start holds it while it starts the schedules
	c.schedMu.Lock()
	if c.schedules == nil {
		c.schedules = map[string]*scheduleEntry{}
	}
	if _, dup := c.schedules[s.Name]; dup {
		c.schedMu.Unlock()
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: schedule %q is registered already", ErrInvalidInput, s.Name)
	}
	c.schedules[s.Name] = e
	if c.rt != nil {
		// The code's schedule replaces a stored one of its name here.
		if se := c.stored[s.Name]; se != nil {
			c.rt.retire(se.e)
			delete(c.stored, s.Name)
		}
		c.rt.startSchedule(e)
	}
	c.schedMu.Unlock()
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.schedMu.Lock()
			if c.schedules[e.name] == e {
				delete(c.schedules, e.name)
			}
			stop := e.stop // Stop may have called it too: it waits all the same
			c.schedMu.Unlock()
			if stop != nil {
				stop()
			}
			if rt := c.runtime(); rt != nil {
				rt.syncStored() // a stored schedule of its name may run here now
			}
		})
	}, nil
}

// startSchedules starts the client's schedules in rt.
func (rt *runtime) startSchedules() {
	rt.c.schedMu.Lock()
	defer rt.c.schedMu.Unlock()
	for _, e := range rt.c.schedules {
		rt.startSchedule(e)
	}
}

// stopSchedules ends the schedules' goroutines of rt and waits for every
// one it started (removed and retired ones too); no schedule starts in rt
// afterwards. The runtime's context is cancelled already.
func (rt *runtime) stopSchedules() {
	rt.c.schedMu.Lock()
	rt.schedulesOff = true
	for _, e := range rt.c.schedules {
		if e.cancel != nil {
			e.cancel()
		}
	}
	for _, se := range rt.c.stored {
		se.e.cancel()
	}
	rt.c.stored = nil // the next runtime reads the stored schedules again
	rt.c.schedMu.Unlock()
	rt.schedWG.Wait()
}

// retire ends e's goroutine without waiting for it (Client.schedMu held):
// the runtime's stop waits for it. The caller may be that goroutine (a
// report's handler that defines or deletes a schedule).
func (rt *runtime) retire(e *scheduleEntry) {
	if e.cancel != nil {
		e.cancel()
	}
}

// startSchedule runs e until the runtime stops or the schedule is removed
// (Client.schedMu held). Its first timer is armed before it returns, and
// each next one before an occurrence fires, so a virtual clock moved at any
// point finds it.
func (rt *runtime) startSchedule(e *scheduleEntry) {
	if rt.schedulesOff {
		return
	}
	ctx, cancel := context.WithCancel(rt.ctx)
	done := make(chan struct{})
	e.stop = func() {
		cancel()
		<-done
	}
	e.cancel = cancel
	rt.schedWG.Add(1)
	c := rt.c
	// Timers are armed against the clock's time when they are made, so a
	// clock that moved meanwhile fires them at once.
	arm := func(at time.Time) Timer {
		if at.IsZero() {
			return nil
		}
		return c.clock.NewTimer(max(0, at.Sub(c.clock.Now())))
	}
	// The first occurrence due: the latest one missed within the window,
	// else the next one. Occurrences from before the store first saw the
	// schedule are left out once the registration says when that was.
	now := c.now()
	notBefore := e.notBefore
	at := firstDue(e, now, notBefore)
	timer := arm(at)
	reg := &driver.ScheduleUpsertParams{Name: e.name, Spec: e.cron, NextAt: at, Stored: e.stored, Version: e.version}
	rt.workerChanged() // the row reports the schedules run here
	go func() {
		defer rt.schedWG.Done()
		defer close(done)
		defer rt.workerChanged()
		defer cancel()
		defer func() {
			if err := e.stuck.Load(); err != nil && ctx.Err() == nil {
				c.reportError(*err, PhaseSchedule)
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
		seen, err := c.registerSchedule(ctx, reg)
		if err != nil && ctx.Err() == nil {
			c.reportError(fmt.Errorf("schedule %s: store its registration: %w", e.name, err), PhaseSchedule)
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
			at = firstDue(e, now, notBefore)
			timer = arm(at)
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
			now := c.now()
			if l := latestWithin(e, now, notBefore); l.After(at) {
				// Behind (the process was suspended, the clock jumped):
				// only the latest occurrence due fires.
				at = l
			} else if now.Sub(at) > e.window() {
				// Too late for this one, and none later is due yet.
				at = e.next(now)
				timer = arm(at)
				continue
			}
			fire := at
			// The next one is after now: any between would have been the
			// latest due.
			at = e.next(fire)
			timer = arm(at)
			rt.fireOccurrence(ctx, e, fire, at)
		}
	}()
}

// registerSchedule stores a schedule's registration, within shortBudget
// (a start without an answer counts as the first sighting).
func (c *Client) registerSchedule(ctx context.Context, reg *driver.ScheduleUpsertParams) (time.Time, error) {
	ctx, cancel := call(ctx, shortBudget)
	defer cancel()
	return c.drv.ScheduleUpsert(ctx, reg)
}

// window is how late e's occurrence may still fire: its CatchUp, and never
// less than scheduleSlack.
func (e *scheduleEntry) window() time.Duration { return max(e.catchUp, scheduleSlack) }

// latestWithin returns the latest occurrence of e at or before now, within
// e's window and not before notBefore, or zero.
func latestWithin(e *scheduleEntry, now, notBefore time.Time) time.Time {
	var last time.Time
	for t := e.next(now.Add(-e.window() - time.Nanosecond)); !t.IsZero() && !t.After(now); t = e.next(t) {
		if !t.Before(notBefore) {
			last = t
		}
	}
	return last
}

// firstDue is the occurrence e fires first when it starts at now: the
// latest one missed within its window (not before notBefore), else the
// next one (zero when there is none).
func firstDue(e *scheduleEntry, now, notBefore time.Time) time.Time {
	if at := latestWithin(e, now, notBefore); !at.IsZero() {
		return at
	}
	at := e.next(now)
	for !at.IsZero() && at.Before(notBefore) {
		at = e.next(at)
	}
	return at
}

// fireOccurrence enqueues e's job for the occurrence at (next follows it),
// unless another process did or the schedule is paused: the occurrence's
// key, its record and the job are stored in one transaction. A failed
// attempt is retried while the occurrence is within the catch-up window
// (and at least once).
func (rt *runtime) fireOccurrence(ctx context.Context, e *scheduleEntry, at, next time.Time) {
	c := rt.c
	var (
		spec *JobSpec
		run  *RunSpec
		err  error
	)
	if e.job != nil {
		spec, err = e.job(at)
	} else {
		run, err = e.run(at)
	}
	if err != nil {
		c.reportError(fmt.Errorf("schedule %s: occurrence %s: %w", e.name, at.Format(time.RFC3339), err), PhaseSchedule)
		return
	}
	if spec == nil && run == nil {
		return
	}
	if spec != nil {
		// A spec returned again keeps the id its first enqueue minted:
		// each occurrence gets a copy with a fresh one (unless InsertOpts.ID
		// names it).
		cp := *spec
		if spec == e.lastJob {
			cp.id = cp.opts.ID
		}
		e.lastJob = spec
		spec = &cp
	}
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		err := c.enqueueOccurrence(ctx, e, at, next, spec, run)
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
		if errors.Is(err, ErrInvalidInput) || (try > 0 && c.now().Sub(at) > e.window()) {
			c.reportError(fmt.Errorf("schedule %s: occurrence %s skipped: %w", e.name, at.Format(time.RFC3339), err), PhaseSchedule)
			return
		}
		c.reportError(fmt.Errorf("schedule %s: occurrence %s (retrying): %w", e.name, at.Format(time.RFC3339), err), PhaseSchedule)
		t := c.clock.NewTimer(wait)
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
func (c *Client) enqueueOccurrence(ctx context.Context, e *scheduleEntry, at, next time.Time, spec *JobSpec, run *RunSpec) error {
	ctx, cancel := call(ctx, min(e.window(), occurrenceBudget))
	defer cancel()
	now := c.now()
	key := &driver.KeySetIfAbsentParams{Key: scheduleKey(e.name, at), Now: now, ExpiresAt: at.Add(e.window() + scheduleKeyKeep)}
	// claim takes the occurrence for this process: false when another
	// process took it or the schedule is paused.
	claim := func(ctx context.Context, tx driver.Executor) (bool, error) {
		fresh, err := tx.KeySetIfAbsent(ctx, key)
		if err != nil || !fresh {
			return false, err
		}
		paused, err := tx.ScheduleRecord(ctx, &driver.ScheduleRecordParams{Name: e.name, Spec: e.cron, At: at, NextAt: next, Now: now,
			Stored: e.stored, Version: e.version})
		if e.stored && errors.Is(err, ErrNotFound) {
			// Deleted or defined again since this process read it: the
			// occurrence is not this definition's (its key goes back too).
			return false, errDefinitionGone
		}
		return err == nil && !paused, err
	}
	if run != nil {
		if run.t == nil {
			return fmt.Errorf("%w: schedule %s: an empty RunSpec (make it with WorkflowType.RunSpec)", ErrInvalidInput, e.name)
		}
		// The run's start notifies its queue itself, after the commit.
		var row *hoppertype.JobRow
		err := c.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			row = nil
			mine, err := claim(ctx, tx)
			if err != nil || !mine {
				return err
			}
			r, existing, err := c.startRunRow(ctx, tx, run.t, run.in, &run.opts, "")
			if err == nil && !existing {
				row = r
			}
			return err
		})
		if errors.Is(err, errDefinitionGone) {
			return err
		}
		if err != nil {
			return fmt.Errorf("hopper: start run: %w", err)
		}
		if row != nil {
			c.afterInsert([]driver.JobInsertResult{{Job: row}}, nil)
		}
		return nil
	}
	if spec.t == nil {
		return fmt.Errorf("%w: schedule %s: an empty JobSpec (make it with Type.Job)", ErrInvalidInput, e.name)
	}
	if _, ok := spec.t.(workflowCore); ok {
		return fmt.Errorf("%w: schedule %s: %q is a workflow: start it with Schedule.Run", ErrInvalidInput, e.name, spec.t.name())
	}
	row, err := c.buildRow(spec, now)
	if err != nil {
		return err
	}
	skip := c.skipQueueRows([]*JobSpec{spec}, []*hoppertype.JobRow{row}, now)
	var res []driver.JobInsertResult
	err = c.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		res = nil
		mine, err := claim(ctx, tx)
		if err != nil || !mine {
			return err
		}
		res, err = c.insertIn(ctx, tx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}})
		return err
	})
	if errors.Is(err, errDefinitionGone) {
		return err
	}
	if err != nil {
		return fmt.Errorf("hopper: enqueue: %w", err)
	}
	if len(res) > 0 {
		c.afterInsert(res, skip)
	}
	return nil
}
