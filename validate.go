package hopper

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// MaxIDLength is the longest id, in bytes, a caller may give a job, a run
// or a schedule.
const MaxIDLength = 255

// ValidateID reports whether id may be given by a caller to a new job
// (InsertOpts.ID) or run (StartOpts.ID, ChildOpts.ID): 1 to MaxIDLength
// bytes of printable UTF-8 characters, without '/', '?', '#' or '\',
// without "..", and not ".", so the id is one path segment of a URL as it
// is; and not ending in '@', '.' or ".a" followed by digits ("order@2",
// "order.5", "order.a3"). Those endings are the ids hopper derives: a
// retried run's attempt 2 is "<run>@2", and the child and the activity an
// attempt starts at position 5 are the run "<attempt>.5" and the job
// "<attempt>.a5", so a run a caller named "order@2" would take the
// children and activities of run "order"'s second attempt. An id that
// breaks the rule is an error wrapping ErrInvalidInput, naming the rule.
// Ids hopper mints (UUIDs) keep it; ids of jobs and runs stored before the
// rule may not, and stay readable. A schedule's name is held to the first
// half only (one URL path segment): it names no job or run.
func ValidateID(id string) error {
	if err := validateSegment(id); err != nil {
		return err
	}
	if derivedEnding(id) {
		return fmt.Errorf("%w: id %s ends in '@', '.' or \".a\" followed by digits, as the ids hopper derives for a run's attempts, children and activities do", ErrInvalidInput, quoteShort(id))
	}
	return nil
}

// validateSegment is ValidateID's rule for a schedule's name: one URL path
// segment as it is.
func validateSegment(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: an empty id", ErrInvalidInput)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: id %s is %d bytes long (at most %d)", ErrInvalidInput, quoteShort(id), len(id), MaxIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: id %s is not valid UTF-8", ErrInvalidInput, quoteShort(id))
	case strings.ContainsAny(id, `/?#\`):
		return fmt.Errorf("%w: id %s holds one of / ? # \\", ErrInvalidInput, quoteShort(id))
	case id == "." || strings.Contains(id, ".."):
		return fmt.Errorf("%w: id %s is \".\" or holds \"..\"", ErrInvalidInput, quoteShort(id))
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: id %s holds a control or non-printable character %U", ErrInvalidInput, quoteShort(id), r)
		}
	}
	return nil
}

// derivedEnding reports whether id ends as the ids hopper derives from a
// run's: '@' (an attempt), '.' (a child) or ".a" (an activity) followed by
// digits.
func derivedEnding(id string) bool {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	if i == len(id) {
		return false
	}
	head := id[:i]
	return strings.HasSuffix(head, "@") || strings.HasSuffix(head, ".") || strings.HasSuffix(head, ".a")
}

// quoteShort quotes s for an error message, cut after 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

// checkText refuses, before it reaches a store, a string no store keeps
// alike (see engine.CheckText): field names it in the error, which wraps
// ErrInvalidInput.
func checkText(field, s string) error { return engine.CheckText(field, s) }

// checkTexts is checkText for each of ss.
func checkTexts[S ~string](field string, ss []S) error {
	for _, s := range ss {
		if err := checkText(field, string(s)); err != nil {
			return err
		}
	}
	return nil
}

// Storable times: every store keeps years 1 to 9999 (and JSON writes no
// others).
var (
	storableMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	storableMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// checkTime refuses a time outside years 1 to 9999 (the zero time, "none",
// passes).
func checkTime(field string, t time.Time) error {
	if t.IsZero() || (!t.Before(storableMin) && !t.After(storableMax)) {
		return nil
	}
	return fmt.Errorf("%w: %s %s is outside years 1 to 9999", ErrInvalidInput, field, t.UTC().Format(time.RFC3339))
}

// checkPriority refuses a priority the stores cannot keep (a 32-bit
// integer).
func checkPriority(p int) error {
	if p < math.MinInt32 || p > math.MaxInt32 {
		return fmt.Errorf("%w: priority %d is outside %d to %d", ErrInvalidInput, p, math.MinInt32, math.MaxInt32)
	}
	return nil
}

// checkRow refuses a job row whose strings, priority or times no store
// keeps alike, naming the field.
func checkRow(row *hoppertype.JobRow) error {
	for _, f := range []struct{ name, v string }{
		{"job id", row.ID}, {"type name", row.Type}, {"queue name", row.Queue}, {"group (fairness label)", row.FairKey},
		{"unique key", row.UniqueKey}, {"concurrency key", row.ConcurrencyKey}, {"parent id", row.ParentID},
	} {
		if err := checkText(f.name, f.v); err != nil {
			return err
		}
	}
	for k, v := range row.Metadata {
		if err := checkText("metadata key", k); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("metadata value of %q", k), v); err != nil {
			return err
		}
	}
	if err := checkPriority(row.Priority); err != nil {
		return err
	}
	if err := checkTime("run at", row.RunAt); err != nil {
		return err
	}
	return checkTime("deadline", row.Deadline)
}
