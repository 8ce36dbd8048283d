package hopper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/hclock"
)

// WorkflowContext is what workflow code sees of its run. Workflow code reads
// time, randomness and new ids only through it (they are recorded, so a
// replay sees the same values), and does side effects in steps.
type WorkflowContext interface {
	// Context is the run's context: cancelled when the run is cancelled or
	// its worker loses it. Pass it to steps' work, not to long waits (use
	// Sleep, hooks, children).
	Context() context.Context
	// RunID returns the run's id; ParentID the parent run's id, if any.
	RunID() string
	ParentID() string
	// Workflow returns the workflow's name.
	Workflow() string
	// Attempt returns the run's attempt, 1 for the first: StrategyRetry
	// starts a new attempt from the beginning, numbered 2, 3 …; a crash
	// does not (the attempt goes on). What an attempt starts (activities,
	// children, steps' ids) is identified per attempt, so a new attempt
	// never meets the previous attempt's.
	Attempt() int
	// StartedAt returns when the run was created.
	StartedAt() time.Time
	// Now returns the current time, recorded: a replay sees the same time.
	Now() time.Time
	// Random returns a number in [0,1), recorded.
	Random() float64
	// NewID returns a new unique id, recorded.
	NewID() string
	// Sleep waits d durably: the run suspends (no goroutine is held) and
	// wakes when d has passed, even after a restart. It returns an error
	// when the run suspends or is cancelled: return it.
	Sleep(d time.Duration) error
	// SleepUntil waits until t durably, as Sleep.
	SleepUntil(t time.Time) error
	// Compensate registers an undo action for what the attempt did so far
	// (register it right after the step it undoes): when the attempt fails
	// (retried or not) or the run is cancelled, the attempt's registered
	// actions run in reverse order, each once and recorded.
	Compensate(name string, fn func(ctx context.Context) error)
	// IsCancelled reports whether the run was asked to stop.
	IsCancelled() bool
	// Patch marks a change to workflow code: it returns true for runs that
	// reach this point with the new code (new runs, and old ones that had
	// not got this far), false for runs whose history predates the change.
	Patch(name string) bool
	// Stream is the run's append-only progress stream.
	Stream() *Stream

	state() *wfState
}

func (st *wfState) state() *wfState             { return st }
func (st *wfState) Context() context.Context    { return st.ctx }
func (st *wfState) RunID() string               { return st.run.ID }
func (st *wfState) ParentID() string            { return st.run.ParentID }
func (st *wfState) Workflow() string            { return st.run.Workflow }
func (st *wfState) Attempt() int                { return st.attempt }
func (st *wfState) StartedAt() time.Time        { return st.run.CreatedAt }
func (st *wfState) Stream() *Stream             { return &Stream{st: st} }
func (st *wfState) IsCancelled() bool           { return st.isCancelled() }
func (st *wfState) Sleep(d time.Duration) error { return st.sleep(d, time.Time{}) }
func (st *wfState) SleepUntil(t time.Time) error {
	return st.sleep(0, t)
}

func (st *wfState) Now() time.Time {
	t, _ := SideEffect(st, "now", func() time.Time { return st.c.now() })
	return t
}

func (st *wfState) Random() float64 {
	f, _ := SideEffect(st, "random", randv2.Float64)
	return f
}

func (st *wfState) NewID() string {
	id, _ := SideEffect(st, "id", st.c.newID)
	return id
}

func (st *wfState) Compensate(name string, fn func(ctx context.Context) error) {
	if st.check() != nil {
		return
	}
	if ev, err := st.next(name, evCompensationAdded); err != nil {
		return
	} else if ev == nil {
		if st.live() != nil || st.record(st.ctx, nil, evCompensationAdded, name, evData{}) != nil {
			return
		}
	}
	st.comps = append(st.comps, compensation{name: name, fn: fn})
}

func (st *wfState) Patch(name string) bool {
	if st.check() != nil {
		return false
	}
	ev := st.peek()
	switch {
	case ev == nil && st.replay:
		st.suspended = true
		return false
	case ev == nil:
		return st.live() == nil && st.record(st.ctx, nil, evPatch, name, evData{}) == nil
	case ev.Kind == evPatch && ev.Name == name:
		st.pos++
		return true
	default:
		return false
	}
}

