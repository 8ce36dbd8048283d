// Package stubs holds the step stand-ins a test registers for a client
// (hoppertest.StubStep), which the root package's Step consults, and the
// recorders of handlers' JobContext calls (hoppertest.Work). Nothing is
// registered outside tests, and a lookup then costs one atomic load.
package stubs

import (
	"sync"
	"sync/atomic"
)

var (
	count atomic.Int32
	mu    sync.RWMutex
	steps = map[stepKey]any{}
)

type stepKey struct {
	owner any
	name  string
}

// SetStep registers fn as the stand-in of the steps named name that
// owner's workflows run, and returns the function that removes it.
func SetStep(owner any, name string, fn any) (remove func()) {
	k := stepKey{owner, name}
	mu.Lock()
	if _, ok := steps[k]; !ok {
		count.Add(1)
	}
	steps[k] = fn
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := steps[k]; ok {
			delete(steps, k)
			count.Add(-1)
		}
	}
}

// Step returns the stand-in registered for owner's steps named name.
func Step(owner any, name string) (any, bool) {
	if count.Load() == 0 {
		return nil, false
	}
	mu.RLock()
	defer mu.RUnlock()
	fn, ok := steps[stepKey{owner, name}]
	return fn, ok
}

// JobCall is a call a handler made on its JobContext that a test records
// (hoppertest.Work): a Claim with its key and answer, or a heartbeat with
// its message.
type JobCall struct {
	JobID string
	// Claim is set for a Claim call, with Key and Won; else the call is a
	// heartbeat, with Message.
	Claim   bool
	Key     string
	Won     bool
	Message string
	Err     error
}

var recorders = map[any]func(JobCall){}

// SetRecorder makes fn receive the JobContext calls of owner's handlers,
// and returns the function that removes it.
func SetRecorder(owner any, fn func(JobCall)) (remove func()) {
	mu.Lock()
	if _, ok := recorders[owner]; !ok {
		count.Add(1)
	}
	recorders[owner] = fn
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := recorders[owner]; ok {
			delete(recorders, owner)
			count.Add(-1)
		}
	}
}

// Record hands call to the recorder set for owner, if any.
func Record(owner any, call JobCall) {
	if count.Load() == 0 {
		return
	}
	mu.RLock()
	fn := recorders[owner]
	mu.RUnlock()
	if fn != nil {
		fn(call)
	}
}
