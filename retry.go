package hopper

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// Backoff shapes of a RetryPolicy.
const (
	BackoffExponential = "exponential"
	BackoffLinear      = "linear"
	BackoffConstant    = "constant"
)

// NoJitter, as RetryPolicy.Jitter, turns jitter off (0 means "the default").
const NoJitter = -1.0

// RetryPolicy says how often and how soon a failed job, step or function is
// tried again. Zero fields take the value of the next layer down (call >
// per-type computed > per-type > client > the defaults), so a policy only
// names what it changes. The delay before retry n (1 = the first retry) is
//
//	min(Base·Factor^(n−1), Max) · (1 − Jitter·rand)   (exponential)
//	min(Base·n, Max) · (1 − Jitter·rand)              (linear)
//	Base · (1 − Jitter·rand)                           (constant)
type RetryPolicy struct {
	// Attempts is the total number of attempts, including the first.
	// Defaults to 3.
	Attempts int
	// Backoff is BackoffExponential, BackoffLinear or BackoffConstant.
	// Defaults to exponential.
	Backoff string
	// Base is the first retry's delay. Defaults to 1s.
	Base time.Duration
	// Factor multiplies the delay per retry (exponential). Defaults to 2.
	Factor float64
	// Max caps the delay. Defaults to 30s.
	Max time.Duration
	// Jitter is the random fraction in [0,1] taken off each delay.
	// Defaults to 0.5; use NoJitter for none.
	Jitter float64
}

// defaultRetryPolicy is the policy every layer starts from. The engine
// reads it; users get copies from DefaultRetryPolicy.
var defaultRetryPolicy = RetryPolicy{
	Attempts: 3, Backoff: BackoffExponential, Base: time.Second, Factor: 2, Max: 30 * time.Second, Jitter: 0.5,
}

// DefaultRetryPolicy returns the policy every layer starts from: 3
// attempts, exponential from 1s by 2 up to 30s, jitter 0.5. Each call
// returns a fresh copy; changing it changes nothing else.
func DefaultRetryPolicy() RetryPolicy { return defaultRetryPolicy }

// RetryAPI returns a retry preset that suits calls to HTTP APIs: 5
// attempts, 1s doubling to 30s.
func RetryAPI() RetryPolicy {
	return RetryPolicy{Attempts: 5, Backoff: BackoffExponential, Base: time.Second, Factor: 2, Max: 30 * time.Second}
}

// RetryDatabase returns a retry preset that suits database calls: 3
// attempts, 500ms doubling to 10s.
func RetryDatabase() RetryPolicy {
	return RetryPolicy{Attempts: 3, Backoff: BackoffExponential, Base: 500 * time.Millisecond, Factor: 2, Max: 10 * time.Second}
}

// RetryNetwork returns a retry preset that suits flaky networks: 5
// attempts, 2s tripling to 60s.
func RetryNetwork() RetryPolicy {
	return RetryPolicy{Attempts: 5, Backoff: BackoffExponential, Base: 2 * time.Second, Factor: 3, Max: time.Minute}
}

// Validate reports a policy that makes no sense.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Attempts < 0:
		return fmt.Errorf("%w: retry attempts must be at least 1, got %d", ErrInvalidInput, p.Attempts)
	case p.Base < 0 || p.Max < 0:
		return fmt.Errorf("%w: retry delays must not be negative", ErrInvalidInput)
	case p.Factor < 0 || math.IsNaN(p.Factor) || math.IsInf(p.Factor, 0):
		return fmt.Errorf("%w: retry factor must be a positive number", ErrInvalidInput)
	case p.Jitter != NoJitter && (p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter)):
		return fmt.Errorf("%w: retry jitter must be in [0,1] (or NoJitter), got %v", ErrInvalidInput, p.Jitter)
	}
	switch p.Backoff {
	case "", BackoffExponential, BackoffLinear, BackoffConstant:
	default:
		return fmt.Errorf("%w: unknown backoff %q", ErrInvalidInput, p.Backoff)
	}
	return nil
}

// merge overlays the non-zero fields of o onto p.
func (p RetryPolicy) merge(o RetryPolicy) RetryPolicy {
	if o.Attempts != 0 {
		p.Attempts = o.Attempts
	}
	if o.Backoff != "" {
		p.Backoff = o.Backoff
	}
	if o.Base != 0 {
		p.Base = o.Base
	}
	if o.Factor != 0 {
		p.Factor = o.Factor
	}
	if o.Max != 0 {
		p.Max = o.Max
	}
	if o.Jitter != 0 {
		p.Jitter = o.Jitter
	}
	return p
}