func (st *wfState) sleep(d time.Duration, until time.Time) error {
	if err := st.check(); err != nil {
		return err
	}
	ev, err := st.next("sleep", evSleep)
	if err != nil {
		return err
	}
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return err
		}
		until = data.Until
		if st.replay && st.pos < len(st.events) {
			return nil // the history goes on: the sleep ended
		}
	} else {
		if err := st.live(); err != nil {
			return err
		}
		if until.IsZero() {
			until = st.c.now().Add(d)
		}
		if err := checkTime("sleep until", until); err != nil {
			return err
		}
		until = hclock.Truncate(until)
		if err := st.record(st.ctx, nil, evSleep, "sleep", evData{Until: until}); err != nil {
			return err
		}
	}
	if !st.c.now().Before(until) {
		return nil
	}
	if err := st.live(); err != nil {
		return err
	}
	return st.suspend(until, nil)
}

// SideEffect runs fn once and records its value: a replay returns the
// recorded value without running fn. Use it for anything non-deterministic
// that is not worth a step (a random choice, a timestamp).
func SideEffect[T any](wf WorkflowContext, name string, fn func() T) (T, error) {
	st := wf.state()
	var zero T
	if err := st.check(); err != nil {
		return zero, err
	}
	ev, err := st.next(name, evSideEffect)
	if err != nil {
		return zero, err
	}
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		var v T
		err := json.Unmarshal(data.Output, &v)
		return v, err
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	v := fn()
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("hopper: side effect %q: %w", name, err)
	}
	if err := st.record(st.ctx, nil, evSideEffect, name, evData{Output: b}); err != nil {
		return zero, err
	}
	return v, nil
}

// StepOpts configure a step. A nil *StepOpts is valid.
type StepOpts struct {
	// Retry is the step's retry policy, run inside the step (the default
	// policy: 3 attempts, exponential backoff). An Abort error (Fatal)
	// stops retrying; RetryAfter sets a floor.
	Retry RetryPolicy
}

// StepError is a step's final error as the workflow sees it, the same on
// every replay. errors.Is matches ErrAborted for a fatal step error.
type StepError struct {
	Step    string
	Kind    hoppertype.ErrorKind
	Message string
}

// Error implements error.
func (e *StepError) Error() string { return fmt.Sprintf("step %q: %s", e.Step, e.Message) }

// Unwrap maps the kind to hopper's sentinels.
func (e *StepError) Unwrap() error {
	return (&JobError{Kind: e.Kind}).Unwrap()
}

// Fatal marks a step error as permanent: the step is not retried. It is
// Abort under the name workflow code expects.
func Fatal(err error) error { return Abort(err) }

// Step runs fn as a checkpointed step: its output (or final error) is
// recorded before the workflow goes on, and a replay returns the recorded
// result without running fn again. fn runs inline, retried under opts'
// policy. A step's effect happens at least once: a crash after the effect
// and before the record runs it again, so make effects idempotent (the
// step's identity, StepMetadata.ID from StepFromContext, which names the
// run's attempt, makes a good key). Names must be stable: a replay that
// reaches a different step at a position fails with a NonDeterminismError
// naming both.
func Step[T any](wf WorkflowContext, name string, fn func(ctx context.Context) (T, error), opts *StepOpts) (T, error) {
	st := wf.state()
	var zero T
	if err := st.check(); err != nil {
		return zero, err
	}
	ev, err := st.next(name, evStep)
	if err != nil {
		return zero, err
	}
	if ev != nil {
		return decodeStep[T](st, name, ev)
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	var policy RetryPolicy
	if opts != nil {
		policy = opts.Retry
	}
	if err := policy.Validate(); err != nil {
		return zero, err
	}
	p := policy.resolved()
	var v T
	meta := StepMetadata{RunID: st.run.ID, Name: name, ID: fmt.Sprintf("%s/%s#%d", st.scope(), name, st.nextSeq)}
	attempt := 1
	for ; ; attempt++ {
		meta.Attempt = attempt
		v, err = runStep(context.WithValue(st.ctx, stepMetaKey{}, meta), fn)
		if err == nil || errors.Is(err, ErrAborted) || attempt >= p.Attempts || st.ctx.Err() != nil {
			break
		}
		d := p.Delay(attempt, nil)
		var ra *hoppertype.RetryAfterError
		if errors.As(err, &ra) && ra.Delay > d {
			d = ra.Delay
		}
		if hclock.Sleep(st.ctx, st.c.clock, d) != nil {
			break
		}
	}
	if err != nil {
		if st.ctx.Err() != nil && st.live() != nil {
			return zero, ErrCancelled
		}
		ei := errorInfo(err, st.attempt, st.c.now())
		if rerr := st.record(st.ctx, nil, evStep, name, evData{Error: ei, Attempts: attempt}); rerr != nil {
			return zero, rerr
		}
		return zero, &StepError{Step: name, Kind: ei.Kind, Message: ei.Message}
	}
	b, err := st.c.codec.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("hopper: step %q: encode output: %w", name, err)
	}
	if err := st.record(st.ctx, nil, evStep, name, evData{Output: b, Attempts: attempt}); err != nil {
		return zero, err
	}
	return v, nil
}

