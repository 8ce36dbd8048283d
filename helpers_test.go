package hopper_test

// Waiting in tests. A test waits for what it expects to happen — a channel
// its handler closes, a job's end (Handle.Result, JobWait, RunWait), a
// lifecycle event, a hook of its own reporting a call, the engine arming a
// timer on a virtual clock — and never for an amount of time to pass. A
// test on the memory store alone can run in a synctest bubble, where
// synctest.Wait returns once every goroutine of the engine is idle: the
// point to assert that something did not happen. Every wait is bounded
// (testCtx, or a context the caller gives), so a bug fails the test instead
// of hanging it.
//
// A few states announce nothing, and only they are polled, through poll
// and pollEvery: a row the leader's promoter holds for a moment (a claim
// skips it), goroutines winding down, and what other processes do, which
// reaches this one through PostgreSQL alone.

import (
	"bufio"
	"context"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/stretchr/testify/require"
)

// testCtx bounds a test's waits so a bug fails the test instead of hanging
// it. The bound is generous: the longest tests take 8 s alone, and several
// times that on a machine busy with other work (the race detector, a
// parallel package), where a tight bound failed them for the machine.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// changes announces that something changed: next returns a channel closed
// at the next notify. A test's own hooks (a handler, a schedule's Job, an
// observer, a store spy) notify it, so the test waits on what they record.
// The zero value is ready.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// next returns a channel closed at the next notify.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// notify wakes those waiting for the next change.
func (c *changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// A wake returns a channel closed at the next change it watches: a
// changes' next, a virtual clock's TimerArmed, onEvents.
type wake func() <-chan struct{}

// onEvents wakes at each lifecycle event c emits, for the rest of the test.
// An event is emitted after the transition it reports has committed, so a
// condition on the store holds by the time its event wakes the waiter.
func onEvents(t testing.TB, c *hopper.Client) wake {
	ch := &changes{}
	t.Cleanup(c.Subscribe(func(hopper.Event) { ch.notify() }))
	return ch.next
}

// await waits until cond holds: it checks cond, then again each time one
// of wakes fires, and fails the test when testCtx ends first. The wakes are
// armed before each check, so a change between the check and the wait is
// not missed: cond must be made true only by something that fires one of
// them afterwards.
func await(t testing.TB, what string, cond func() bool, wakes ...wake) {
	t.Helper()
	ctx := testCtx(t)
	cases := make([]reflect.SelectCase, len(wakes)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	for {
		for i, w := range wakes {
			cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w())}
		}
		if cond() {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitUntil is await for examples, which have no *testing.T: it checks
// cond, then again at each event c emits, and panics if a minute passes
// first.
func waitUntil(c *hopper.Client, cond func() bool) {
	var ch changes
	defer c.Subscribe(func(hopper.Event) { ch.notify() })()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		next := ch.next()
		if cond() {
			return
		}
		select {
		case <-next:
		case <-timeout.C:
			panic("condition not met in time")
		}
	}
}

// stepUntil, in a synctest bubble, moves clk on by step and waits until
// everything in the bubble is idle, again and again until cond holds; it
// fails the test if cond does not hold after 1000 steps.
func stepUntil(t testing.TB, clk *hoppertest.Clock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		clk.Advance(step)
		synctest.Wait()
	}
	if !cond() {
		t.Fatalf("%s: not after 1000 steps of %v", what, step)
	}
}

// poll waits until cond holds, checking it every millisecond, and fails the
// test when testCtx ends first. It is for a state nothing announces; each
// use says why it has no event to wait on.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	pollEvery(t, testCtx(t), time.Millisecond, what, cond)
}

