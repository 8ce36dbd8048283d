// Package stubs holds the step stand-ins a test registers for a client
// (hoppertest.StubStep), which the root package's Step consults. Nothing
// is registered outside tests, and a lookup then costs one atomic load.
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