// StepMetadata describes the step whose function is running.
type StepMetadata struct {
	RunID string
	Name  string
	// ID is the step's identity: its run and attempt, its name and its
	// position ("run/name#position" in a run's first attempt,
	// "run@2/name#position" in its second). It is the same on every try of
	// the step and differs between attempts of the run: a good idempotency
	// key for the step's effect, which a retried run undoes (its
	// compensation) before the next attempt does it again.
	ID string
	// Attempt counts the step's tries, from 1.
	Attempt int
}

type stepMetaKey struct{}

// StepFromContext returns the metadata of the step whose function was given
// ctx (false outside a step).
func StepFromContext(ctx context.Context) (StepMetadata, bool) {
	m, ok := ctx.Value(stepMetaKey{}).(StepMetadata)
	return m, ok
}

func runStep[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return fn(ctx)
}

func decodeStep[T any](st *wfState, name string, ev *hoppertype.RunEvent) (T, error) {
	var zero T
	var data evData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return zero, err
	}
	if data.Error != nil {
		return zero, &StepError{Step: name, Kind: data.Error.Kind, Message: data.Error.Message}
	}
	var v T
	if len(data.Output) > 0 {
		if err := st.c.codec.Unmarshal(data.Output, &v); err != nil {
			return zero, fmt.Errorf("hopper: step %q: decode recorded output: %w", name, err)
		}
	}
	return v, nil
}

// Activity runs a job of type t as a step of the workflow: the job is
// queued with its own queue, limits, timeout, retries and heartbeats, and
// the workflow waits (suspended, holding no goroutine) until it finishes.
// Its output, or its final error as a *StepError, is recorded.
func Activity[I, O any](wf WorkflowContext, t *Type[I, O], in I, opts *InsertOpts) (O, error) {
	st := wf.state()
	var zero O
	if err := st.check(); err != nil {
		return zero, err
	}
	name := t.Name()
	ev, err := st.next(name, evActivityScheduled)
	if err != nil {
		return zero, err
	}
	var jobID string
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		jobID = data.Job
	} else {
		if err := st.live(); err != nil {
			return zero, err
		}
		jobID = st.scope() + ".a" + strconv.Itoa(st.nextSeq)
		o := InsertOpts{}
		if opts != nil {
			o = *opts
		}
		o.ID = jobID
		o.Metadata = mergeMeta(o.Metadata, map[string]string{wakeKey: st.run.ID})
		spec := t.Job(in, &o)
		spec.derivedID = true // the run's id and a position
		row, err := st.c.buildRow(spec, st.c.now())
		if err != nil {
			return zero, err
		}
		row.ParentID = st.run.ID
		var res []driver.JobInsertResult
		err = st.inTx(evActivityScheduled, name, evData{Job: jobID}, func(ctx context.Context, tx driver.Executor) error {
			var err error
			if res, err = tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{row}}); err != nil {
				return err
			}
			return notifyQueues(ctx, tx, res)
		})
		if err != nil {
			return zero, err
		}
		st.c.afterInsert(res, nil)
	}
	if ev, err := st.next(name, evActivityCompleted); err != nil {
		return zero, err
	} else if ev != nil {
		return decodeStep[O](st, name, ev)
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	job, err := st.c.drv.JobGet(st.ctx, jobID)
	if err != nil {
		return zero, st.fail(err)
	}
	if !job.State.Terminal() {
		return zero, st.suspend(farFuture, func(ctx context.Context) bool {
			j, err := st.c.drv.JobGet(ctx, jobID)
			return err == nil && j.State.Terminal()
		})
	}
	data := evData{Attempts: job.Attempt}
	if job.State == hoppertype.JobStateSucceeded {
		data.Output = job.Result
	} else {
		je := jobErrorFromRow(job).(*JobError)
		data.Error = &hoppertype.ErrorInfo{Kind: je.Kind, Message: je.Message, Attempt: job.Attempt, At: st.c.now()}
	}
	if err := st.record(st.ctx, nil, evActivityCompleted, name, data); err != nil {
		return zero, err
	}
	return decodeStep[O](st, name, st.events[len(st.events)-1])
}

