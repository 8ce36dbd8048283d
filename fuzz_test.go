package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"2s": 2 * time.Second, "500ms": 500 * time.Millisecond, "1m30s": 90 * time.Second, "1500": 1500 * time.Millisecond, "0": 0, "1h": time.Hour, "2.5": 2500 * time.Microsecond}
	for in, want := range good {
		got, err := hopper.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1s", "-5", "abc", "5 parsecs", "1e400", "NaN"} {
		if _, err := hopper.ParseDuration(in); !errors.Is(err, hopper.ErrInvalidInput) {
			t.Errorf("ParseDuration(%q) error = %v, want ErrInvalidInput", in, err)
		}
	}
	var d struct{ D hopper.Duration }
	if err := json.Unmarshal([]byte(`{"D":"2s"}`), &d); err != nil || time.Duration(d.D) != 2*time.Second {
		t.Fatalf("string form: %v %v", d.D, err)
	}
	if err := json.Unmarshal([]byte(`{"D":250}`), &d); err != nil || time.Duration(d.D) != 250*time.Millisecond {
		t.Fatalf("number form: %v %v", d.D, err)
	}
	b, _ := json.Marshal(hopper.Duration(90 * time.Second))
	if string(b) != `"1m30s"` {
		t.Fatalf("marshal = %s", b)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2s", "1500", "-1", "1h2m3.5s", "", "9223372036854775807", ".5", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := hopper.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, hopper.ErrInvalidInput) {
				t.Fatalf("error %v does not match ErrInvalidInput", err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v: negative accepted", s, d)
		}
		var wire hopper.Duration
		_ = json.Unmarshal([]byte(`"`+s+`"`), &wire)
	})
}

// FuzzEnqueueName feeds outside JSON to name-form enqueue: it must either
// store a job whose input decodes, or refuse with a typed error and store
// nothing — never panic.
func FuzzEnqueueName(f *testing.F) {
	type in struct {
		A int      `json:"a"`
		B string   `json:"b"`
		C []string `json:"c"`
	}
	t0 := hopper.Define("t", func(context.Context, in) (int, error) { return 0, nil }, nil)
	for _, s := range []string{`{"a":1}`, `{"a":"x"}`, `{}`, `null`, `[]`, `{"a":1,"z":2}`, `{"c":["x",1]}`, `{"a":1}{"a":2}`, ``, `"str"`, `{"a":1e400}`} {
		f.Add([]byte(s))
	}
	d := memdriver.New()
	c, err := hopper.New(hopper.Config{Driver: d, MaxPayloadBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Register(t0); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx := context.Background()
		h, err := c.EnqueueName(ctx, "t", raw, nil)
		if err != nil {
			if !errors.Is(err, hopper.ErrInvalidInput) {
				t.Fatalf("error %v is not ErrInvalidInput", err)
			}
			return
		}
		row, err := c.JobGet(ctx, h.ID())
		if err != nil {
			t.Fatal(err)
		}
		var v in
		if err := json.Unmarshal(row.Input, &v); err != nil {
			t.Fatalf("stored input %q does not decode: %v", row.Input, err)
		}
	})
}

// FuzzParseCron feeds outside text to the cron parser: it must refuse with
// ErrInvalidInput or give occurrences strictly after the time asked, and
// never panic.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/15 0 * * 1-5", "0 3 * * *", "0 0 30 2 *", "@every 10m", "@every -1s",
		"@hourly", "CRON_TZ=America/New_York 0 3 * * *", "TZ=Bad 0 0 * * *", "60 * * * *", "1-0 * * * *", "*/0 * * * *",
		"0 0 1,15 * MON-FRI", "? * * * *", ""} {
		f.Add(s)
	}
	after := time.Date(2030, 6, 15, 12, 34, 56, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		next, err := hopper.ParseCron(s, time.UTC)
		if err != nil {
			if !errors.Is(err, hopper.ErrInvalidInput) {
				t.Fatalf("ParseCron(%q): error %v does not match ErrInvalidInput", s, err)
			}
			return
		}
		if at := next(after); !at.IsZero() && !at.After(after) {
			t.Fatalf("ParseCron(%q): occurrence %s is not after %s", s, at, after)
		}
	})
}