// pollEvery is poll checking every interval until ctx ends: for a state
// other processes make, which reaches this one only through the store.
func pollEvery(t testing.TB, ctx context.Context, every time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// leads waits until c leads, rechecking each time c begins or stops
// leading.
func leads(t testing.TB, c *hopper.Client) {
	t.Helper()
	await(t, "leadership", c.IsLeader, c.LeadershipChanged)
}

// awaitJobState waits until job id is in state s, rechecking at each event
// of c (the client making the transition), and returns the row.
func awaitJobState(t testing.TB, c *hopper.Client, id string, s hopper.JobState) *hopper.JobRow {
	t.Helper()
	ctx := testCtx(t)
	var row *hopper.JobRow
	var err error
	await(t, fmt.Sprintf("job %s to be %s", id, s), func() bool {
		row, err = c.JobGet(ctx, id)
		return err == nil && row.State == s
	}, onEvents(t, c))
	return row
}

// awaitRunStatus waits until run id has status, rechecking at each event of
// c: a run's status is written in its job's transitions.
func awaitRunStatus(t testing.TB, c *hopper.Client, id string, status hopper.RunStatus) {
	t.Helper()
	ctx := testCtx(t)
	await(t, fmt.Sprintf("run %s to be %s", id, status), func() bool {
		info, err := c.RunGet(ctx, id)
		return err == nil && info.Status == status
	}, onEvents(t, c))
}

// storeSpy wraps a store and announces, once the store answered it, each
// call that changes what tests wait on without an event: a transaction
// (the engine writes through them), a lease renewal (JobHeartbeat), an
// observer's cursor moving (CursorAdvance), a schedule's registration
// (ScheduleUpsert), a worker's report (WorkerUpsert).
type storeSpy struct {
	driver.Driver
	baseExec
	answered changes
}

func spyOn(d driver.Driver) *storeSpy { return &storeSpy{Driver: d, baseExec: d.Executor()} }

// Executor is the spy itself.
func (s *storeSpy) Executor() driver.Executor { return s }

func (s *storeSpy) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	defer s.answered.notify()
	return s.baseExec.InTx(ctx, fn)
}

func (s *storeSpy) ScheduleUpsert(ctx context.Context, p *driver.ScheduleUpsertParams) (time.Time, error) {
	defer s.answered.notify()
	return s.baseExec.ScheduleUpsert(ctx, p)
}

func (s *storeSpy) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	defer s.answered.notify()
	return s.baseExec.JobHeartbeat(ctx, p)
}

func (s *storeSpy) WorkerUpsert(ctx context.Context, p *driver.WorkerUpsertParams) error {
	defer s.answered.notify()
	return s.baseExec.WorkerUpsert(ctx, p)
}

func (s *storeSpy) CursorAdvance(ctx context.Context, p *driver.CursorAdvanceParams) error {
	defer s.answered.notify()
	return s.baseExec.CursorAdvance(ctx, p)
}

// awaitRetryObserverPassed waits until the retry observer's cursor has
// passed the entity's latest change, which must be into stuck, and returns
// that change. The observer's client works on spy.
func awaitRetryObserverPassed(t *testing.T, spy *storeSpy, id string) *hoppertype.Change {
	t.Helper()
	chs, err := spy.ChangeList(t.Context(), &driver.ChangeListParams{EntityID: id, Limit: 1000})
	require.NoError(t, err)
	last := chs[len(chs)-1]
	for i := len(chs) - 1; i >= 0 && chs[i].Kind == hopper.ChangeRun; i-- {
		last = chs[i-1] // a run's status change follows its job's
	}
	require.Equal(t, "stuck", last.State)
	awaitCursorPassed(t, spy, hopper.RetryObserverName, last)
	return last
}

// awaitCursorPassed waits until observer name's cursor is at or past ch,
// rechecking as the cursors on spy move.
func awaitCursorPassed(t *testing.T, spy *storeSpy, name string, ch *hoppertype.Change) {
	t.Helper()
	await(t, "observer "+name+" to pass change "+fmt.Sprint(ch.Position), func() bool {
		cursors, err := spy.CursorList(t.Context(), &driver.CursorListParams{})
		require.NoError(t, err)
		for _, cur := range cursors {
			if cur.Name == name {
				return !cur.At.Before(ch)
			}
		}
		return false
	}, spy.answered.next)
}

