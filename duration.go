package hopper

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration as it travels in JSON (the HTTP API, stored
// options): it writes a Go duration string ("1m30s") and reads either such a
// string ("2s", "500ms", "1h") or a bare number of milliseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := ParseDuration(str)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	v, err := parseMillis(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads a Go duration string ("1m30s") or a bare number of
// milliseconds ("1500"). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: empty duration", ErrInvalidInput)
	}
	if isNumber(s) {
		return parseMillis(s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: duration %q: want a Go duration such as \"2s\" or a number of milliseconds", ErrInvalidInput, s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%w: negative duration %q", ErrInvalidInput, s)
	}
	return v, nil
}

func isNumber(s string) bool {
	for i, r := range s {
		if (r < '0' || r > '9') && r != '.' && !(i == 0 && r == '-') {
			return false
		}
	}
	return true
}

func parseMillis(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: duration %q is not a number of milliseconds", ErrInvalidInput, s)
	}
	if f < 0 {
		return 0, fmt.Errorf("%w: negative duration %q", ErrInvalidInput, s)
	}
	if f*float64(time.Millisecond) > math.MaxInt64 {
		return 0, fmt.Errorf("%w: duration %q is too long", ErrInvalidInput, s)
	}
	return time.Duration(f * float64(time.Millisecond)), nil
}
