package hopper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/internal/engine"
)

// StoredSchedule is a schedule defined in the store rather than in a
// program's code: any process can define it (the HTTP API, the CLI), and
// every started client that registers its Type (or Workflow) runs it,
// enqueueing that job (or starting that run) with Input at each occurrence,
// once across the fleet. Define it with Client.ScheduleDefine.
type StoredSchedule struct {
	// Name identifies the schedule (one URL path segment, as Schedule.Name);
	// it must not be the name of a schedule registered in code.
	Name string
	// Cron is a cron expression as Schedule.Cron takes it, without a
	// CRON_TZ prefix (Location gives the zone).
	Cron string
	// Location is the IANA time zone Cron is read in; empty is UTC (the
	// machines that run a stored schedule may sit in different zones, so
	// "Local" is refused).
	Location string
	// CatchUp is as Schedule.CatchUp: zero means one minute, negative on
	// time only; at most a day.
	CatchUp time.Duration
	// Type is the job type to enqueue, or Workflow the workflow to start;
	// exactly one is set.
	Type     string
	Workflow string
	// Input is the JSON input of each occurrence's job or run; empty is
	// null.
	Input json.RawMessage
}

// Schedule definition kinds, as the store keeps them.
const (
	scheduleDefJob = "job"
	scheduleDefRun = "run"
)

// ScheduleDefine stores s, or replaces the definition of the stored
// schedule of its name (its pause and counts stay). The processes that
// register s's type or workflow pick it up within five poll intervals
// (Config.PollInterval, at most 30 s); this client, when started, before
// ScheduleDefine returns; no occurrence from before the definition is
// caught up (a failed read of the store is reported to
// Config.OnError, on the caller's goroutine). A process that still runs
// an older definition enqueues nothing for it: the refused occurrence
// makes it read the store again, and the new definition fires it if it is
// still due. A malformed
// definition (no name, a bad cron expression or zone, a CRON_TZ prefix,
// both or neither of Type and Workflow, a CatchUp over a day, input that
// is not JSON, too large, or that the type, when registered here, does not
// decode) is refused with an error wrapping ErrInvalidInput; so is the name
// of a schedule registered in code on this client, or stored by a process
// that runs one in code. ScheduleDelete removes it, and every process stops
// running it.
func (c *Client) ScheduleDefine(ctx context.Context, s StoredSchedule) error {
	def, next, err := c.scheduleDef(s)
	if err != nil {
		return err
	}
	if slices.Contains(c.eng.CodeSchedules(), s.Name) {
		return fmt.Errorf("%w: schedule %q is registered in this program's code", ErrInvalidInput, s.Name)
	}
	now := c.now()
	def.DefinedAt = now
	// The store refuses the row of a schedule in code (one a process
	// registered or fired); a name only paused may be defined.
	err = c.store().ScheduleDefine(ctx, &driver.ScheduleDefineParams{Name: s.Name, Def: def, NextAt: next(now), Now: now})
	if errors.Is(err, ErrStateConflict) {
		return fmt.Errorf("%w: schedule %q is registered in a program's code", ErrInvalidInput, s.Name)
	}
	if err != nil {
		return fmt.Errorf("hopper: define schedule %s: %w", s.Name, err)
	}
	c.syncSchedulesNow(ctx)
	return nil
}

