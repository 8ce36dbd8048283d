package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestLifetimes: the hard lifetime ends stopGrace after Stop's ctx is done,
// and takes the others with it; end ends them all at once.
func TestLifetimes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLifetimes(context.Background())
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		begin := time.Now()
		l.endHardAfter(stopCtx)
		l.endStopping()
		if l.stopping.Err() == nil || l.drained.Err() != nil || l.hard.Err() != nil {
			t.Fatal("Stop beginning ends the stopping lifetime only")
		}
		<-l.hard.Done()
		if got := time.Since(begin); got != time.Second+stopGrace {
			t.Errorf("hard ended after %v, want %v", got, time.Second+stopGrace)
		}
		if l.drained.Err() == nil {
			t.Error("the drained lifetime outlived the hard one")
		}
		l.end()

		l = newLifetimes(context.Background())
		l.endHardAfter(context.Background()) // Stop without a deadline
		l.end()
		if l.hard.Err() == nil || l.stopping.Err() == nil || l.drained.Err() == nil {
			t.Error("end left a lifetime running")
		}
	})
}

// TestWithin: a context made within a lifetime keeps its parent's values,
// outlives its parent's end, and ends with the lifetime or its budget.
func TestWithin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		life, endLife := context.WithCancelCause(context.Background())
		ctx, cancel := within(parent, life, 0)
		defer cancel()
		cancelParent()
		if ctx.Err() != nil || ctx.Value(key{}) != "v" {
			t.Fatal("within: ended with its parent, or lost its values")
		}
		gone := errors.New("stopping gave up")
		endLife(gone)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), gone) {
			t.Errorf("within ended with %v, want the lifetime's cause", context.Cause(ctx))
		}

		begin := time.Now()
		ctx, cancel = within(parent, context.Background(), 3*time.Second)
		defer cancel()
		<-ctx.Done()
		if got := time.Since(begin); got != 3*time.Second {
			t.Errorf("within's budget ended it after %v, want 3s", got)
		}
		ctx, cancel = call(context.Background(), time.Millisecond)
		defer cancel()
		if d, _ := ctx.Deadline(); d.Sub(time.Now()) != minBudget {
			t.Errorf("call's budget is %v, want at least %v", d.Sub(time.Now()), minBudget)
		}
	})
}
