package hopper

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
)

// Handler runs one attempt of a job: it receives the decoded input and
// returns the job's output. The job's context (id, attempt, heartbeat, …) is
// reachable from ctx with JobFromContext. Returning an error retries the job
// under its policy; Abort, Snooze, SnoozeUntil and RetryAfter say otherwise.
type Handler[I, O any] func(ctx context.Context, in I) (O, error)

// TypeOpts are a job type's defaults. Every field is optional; a per-call
// InsertOpts overrides them, and Options computes per-instance options from
// the input (call > Options(input) > these constants > client defaults).
type TypeOpts[I any] struct {
	// Queue the type's jobs go to. Defaults to the client's default queue,
	// "default".
	Queue string
	// Priority of the type's jobs; higher runs first.
	Priority int
	// Group is the default fairness label read by fair limiters (not the
	// fan-out group, which hopper assigns).
	Group string
	// Retry overrides fields of the client's retry policy.
	Retry RetryPolicy
	// Timeout is the default relative deadline: a job must start and finish
	// within Timeout of being enqueued, or it expires.
	Timeout time.Duration
	// AttemptTimeout bounds one execution; the handler's context is
	// cancelled and the attempt counts as failed.
	AttemptTimeout time.Duration
	// HeartbeatTimeout fails an attempt that goes that long without a
	// heartbeat (JobContext.Heartbeat or HeartbeatMessage; counted from the
	// attempt's start): its context is cancelled with ErrHeartbeatTimeout
	// and the attempt counts as failed, retried under the policy — seed
	// 004's activity heartbeatTimeout, which finds a hung handler well
	// before its attempt timeout. It is read on the client that runs the
	// type and timed on its Config.Clock. Defaults to none.
	HeartbeatTimeout time.Duration
	// WorkMiddleware wrap this type's attempts, inside the client's
	// Config.WorkMiddleware (see WorkMiddleware).
	WorkMiddleware []WorkMiddleware
	// InsertMiddleware wrap the inserts of this type's jobs, inside the
	// client's Config.InsertMiddleware, with only this type's rows (see
	// InsertMiddleware). They run on the client that inserts.
	InsertMiddleware []InsertMiddleware
	// Options computes per-instance options from the input.
	Options func(in I) *InsertOpts
	// Classify decides what a failed attempt leads to; it overrides the
	// client's Config.Classify.
	Classify Classifier
	// OnEvent receives this type's lifecycle events (after Config.OnEvent).
	OnEvent func(Event)
	// Codec encodes this type's input and output. Defaults to the client's.
	Codec Codec
	// Limit bounds this type's attempts in each client: how many run at
	// once, in which order waiting ones start, how fast they start. It
	// governs the type's jobs instead of Config.Limit. Defaults to none.
	Limit *Limit
	// SkipQueue runs the first attempt in the enqueuing process at once
	// (still recorded as running under a lease; a failure retries durably)
	// when the enqueuing client is started and has the type registered.
	SkipQueue bool
}

// Type is a named, typed job handler with its options, made by Define.
type Type[I, O any] struct {
	typeName string
	handler  Handler[I, O]
	opts     TypeOpts[I]
}

// Define makes a job type. name must be unique within a client; opts may be
// nil. Register the type with a client that should run its jobs; any client
// can enqueue it.
func Define[I, O any](name string, handler Handler[I, O], opts *TypeOpts[I]) *Type[I, O] {
	if name == "" {
		panic("hopper: Define with an empty name")
	}
	if handler == nil {
		panic("hopper: Define with a nil handler")
	}
	t := &Type[I, O]{typeName: name, handler: handler}
	if opts != nil {
		t.opts = *opts
	}
	return t
}

// Name returns the type's name.
func (t *Type[I, O]) Name() string { return t.typeName }

// DecodeInput decodes a stored input of this type (JobRow.Input) with the
// type's codec, or c's when the type sets none: what a test or a tool
// reads back of a job it did not enqueue itself.
func (t *Type[I, O]) DecodeInput(c *Client, b []byte) (I, error) {
	var in I
	if len(b) == 0 {
		return in, nil
	}
	err := t.core().codec(c).Unmarshal(b, &in)
	return in, err
}

// AnyType is a job type of any input and output types, as Client.Register
// takes it. *Type[I, O] implements it.
type AnyType interface {
	// Name returns the type's name.
	Name() string
	core() typeCore
}

// typeCore is the non-generic view of a Type the engine works with.
type typeCore interface {
	name() string
	queue() string
	codec(c *Client) Codec
	classify() Classifier
	onEvent() func(Event)
	skipQueue() bool
	// limit returns the type's own Limit, nil if none.
	limit() *Limit
	// heartbeatTimeout returns the type's HeartbeatTimeout (0: none).
	heartbeatTimeout() time.Duration
	// workMiddleware and insertMiddleware return the type's own
	// middleware.
	workMiddleware() []WorkMiddleware
	insertMiddleware() []InsertMiddleware
	// base returns the type's constant options (as client c applies them).
	base(c *Client) InsertOpts
	// computed returns the per-instance options computed from in (nil if none).
	computed(in any) *InsertOpts
	// decodeJSON decodes outside JSON input into the type's input.
	decodeJSON(raw []byte) (any, error)
	// encodeInput encodes a typed input (as produced by decodeJSON or given
	// by the caller) with the type's codec.
	encodeInput(c *Client, in any) ([]byte, error)
	// run decodes input, runs the handler and encodes the output.
	run(ctx context.Context, c *Client, input []byte) ([]byte, error)
	// encodeOutput encodes an output of the type's output type (as run
	// encodes the handler's), for CompleteTx.
	encodeOutput(c *Client, out any) ([]byte, error)
}

