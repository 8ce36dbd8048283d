package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addHandler(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil }

// newClient is a started client on a fresh memory store with the wall clock.
func newClient(t *testing.T, cfg hopper.Config) *hopper.Client {
	t.Helper()
	if cfg.Driver == nil {
		d := memdriver.New()
		t.Cleanup(func() { _ = d.Close() })
		cfg.Driver = d
	}
	c, err := hopper.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
	return c
}

func TestEnqueueAndResult(t *testing.T) { forEachDriver(t, testEnqueueAndResult) }

func testEnqueueAndResult(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)

	h, err := add.Enqueue(ctx, c, addIn{A: 1, B: 2}, nil)
	require.NoError(t, err)
	require.Equal(t, h.ID(), h.GroupID(), "a root job is its own group")
	sum, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, sum)

	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
	require.Equal(t, 1, row.Attempt)
	require.JSONEq(t, `3`, string(row.Result))
	require.False(t, row.EndedAt.IsZero())
	require.False(t, row.RunAt.IsZero(), "the due time survives the job's completion")
	require.False(t, row.RunAt.After(row.StartedAt))

	g, err := h.Group(ctx)
	require.NoError(t, err)
	var gv int
	require.NoError(t, g.Decode(&gv))
	require.Equal(t, 3, gv, "a job that never fanned out is a group of one")
}

func TestEnqueueNameAndMany(t *testing.T) { forEachDriver(t, testEnqueueNameAndMany) }

func testEnqueueNameAndMany(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	mul := hopper.Define("mul", func(_ context.Context, in addIn) (int, error) { return in.A * in.B, nil }, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(add, mul))
	ctx := testCtx(t)

	h, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":20,"b":22}`), nil)
	require.NoError(t, err)
	raw, err := h.Result(ctx)
	require.NoError(t, err)
	require.JSONEq(t, `42`, string(raw))

	a, m := add.Job(addIn{A: 2, B: 3}, nil), mul.Job(addIn{A: 2, B: 3}, &hopper.InsertOpts{Priority: 5})
	preID := m.ID()
	hs, err := c.EnqueueMany(ctx, a, m)
	require.NoError(t, err)
	require.Len(t, hs, 2)
	require.Equal(t, preID, hs[1].ID(), "an id asked before enqueue is the id stored")
	r0, err := hs[0].Result(ctx)
	require.NoError(t, err)
	r1, err := hs[1].Result(ctx)
	require.NoError(t, err)
	require.JSONEq(t, `5`, string(r0))
	require.JSONEq(t, `6`, string(r1))

	typed, err := add.EnqueueMany(ctx, c, []addIn{{1, 1}, {2, 2}, {3, 3}}, nil)
	require.NoError(t, err)
	for i, h := range typed {
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, 2*(i+1), v)
	}
}

func TestBadInputIsRefused(t *testing.T) { forEachDriver(t, testBadInputIsRefused) }

func testBadInputIsRefused(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	add := hopper.Define("add", addHandler, nil)
	c := newClient(t, hopper.Config{Driver: d, MaxPayloadBytes: 64})
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)

	cases := []struct {
		name string
		do   func() error
		is   error
	}{
		{"unknown type", func() error { _, err := c.EnqueueName(ctx, "nope", json.RawMessage(`{}`), nil); return err }, hopper.ErrUnknownType},
		{"wrong field type", func() error {
			_, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":"one"}`), nil)
			return err
		}, hopper.ErrInvalidInput},
		{"unknown field", func() error { _, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":1,"c":2}`), nil); return err }, hopper.ErrInvalidInput},
		{"not json", func() error { _, err := c.EnqueueName(ctx, "add", json.RawMessage(`{a:1`), nil); return err }, hopper.ErrInvalidInput},
		{"trailing data", func() error { _, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":1} {}`), nil); return err }, hopper.ErrInvalidInput},
		{"oversized", func() error {
			_, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":1,"b":2`+strings.Repeat(" ", 100)+`}`), nil)
			return err
		}, hopper.ErrInvalidInput},
		{"negative delay", func() error {
			_, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Delay: -time.Second})
			return err
		}, hopper.ErrInvalidInput},
		{"attempts below one", func() error {
			_, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: -3}})
			return err
		}, hopper.ErrInvalidInput},
		{"jitter out of range", func() error {
			_, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Retry: hopper.RetryPolicy{Jitter: 2}})
			return err
		}, hopper.ErrInvalidInput},
		{"duplicate ids in one call", func() error {
			_, err := c.EnqueueMany(ctx, add.Job(addIn{}, &hopper.InsertOpts{ID: "x"}), add.Job(addIn{}, &hopper.InsertOpts{ID: "x"}))
			return err
		}, hopper.ErrInvalidInput},
		{"unencodable input", func() error {
			bad := hopper.Define("bad-in", func(context.Context, chan int) (int, error) { return 0, nil }, nil)
			_, err := bad.Enqueue(ctx, c, make(chan int), nil)
			return err
		}, hopper.ErrInvalidInput},
	}
	for _, tc := range cases {
		err := tc.do()
		require.ErrorIs(t, err, tc.is, tc.name)
	}
	page, err := c.JobList(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "nothing may be stored for bad input")

	_, err = c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{"bogus"}})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	_, err = c.JobList(ctx, &hopper.ListParams{Limit: -1})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
	require.ErrorIs(t, c.Register(hopper.Define("add", addHandler, nil)), hopper.ErrDuplicateType)
}