// eventLog collects events for assertions.
type eventLog struct {
	mu     sync.Mutex
	events []hopper.Event
	ch     chan hopper.Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan hopper.Event, 1024)} }

func (l *eventLog) hook(e hopper.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.ch <- e:
	default:
	}
}

// waitFor blocks until an event matching f arrives.
func (l *eventLog) waitFor(t *testing.T, f func(hopper.Event) bool) hopper.Event {
	t.Helper()
	ctx := testCtx(t)
	for {
		select {
		case e := <-l.ch:
			if f(e) {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("event not seen; have %v", l.kinds(""))
		}
	}
}

// attempts lists kind/attempt of a job's events, in arrival order (events of
// one job come from several goroutines, so tests compare them as sets).
func (l *eventLog) attempts(jobID string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if e.JobID == jobID {
			out = append(out, fmt.Sprintf("%s/%d", e.Kind, e.Attempt))
		}
	}
	return out
}

func (l *eventLog) kinds(jobID string) []hopper.EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []hopper.EventKind
	for _, e := range l.events {
		if jobID == "" || e.JobID == jobID {
			ks = append(ks, e.Kind)
		}
	}
	return ks
}

// logLine matches a line the standard logger wrote (the engine's warnings
// under load, in a child process whose stderr is merged with its stdout).
var logLine = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)

// childLine reads a child process's next line that is not a log line:
// what the child says on purpose ("ready", a crash marker).
func childLine(r *bufio.Reader) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil || !logLine.MatchString(line) {
			return line, err
		}
	}
}

// runHeld registers a job type named name on c, enqueues one job of it with
// input n and returns its handle once the job runs; the handler holds until
// release is called (or its context ends), then returns out(n).
func runHeld(t *testing.T, ctx context.Context, c *hopper.Client, name string, n int, out func(int) int) (*hopper.Handle[int], func()) {
	t.Helper()
	release, running := make(chan struct{}), make(chan struct{})
	held := hopper.Define(name, func(ctx context.Context, n int) (int, error) {
		close(running)
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return out(n), nil
	}, nil)
	require.NoError(t, c.Register(held))
	h, err := held.Enqueue(ctx, c, n, nil)
	require.NoError(t, err)
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the job never ran")
	}
	return h, func() { close(release) }
}

// asideWait is a wait for a job run in a goroutine of its own: blocked
// returns once the wait blocks (registered, done reading) one more time,
// and outcome once it ended; either fails the test when ctx ends first.
type asideWait struct {
	t      *testing.T
	ctx    context.Context
	blocks chan struct{}
	done   chan struct{}
	row    *hopper.JobRow
	err    error
}

// waitAside starts wait (a handle's Wait) for job id in a goroutine, with
// c's wait hook counting the times the wait blocks.
func waitAside(t *testing.T, ctx context.Context, c *hopper.Client, id string, wait func(context.Context) (*hopper.JobRow, error)) *asideWait {
	t.Helper()
	w := &asideWait{t: t, ctx: ctx, blocks: make(chan struct{}, 16), done: make(chan struct{})}
	c.OnWaitBlock(func(got string) {
		if got == id {
			select {
			case w.blocks <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { c.OnWaitBlock(nil) })
	go func() {
		defer close(w.done)
		w.row, w.err = wait(ctx)
	}()
	return w
}

func (w *asideWait) blocked(what string) {
	w.t.Helper()
	select {
	case <-w.blocks:
	case <-w.ctx.Done():
		w.t.Fatal(what)
	}
}

func (w *asideWait) outcome() (*hopper.JobRow, error) {
	w.t.Helper()
	select {
	case <-w.done:
	case <-w.ctx.Done():
		w.t.Fatal("the wait did not end")
	}
	return w.row, w.err
}