func (t *Type[I, O]) core() typeCore { return (*typeImpl[I, O])(t) }

type typeImpl[I, O any] Type[I, O]

func (t *typeImpl[I, O]) name() string { return t.typeName }
func (t *typeImpl[I, O]) queue() string {
	return t.opts.Queue
}
func (t *typeImpl[I, O]) codec(c *Client) Codec {
	if t.opts.Codec != nil {
		return t.opts.Codec
	}
	return c.codec
}
func (t *typeImpl[I, O]) classify() Classifier             { return t.opts.Classify }
func (t *typeImpl[I, O]) onEvent() func(Event)             { return t.opts.OnEvent }
func (t *typeImpl[I, O]) skipQueue() bool                  { return t.opts.SkipQueue }
func (t *typeImpl[I, O]) limit() *Limit                    { return t.opts.Limit }
func (t *typeImpl[I, O]) heartbeatTimeout() time.Duration  { return t.opts.HeartbeatTimeout }
func (t *typeImpl[I, O]) workMiddleware() []WorkMiddleware { return t.opts.WorkMiddleware }
func (t *typeImpl[I, O]) insertMiddleware() []InsertMiddleware {
	return t.opts.InsertMiddleware
}
func (t *typeImpl[I, O]) base(*Client) InsertOpts {
	return InsertOpts{
		Queue:          t.opts.Queue,
		Priority:       t.opts.Priority,
		Group:          t.opts.Group,
		Retry:          t.opts.Retry,
		Timeout:        t.opts.Timeout,
		AttemptTimeout: t.opts.AttemptTimeout,
	}
}

func (t *typeImpl[I, O]) computed(in any) *InsertOpts {
	if t.opts.Options == nil {
		return nil
	}
	v, ok := in.(I)
	if !ok {
		return nil
	}
	return t.opts.Options(v)
}

func (t *typeImpl[I, O]) decodeJSON(raw []byte) (any, error) {
	var in I
	if len(raw) == 0 {
		raw = []byte("null")
	}
	if err := decodeStrictJSON(raw, &in); err != nil {
		return nil, fmt.Errorf("%w: input for %q: %w", ErrInvalidInput, t.typeName, err)
	}
	return in, nil
}

func (t *typeImpl[I, O]) encodeInput(c *Client, in any) ([]byte, error) {
	v, ok := in.(I)
	if !ok {
		return nil, fmt.Errorf("%w: input for %q is %T, want %v", ErrInvalidInput, t.typeName, in, reflect.TypeFor[I]())
	}
	b, err := t.codec(c).Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode input for %q: %w", ErrInvalidInput, t.typeName, err)
	}
	return b, nil
}

func (t *typeImpl[I, O]) run(ctx context.Context, c *Client, input []byte) (out []byte, err error) {
	codec := t.codec(c)
	var in I
	if err := codec.Unmarshal(input, &in); err != nil {
		return nil, &engine.KindError{Kind: hoppertype.ErrorKindDecode, Err: fmt.Errorf("decode input for %q: %w", t.typeName, err), Abort: true}
	}
	var res O
	func() {
		defer func() {
			if r := recover(); r != nil {
				stack := debug.Stack()
				err = &engine.KindError{Kind: hoppertype.ErrorKindPanic, Err: fmt.Errorf("%w: %w", ErrPanic, engine.PanicCause(r)), Stack: string(stack)}
			}
		}()
		res, err = t.handler(ctx, in)
	}()
	if err != nil {
		return nil, err
	}
	if isNoValue[O]() {
		return nil, nil
	}
	b, err := codec.Marshal(res)
	if err != nil {
		return nil, &engine.KindError{Kind: hoppertype.ErrorKindEncode, Err: fmt.Errorf("%w: %w", ErrEncode, err), Abort: true}
	}
	return b, nil
}

// None is the output type of a job that produces no value: its Result is the
// zero None and it contributes nothing to its group.
type None = struct{}

func isNoValue[O any]() bool {
	return reflect.TypeFor[O]() == reflect.TypeFor[struct{}]()
}

// boundType is a registered type as the engine runs it: the type with the
// client whose codec and context its handler gets.
type boundType struct {
	t typeCore
	c *Client
}

func (c *Client) bind(t typeCore) engine.JobType { return &boundType{t: t, c: c} }

func (b *boundType) Name() string                      { return b.t.name() }
func (b *boundType) Queue() string                     { return b.t.queue() }
func (b *boundType) SkipQueue() bool                   { return b.t.skipQueue() }
func (b *boundType) Limit() *hoppertype.Limit          { return b.t.limit() }
func (b *boundType) Classifier() hoppertype.Classifier { return b.t.classify() }
func (b *boundType) OnEvent() func(hoppertype.Event)   { return b.t.onEvent() }
func (b *boundType) HeartbeatTimeout() time.Duration   { return b.t.heartbeatTimeout() }

// IsWorkflow says the type's jobs are a workflow's runs (see
// engine.WorkflowJobType).
func (b *boundType) IsWorkflow() bool {
	_, ok := b.t.(workflowCore)
	return ok
}
func (b *boundType) Run(ctx context.Context, a *engine.Attempt) ([]byte, error) {
	jc := &JobContext{c: b.c, a: a, row: a.Row(), ctx: ctx}
	ctx = withJobContext(ctx, jc)
	var out []byte
	err := b.c.withWorkMiddleware(ctx, b.t, a.Row(), func(ctx context.Context) error {
		jc.ctx = ctx
		var err error
		out, err = b.t.run(ctx, b.c, a.Row().Input)
		return err
	})
	return out, err
}
