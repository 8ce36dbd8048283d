package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// Waiting in the API tests: a test waits for what it expects to happen —
// a state the client of its server reaches, rechecked at each event the
// client emits — and never for time to pass. An event follows the commit
// of the transition it reports, so the API shows the state by then.

// await waits until cond holds: it checks cond, then again at each event
// e's client emits, and fails the test after 20 s.
func (e *env) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	var mu sync.Mutex
	changed := make(chan struct{})
	next := func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return changed
	}
	defer e.c.Subscribe(func(hopper.Event) {
		mu.Lock()
		defer mu.Unlock()
		close(changed)
		changed = make(chan struct{})
	})()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
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

// awaitFleet waits until cond holds of what s's fleet follower folded: it
// checks cond, then again at each event the follower folds from the store,
// and fails the test after 30 s.
func awaitFleet(t *testing.T, s *server.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ch := server.FleetNext(s)
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
