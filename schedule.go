package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
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
	// one URL path segment, as ValidateID has it, but may end in '@' or
	// '.' and digits (it names no job or run).
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
	stored, err := c.store().ScheduleList(ctx, &driver.ScheduleListParams{})
	if err != nil {
		return nil, fmt.Errorf("hopper: list schedules: %w", err)
	}
	now := c.now()
	entries := c.eng.Schedules()
	byName := make(map[string]*ScheduleInfo, len(entries)+len(stored))
	for _, e := range entries {
		byName[e.Name] = &ScheduleInfo{Name: e.Name, Cron: e.Cron, Next: e.Next(now), CatchUp: e.CatchUp, Registered: true}
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
	err := c.store().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
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
	gone, err := c.store().ScheduleDelete(ctx, &driver.ScheduleDeleteParams{Name: name})
	if err != nil {
		return fmt.Errorf("hopper: delete schedule %s: %w", name, err)
	}
	if !gone {
		return fmt.Errorf("hopper: delete schedule %s: %w", name, ErrNotFound)
	}
	c.syncSchedulesNow(ctx)
	return nil
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
	if err := validateSegment(s.Name); err != nil {
		return nil, fmt.Errorf("schedule name: %w", err)
	}
	if err := checkText("cron expression", s.Cron); err != nil {
		return nil, err
	}
	if (s.Job == nil) == (s.Run == nil) {
		return nil, fmt.Errorf("%w: schedule %q needs one of Job and Run", ErrInvalidInput, s.Name)
	}
	sc := &engine.Schedule{Name: s.Name, Cron: s.Cron, Next: s.Next, CatchUp: catchUpWindow(s.CatchUp)}
	switch {
	case s.Cron != "" && s.Next != nil:
		return nil, fmt.Errorf("%w: schedule %q has both Cron and Next", ErrInvalidInput, s.Name)
	case s.Cron != "":
		next, err := ParseCron(s.Cron, s.Location)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %w", s.Name, err)
		}
		sc.Next = next
	case s.Next == nil:
		return nil, fmt.Errorf("%w: schedule %q needs Cron or Next", ErrInvalidInput, s.Name)
	default:
		// A Next that does not move forward would fire one time forever:
		// it ends the schedule instead; the schedule's goroutine reports
		// it (not here: this may run under the client's locks).
		next := s.Next
		sc.Next = func(after time.Time) time.Time {
			at := next(after)
			if !at.IsZero() && !at.After(after) {
				sc.End(fmt.Errorf("schedule %s: Next(%s) returned %s, not a later time: the schedule ends",
					s.Name, after.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
				return time.Time{}
			}
			return at
		}
	}
	sc.Occurrence = c.occurrences(s.Name, s.Job, s.Run)
	return c.eng.AddSchedule(sc)
}

// occurrences returns what a schedule's occurrence at stores: the job
// that job makes (or the run that run makes) for it, checked and built.
// It runs on the schedule's goroutine.
func (c *Client) occurrences(name string, job func(time.Time) (*JobSpec, error), run func(time.Time) (*RunSpec, error)) func(at time.Time) (*engine.Occurrence, error) {
	// lastJob is the spec Job returned for the previous occurrence.
	var lastJob *JobSpec
	return func(at time.Time) (*engine.Occurrence, error) {
		if run != nil {
			rs, err := run(at)
			if err != nil || rs == nil {
				return nil, err
			}
			return &engine.Occurrence{Start: func(ctx context.Context, tx driver.Executor) (*hoppertype.JobRow, error) {
				if rs.t == nil {
					return nil, fmt.Errorf("%w: schedule %s: an empty RunSpec (make it with WorkflowType.RunSpec)", ErrInvalidInput, name)
				}
				row, existing, err := c.startRunRow(ctx, tx, rs.t, rs.in, &rs.opts, "")
				if err != nil || existing {
					return nil, err
				}
				return row, nil
			}}, nil
		}
		spec, err := job(at)
		if err != nil || spec == nil {
			return nil, err
		}
		// A spec returned again keeps the id its first enqueue minted:
		// each occurrence gets a copy with a fresh one (unless
		// InsertOpts.ID names it).
		cp := *spec
		if spec == lastJob {
			cp.id = cp.opts.ID
		}
		lastJob = spec
		spec = &cp
		return &engine.Occurrence{Job: func(now time.Time) (*hoppertype.JobRow, bool, error) {
			if spec.t == nil {
				return nil, false, fmt.Errorf("%w: schedule %s: an empty JobSpec (make it with Type.Job)", ErrInvalidInput, name)
			}
			if _, ok := spec.t.(workflowCore); ok {
				return nil, false, fmt.Errorf("%w: schedule %s: %q is a workflow: start it with Schedule.Run", ErrInvalidInput, name, spec.t.name())
			}
			row, err := c.buildRow(spec, now)
			if err != nil {
				return nil, false, err
			}
			return row, spec.t.skipQueue() || spec.opts.SkipQueue, nil
		}}, nil
	}
}
