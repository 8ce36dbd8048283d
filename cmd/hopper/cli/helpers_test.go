package cli

import (
	"context"
	"sync"
	"testing"

	"github.com/hopper-go/hopper"
)

// awaitEvents waits until cond holds: it checks cond, then again at each
// event c emits, and fails the test when ctx ends first. An event follows
// the commit of the transition it reports, so a state c's own workers make
// (a run waiting, a job done) shows by then. Waits on what the test cannot
// reach the client of (`hopper dev`, a browser) look again instead.
func awaitEvents(t *testing.T, ctx context.Context, c *hopper.Client, what string, cond func() bool) {
	t.Helper()
	var mu sync.Mutex
	changed := make(chan struct{})
	next := func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return changed
	}
	defer c.Subscribe(func(hopper.Event) {
		mu.Lock()
		defer mu.Unlock()
		close(changed)
		changed = make(chan struct{})
	})()
	for {
		ch := next()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
