package hoppertest

import (
	"context"
	"sync"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/internal/stubs"
)

// Stub stands in for a job type in a test: a type of the same name whose
// handler is fn, recording each input it is called with. Register it on
// the test's client instead of the real type, and every job of that name
// (an activity of a workflow among them, however the workflow code names
// the real type) runs fn: Temporal's OnActivity for hopper. The options
// jobs are queued with (retry policy, queue, timeouts) are the real type's,
// as the code that enqueues them gives them.
type Stub[I, O any] struct {
	*hopper.Type[I, O]
	mu    sync.Mutex
	calls []I
}

// StubType returns a stub of typ running fn.
func StubType[I, O any](typ *hopper.Type[I, O], fn func(ctx context.Context, in I) (O, error)) *Stub[I, O] {
	s := &Stub[I, O]{}
	s.Type = hopper.Define(typ.Name(), func(ctx context.Context, in I) (O, error) {
		s.mu.Lock()
		s.calls = append(s.calls, in)
		s.mu.Unlock()
		return fn(ctx, in)
	}, nil)
	return s
}

// Calls returns the inputs the stub was called with, in order (an input
// retried is there once per attempt).
func (s *Stub[I, O]) Calls() []I {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]I(nil), s.calls...)
}

// WorkflowStub stands in for a workflow in a test: a workflow of the same
// name whose function is fn, recording each input. Register it instead of
// the real workflow and the runs of that name, children started with
// hopper.Child among them, run fn.
type WorkflowStub[I, O any] struct {
	*hopper.WorkflowType[I, O]
	mu    sync.Mutex
	calls []I
}

// StubWorkflow returns a stub of w running fn (as a one-step workflow: fn
// runs once per run, its result recorded).
func StubWorkflow[I, O any](w *hopper.WorkflowType[I, O], fn func(ctx context.Context, in I) (O, error)) *WorkflowStub[I, O] {
	s := &WorkflowStub[I, O]{}
	s.WorkflowType = hopper.Workflow(w.Name(), func(wf hopper.WorkflowContext, in I) (O, error) {
		return hopper.Step(wf, "stub", func(ctx context.Context) (O, error) {
			s.mu.Lock()
			s.calls = append(s.calls, in)
			s.mu.Unlock()
			return fn(ctx, in)
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 1}})
	}, nil)
	return s
}

// Calls returns the inputs the stub was called with, in order.
func (s *WorkflowStub[I, O]) Calls() []I {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]I(nil), s.calls...)
}

// StubStep makes the steps named name in the workflows c runs call fn
// instead of their own function, until the test ends: a step's call to a
// service the test cannot reach. fn must return the step's type (an error
// says so when it does not). A step recorded before the stub keeps its
// recorded result, as replay always does.
func StubStep[O any](t T, c *hopper.Client, name string, fn func(ctx context.Context) (O, error)) {
	t.Helper()
	t.Cleanup(stubs.SetStep(c, name, fn))
}