func TestResultThatDoesNotEncodeDeadLetters(t *testing.T) {
	forEachDriver(t, testResultThatDoesNotEncodeDeadLetters)
}

func testResultThatDoesNotEncodeDeadLetters(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	bad := hopper.Define("bad-out", func(context.Context, addIn) (func(), error) { return func() {}, nil }, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(bad))
	ctx := testCtx(t)
	h, err := bad.Enqueue(ctx, c, addIn{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrEncode)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateDead, row.State)
	require.Equal(t, 1, row.Attempt, "an encoding failure is not retried")
}

func TestRetriesThenSucceeds(t *testing.T) { forEachDriver(t, testRetriesThenSucceeds) }

func testRetriesThenSucceeds(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	events := newEventLog()
	var calls atomic.Int32
	flaky := hopper.Define("flaky", func(ctx context.Context, n int) (string, error) {
		jc := hopper.JobFromContext(ctx)
		calls.Add(1)
		if jc.Attempt() <= n {
			return "", fmt.Errorf("attempt %d fails", jc.Attempt())
		}
		return fmt.Sprintf("ok on %d", jc.Attempt()), nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 4, Base: time.Millisecond, Jitter: hopper.NoJitter}})
	c := newClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(flaky))
	ctx := testCtx(t)

	h, err := flaky.Enqueue(ctx, c, 2, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok on 3", v)
	require.EqualValues(t, 3, calls.Load())
	events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventSucceeded })
	require.ElementsMatch(t, []string{
		"queued/0", "started/1", "failed/1", "started/2", "failed/2", "started/3", "succeeded/3",
	}, events.attempts(h.ID()))

	// Out of attempts: dead, and the waiter gets the last error.
	h2, err := flaky.Enqueue(ctx, c, 10, nil)
	require.NoError(t, err)
	_, err = h2.Result(ctx)
	var je *hopper.JobError
	require.ErrorAs(t, err, &je)
	require.Equal(t, hopper.StateDead, je.State)
	require.Equal(t, 4, je.Attempt)
	require.Contains(t, je.Message, "attempt 4 fails")
	last := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h2.ID() && e.Kind == hopper.EventFailed && !e.WillRetry })
	require.Equal(t, 4, last.Attempt)
}

func TestAbortSnoozeAndClassifier(t *testing.T) { forEachDriver(t, testAbortSnoozeAndClassifier) }

func testAbortSnoozeAndClassifier(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var snoozes atomic.Int32
	permanent := errors.New("card declined")
	job := hopper.Define("j", func(ctx context.Context, mode string) (int, error) {
		jc := hopper.JobFromContext(ctx)
		switch mode {
		case "abort":
			return 0, hopper.Abort(permanent)
		case "snooze":
			if snoozes.Add(1) < 3 {
				return 0, hopper.Snooze(time.Millisecond)
			}
			return jc.Attempt(), nil
		case "classified":
			return 0, errors.New("HTTP 404")
		}
		return 0, nil
	}, &hopper.TypeOpts[string]{
		Classify: func(err error, info hopper.FailureInfo) hopper.Decision {
			if strings.Contains(err.Error(), "404") {
				return hopper.DecideAbort()
			}
			return hopper.DecideRetry()
		},
	})
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)

	h, err := job.Enqueue(ctx, c, "abort", nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)
	row, _ := c.JobGet(ctx, h.ID())
	require.Equal(t, 1, row.Attempt, "an abort uses no more attempts")

	h, err = job.Enqueue(ctx, c, "snooze", nil)
	require.NoError(t, err)
	attempt, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, attempt, "snoozes do not use attempts")

	h, err = job.Enqueue(ctx, c, "classified", nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)
}