// wakeKey, in a job's metadata, names the run its end wakes (an activity's
// run).
const wakeKey = "hopper.wake"

func mergeMeta(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// fail turns a store error into a fatal one for the run.
func (st *wfState) fail(err error) error {
	if st.fatal == nil {
		st.fatal = err
	}
	return st.fatal
}

// ChildOpts configure a child run. A nil *ChildOpts is valid.
type ChildOpts struct {
	// ID is the child's run id (ValidateID's rule holds); empty derives
	// one from the parent's id, its attempt and the position ("parent.5" in
	// the parent's first attempt, "parent@2.5" in its second), stable
	// across replays. An explicit ID is the same in every attempt of the
	// parent: a retried parent finds the child an earlier attempt started
	// (starts are idempotent by id).
	ID string
}

// Child starts a child run of w and waits for it durably (the parent
// suspends, holding no goroutine, and wakes when the child ends). It
// returns the child's output, or its failure as a *RunError. Cancelling
// the parent cancels its children.
func Child[I, O any](wf WorkflowContext, w *WorkflowType[I, O], in I, opts *ChildOpts) (O, error) {
	st := wf.state()
	var zero O
	if err := st.check(); err != nil {
		return zero, err
	}
	if opts != nil && opts.ID != "" {
		// Refused alike on every replay, before the history is read.
		if err := ValidateID(opts.ID); err != nil {
			return zero, fmt.Errorf("hopper: child %s: %w", w.wfName, err)
		}
	}
	ev, err := st.next(w.wfName, evChildStarted)
	if err != nil {
		return zero, err
	}
	var childID string
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		childID = data.Child
	} else {
		if err := st.live(); err != nil {
			return zero, err
		}
		childID = st.scope() + "." + strconv.Itoa(st.nextSeq)
		if opts != nil && opts.ID != "" {
			childID = opts.ID
		}
		var started bool
		err := st.inTx(evChildStarted, w.wfName, evData{Child: childID}, func(ctx context.Context, tx driver.Executor) error {
			_, existing, err := st.c.startRunIn(ctx, tx, w.core(), in, &StartOpts{ID: childID}, st.run.ID)
			started = !existing
			return err
		})
		if err != nil {
			return zero, err
		}
		if started {
			st.c.wakeQueue(w.core().queue(), time.Time{})
			st.c.wakeQueue(st.c.cfg.DefaultQueue, time.Time{})
		}
	}
	if ev, err := st.next(w.wfName, evChildCompleted); err != nil {
		return zero, err
	} else if ev != nil {
		return decodeChild[O](st, childID, ev)
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	info, err := st.c.runStatus(st.ctx, childID)
	if err != nil {
		return zero, st.fail(err)
	}
	if !info.Status.Terminal() {
		return zero, st.suspend(farFuture, func(ctx context.Context) bool {
			i, err := st.c.runStatus(ctx, childID)
			return err == nil && i.Status.Terminal()
		})
	}
	data := evData{Child: childID, Status: info.Status}
	if info.Status == hoppertype.RunCompleted {
		data.Output = info.Output
	} else {
		data.Error = info.Error
		if data.Error == nil {
			data.Error = &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: string(info.Status)}
		}
	}
	if err := st.record(st.ctx, nil, evChildCompleted, w.wfName, data); err != nil {
		return zero, err
	}
	return decodeChild[O](st, childID, st.events[len(st.events)-1])
}

