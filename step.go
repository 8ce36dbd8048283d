package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
	"github.com/hopper-go/hopper/internal/stubs"
)

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
// recorded before the workflow's next operation goes live (or with the
// run's end, when the step is its last: one commit fewer), and a replay
// returns the recorded result without running fn again. fn runs inline,
// retried under opts' policy. A step's effect happens at least once: a
// crash after the effect and before the record runs it again, so make
// effects idempotent (the
// step's identity, StepMetadata.ID from StepFromContext, which names the
// run's attempt, makes a good key). Names must be stable: a replay that
// reaches a different step at a position fails with a NonDeterminismError
// naming both.
func Step[T any](wf WorkflowContext, name string, fn func(ctx context.Context) (T, error), opts *StepOpts) (T, error) {
	st := wf.state()
	var zero T
	v, done, p, err := stepBegin[T](st, name, opts)
	if done || err != nil {
		return v, err
	}
	if stub, ok := stubs.Step(st.c, name); ok {
		f, ok := stub.(func(context.Context) (T, error))
		if !ok {
			return zero, fmt.Errorf("hopper: step %q: its stub is a %T, the step returns %T", name, stub, zero)
		}
		fn = f
	}
	meta := StepMetadata{RunID: st.Run.ID, Name: name, ID: fmt.Sprintf("%s/%s#%d", st.Scope(), name, st.NextSeq)}
	attempt := 1
	for ; ; attempt++ {
		meta.Attempt = attempt
		v, err = runStep(context.WithValue(st.Context(), stepMetaKey{}, meta), stepMiddleware(st.c.cfg.StepMiddleware, meta, fn))
		if err == nil || errors.Is(err, ErrAborted) || attempt >= p.Attempts || st.Context().Err() != nil {
			break
		}
		d := p.Delay(attempt, nil)
		var ra *hoppertype.RetryAfterError
		if errors.As(err, &ra) && ra.Delay > d {
			d = ra.Delay
		}
		if hclock.Sleep(st.Context(), st.c.clock, d) != nil {
			break
		}
	}
	if err != nil {
		if st.Context().Err() != nil && st.Live() != nil {
			return zero, ErrCancelled
		}
		ei := engine.ErrorInfo(err, st.Attempt(), st.c.now())
		if rerr := st.RecordLater(engine.EvStep, name, engine.EventData{Error: ei, Attempts: attempt}); rerr != nil {
			return zero, rerr
		}
		return zero, &StepError{Step: name, Kind: ei.Kind, Message: ei.Message}
	}
	b, err := st.c.codec.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("hopper: step %q: encode output: %w", name, err)
	}
	// Stored with the run's next append: before its next operation, or
	// with its end (see RunState.RecordLater).
	if err := st.RecordLater(engine.EvStep, name, engine.EventData{Output: b, Attempts: attempt}); err != nil {
		return zero, err
	}
	return v, nil
}