// resolved fills unset fields from the default policy.
func (p RetryPolicy) resolved() RetryPolicy {
	return defaultRetryPolicy.merge(p)
}

func (p RetryPolicy) stored() hoppertype.RetryPolicy {
	r := p.resolved()
	j := r.Jitter
	if j == NoJitter {
		j = 0
	}
	return hoppertype.RetryPolicy{Attempts: r.Attempts, Backoff: r.Backoff, Base: r.Base, Factor: r.Factor, Max: r.Max, Jitter: j}
}

func policyFromStored(s hoppertype.RetryPolicy) RetryPolicy {
	j := s.Jitter
	if j == 0 {
		j = NoJitter
	}
	return RetryPolicy{Attempts: s.Attempts, Backoff: s.Backoff, Base: s.Base, Factor: s.Factor, Max: s.Max, Jitter: j}
}

// Delay returns the backoff before retry n (1 = the first retry), with
// jitter drawn from rnd in [0,1) (nil draws from math/rand).
func (p RetryPolicy) Delay(n int, rnd func() float64) time.Duration {
	return p.stored().Delay(n, rnd)
}

// Retry calls fn until it succeeds, its error is an Abort, ctx is done, or
// the policy's attempts are used up, sleeping the policy's backoff between
// attempts (at least the floor of a RetryAfter error). It returns the last
// error, wrapped so errors.Is still matches it. The backoff is waited on
// the clock of ctx: the client's Config.Clock inside a handler or a
// workflow step, the clock of WithClock, else the wall clock — so under
// hoppertest's virtual clock it waits until the test advances it.
func Retry(ctx context.Context, fn func(ctx context.Context) error, policy RetryPolicy) error {
	_, err := RetryValue(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, policy)
	return err
}

// RetryValue is Retry for a function that returns a value.
func RetryValue[T any](ctx context.Context, fn func(ctx context.Context) (T, error), policy RetryPolicy) (T, error) {
	if err := policy.Validate(); err != nil {
		var zero T
		return zero, err
	}
	p := policy.resolved()
	for attempt := 1; ; attempt++ {
		v, err := fn(ctx)
		if err == nil {
			return v, nil
		}
		if errors.Is(err, ErrAborted) || attempt >= p.Attempts {
			return v, err
		}
		if ctx.Err() != nil {
			return v, err
		}
		d := p.Delay(attempt, nil)
		var ra *hoppertype.RetryAfterError
		if errors.As(err, &ra) && ra.Delay > d {
			d = ra.Delay
		}
		t := clockOf(ctx).NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C():
		}
	}
}

type clockKey struct{}

// WithClock returns a context whose Retry and RetryValue wait on clock (a
// test's virtual clock, say) instead of the wall clock. Inside a handler
// or a workflow step they already use the client's Config.Clock.
func WithClock(ctx context.Context, clock Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, clock)
}

// clockOf is the clock a context times with: its own (WithClock), its
// job's client's, or the wall clock.
func clockOf(ctx context.Context) Clock {
	if c, ok := ctx.Value(clockKey{}).(Clock); ok && c != nil {
		return c
	}
	if jc := JobFromContext(ctx); jc != nil && jc.c != nil {
		return jc.c.clock
	}
	return hclock.Real{}
}

// Retryable wraps fn so each call retries under policy.
func Retryable[T any](fn func(ctx context.Context) (T, error), policy RetryPolicy) func(ctx context.Context) (T, error) {
	return func(ctx context.Context) (T, error) { return RetryValue(ctx, fn, policy) }
}

// IsTransient reports whether err looks temporary: a network error (refused,
// reset, unreachable, not found, timed out), a rate limit (HTTP 429), or a
// server error (HTTP 500, 502, 503), found by errors.As on net.Error,
// syscall errors, or any error with a StatusCode() int method — or, for
// errors that carry none of these, by the same words in the message. Use it
// in classifiers.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		switch sc.StatusCode() {
		case 429, 500, 502, 503:
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ECONNABORTED, syscall.EPIPE} {
		if errors.Is(err, e) {
			return true
		}
	}
	msg := strings.ToLower(err.Error())
	for _, w := range []string{"econnrefused", "enotfound", "etimedout", "connection refused", "connection reset", "network", "timeout", "timed out", "rate limit", "too many requests", "429", "500", "502", "503", "service unavailable", "bad gateway", "internal server error"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