func TestPanickingHandlerIsAFailure(t *testing.T) { forEachDriver(t, testPanickingHandlerIsAFailure) }

func testPanickingHandlerIsAFailure(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	boom := hopper.Define("boom", func(ctx context.Context, _ int) (int, error) {
		if hopper.JobFromContext(ctx).Attempt() == 1 {
			panic("kaboom")
		}
		return 7, nil
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Base: time.Millisecond}})
	var hookPanics atomic.Int32
	c := newClient(t, hopper.Config{Driver: newDriver(t),
		OnEvent: func(hopper.Event) { panic("bad hook") },
		OnError: func(err error, phase hopper.ErrorPhase) {
			if phase == hopper.PhaseHook {
				hookPanics.Add(1)
			}
		},
	})
	require.NoError(t, c.Register(boom))
	ctx := testCtx(t)
	h, err := boom.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err, "the panic is retried like any failure")
	require.Equal(t, 7, v)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.NotNil(t, row.Error)
	require.Equal(t, hoppertype.ErrorKindPanic, row.Error.Kind)
	require.Contains(t, row.Error.Message, "kaboom")
	require.Contains(t, row.Error.Stack, "goroutine", "the stack is kept with the error")
	require.Positive(t, hookPanics.Load(), "panicking hooks are reported, the engine carries on")
}

func TestUniqueKey(t *testing.T) { forEachDriver(t, testUniqueKey) }

func testUniqueKey(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	release := make(chan struct{})
	slow := hopper.Define("slow", func(ctx context.Context, n int) (int, error) {
		<-release
		return n, nil
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(slow))
	ctx := testCtx(t)

	h1, err := slow.Enqueue(ctx, c, 1, &hopper.InsertOpts{UniqueKey: "k"})
	require.NoError(t, err)
	require.False(t, h1.Deduplicated())
	h2, err := slow.Enqueue(ctx, c, 2, &hopper.InsertOpts{UniqueKey: "k"})
	require.NoError(t, err)
	require.True(t, h2.Deduplicated())
	require.Equal(t, h1.ID(), h2.ID(), "the same key while the first is live returns the first job")
	close(release)
	v, err := h2.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)

	h3, err := slow.Enqueue(ctx, c, 3, &hopper.InsertOpts{UniqueKey: "k"})
	require.NoError(t, err)
	require.NotEqual(t, h1.ID(), h3.ID(), "once the first is terminal the key is free again")
	v, err = h3.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestOptionPrecedence(t *testing.T) { forEachDriver(t, testOptionPrecedence) }

func testOptionPrecedence(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	type in struct {
		Tenant string `json:"tenant"`
	}
	job := hopper.Define("p", func(context.Context, in) (int, error) { return 0, nil }, &hopper.TypeOpts[in]{
		Queue:    "type-queue",
		Priority: 1,
		Group:    "type-group",
		Retry:    hopper.RetryPolicy{Attempts: 7, Base: 3 * time.Second},
		Timeout:  time.Hour,
		Options: func(v in) *hopper.InsertOpts {
			return &hopper.InsertOpts{Group: v.Tenant, Priority: 2, Metadata: map[string]string{"from": "computed", "tenant": v.Tenant}}
		},
	})
	d := newDriver(t)
	c, err := hopper.New(hopper.Config{Driver: d, Retry: hopper.RetryPolicy{Attempts: 9, Max: time.Minute, Jitter: hopper.NoJitter}, AttemptTimeout: time.Second})
	require.NoError(t, err)
	ctx := testCtx(t)

	h, err := job.Enqueue(ctx, c, in{Tenant: "acme"}, &hopper.InsertOpts{Priority: 3, Metadata: map[string]string{"from": "call"}})
	require.NoError(t, err)
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, "type-queue", row.Queue, "type constant over client default")
	require.Equal(t, 3, row.Priority, "call over computed over constant")
	require.Equal(t, "acme", row.FairKey, "computed over constant")
	require.Equal(t, hoppertype.RetryPolicy{Attempts: 7, Backoff: "exponential", Base: 3 * time.Second, Factor: 2, Max: time.Minute, Jitter: 0}, row.Retry,
		"retry merges field by field: type over client over defaults")
	require.Equal(t, time.Second, row.AttemptTimeout, "client default kept")
	require.Equal(t, map[string]string{"from": "call", "tenant": "acme"}, row.Metadata)
	require.Equal(t, row.QueuedAt.Add(time.Hour), row.Deadline, "type timeout is a deadline from enqueue")
	require.Equal(t, hopper.StatePending, row.State)

	at := row.QueuedAt.Add(48 * time.Hour)
	h, err = job.Enqueue(ctx, c, in{}, &hopper.InsertOpts{Delay: time.Minute, RunAt: at, Deadline: at.Add(time.Hour)})
	require.NoError(t, err)
	row, err = c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateScheduled, row.State)
	require.True(t, row.RunAt.Equal(at.Truncate(time.Microsecond)), "run-at wins over delay")
	require.True(t, row.Deadline.Equal(at.Add(time.Hour).Truncate(time.Microsecond)), "deadline wins over timeout")
}