// scheduleDef checks s and returns its stored definition and occurrences.
func (c *Client) scheduleDef(s StoredSchedule) (driver.ScheduleDef, func(time.Time) time.Time, error) {
	var def driver.ScheduleDef
	if s.Name == "" {
		return def, nil, fmt.Errorf("%w: a schedule needs a name", ErrInvalidInput)
	}
	if err := validateSegment(s.Name); err != nil {
		return def, nil, fmt.Errorf("schedule name: %w", err)
	}
	for _, f := range []struct{ name, v string }{{"cron expression", s.Cron}, {"location", s.Location}, {"type name", s.Type}, {"workflow name", s.Workflow}} {
		if err := checkText(f.name, f.v); err != nil {
			return def, nil, err
		}
	}
	loc := time.UTC
	if s.Location != "" {
		l, err := time.LoadLocation(s.Location)
		if err == nil && (l == time.Local || l.String() != s.Location) {
			err = errors.New("name an IANA zone (every machine reads it alike)")
		}
		if err != nil {
			return def, nil, fmt.Errorf("%w: schedule %q: location %q: %w", ErrInvalidInput, s.Name, s.Location, err)
		}
		loc = l
	}
	if s.Cron == "" {
		return def, nil, fmt.Errorf("%w: schedule %q needs a cron expression", ErrInvalidInput, s.Name)
	}
	if cron := strings.TrimSpace(s.Cron); strings.HasPrefix(cron, "CRON_TZ=") || strings.HasPrefix(cron, "TZ=") {
		return def, nil, fmt.Errorf("%w: schedule %q: give the zone as Location, not in the expression", ErrInvalidInput, s.Name)
	}
	if s.CatchUp > engine.ScheduleKeyKeep {
		return def, nil, fmt.Errorf("%w: schedule %q: a catch-up of %s is over the %s a stored schedule may have", ErrInvalidInput, s.Name, s.CatchUp, engine.ScheduleKeyKeep)
	}
	next, err := ParseCron(s.Cron, loc)
	if err != nil {
		return def, nil, fmt.Errorf("schedule %q: %w", s.Name, err)
	}
	input := bytes.TrimSpace(s.Input)
	if len(input) == 0 {
		input = []byte("null")
	}
	if !json.Valid(input) {
		return def, nil, fmt.Errorf("%w: schedule %q: the input is not JSON", ErrInvalidInput, s.Name)
	}
	if len(input) > c.cfg.MaxPayloadBytes {
		return def, nil, fmt.Errorf("schedule %q: %w", s.Name, c.tooLarge("input", len(input)))
	}
	// A version no other definition of the name had: processes still
	// running an older one (or a deleted one) are told apart by it.
	version := int64(rand.Uint64()>>1) | 1
	def = driver.ScheduleDef{Spec: s.Cron, Input: slices.Clone(input), Location: loc.String(), CatchUp: s.CatchUp, Version: version}
	switch {
	case (s.Type == "") == (s.Workflow == ""):
		return def, nil, fmt.Errorf("%w: schedule %q needs one of Type and Workflow", ErrInvalidInput, s.Name)
	case s.Type != "":
		def.Kind, def.Target = scheduleDefJob, s.Type
	default:
		def.Kind, def.Target = scheduleDefRun, s.Workflow
	}
	// A target registered here checks the input now rather than at each
	// occurrence.
	if _, err := c.storedScheduleEntry(s.Name, &def); err != nil && !errors.Is(err, engine.ErrScheduleNotHere) {
		return def, nil, fmt.Errorf("schedule %q: %w", s.Name, err)
	}
	return def, next, nil
}

// NameRun builds a RunSpec by workflow name with JSON input, decoding the
// input strictly; the workflow must be registered with c.
func (c *Client) NameRun(name string, input json.RawMessage, opts *StartOpts) (*RunSpec, error) {
	t := c.lookupType(workflowTypePrefix + name)
	if t == nil {
		return nil, fmt.Errorf("%w: workflow %q is not registered with this client (registered: %s)", ErrUnknownType, name, listOrNone(c.Workflows()))
	}
	if len(input) > c.cfg.MaxPayloadBytes {
		return nil, c.tooLarge("input", len(input))
	}
	in, err := t.decodeJSON(input)
	if err != nil {
		return nil, err
	}
	s := &RunSpec{t: t, in: in}
	if opts != nil {
		s.opts = *opts
	}
	return s, nil
}

// syncSchedulesNow makes a started client run the stored schedules as
// they are now, before it returns (a stopped one reads them when it
// starts); a failed read is reported to Config.OnError on the caller's
// goroutine.
func (c *Client) syncSchedulesNow(ctx context.Context) { c.eng.SyncSchedules(ctx) }

// storedScheduleEntry is the entry that runs the stored schedule name
// defined by def, or an error when this client cannot run it (an error
// errNotHere when it does not register the target).
func (c *Client) storedScheduleEntry(name string, def *driver.ScheduleDef) (*engine.Schedule, error) {
	switch def.Kind {
	case scheduleDefJob:
		if c.lookupType(def.Target) == nil {
			return nil, engine.ErrScheduleNotHere
		}
	case scheduleDefRun:
		if c.lookupType(workflowTypePrefix+def.Target) == nil {
			return nil, engine.ErrScheduleNotHere
		}
	}
	loc, err := time.LoadLocation(def.Location)
	if err != nil {
		return nil, err
	}
	next, err := ParseCron(def.Spec, loc)
	if err != nil {
		return nil, err
	}
	e := &engine.Schedule{Name: name, Cron: def.Spec, Stored: true, Version: def.Version, Next: next,
		CatchUp: catchUpWindow(def.CatchUp), NotBefore: def.DefinedAt}
	target, input := def.Target, slices.Clone(def.Input)
	switch def.Kind {
	case scheduleDefJob:
		if _, err := c.NameJob(target, input, nil); err != nil {
			return nil, err
		}
		e.Occurrence = c.occurrences(name, func(time.Time) (*JobSpec, error) { return c.NameJob(target, input, nil) }, nil)
	case scheduleDefRun:
		if _, err := c.NameRun(target, input, nil); err != nil {
			return nil, err
		}
		e.Occurrence = c.occurrences(name, nil, func(time.Time) (*RunSpec, error) { return c.NameRun(target, input, nil) })
	default:
		return nil, fmt.Errorf("%w: schedule definition of kind %q", ErrInvalidInput, def.Kind)
	}
	return e, nil
}
