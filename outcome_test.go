package hopper

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
)

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	half := func() float64 { return 0.5 }
	tests := []struct {
		name string
		p    RetryPolicy
		n    int
		rnd  func() float64
		want time.Duration
	}{
		{"default first retry, no jitter draw", RetryPolicy{Jitter: NoJitter}, 1, nil, time.Second},
		{"default doubles", RetryPolicy{Jitter: NoJitter}, 3, nil, 4 * time.Second},
		{"default caps at max", RetryPolicy{Jitter: NoJitter}, 10, nil, 30 * time.Second},
		{"jitter takes a fraction off", RetryPolicy{}, 2, half, time.Duration(float64(2*time.Second) * (1 - 0.5*0.5))},
		{"jitter 1 with rand 0 keeps delay", RetryPolicy{Jitter: 1}, 1, func() float64 { return 0 }, time.Second},
		{"linear", RetryPolicy{Backoff: BackoffLinear, Base: 100 * time.Millisecond, Jitter: NoJitter}, 3, nil, 300 * time.Millisecond},
		{"linear capped", RetryPolicy{Backoff: BackoffLinear, Base: 10 * time.Second, Max: 15 * time.Second, Jitter: NoJitter}, 3, nil, 15 * time.Second},
		{"constant", RetryPolicy{Backoff: BackoffConstant, Base: 7 * time.Millisecond, Jitter: NoJitter}, 9, nil, 7 * time.Millisecond},
		{"factor 3", RetryPolicy{Base: time.Second, Factor: 3, Max: time.Hour, Jitter: NoJitter}, 4, nil, 27 * time.Second},
		{"huge n does not overflow", RetryPolicy{Jitter: NoJitter}, 5000, nil, 30 * time.Second},
		{"n below 1 is the first retry", RetryPolicy{Jitter: NoJitter}, 0, nil, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.n, tt.rnd); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	bad := []RetryPolicy{
		{Attempts: -1},
		{Base: -time.Second},
		{Factor: -2},
		{Jitter: 1.5},
		{Backoff: "fibonacci"},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidInput", p, err)
		}
	}
	for _, p := range []RetryPolicy{{}, RetryAPI(), RetryDatabase(), RetryNetwork(), {Jitter: NoJitter}, {Attempts: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

func TestRetryPolicyMergeAndStore(t *testing.T) {
	t.Parallel()
	client := RetryPolicy{Attempts: 5, Base: 2 * time.Second}
	typ := RetryPolicy{Max: time.Minute, Jitter: NoJitter}
	call := RetryPolicy{Attempts: 2}
	got := client.merge(typ).merge(call).stored()
	want := hoppertype.RetryPolicy{Attempts: 2, Backoff: BackoffExponential, Base: 2 * time.Second, Factor: 2, Max: time.Minute, Jitter: 0}
	if got != want {
		t.Fatalf("merged = %+v, want %+v", got, want)
	}
	if back := policyFromStored(got); back.Jitter != NoJitter || back.Attempts != 2 {
		t.Fatalf("policyFromStored = %+v", back)
	}
}

// TestRetryDefaultsAreFresh: DefaultRetryPolicy and the presets hand out
// copies, so a caller that changes one changes neither what the next call
// returns nor the default the engine fills policies from.
func TestRetryDefaultsAreFresh(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy()
	p.Attempts, p.Base = 99, time.Hour
	if got := DefaultRetryPolicy(); got.Attempts != 3 || got.Base != time.Second {
		t.Fatalf("DefaultRetryPolicy() after a caller changed a copy = %+v", got)
	}
	if got := (RetryPolicy{}).resolved(); got != DefaultRetryPolicy() {
		t.Fatalf("resolved() = %+v, want the default %+v", got, DefaultRetryPolicy())
	}
	api := RetryAPI()
	api.Attempts = 1
	if RetryAPI().Attempts != 5 {
		t.Fatal("RetryAPI() returned a changed preset")
	}
	c := AllDone()
	c.Kind = hoppertype.GateAllSuccess
	if AllDone().Kind != hoppertype.GateAllDone {
		t.Fatal("AllDone() returned a changed condition")
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp: connect: connection refused"), true},
		{errors.New("upstream said 503"), true},
		{statusErr(429), true},
		{statusErr(404), false},
		{statusErr(502), true},
		{errors.New("validation failed: name is required"), false},
		{fmt.Errorf("wrapped: %w", statusErr(500)), true},
	} {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("http status %d", int(e)) }
func (e statusErr) StatusCode() int { return int(e) }