func TestCrossClientWaiter(t *testing.T) { forEachDriver(t, testCrossClientWaiter) }

func testCrossClientWaiter(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	add := hopper.Define("add", addHandler, nil)
	worker := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, worker.Register(add))
	// The producer side does not register or start anything.
	producer, err := hopper.New(hopper.Config{Driver: d, WaitPollInterval: time.Hour})
	require.NoError(t, err)
	ctx := testCtx(t)
	h, err := add.Enqueue(ctx, producer, addIn{A: 40, B: 2}, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err, "woken by the store's notification, not by polling (the poll is an hour)")
	require.Equal(t, 42, v)

	other := hopper.HandleFor(producer, add, h.ID())
	v, err = other.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 42, v)
}

func TestClaimOnceAcrossClients(t *testing.T) { forEachDriver(t, testClaimOnceAcrossClients) }

func testClaimOnceAcrossClients(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	var effects atomic.Int32
	job := hopper.Define("once", func(ctx context.Context, key string) (bool, error) {
		ok, err := hopper.JobFromContext(ctx).Claim(ctx, key)
		if ok {
			effects.Add(1)
		}
		return ok, err
	}, nil)
	var clients []*hopper.Client
	for range 3 {
		c := newClient(t, hopper.Config{Driver: d})
		require.NoError(t, c.Register(job))
		clients = append(clients, c)
	}
	ctx := testCtx(t)
	var hs []*hopper.Handle[bool]
	for i := range 30 {
		h, err := job.Enqueue(ctx, clients[i%3], "same-key", nil)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	wins := 0
	for _, h := range hs {
		ok, err := h.Result(ctx)
		require.NoError(t, err)
		if ok {
			wins++
		}
	}
	require.Equal(t, 1, wins)
	require.EqualValues(t, 1, effects.Load())
}

func TestCancel(t *testing.T) { forEachDriver(t, testCancel) }

func testCancel(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	started := make(chan string, 1)
	block := hopper.Define("block", func(ctx context.Context, _ int) (int, error) {
		started <- hopper.JobFromContext(ctx).ID()
		<-ctx.Done()
		return 0, ctx.Err()
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(block))
	ctx := testCtx(t)

	// A scheduled job is cancelled at once.
	h, err := block.Enqueue(ctx, c, 0, &hopper.InsertOpts{Delay: time.Hour})
	require.NoError(t, err)
	row, err := c.JobCancel(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateCancelled, row.State)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)

	// A finished job cannot be cancelled.
	_, err = c.JobCancel(ctx, h.ID())
	require.ErrorIs(t, err, hopper.ErrStateConflict)
	_, err = c.JobCancel(ctx, "missing")
	require.ErrorIs(t, err, hopper.ErrNotFound)

	// A running job's context is cancelled; it ends cancelled, not retried.
	h, err = block.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	require.Equal(t, h.ID(), <-started)
	row, err = c.JobCancel(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateRunning, row.State)
	require.True(t, row.CancelRequested)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
	row, err = c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateCancelled, row.State)
	require.Equal(t, 1, row.Attempt)
}

