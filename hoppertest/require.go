package hoppertest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
)

// TB is the part of testing.TB the Require helpers use, so their own
// failures can be tested. *testing.T and *testing.B satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// JobOpts narrow the jobs RequireEnqueued and RequireNotEnqueued look at.
// The zero value matches every job of the type; each set field must match.
type JobOpts[I any] struct {
	// Match, when set, must report true for the job's decoded input.
	Match func(in I) bool
	// Queue, State, Priority (when non-nil), MaxAttempts, UniqueKey and
	// Group (the fairness label) must equal the job's.
	Queue       string
	State       hopper.JobState
	Priority    *int
	MaxAttempts int
	UniqueKey   string
	Group       string
	// RunAt must equal the job's due time, at the store's precision (a
	// microsecond).
	RunAt time.Time
	// Metadata's keys must be in the job's metadata with these values.
	Metadata map[string]string
}

// Enqueued is a job RequireEnqueued found, with its input decoded.
type Enqueued[I any] struct {
	Row   *hopper.JobRow
	Input I
}

// RequireEnqueued requires that exactly one job of typ matching opts (nil:
// any) is in c's store, and returns it with its input decoded. Otherwise it
// fails the test with the jobs of the type that are there, so the message
// says what was enqueued instead.
func RequireEnqueued[I, O any](tb TB, c *hopper.Client, typ *hopper.Type[I, O], opts *JobOpts[I]) *Enqueued[I] {
	tb.Helper()
	all, matched := findJobs(tb, c, typ, opts)
	switch len(matched) {
	case 1:
		return matched[0]
	case 0:
		tb.Fatalf("hoppertest: no %q job%s was enqueued; %s", typ.Name(), optsText(opts), listJobs(all))
	default:
		tb.Fatalf("hoppertest: %d %q jobs%s were enqueued, want one; %s", len(matched), typ.Name(), optsText(opts), listJobs(matchedRows(matched)))
	}
	return nil
}

// RequireNotEnqueued requires that no job of typ matching opts (nil: any)
// is in c's store; it fails the test listing the ones that are.
func RequireNotEnqueued[I, O any](tb TB, c *hopper.Client, typ *hopper.Type[I, O], opts *JobOpts[I]) {
	tb.Helper()
	_, matched := findJobs(tb, c, typ, opts)
	if len(matched) > 0 {
		tb.Fatalf("hoppertest: want no %q job%s, found %d; %s", typ.Name(), optsText(opts), len(matched), listJobs(matchedRows(matched)))
	}
}

// maxListed bounds the jobs a Require helper reads and lists.
const maxListed = hopper.MaxListLimit

func findJobs[I, O any](tb TB, c *hopper.Client, typ *hopper.Type[I, O], opts *JobOpts[I]) ([]*hopper.JobRow, []*Enqueued[I]) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := c.JobList(ctx, &hopper.ListParams{Types: []string{typ.Name()}, Limit: maxListed, Ascending: true})
	if err != nil {
		tb.Fatalf("hoppertest: list %q jobs: %v", typ.Name(), err)
		return nil, nil
	}
	var matched []*Enqueued[I]
	for _, row := range page.Jobs {
		in, err := typ.DecodeInput(c, row.Input)
		if err != nil {
			tb.Fatalf("hoppertest: job %s: decode its input: %v", row.ID, err)
			return nil, nil
		}
		if opts.matches(row, in) {
			matched = append(matched, &Enqueued[I]{Row: row, Input: in})
		}
	}
	return page.Jobs, matched
}

func (o *JobOpts[I]) matches(row *hopper.JobRow, in I) bool {
	if o == nil {
		return true
	}
	switch {
	case o.Queue != "" && row.Queue != o.Queue,
		o.State != "" && row.State != o.State,
		o.Priority != nil && row.Priority != *o.Priority,
		o.MaxAttempts != 0 && hopper.MaxAttempts(row) != o.MaxAttempts,
		o.UniqueKey != "" && row.UniqueKey != o.UniqueKey,
		o.Group != "" && row.FairKey != o.Group,
		!o.RunAt.IsZero() && !row.RunAt.Equal(o.RunAt.Truncate(time.Microsecond)):
		return false
	}
	for k, v := range o.Metadata {
		if have, ok := row.Metadata[k]; !ok || have != v {
			return false
		}
	}
	return o.Match == nil || o.Match(in)
}