func decodeChild[O any](st *wfState, childID string, ev *hoppertype.RunEvent) (O, error) {
	var zero O
	var data evData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return zero, err
	}
	if data.Error != nil {
		return zero, &RunError{RunID: childID, Status: data.Status, Kind: data.Error.Kind, Message: data.Error.Message}
	}
	var v O
	if len(data.Output) > 0 && !isNoValue[O]() {
		if err := st.c.codec.Unmarshal(data.Output, &v); err != nil {
			return zero, fmt.Errorf("hopper: child %s: decode output: %w", childID, err)
		}
	}
	return v, nil
}

// Hook is a durable wait for an external payload of type T, found by its
// token (at least 128 random bits): resumed from Go (Client.HookResume),
// the HTTP API or a webhook URL.
type Hook[T any] struct {
	st    *wfState
	name  string
	token string
	req   *HookRequest
}

// HookRequest is the HTTP request that resumed a hook through its webhook
// (/v1/webhooks/{token}): its method, headers and query, so a workflow can
// check a signature or read what the caller sent beside the body. The
// credentials are left out: Authorization, Proxy-Authorization and Cookie
// headers are never stored.
type HookRequest struct {
	Method string      `json:"method"`
	Header http.Header `json:"header,omitempty"`
	Query  url.Values  `json:"query,omitempty"`
}

// Request returns the request that resumed the hook through its webhook,
// once Wait has returned its payload; nil when it was resumed otherwise
// (HookResume, POST /v1/hooks/{token}) or has not been.
func (h *Hook[T]) Request() *HookRequest { return h.req }

// Token returns the hook's token.
func (h *Hook[T]) Token() string { return h.token }

// URL returns the hook's webhook URL (Config.WebhookBaseURL + token), or
// "" when no base URL is configured.
func (h *Hook[T]) URL() string {
	if h.st.c.cfg.WebhookBaseURL == "" {
		return ""
	}
	return h.st.c.cfg.WebhookBaseURL + h.token
}

// ErrHookTimeout is returned by Hook.Wait when its timeout passes first.
var ErrHookTimeout = errors.New("hopper: hook timed out")

// HookType is a typed hook factory: DefineHook[Approval]("approval").
type HookType[T any] struct{ name string }

// DefineHook makes a typed hook factory.
func DefineHook[T any](name string) HookType[T] { return HookType[T]{name: name} }

// Create creates a hook of this type in the run.
func (ht HookType[T]) Create(wf WorkflowContext) (*Hook[T], error) { return NewHook[T](wf, ht.name) }

// NewHook creates a hook in the run: a token is minted (and recorded, so a
// replay gets the same token) and stored, waiting for a payload.
func NewHook[T any](wf WorkflowContext, name string) (*Hook[T], error) {
	st := wf.state()
	if err := st.check(); err != nil {
		return nil, err
	}
	ev, err := st.next(name, evHookCreated)
	if err != nil {
		return nil, err
	}
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return nil, err
		}
		return &Hook[T]{st: st, name: name, token: data.Token}, nil
	}
	if err := st.live(); err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b)
	data := evData{Token: token}
	if _, ok := st.c.codec.(JSONCodec); ok {
		// Recorded so that any process refuses a payload that would not
		// decode into a T before it uses the hook (Client.HookResume).
		data.Schema = hookSchema[T]()
	}
	err = st.inTx(evHookCreated, name, data, func(ctx context.Context, tx driver.Executor) error {
		return tx.HookInsert(ctx, &hoppertype.HookRow{Token: token, RunID: st.run.ID, Name: name, State: hoppertype.HookWaiting, CreatedAt: st.c.now()})
	})
	if err != nil {
		return nil, err
	}
	return &Hook[T]{st: st, name: name, token: token}, nil
}

// HookWaitOpts configure a wait. A nil *HookWaitOpts waits forever.
type HookWaitOpts struct {
	// Timeout, when set, ends the wait with ErrHookTimeout.
	Timeout time.Duration
}