func TestCancelRunningInOtherProcess(t *testing.T) { forEachDriver(t, testCancelRunningInOtherProcess) }

func testCancelRunningInOtherProcess(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	started := make(chan struct{}, 1)
	block := hopper.Define("block", func(ctx context.Context, _ int) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}, nil)
	worker := newClient(t, hopper.Config{Driver: d})
	require.NoError(t, worker.Register(block))
	admin, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	ctx := testCtx(t)
	h, err := block.Enqueue(ctx, admin, 0, nil)
	require.NoError(t, err)
	<-started
	_, err = admin.JobCancel(ctx, h.ID())
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled)
}

func TestDeadlines(t *testing.T) { forEachDriver(t, testDeadlines) }

func testDeadlines(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	events := newEventLog()
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	var runs atomic.Int32
	job := hopper.Define("d", func(ctx context.Context, fail bool) (int, error) {
		runs.Add(1)
		if fail {
			return 0, errors.New("nope")
		}
		return 1, nil
	}, &hopper.TypeOpts[bool]{Retry: hopper.RetryPolicy{Base: time.Minute, Jitter: hopper.NoJitter}})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)

	// Delayed past its deadline: expires without ever running.
	h, err := job.Enqueue(ctx, c, false, &hopper.InsertOpts{Delay: time.Hour, Timeout: time.Minute})
	require.NoError(t, err)
	clk.Advance(time.Hour)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrExpired)
	require.EqualValues(t, 0, runs.Load())
	ev := events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventExpired })
	require.False(t, ev.Deadline.IsZero())

	// A failure whose next retry would land past the deadline expires instead.
	h, err = job.Enqueue(ctx, c, true, &hopper.InsertOpts{Timeout: 30 * time.Second})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrExpired)
	require.EqualValues(t, 1, runs.Load())
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateExpired, row.State)
}

func TestAttemptTimeout(t *testing.T) { forEachDriver(t, testAttemptTimeout) }

func testAttemptTimeout(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	started := make(chan struct{}, 4)
	job := hopper.Define("slow", func(ctx context.Context, _ int) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}, &hopper.TypeOpts[int]{AttemptTimeout: 5 * time.Second, Retry: hopper.RetryPolicy{Attempts: 1}})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	<-started
	clk.Advance(5 * time.Second)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAttemptTimeout)
}

func TestRedriveAndRetry(t *testing.T) { forEachDriver(t, testRedriveAndRetry) }

func testRedriveAndRetry(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var fail atomic.Bool
	fail.Store(true)
	job := hopper.Define("r", func(ctx context.Context, _ int) (int, error) {
		if fail.Load() {
			return 0, hopper.Abort(errors.New("downstream down"))
		}
		return hopper.JobFromContext(ctx).Attempt(), nil
	}, nil)
	events := newEventLog()
	c := newClient(t, hopper.Config{Driver: newDriver(t), OnEvent: events.hook})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)

	var hs []*hopper.Handle[int]
	for range 3 {
		h, err := job.Enqueue(ctx, c, 0, nil)
		require.NoError(t, err)
		_, err = h.Result(ctx)
		require.ErrorIs(t, err, hopper.ErrAborted)
		hs = append(hs, h)
	}
	page, err := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{hopper.StateDead}})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 3, "dead letters stay queryable")

	fail.Store(false)
	n, err := c.JobRedrive(ctx, &hopper.RedriveParams{IDs: []string{hs[0].ID()}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	v, err := hs[0].Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v, "a redriven job starts again at attempt 1")
	events.waitFor(t, func(e hopper.Event) bool { return e.JobID == hs[0].ID() && e.Kind == hopper.EventRedriven })

	row, err := c.JobRetry(ctx, hs[1].ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StatePending, row.State)
	_, err = hs[1].Result(ctx)
	require.NoError(t, err)
	_, err = c.JobRetry(ctx, hs[1].ID())
	require.ErrorIs(t, err, hopper.ErrStateConflict, "a succeeded job cannot be retried")

	n, err = c.JobRedrive(ctx, &hopper.RedriveParams{Type: "r"})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = hs[2].Result(ctx)
	require.NoError(t, err)

	_, err = c.JobRedrive(ctx, &hopper.RedriveParams{})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}