// TxStep runs fn as a checkpointed step in a transaction on the client's
// store: fn writes through tx, and its writes and the step's record in the
// run's history commit together, or neither does. A replay returns the
// recorded result without running fn again; a crash before the commit
// leaves neither, and the step runs again. Where Step's effect happens at
// least once, the effect of TxStep on the store's own database happens
// exactly once (effects outside it, an e-mail say, are still at least
// once: keep them out of fn).
//
// Tx is the store's transaction as fn receives it: *sql.Tx on SQLite,
// pgx.Tx on PostgreSQL; a function taking another type fails the step
// with an error matching ErrInvalidInput, and the memory store refuses
// with ErrTxUnsupported (a step stub of the name, from hoppertest, runs
// as a plain step there). On SQLite the transaction holds the one write
// connection, and the client's other writes wait for it: keep fn short.
// fn must write only through tx: on SQLite a write of the client's own
// under fn's context (an Enqueue, a heartbeat) would wait for tx, and
// fails at once instead.
//
// A try whose fn returns an error is rolled back and retried under opts'
// policy, as Step's; the final error is recorded (in a transaction of
// its own) and returned as a *StepError. The record is fenced by the
// run's lease: a worker that lost its run commits nothing.
func TxStep[T, Tx any](wf WorkflowContext, name string, fn func(ctx context.Context, tx Tx) (T, error), opts *StepOpts) (T, error) {
	st := wf.state()
	var zero T
	if _, ok := stubs.Step(st.c, name); ok {
		// Stubbed in a test: the stub stands for the whole step.
		return Step(wf, name, func(context.Context) (T, error) { return zero, errors.New("hopper: stub not found") }, opts)
	}
	v, done, p, err := stepBegin[T](st, name, opts)
	if done || err != nil {
		return v, err
	}
	meta := StepMetadata{RunID: st.Run.ID, Name: name, ID: fmt.Sprintf("%s/%s#%d", st.Scope(), name, st.NextSeq)}
	attempt := 1
	var stepErr error // the last try's
	for ; ; attempt++ {
		meta.Attempt = attempt
		var v T
		ctx := context.WithValue(st.Context(), stepMetaKey{}, meta)
		ferr, err := st.InAppTx(ctx, engine.EvStep, name, func(ctx context.Context, tx any) (engine.EventData, error) {
			t, ok := tx.(Tx)
			if !ok {
				return engine.EventData{}, Abort(fmt.Errorf("%w: TxStep %q takes a %v, the %s store's transactions are %T",
					ErrInvalidInput, name, reflect.TypeFor[Tx](), st.c.eng.Driver().Name(), tx))
			}
			var err error
			v, err = runStep(ctx, stepMiddleware(st.c.cfg.StepMiddleware, meta, func(ctx context.Context) (T, error) { return fn(ctx, t) }))
			if err != nil {
				return engine.EventData{}, err
			}
			b, err := st.c.codec.Marshal(v)
			if err != nil {
				return engine.EventData{}, Abort(fmt.Errorf("%w: step %q: %w", ErrEncode, name, err))
			}
			return engine.EventData{Output: b, Attempts: attempt}, nil
		})
		if errors.Is(err, ErrTxUnsupported) {
			return zero, Abort(err) // no try will do better
		} else if err != nil {
			return zero, err
		}
		if ferr == nil {
			return v, nil
		}
		stepErr = ferr
		if errors.Is(ferr, ErrAborted) || attempt >= p.Attempts || st.Context().Err() != nil {
			break
		}
		d := p.Delay(attempt, nil)
		var ra *hoppertype.RetryAfterError
		if errors.As(ferr, &ra) && ra.Delay > d {
			d = ra.Delay
		}
		if hclock.Sleep(st.Context(), st.c.clock, d) != nil {
			break
		}
	}
	if st.Context().Err() != nil && st.Live() != nil {
		return zero, ErrCancelled
	}
	ei := engine.ErrorInfo(stepErr, st.Attempt(), st.c.now())
	if rerr := st.Record(st.Context(), nil, engine.EvStep, name, engine.EventData{Error: ei, Attempts: attempt}); rerr != nil {
		return zero, rerr
	}
	return zero, &StepError{Step: name, Kind: ei.Kind, Message: ei.Message}
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
			err = fmt.Errorf("%w: %w", ErrPanic, engine.PanicCause(r))
		}
	}()
	return fn(ctx)
}

func decodeStep[T any](st *wfState, name string, ev *hoppertype.RunEvent) (T, error) {
	var zero T
	var data engine.EventData
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

// stepBegin is what Step and TxStep do before running their function:
// check the run, answer a recorded step from its history (done), and
// resolve the retry policy of opts.
func stepBegin[T any](st *wfState, name string, opts *StepOpts) (v T, done bool, p RetryPolicy, err error) {
	if err := st.Check(); err != nil {
		return v, true, p, err
	}
	ev, err := st.Next(name, engine.EvStep)
	if err != nil {
		return v, true, p, err
	}
	if ev != nil {
		v, err = decodeStep[T](st, name, ev)
		return v, true, p, err
	}
	if err := st.Live(); err != nil {
		return v, true, p, err
	}
	var policy RetryPolicy
	if opts != nil {
		policy = opts.Retry
	}
	if err := policy.Validate(); err != nil {
		return v, true, p, err
	}
	return v, false, policy.resolved(), nil
}