// Wait waits durably for the hook's payload and decodes it into a T.
func (h *Hook[T]) Wait(opts *HookWaitOpts) (T, error) {
	st := h.st
	var zero T
	if err := st.check(); err != nil {
		return zero, err
	}
	ev, err := st.next(h.name, evHookWait)
	if err != nil {
		return zero, err
	}
	until := farFuture
	if ev != nil {
		var data evData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		until = data.Until
	} else {
		if err := st.live(); err != nil {
			return zero, err
		}
		if opts != nil && opts.Timeout > 0 {
			until = hclock.Truncate(st.c.now().Add(opts.Timeout))
		}
		if err := st.record(st.ctx, nil, evHookWait, h.name, evData{Until: until, Token: h.token}); err != nil {
			return zero, err
		}
	}
	if ev, err := st.next(h.name, evHookReceived, evHookTimeout); err != nil {
		return zero, err
	} else if ev != nil {
		return h.decode(ev)
	}
	if err := st.live(); err != nil {
		return zero, err
	}
	row, err := st.c.drv.HookGet(st.ctx, h.token)
	if err != nil {
		return zero, st.fail(err)
	}
	switch {
	case row.State == hoppertype.HookResumed:
		if err := st.record(st.ctx, nil, evHookReceived, h.name, evData{Output: row.Payload, Request: row.Request}); err != nil {
			return zero, err
		}
	case !st.c.now().Before(until):
		if err := st.record(st.ctx, nil, evHookTimeout, h.name, evData{}); err != nil {
			return zero, err
		}
	default:
		token := h.token
		return zero, st.suspend(until, func(ctx context.Context) bool {
			r, err := st.c.drv.HookGet(ctx, token)
			return err == nil && r.State == hoppertype.HookResumed
		})
	}
	return h.decode(st.events[len(st.events)-1])
}

// decode reads the hook's payload, and the request that sent it, from its
// hook_received event.
func (h *Hook[T]) decode(ev *hoppertype.RunEvent) (T, error) {
	v, err := decodeHook[T](h.st, h.name, ev)
	if err == nil && ev.Kind == evHookReceived {
		var data evData
		if json.Unmarshal(ev.Data, &data) == nil && len(data.Request) > 0 {
			var req HookRequest
			if json.Unmarshal(data.Request, &req) == nil {
				h.req = &req
			}
		}
	}
	return v, err
}

func decodeHook[T any](st *wfState, name string, ev *hoppertype.RunEvent) (T, error) {
	var zero T
	if ev.Kind == evHookTimeout {
		return zero, fmt.Errorf("%w: %q", ErrHookTimeout, name)
	}
	var data evData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(data.Output, &v); err != nil {
		return zero, fmt.Errorf("%w: hook %q payload does not decode into %T: %w", ErrInvalidInput, name, v, err)
	}
	return v, nil
}

// WaitHook creates a hook named name and waits for its payload.
func WaitHook[T any](wf WorkflowContext, name string, opts *HookWaitOpts) (T, error) {
	h, err := NewHook[T](wf, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return h.Wait(opts)
}

// Stream is a run's durable, append-only stream of chunks: progress for
// clients that read it from any offset or tail it live.
type Stream struct{ st *wfState }

// Write appends v (JSON-encoded) to the stream. Written from workflow code,
// a chunk is written exactly once (the write is recorded in history, with
// the chunk's offset). A run has one stream: a retried attempt's chunks
// follow the earlier attempts', and each attempt's history names the
// offsets of those it wrote.
func (s *Stream) Write(v any) error {
	st := s.st
	if err := st.check(); err != nil {
		return err
	}
	ev, err := st.next("", evStreamWrite)
	if err != nil || ev != nil {
		return err
	}
	if err := st.live(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("hopper: stream write: %w", err)
	}
	return st.inTxData(evStreamWrite, "", func(ctx context.Context, tx driver.Executor) (evData, error) {
		chunks, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: st.run.ID, Chunks: [][]byte{b}, Now: st.c.now()})
		if err != nil {
			return evData{}, err
		}
		if len(chunks) != 1 {
			return evData{}, fmt.Errorf("hopper: stream write: the store appended %d chunks, not 1", len(chunks))
		}
		return evData{Offset: &chunks[0].Offset}, nil
	})
}