// optsText says what opts ask for, for messages.
func optsText[I any](o *JobOpts[I]) string {
	if o == nil {
		return ""
	}
	var parts []string
	add := func(k string, v any) { parts = append(parts, fmt.Sprintf("%s %v", k, v)) }
	if o.Queue != "" {
		add("queue", o.Queue)
	}
	if o.State != "" {
		add("state", o.State)
	}
	if o.Priority != nil {
		add("priority", *o.Priority)
	}
	if o.MaxAttempts != 0 {
		add("max attempts", o.MaxAttempts)
	}
	if o.UniqueKey != "" {
		add("unique key", o.UniqueKey)
	}
	if o.Group != "" {
		add("group", o.Group)
	}
	if !o.RunAt.IsZero() {
		add("due", o.RunAt.UTC().Format(time.RFC3339Nano))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Metadata)) {
		add("metadata "+k, o.Metadata[k])
	}
	if o.Match != nil {
		parts = append(parts, "an input Match accepts")
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

func matchedRows[I any](es []*Enqueued[I]) []*hopper.JobRow {
	rows := make([]*hopper.JobRow, len(es))
	for i, e := range es {
		rows[i] = e.Row
	}
	return rows
}

// listJobs describes jobs, one per line, for messages.
func listJobs(rows []*hopper.JobRow) string {
	if len(rows) == 0 {
		return "there were none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "there were %d:", len(rows))
	for _, r := range rows {
		fmt.Fprintf(&b, "\n  %s queue %s, %s, priority %d, attempt %d of %d, due %s, input %s",
			r.ID, r.Queue, r.State, r.Priority, r.Attempt, hopper.MaxAttempts(r), r.RunAt.UTC().Format(time.RFC3339Nano), compact(r.Input))
		if len(r.Metadata) > 0 {
			fmt.Fprintf(&b, ", metadata %v", r.Metadata)
		}
	}
	return b.String()
}

func compact(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return fmt.Sprintf("%q", b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// RequireRunCompleted waits (up to 10 seconds of real time, which a run on
// the virtual clock spends only on work) for run to end and requires that
// it completed; it returns the output. A failed, cancelled or stuck run
// fails the test with its status, its error and its steps.
func RequireRunCompleted[O any](tb TB, c *hopper.Client, run *hopper.RunHandle[O]) O {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var zero O
	info, err := c.RunWait(ctx, run.ID())
	if err != nil {
		now, gerr := c.RunGet(context.Background(), run.ID())
		if gerr != nil {
			tb.Fatalf("hoppertest: run %s did not end: %v", run.ID(), err)
			return zero
		}
		tb.Fatalf("hoppertest: run %s did not end: %v; it is %s%s", run.ID(), err, now.Status, runSteps(now))
		return zero
	}
	if info.Status != hopper.RunCompleted {
		if full, err := c.RunGet(ctx, run.ID()); err == nil {
			info = full // with its steps
		}
		msg := ""
		if info.Error != nil {
			msg = fmt.Sprintf(" (%s: %s)", info.Error.Kind, info.Error.Message)
		}
		tb.Fatalf("hoppertest: run %s ended %s%s, want completed%s", run.ID(), info.Status, msg, runSteps(info))
		return zero
	}
	out, err := run.Result(ctx)
	if err != nil {
		tb.Fatalf("hoppertest: run %s: read its output: %v", run.ID(), err)
	}
	return out
}

func runSteps(info *hopper.RunInfo) string {
	if len(info.Steps) == 0 {
		return "; no steps recorded"
	}
	var b strings.Builder
	b.WriteString("; steps:")
	for _, s := range info.Steps {
		if s.Error != nil {
			fmt.Fprintf(&b, " %s (failed: %s)", s.Name, s.Error.Message)
		} else {
			fmt.Fprintf(&b, " %s", s.Name)
		}
	}
	return b.String()
}

// Event is one event of a run's history as RequireHistory compares it: its
// kind ("step", "sleep", "hook_wait", "activity_scheduled", …) and name.
type Event struct {
	Kind string
	Name string
}

// RequireHistory requires that run id's recorded history (its latest
// attempt) holds want, in order: each event of want must appear after the
// previous one, with events between them allowed. It fails the test with
// the history as it is.
func RequireHistory(tb TB, c *hopper.Client, id string, want ...Event) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := c.RunHistory(ctx, id)
	if err != nil {
		tb.Fatalf("hoppertest: history of run %s: %v", id, err)
		return
	}
	i := 0
	for _, ev := range h.Events {
		if i < len(want) && ev.Kind == want[i].Kind && ev.Name == want[i].Name {
			i++
		}
	}
	if i == len(want) {
		return
	}
	var b strings.Builder
	for _, ev := range h.Events {
		fmt.Fprintf(&b, "\n  %d %s %q", ev.Seq, ev.Kind, ev.Name)
	}
	tb.Fatalf("hoppertest: run %s's history lacks %s %q (after %d of %d wanted events); it is:%s",
		id, want[i].Kind, want[i].Name, i, len(want), b.String())
}