func TestAutoRedrive(t *testing.T) { forEachDriver(t, testAutoRedrive) }

func testAutoRedrive(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var fail atomic.Bool
	fail.Store(true)
	job := hopper.Define("r", func(ctx context.Context, _ int) (int, error) {
		if fail.Load() {
			return 0, hopper.Abort(errors.New("down"))
		}
		return 1, nil
	}, nil)
	events := newEventLog()
	c := newClient(t, hopper.Config{Driver: newDriver(t), AutoRedrive: 10, PollInterval: 10 * time.Millisecond, OnEvent: events.hook})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventFailed })
	fail.Store(false)
	// The idle queue redrives the dead job and it now succeeds.
	events.waitFor(t, func(e hopper.Event) bool { return e.JobID == h.ID() && e.Kind == hopper.EventSucceeded })
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateSucceeded, row.State)
}

func TestPausedQueue(t *testing.T) { forEachDriver(t, testPausedQueue) }

func testPausedQueue(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	add := hopper.Define("add", addHandler, nil)
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	require.NoError(t, c.QueuePause(ctx, hopper.DefaultQueue, nil))
	h, err := add.Enqueue(ctx, c, addIn{A: 1}, nil)
	require.NoError(t, err)
	clk.Advance(5 * time.Second) // several poll rounds
	row, err := c.JobGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StatePending, row.State, "a paused queue starts nothing")
	qs, err := c.QueueList(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.True(t, qs[0].Paused)
	require.Equal(t, 1, qs[0].Counts[hopper.StatePending])

	require.NoError(t, c.QueueResume(ctx, hopper.DefaultQueue))
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

func TestListPaging(t *testing.T) { forEachDriver(t, testListPaging) }

func testListPaging(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	add := hopper.Define("add", addHandler, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	ctx := testCtx(t)
	var ids []string
	for i := range 25 {
		h, err := add.Enqueue(ctx, c, addIn{A: i}, nil)
		require.NoError(t, err)
		ids = append(ids, h.ID())
	}
	var got []string
	p := &hopper.ListParams{Limit: 10}
	for {
		page, err := c.JobList(ctx, p)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	require.Len(t, got, 25)
	for i := range got {
		require.Equal(t, ids[len(ids)-1-i], got[i], "newest first")
	}
}

// TestListSearchWindow: a search by a filter no index serves, bounded by
// ScanLimit, returns short pages whose cursors search on from where each
// window stopped, and finds every match; a page that fills first goes on
// from its last job.
func TestListSearchWindow(t *testing.T) { forEachDriver(t, testListSearchWindow) }

func testListSearchWindow(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	c, err := hopper.New(hopper.Config{Driver: newDriver(t)})
	require.NoError(t, err)
	ctx := testCtx(t)
	var ids []string
	for i := range 25 {
		var opts *hopper.InsertOpts
		if i%10 == 3 {
			opts = &hopper.InsertOpts{Metadata: map[string]string{"tenant": "acme"}}
		}
		h, err := add.Enqueue(ctx, c, addIn{A: i}, opts)
		require.NoError(t, err)
		ids = append(ids, h.ID())
	}
	search := func(p hopper.ListParams) (pages [][]string, cursors []string) {
		t.Helper()
		for range 20 {
			page, err := c.JobList(ctx, &p)
			require.NoError(t, err)
			got := []string{}
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			pages, cursors = append(pages, got), append(cursors, page.NextCursor)
			if page.NextCursor == "" {
				return pages, cursors
			}
			p.Cursor = page.NextCursor
		}
		require.Fail(t, "search did not end")
		return nil, nil
	}
	acme := map[string]string{"tenant": "acme"}
	pages, cursors := search(hopper.ListParams{Metadata: acme, ScanLimit: 5, Limit: 2})
	require.Equal(t, [][]string{{ids[23]}, {}, {ids[13]}, {}, {ids[3]}, {}}, pages, "windows of five jobs")
	require.Equal(t, []string{ids[20], ids[15], ids[10], ids[5], ids[0], ""}, cursors, "each window's end")

	pages, cursors = search(hopper.ListParams{Metadata: acme, ScanLimit: 100, Limit: 2})
	require.Equal(t, [][]string{{ids[23], ids[13]}, {ids[3]}}, pages, "a page that fills first")
	require.Equal(t, []string{ids[13], ""}, cursors)

	pages, _ = search(hopper.ListParams{ScanLimit: 1, Limit: 20})
	require.Len(t, pages, 2, "no search, no window")
	require.Len(t, pages[0], 20)

	_, err = c.JobList(ctx, &hopper.ListParams{Metadata: acme, ScanLimit: -1})
	require.ErrorIs(t, err, hopper.ErrInvalidInput)
}

func TestSkipQueue(t *testing.T) { forEachDriver(t, testSkipQueue) }

func testSkipQueue(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var worker atomic.Value
	job := hopper.Define("fast", func(ctx context.Context, n int) (int, error) {
		worker.Store(hopper.JobFromContext(ctx).Attempt())
		return n * 2, nil
	}, &hopper.TypeOpts[int]{SkipQueue: true})
	c := newClient(t, hopper.Config{Driver: newDriver(t), PollInterval: time.Hour})
	require.NoError(t, c.Register(job))
	require.NoError(t, c.QueuePause(testCtx(t), hopper.DefaultQueue, nil))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, 21, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err, "the first attempt runs in-process even with the queue paused")
	require.Equal(t, 42, v)
	require.Equal(t, 1, worker.Load())
}

// TestStopWhileEnqueueing: goroutines enqueue while the client stops; no job
// is left running, every stored job is either done or waiting, none lost.
func TestStopWhileEnqueueing(t *testing.T) { forEachDriver(t, testStopWhileEnqueueing) }

func testStopWhileEnqueueing(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	job := hopper.Define("work", func(ctx context.Context, n int) (int, error) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(n%5) * time.Millisecond):
			return n, nil
		}
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: d, MaxWorkers: 8})
	require.NoError(t, err)
	require.NoError(t, c.Register(job))
	require.NoError(t, c.Start(context.Background()))
	ctx := testCtx(t)

	var wg sync.WaitGroup
	var enqueued atomic.Int32
	stop := make(chan struct{})
	loaded := make(chan struct{}) // closed at the 300th enqueue
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := job.Enqueue(ctx, c, g*1000+i, nil); err != nil {
					t.Error(err)
					return
				}
				if enqueued.Add(1) == 300 {
					close(loaded)
				}
			}
		}()
	}
	select { // let load build up
	case <-loaded:
	case <-ctx.Done():
		t.Fatal("300 enqueues not made in time")
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	_ = c.Stop(stopCtx)
	cancel()
	close(stop)
	wg.Wait()

	total := 0
	for _, st := range hoppertype.JobStates() {
		page, err := c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{st}, Limit: hopper.MaxListLimit})
		require.NoError(t, err)
		n := len(page.Jobs)
		for page.NextCursor != "" {
			page, err = c.JobList(ctx, &hopper.ListParams{States: []hopper.JobState{st}, Limit: hopper.MaxListLimit, Cursor: page.NextCursor})
			require.NoError(t, err)
			n += len(page.Jobs)
		}
		switch st {
		case hopper.StateRunning:
			require.Zero(t, n, "no job may be left running after Stop")
		case hopper.StatePending, hopper.StateScheduled, hopper.StateSucceeded:
		default:
			require.Zero(t, n, "unexpected jobs in state %s", st)
		}
		total += n
	}
	require.EqualValues(t, enqueued.Load(), total, "every acknowledged enqueue is stored")
}

func TestStartStopIdempotent(t *testing.T) { forEachDriver(t, testStartStopIdempotent) }

func testStartStopIdempotent(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	d := newDriver(t)
	add := hopper.Define("add", addHandler, nil)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(add))
	ctx := testCtx(t)
	require.NoError(t, c.Stop(ctx), "stopping a client never started is fine")
	require.NoError(t, c.Start(ctx))
	require.NoError(t, c.Start(ctx))
	require.True(t, c.Started())
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx))
	require.False(t, c.Started())
	// And again: a stopped client may start anew.
	require.NoError(t, c.Start(ctx))
	h, err := add.Enqueue(ctx, c, addIn{A: 2, B: 2}, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, v)
	require.NoError(t, c.Stop(ctx))
}
