package hclock

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestVirtualFiresInOrder(t *testing.T) {
	t.Parallel()
	v := NewVirtual(t0)
	a, b, c := v.NewTimer(3*time.Second), v.NewTimer(time.Second), v.NewTimer(2*time.Second)
	v.Advance(90 * time.Second)
	for _, tc := range []struct {
		tm   Timer
		want time.Duration
	}{{b, time.Second}, {c, 2 * time.Second}, {a, 3 * time.Second}} {
		select {
		case got := <-tc.tm.C():
			if !got.Equal(t0.Add(tc.want)) {
				t.Errorf("timer fired at %v, want %v", got, t0.Add(tc.want))
			}
		default:
			t.Fatalf("timer at %v did not fire", tc.want)
		}
	}
	if !v.Now().Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("now = %v", v.Now())
	}
	if v.Timers() != 0 {
		t.Fatalf("%d timers left", v.Timers())
	}
}

func TestVirtualStopResetAfterFunc(t *testing.T) {
	t.Parallel()
	v := NewVirtual(t0)
	tm := v.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reports false")
	}
	v.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reports it was active")
	}
	if at, ok := v.NextTimer(); !ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("NextTimer = %v %v", at, ok)
	}
	v.Advance(time.Second)
	<-tm.C()

	done := make(chan time.Time, 1)
	v.AfterFunc(time.Minute, func() { done <- v.Now() })
	v.Advance(59 * time.Second)
	select {
	case <-done:
		t.Fatal("AfterFunc ran early")
	default:
	}
	v.Advance(time.Second)
	if got := <-done; !got.Equal(t0.Add(3*time.Second + time.Minute)) {
		t.Fatalf("AfterFunc at %v", got)
	}
}

func TestWithDeadlineVirtual(t *testing.T) {
	t.Parallel()
	v := NewVirtual(t0)
	cause := errors.New("too late")
	ctx, cancel := WithDeadline(context.Background(), v, t0.Add(time.Second), cause)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Fatalf("Deadline = %v %v", d, ok)
	}
	if ctx.Err() != nil {
		t.Fatal("cancelled early")
	}
	v.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), cause) {
		t.Fatalf("cause = %v", context.Cause(ctx))
	}
	// Already past: cancelled at once.
	ctx2, cancel2 := WithDeadline(context.Background(), v, t0, cause)
	defer cancel2()
	if !errors.Is(context.Cause(ctx2), cause) {
		t.Fatalf("past deadline cause = %v", context.Cause(ctx2))
	}
}

func TestSleepAndTruncate(t *testing.T) {
	t.Parallel()
	v := NewVirtual(t0)
	armed := v.TimerArmed()
	errc := make(chan error, 1)
	go func() { errc <- Sleep(context.Background(), v, time.Hour) }()
	<-armed
	v.Advance(time.Hour)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, v, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a done context = %v", err)
	}
	ts := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	if got := Truncate(ts); got.Nanosecond() != 123456000 {
		t.Fatalf("Truncate = %v", got)
	}
	if !Truncate(time.Time{}).IsZero() {
		t.Fatal("zero time changed")
	}
}

// TestVirtualJump: Jump fires the due timers with the time already at the
// target (a process waking from a suspension); Set fires each at its own
// due time, walking through them.
func TestVirtualJump(t *testing.T) {
	t.Parallel()
	jumped, walked := NewVirtual(t0), NewVirtual(t0)
	a, b := jumped.NewTimer(time.Minute), walked.NewTimer(time.Minute)
	jumped.Jump(t0.Add(time.Hour))
	walked.Set(t0.Add(time.Hour))
	if got := <-a.C(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("after Jump the timer fired at %v, want %v", got, t0.Add(time.Hour))
	}
	if got := <-b.C(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("after Set the timer fired at %v, want %v", got, t0.Add(time.Minute))
	}
	if !jumped.Now().Equal(t0.Add(time.Hour)) || !walked.Now().Equal(t0.Add(time.Hour)) {
		t.Errorf("now: %v and %v", jumped.Now(), walked.Now())
	}
}

// TestNextForegroundTimer: background timers (periodic housekeeping) are
// passed over, also once reset; NewBackgroundTimer on a clock that does
// not tell them apart makes an ordinary timer.
func TestNextForegroundTimer(t *testing.T) {
	t.Parallel()
	v := NewVirtual(t0)
	poll := NewBackgroundTimer(v, time.Second)
	if _, ok := v.NextForegroundTimer(); ok {
		t.Fatal("a background timer counted as foreground")
	}
	if at, ok := v.NextTimer(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextTimer = %v, %v; want the poll", at, ok)
	}
	backoff := v.NewTimer(time.Hour)
	poll.Reset(2 * time.Second)
	if at, ok := v.NextForegroundTimer(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextForegroundTimer = %v, %v; want the backoff", at, ok)
	}
	backoff.Stop()
	poll.Stop()
	real := NewBackgroundTimer(Real{}, time.Hour)
	defer real.Stop()
	if _, ok := real.(realTimer); !ok {
		t.Fatalf("on the wall clock: a %T", real)
	}
}
