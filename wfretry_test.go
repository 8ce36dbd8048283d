package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/hoppertype"
)

// ledger records the effects a test's workflows have, in order: "2 charge"
// is a charge made by a run's attempt 2.
type ledger struct {
	mu      sync.Mutex
	entries []string
}

func (l *ledger) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

func (l *ledger) add(attempt int, effect string) {
	l.mu.Lock()
	l.entries = append(l.entries, fmt.Sprintf("%d %s", attempt, effect))
	l.mu.Unlock()
}

// all returns the entries so far.
func (l *ledger) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// count counts the entries of an effect, over all attempts.
func (l *ledger) count(effect string) int {
	n := 0
	for _, e := range l.all() {
		if _, eff, _ := strings.Cut(e, " "); eff == effect {
			n++
		}
	}
	return n
}

// retryNow is a workflow retry policy whose backoff is due at once, so a
// test on a virtual clock that never moves sees every attempt.
var retryNow = hopper.RetryPolicy{Base: time.Nanosecond, Jitter: hopper.NoJitter}

// TestWorkflowRetryRunsActivitiesAgain: a retried run runs its activities
// again, each attempt as a job of its own (the activity of attempt 2 does
// not collide with attempt 1's), and completes.
func TestWorkflowRetryRunsActivitiesAgain(t *testing.T) {
	forEachDriver(t, testWorkflowRetryRunsActivitiesAgain)
}

func testWorkflowRetryRunsActivitiesAgain(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	ship := hopper.Define("retry-ship", func(ctx context.Context, attempt int) (string, error) {
		l.add(attempt, "ship "+hopper.JobFromContext(ctx).ID())
		return "shipped", nil
	}, nil)
	wf := hopper.Workflow("retry-activity", func(wf hopper.WorkflowContext, failUntil int) (string, error) {
		out, err := hopper.Activity(wf, ship, wf.Attempt(), nil)
		if err != nil {
			return "", err
		}
		if wf.Attempt() < failUntil {
			return "", fmt.Errorf("attempt %d fails after the activity", wf.Attempt())
		}
		return fmt.Sprintf("%s on attempt %d", out, wf.Attempt()), nil
	}, &hopper.WorkflowOpts{MaxRetries: 3, Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(ship, wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, 3, &hopper.StartOpts{ID: "ra"})
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "shipped on attempt 3", out)
	require.Equal(t, []string{"1 ship ra.a2", "2 ship ra@2.a2", "3 ship ra@3.a2"}, l.all(),
		"one activity job per attempt, each named by its attempt")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, info.Activities, 1, "the latest attempt's")
	require.Equal(t, "ra@3.a2", info.Activities[0].JobID)
}

// TestWorkflowRetryRunsChildrenAgain: a retried run starts its children
// again, as new runs (the child of attempt 2 is not the child of attempt
// 1, read back).
func TestWorkflowRetryRunsChildrenAgain(t *testing.T) {
	forEachDriver(t, testWorkflowRetryRunsChildrenAgain)
}

func testWorkflowRetryRunsChildrenAgain(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	child := hopper.Workflow("retry-child", func(wf hopper.WorkflowContext, parentAttempt int) (string, error) {
		l.add(parentAttempt, "child "+wf.RunID())
		return fmt.Sprintf("child of attempt %d", parentAttempt), nil
	}, nil)
	parent := hopper.Workflow("retry-parent", func(wf hopper.WorkflowContext, failUntil int) (string, error) {
		out, err := hopper.Child(wf, child, wf.Attempt(), nil)
		if err != nil {
			return "", err
		}
		if wf.Attempt() < failUntil {
			return "", errors.New("fails after its child")
		}
		return out, nil
	}, &hopper.WorkflowOpts{MaxRetries: 3, Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(child, parent))
	ctx := testCtx(t)
	h, err := parent.Start(ctx, c, 2, &hopper.StartOpts{ID: "rp"})
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "child of attempt 2", out, "attempt 2 reads its own child")
	require.Equal(t, []string{"1 child rp.2", "2 child rp@2.2"}, l.all())
	kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: h.ID()}))
	require.NoError(t, err)
	require.Len(t, kids, 2)
}

// TestWorkflowRetryIDsCannotBeTaken: no id a caller gives takes the name
// of something a retried run derives. A run started as "o@2" would have
// taken run "o"'s second attempt: its activity would be the job "o@2.a2"
// too, and "o"'s attempt 2 would go stuck on a duplicate id; a run
// started as "q.4" would take the id of run "q"'s child, and "q" would go
// stuck (or, were it of the child's workflow, read it as its own). Such
// starts are refused, and each run retries its activity and child as its
// own. An id with '@' and '.' elsewhere (an email address) is a run's id
// like any other, through retries.
func TestWorkflowRetryIDsCannotBeTaken(t *testing.T) {
	forEachDriver(t, testWorkflowRetryIDsCannotBeTaken)
}

func testWorkflowRetryIDsCannotBeTaken(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	ship := hopper.Define("taken-ship", func(ctx context.Context, attempt int) (string, error) {
		l.add(attempt, "ship "+hopper.JobFromContext(ctx).ID())
		return "shipped", nil
	}, nil)
	label := hopper.Workflow("taken-label", func(wf hopper.WorkflowContext, attempt int) (string, error) {
		l.add(attempt, "label "+wf.RunID())
		return "label", nil
	}, nil)
	wf := hopper.Workflow("taken", func(wf hopper.WorkflowContext, failUntil int) (string, error) {
		if _, err := hopper.Activity(wf, ship, wf.Attempt(), nil); err != nil {
			return "", err
		}
		if _, err := hopper.Child(wf, label, wf.Attempt(), nil); err != nil {
			return "", err
		}
		if wf.Attempt() < failUntil {
			return "", fmt.Errorf("attempt %d fails", wf.Attempt())
		}
		return fmt.Sprintf("done on attempt %d", wf.Attempt()), nil
	}, &hopper.WorkflowOpts{MaxRetries: 2, Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(ship, label, wf))
	ctx := testCtx(t)

	for _, tc := range []struct {
		taken, run string
		want       []string
	}{
		{"o@2", "o", []string{"1 ship o.a2", "1 label o.4", "2 ship o@2.a2", "2 label o@2.4"}},
		{"q.4", "q", []string{"1 ship q.a2", "1 label q.4", "2 ship q@2.a2", "2 label q@2.4"}},
	} {
		// The caller's start comes first: were it taken, its run would
		// hold ids the other run derives later.
		th, errTaken := wf.Start(ctx, c, 1, &hopper.StartOpts{ID: tc.taken})
		if errTaken == nil {
			_, _ = th.Result(ctx)
		}
		l.reset()
		h, err := wf.Start(ctx, c, 2, &hopper.StartOpts{ID: tc.run})
		require.NoError(t, err)
		var info *hopper.RunInfo
		await(t, "run "+tc.run+" to end", func() bool {
			info, err = c.RunGet(ctx, tc.run)
			return err == nil && (info.Status.Terminal() || info.Status == hopper.RunStuck)
		}, onEvents(t, c))
		require.Equal(t, hopper.RunCompleted, info.Status, "%+v", info.Error)
		out, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, "done on attempt 2", out)
		require.Equal(t, tc.want, l.all())
		requireInvalid(t, errTaken, "start %q", tc.taken)
	}

	l.reset()
	h, err := wf.Start(ctx, c, 2, &hopper.StartOpts{ID: "ada@example.com"})
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "done on attempt 2", out)
	require.Equal(t, []string{
		"1 ship ada@example.com.a2", "1 label ada@example.com.4",
		"2 ship ada@example.com@2.a2", "2 label ada@example.com@2.4",
	}, l.all())
}

// The workflow of testdata/histories/runs/compat-order-v1.json: a run that
// hopper recorded before the attempts of a run had identities of their own
// (its activity is the job "compat-o-7.a4", its child the run
// "compat-o-7.6"). Its first attempt charged, registered a refund, ran the
// activity and the child, wrote to its stream and failed; the workflow
// retries it.
func compatOrder(l *ledger) (*hopper.Type[string, string], *hopper.WorkflowType[string, string], *hopper.WorkflowType[string, string]) {
	email := hopper.Define("compat-email", func(ctx context.Context, to string) (string, error) {
		l.add(0, "email "+hopper.JobFromContext(ctx).ID())
		return "sent to " + to, nil
	}, nil)
	ship := hopper.Workflow("compat-ship", func(wf hopper.WorkflowContext, id string) (string, error) {
		l.add(0, "ship "+wf.RunID())
		return hopper.Step(wf, "label", func(ctx context.Context) (string, error) { return "label-" + id, nil }, nil)
	}, nil)
	order := hopper.Workflow("compat-order", func(wf hopper.WorkflowContext, id string) (string, error) {
		pay, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) {
			l.add(wf.Attempt(), "charge")
			return "pay-" + id, nil
		}, nil)
		if err != nil {
			return "", err
		}
		wf.Compensate("refund", func(ctx context.Context) error { l.add(wf.Attempt(), "refund"); return nil })
		if _, err := hopper.Activity(wf, email, id+"@example.com", nil); err != nil {
			return "", err
		}
		label, err := hopper.Child(wf, ship, id, nil)
		if err != nil {
			return "", err
		}
		if err := wf.Stream().Write(map[string]string{"label": label}); err != nil {
			return "", err
		}
		if wf.Attempt() == 1 {
			return "", errors.New("carrier unavailable")
		}
		return pay + " " + label, nil
	}, &hopper.WorkflowOpts{Retry: hopper.RetryPolicy{Base: time.Hour, Jitter: hopper.NoJitter}})
	return email, ship, order
}

// readRecordedRun reads a run recorded before (testdata/histories/runs):
// its attempts' histories.
func readRecordedRun(t *testing.T, path string) []*hopper.History {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var atts []*hopper.History
	require.NoError(t, json.Unmarshal(b, &atts))
	require.NotEmpty(t, atts)
	return atts
}

// loadRecordedRun stores a recorded run (its attempts' histories) as the
// run's job would have left it, waiting for its next execution in an hour:
// the run and its job are started through c (a client that runs nothing),
// the attempts' events are appended under the job's lease, and the job is
// left retrying.
func loadRecordedRun[I, O any](t *testing.T, c *hopper.Client, clk *hoppertest.Clock, w *hopper.WorkflowType[I, O], atts []*hopper.History) {
	t.Helper()
	ctx := testCtx(t)
	var in I
	require.NoError(t, json.Unmarshal(atts[0].Input, &in))
	_, err := w.Start(ctx, c, in, &hopper.StartOpts{ID: atts[0].RunID})
	require.NoError(t, err)
	d := c.Driver()
	now := clk.Now()
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now, LeaseExpiresAt: now.Add(time.Minute), Worker: "recorder"})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	job := claimed[0]
	require.Equal(t, atts[0].RunID, job.ID)
	for _, h := range atts {
		p := &driver.RunEventAppendParams{RunID: job.ID, LeaseToken: job.LeaseToken}
		for _, ev := range h.Events {
			data := []byte(ev.Data)
			if len(data) == 0 {
				data = []byte("{}")
			}
			p.Events = append(p.Events, &hoppertype.RunEvent{RunID: job.ID, Attempt: h.Attempt, Seq: ev.Seq, Kind: ev.Kind, Name: ev.Name, Data: data, At: ev.At})
		}
		require.NoError(t, d.Executor().RunEventAppend(ctx, p))
	}
	errInfo := &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "carrier unavailable", Attempt: job.Attempt, At: now}
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: job.ID, LeaseToken: job.LeaseToken, State: hopper.StateRetrying, Attempt: job.Attempt, RunAt: now.Add(time.Hour), Error: errInfo,
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	_, err = d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: job.ID, Status: hopper.RunPending, Now: now})
	require.NoError(t, err)
}

// TestWorkflowRetryOfARecordedRun: a run recorded before attempts had
// identities of their own, between its first attempt (failed, retried)
// and its second, goes on with this code: the first attempt's charge,
// which hopper did not undo then, is refunded before the second attempt
// begins; the second attempt runs its activity and its child again as new
// ones (the first attempt's ids are taken) and completes.
func TestWorkflowRetryOfARecordedRun(t *testing.T) { forEachDriver(t, testWorkflowRetryOfARecordedRun) }

func testWorkflowRetryOfARecordedRun(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	recorded := readRecordedRun(t, "testdata/histories/runs/compat-order-v1.json")
	// setup stores the recorded run, with its first attempt's activity job
	// and child run as it left them, and returns a client that runs it.
	setup := func(t *testing.T, l *ledger, atts []*hopper.History) (*hopper.Client, *hoppertest.Clock, driver.Driver) {
		email, ship, order := compatOrder(l)
		d := newDriver(t)
		clk := hoppertest.NewClock(time.Time{})
		recorder, err := hopper.New(hopper.Config{Driver: d, Clock: clk}) // never started: runs nothing
		require.NoError(t, err)
		loadRecordedRun(t, recorder, clk, order, atts)
		c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk})
		require.NoError(t, c.Register(email, ship, order))
		ctx := testCtx(t)
		// Stored through the driver: their ids end as derived ids do,
		// which no caller may give.
		now := clk.Now()
		done := func(id, typ, result string) *hoppertype.JobRow {
			return &hoppertype.JobRow{ID: id, Type: typ, Queue: hopper.DefaultQueue, State: hopper.StateSucceeded, GroupID: id, ParentID: "compat-o-7",
				Input: []byte(`"o-7"`), Result: []byte(result), Retry: hoppertype.RetryPolicy{Attempts: 1}, Attempt: 1, QueuedAt: now, RunAt: now, EndedAt: now}
		}
		_, err = d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{done("compat-o-7.a4", "compat-email", `"sent to o-7@example.com"`)}})
		require.NoError(t, err)
		_, err = d.Executor().RunStart(ctx, &driver.RunStartParams{
			Run: &hoppertype.RunRow{ID: "compat-o-7.6", Workflow: "compat-ship", Status: hopper.RunCompleted, ParentID: "compat-o-7", CreatedAt: now, UpdatedAt: now, EndedAt: now},
			Job: done("compat-o-7.6", "workflow:compat-ship", `"label-o-7"`),
		})
		require.NoError(t, err)
		return c, clk, d
	}
	result := func(t *testing.T, c *hopper.Client) (string, error) {
		_, _, order := compatOrder(&ledger{})
		return order.Handle(c, "compat-o-7").Result(testCtx(t))
	}

	t.Run("between its attempts", func(t *testing.T) {
		var l ledger
		c, clk, d := setup(t, &l, recorded)
		ctx := testCtx(t)
		clk.Advance(time.Hour) // the second attempt is due
		out, err := result(t, c)
		require.NoError(t, err)
		require.Equal(t, "pay-o-7 label-o-7", out)
		require.Equal(t, []string{
			"1 refund", // the first attempt's charge, left undone when it was recorded, is undone first
			"2 charge", "0 email compat-o-7@2.a4", "0 ship compat-o-7@2.6",
		}, l.all(), "the second attempt's activity and child are new ones")
		info, err := c.RunGet(ctx, "compat-o-7")
		require.NoError(t, err)
		require.Equal(t, hopper.RunCompleted, info.Status)
		require.Equal(t, 2, info.History[0].Attempt)
		require.Equal(t, []hopper.CompensationInfo{{Name: "refund", Attempt: 1, Executed: true}, {Name: "refund", Attempt: 2}}, info.Compensations)
		// The undo is recorded in the first attempt's history, after its
		// failure, so it never runs again.
		first, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: "compat-o-7", Attempt: 1})
		require.NoError(t, err)
		last := first[len(first)-1]
		require.Equal(t, "compensation_executed", last.Kind)
		require.Equal(t, "refund#0", last.Name)
		require.Equal(t, 10, last.Seq)
	})

	// Its second attempt begun (keyed 3, the job attempt that began it, as
	// hopper keyed attempts then: a crash had used attempt 2), charged and
	// registered its refund: the first attempt is undone before it goes
	// on, and its activity and child are named by its key.
	t.Run("in its second attempt", func(t *testing.T) {
		second := &hopper.History{RunID: "compat-o-7", Workflow: "compat-order", Attempt: 3, Events: []hopper.HistoryEvent{
			{Seq: 1, Kind: "workflow_started", At: hoppertest.Epoch()},
			{Seq: 2, Kind: "step", Name: "charge", Data: json.RawMessage(`{"output":"pay-o-7","attempts":1}`), At: hoppertest.Epoch()},
			{Seq: 3, Kind: "compensation_added", Name: "refund", At: hoppertest.Epoch()},
		}}
		var l ledger
		c, clk, _ := setup(t, &l, append(slices.Clone(recorded), second))
		clk.Advance(time.Hour)
		out, err := result(t, c)
		require.NoError(t, err)
		require.Equal(t, "pay-o-7 label-o-7", out)
		require.Equal(t, []string{"1 refund", "0 email compat-o-7@3.a4", "0 ship compat-o-7@3.6"}, l.all(),
			"the recorded charge does not run again")
	})

	// The code no longer takes the first attempt's path: its refund cannot
	// be found, and the run goes stuck, undoing nothing, until the code is
	// fixed.
	t.Run("diverged from its first attempt", func(t *testing.T) {
		var broken hopper.History
		b, err := json.Marshal(recorded[0])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &broken))
		broken.Events[1].Name = "charge-card"
		var l ledger
		c, clk, _ := setup(t, &l, []*hopper.History{&broken})
		clk.Advance(time.Hour)
		awaitRunStatus(t, c, "compat-o-7", hopper.RunStuck)
		info, err := c.RunGet(testCtx(t), "compat-o-7")
		require.NoError(t, err)
		require.Contains(t, info.Error.Message, `(attempt 1): history event 2 is step "charge-card", but the code now reaches step "charge"`)
		require.Empty(t, l.all(), "nothing undone, nothing done")
	})
}

// TestWorkflowChildIDOfARecordedRun: a run whose history started a child
// under an id given in ChildOpts.ID that ends as a derived id, recorded
// before such ids were refused, replays and reads its child, while a new
// start of a child under such an id is refused (TestCallerIDsAreCheckedInWorkers).
func TestWorkflowChildIDOfARecordedRun(t *testing.T) {
	forEachDriver(t, testWorkflowChildIDOfARecordedRun)
}

func testWorkflowChildIDOfARecordedRun(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	kid := hopper.Workflow("legacy-kid", func(wf hopper.WorkflowContext, in string) (string, error) { return "label-" + in, nil }, nil)
	parent := hopper.Workflow("legacy-parent", func(wf hopper.WorkflowContext, in string) (string, error) {
		out, err := hopper.Child(wf, kid, in, &hopper.ChildOpts{ID: "label-" + in + ".1"})
		if err != nil {
			return "", err
		}
		return "got " + out, nil
	}, &hopper.WorkflowOpts{Retry: hopper.RetryPolicy{Base: time.Hour, Jitter: hopper.NoJitter}})
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	recorder, err := hopper.New(hopper.Config{Driver: d, Clock: clk}) // never started: runs nothing
	require.NoError(t, err)
	at := hoppertest.Epoch()
	loadRecordedRun(t, recorder, clk, parent, []*hopper.History{{RunID: "legacy-p", Workflow: "legacy-parent", Attempt: 1, Input: json.RawMessage(`"o-8"`),
		Events: []hopper.HistoryEvent{
			{Seq: 1, Kind: "workflow_started", At: at},
			{Seq: 2, Kind: "child_started", Name: "legacy-kid", Data: json.RawMessage(`{"child":"label-o-8.1"}`), At: at},
			{Seq: 3, Kind: "child_completed", Name: "legacy-kid", Data: json.RawMessage(`{"child":"label-o-8.1","status":"completed","output":"label-o-8"}`), At: at},
		}}})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk})
	require.NoError(t, c.Register(kid, parent))
	clk.Advance(time.Hour) // the run's job is due again: it replays
	out, err := parent.Handle(c, "legacy-p").Result(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "got label-o-8", out)
}

// retrySaga is an order workflow that charges and reserves, registering a
// refund and a release after each, then fails in every attempt before
// okFrom (by a plain error, which the workflow retries). Effects go to l
// with the attempt that made them; failRelease makes the release of that
// attempt fail.
func retrySaga(name string, l *ledger, opts *hopper.WorkflowOpts) *hopper.WorkflowType[sagaIn, string] {
	return hopper.Workflow(name, func(wf hopper.WorkflowContext, in sagaIn) (string, error) {
		for _, step := range []struct{ do, undo string }{{"charge", "refund"}, {"reserve", "release"}} {
			if _, err := hopper.Step(wf, step.do, func(context.Context) (string, error) {
				l.add(wf.Attempt(), step.do)
				return step.do + "-ok", nil
			}, nil); err != nil {
				return "", err
			}
			wf.Compensate(step.undo, func(context.Context) error {
				l.add(wf.Attempt(), step.undo)
				if step.undo == "release" && wf.Attempt() == in.FailRelease {
					return errors.New("warehouse down")
				}
				return nil
			})
		}
		if wf.Attempt() < in.OKFrom {
			return "", fmt.Errorf("attempt %d: carrier unavailable", wf.Attempt())
		}
		return fmt.Sprintf("shipped by attempt %d", wf.Attempt()), nil
	}, opts)
}

type sagaIn struct {
	OKFrom      int `json:"ok_from"`
	FailRelease int `json:"fail_release"`
}

// TestWorkflowRetryUndoesEachAttempt: a retried saga undoes each failed
// attempt's effects before the next attempt does them again, so a run
// that ends with an attempt that succeeded has one refund per charge of
// the attempts that failed, and its last charge stands. This is the case
// that decides when a failed attempt is undone: were it undone at the end
// of the run, nothing would ever refund attempt 1's charge here.
func TestWorkflowRetryUndoesEachAttempt(t *testing.T) {
	forEachDriver(t, testWorkflowRetryUndoesEachAttempt)
}

func testWorkflowRetryUndoesEachAttempt(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	wf := retrySaga("retry-saga-ok", &l, &hopper.WorkflowOpts{MaxRetries: 2, Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, sagaIn{OKFrom: 3}, nil)
	require.NoError(t, err)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "shipped by attempt 3", out)
	require.Equal(t, []string{
		"1 charge", "1 reserve", "1 release", "1 refund",
		"2 charge", "2 reserve", "2 release", "2 refund",
		"3 charge", "3 reserve",
	}, l.all(), "each failed attempt undone, newest first, before the next")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.Equal(t, []hopper.CompensationInfo{
		{Name: "release", Attempt: 1, Executed: true}, {Name: "refund", Attempt: 1, Executed: true},
		{Name: "release", Attempt: 2, Executed: true}, {Name: "refund", Attempt: 2, Executed: true},
		{Name: "refund", Attempt: 3}, {Name: "release", Attempt: 3}, // the successful attempt's stand
	}, info.Compensations)
}

// TestWorkflowRetryFinalFailureUndoesEveryAttempt: a saga that fails in
// every attempt ends compensated with one refund per charge, each attempt
// undone newest first (and so, over the run, last in first out); a
// failing compensation is recorded and the others still run.
func TestWorkflowRetryFinalFailureUndoesEveryAttempt(t *testing.T) {
	forEachDriver(t, testWorkflowRetryFinalFailureUndoesEveryAttempt)
}

func testWorkflowRetryFinalFailureUndoesEveryAttempt(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	wf := retrySaga("retry-saga-fail", &l, &hopper.WorkflowOpts{MaxRetries: 2, Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, sagaIn{OKFrom: 99, FailRelease: 2}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	var re *hopper.RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, hopper.RunCompensated, re.Status)
	require.Contains(t, re.Message, "attempt 3: carrier unavailable")
	require.Equal(t, []string{
		"1 charge", "1 reserve", "1 release", "1 refund",
		"2 charge", "2 reserve", "2 release", "2 refund",
		"3 charge", "3 reserve", "3 release", "3 refund",
	}, l.all())
	require.Equal(t, 3, l.count("charge"))
	require.Equal(t, 3, l.count("refund"), "one refund per charge")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, []hopper.CompensationInfo{
		{Name: "release", Attempt: 1, Executed: true}, {Name: "refund", Attempt: 1, Executed: true},
		{Name: "release", Attempt: 2, Executed: true, Error: "warehouse down"}, {Name: "refund", Attempt: 2, Executed: true},
		{Name: "release", Attempt: 3, Executed: true}, {Name: "refund", Attempt: 3, Executed: true},
	}, info.Compensations)
}

// TestWorkflowRetryOfErrorsPassedOn: a parent that returns a child's or an
// activity's error as it is retries it under its own policy, starting a new
// child or activity in each attempt, unless the error is an abort, which
// ends the parent at once. The parent's final error keeps the cause's
// kind for its waiters, in any process (here a client that runs nothing
// and reads the store).
func TestWorkflowRetryOfErrorsPassedOn(t *testing.T) {
	forEachDriver(t, testWorkflowRetryOfErrorsPassedOn)
}

func testWorkflowRetryOfErrorsPassedOn(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	type how struct {
		Abort bool `json:"abort"`
		Panic bool `json:"panic"`
	}
	fail := func(h how, what string) error {
		switch {
		case h.Panic:
			panic(what + " panics")
		case h.Abort:
			return hopper.Abort(errors.New(what + " refuses for good"))
		}
		return errors.New(what + " fails")
	}
	child := hopper.Workflow("passed-child", func(wf hopper.WorkflowContext, h how) (string, error) {
		l.add(0, "child "+wf.RunID())
		return "", fail(h, "the child")
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})
	act := hopper.Define("passed-activity", func(ctx context.Context, h how) (string, error) {
		l.add(0, "activity "+hopper.JobFromContext(ctx).ID())
		return "", fail(h, "the activity")
	}, &hopper.TypeOpts[how]{Retry: hopper.RetryPolicy{Attempts: 1}})
	type in struct {
		Activity bool `json:"activity"`
		How      how  `json:"how"`
	}
	parent := hopper.Workflow("passed-parent", func(wf hopper.WorkflowContext, in in) (string, error) {
		if in.Activity {
			return hopper.Activity(wf, act, in.How, nil)
		}
		return hopper.Child(wf, child, in.How, nil) // the child's error as it is
	}, &hopper.WorkflowOpts{MaxRetries: 2, Retry: retryNow})
	d := newDriver(t)
	c, clk := hoppertest.NewClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(child, act, parent))
	reader, err := hopper.New(hopper.Config{Driver: d, Clock: clk}) // another process's client: runs nothing
	require.NoError(t, err)
	ctx := testCtx(t)

	for i, tc := range []struct {
		name    string
		in      in
		want    []string // the ledger
		is      error    // what the waiter's error matches
		isNot   error
		message string
	}{
		{"a child's failure", in{}, []string{"0 child p1.2", "0 child p1@2.2", "0 child p1@3.2"}, nil, hopper.ErrAborted, "the child fails"},
		{"a child's abort", in{How: how{Abort: true}}, []string{"0 child p2.2"}, hopper.ErrAborted, nil, "the child refuses for good"},
		{"a child's panic", in{How: how{Panic: true}}, []string{"0 child p3.2", "0 child p3@2.2", "0 child p3@3.2"}, hopper.ErrPanic, hopper.ErrAborted, "the child panics"},
		{"an activity's failure", in{Activity: true}, []string{"0 activity p4.a2", "0 activity p4@2.a2", "0 activity p4@3.a2"}, nil, hopper.ErrAborted, "the activity fails"},
		{"an activity's abort", in{Activity: true, How: how{Abort: true}}, []string{"0 activity p5.a2"}, hopper.ErrAborted, nil, "the activity refuses for good"},
		{"an activity's panic", in{Activity: true, How: how{Panic: true}}, []string{"0 activity p6.a2", "0 activity p6@2.a2", "0 activity p6@3.a2"}, hopper.ErrPanic, hopper.ErrAborted, "the activity panics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.reset()
			id := fmt.Sprintf("p%d", i+1)
			h, err := parent.Start(ctx, c, tc.in, &hopper.StartOpts{ID: id})
			require.NoError(t, err)
			_, err = h.Result(ctx)
			require.Error(t, err)
			require.Equal(t, tc.want, l.all(), "one child or activity per attempt of the parent")
			// A waiter in another process: the run as the store has it.
			_, err = parent.Handle(reader, id).Result(ctx)
			var re *hopper.RunError
			require.ErrorAs(t, err, &re)
			require.Equal(t, hopper.RunFailed, re.Status)
			require.Contains(t, re.Message, tc.message)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			if tc.isNot != nil {
				require.NotErrorIs(t, err, tc.isNot)
			}
		})
	}
}

// TestWorkflowRetryHooksAndStreams: each attempt of a retried run creates
// its own hook; the hook of an attempt that is over cannot be resumed any
// more (the payload would reach no one), the new attempt's can. The run's
// stream holds every attempt's chunks in order, and each attempt's history
// names the offset of the chunk it wrote.
func TestWorkflowRetryHooksAndStreams(t *testing.T) {
	forEachDriver(t, testWorkflowRetryHooksAndStreams)
}

func testWorkflowRetryHooksAndStreams(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	waiting := make(chan struct{}, 1) // attempt 2 published its hook
	wf := hopper.Workflow("retry-hook", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		h, err := hopper.NewHook[string](wf, "approval")
		if err != nil {
			return "", err
		}
		if err := wf.Stream().Write(map[string]any{"attempt": wf.Attempt(), "hook": h.Token()}); err != nil {
			return "", err
		}
		if wf.Attempt() == 2 {
			select {
			case waiting <- struct{}{}:
			default: // a replay after the hook's payload
			}
		}
		if wf.Attempt() == 1 {
			return "", errors.New("the approver's inbox is full") // retried: a new hook
		}
		by, err := h.Wait(nil)
		return "approved by " + by, err
	}, &hopper.WorkflowOpts{Retry: retryNow})
	d := newDriver(t)
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "rh"})
	require.NoError(t, err)
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("attempt 2 never published its hook")
	}
	chunks, err := c.StreamRead(ctx, h.ID(), 0, 10)
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	var first, second struct {
		Attempt int    `json:"attempt"`
		Hook    string `json:"hook"`
	}
	require.NoError(t, json.Unmarshal(chunks[0].Data, &first))
	require.NoError(t, json.Unmarshal(chunks[1].Data, &second))
	require.Equal(t, 1, first.Attempt, "the stream keeps every attempt's chunks, in order")
	require.Equal(t, 2, second.Attempt)
	require.NotEqual(t, first.Hook, second.Hook)

	err = c.HookResume(ctx, first.Hook, json.RawMessage(`"ada"`))
	require.ErrorIs(t, err, hopper.ErrStateConflict, "attempt 1's hook: its attempt is over")
	require.Contains(t, err.Error(), "retried")
	require.NoError(t, c.HookResume(ctx, second.Hook, json.RawMessage(`"grace"`)))
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "approved by grace", out)

	for attempt, offset := range []int{0, 1} {
		evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: h.ID(), Attempt: attempt + 1})
		require.NoError(t, err)
		i := slices.IndexFunc(evs, func(ev *hoppertype.RunEvent) bool { return ev.Kind == "stream_write" })
		require.GreaterOrEqual(t, i, 0)
		require.JSONEq(t, fmt.Sprintf(`{"offset":%d}`, offset), string(evs[i].Data), "attempt %d's history names its chunk", attempt+1)
	}
}

// TestWorkflowRetrySleepsAgain: a durable sleep belongs to its attempt.
// Attempt 1 sleeps an hour and fails; attempt 2 does not take attempt 1's
// recorded sleep as its own: it sleeps an hour from its own start, holding
// no worker, is not woken before, and completes when its sleep ends. Each
// attempt's history records its own wake-up time.
func TestWorkflowRetrySleepsAgain(t *testing.T) { forEachDriver(t, testWorkflowRetrySleepsAgain) }

func testWorkflowRetrySleepsAgain(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	var clk *hoppertest.Clock
	var start time.Time
	wf := hopper.Workflow("retry-sleep", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if _, err := hopper.Step(wf, "before", func(context.Context) (int, error) { l.add(wf.Attempt(), "before"); return 1, nil }, nil); err != nil {
			return "", err
		}
		if err := wf.Sleep(time.Hour); err != nil {
			return "", err
		}
		if _, err := hopper.Step(wf, "after", func(context.Context) (int, error) {
			l.add(wf.Attempt(), "woke at +"+clk.Now().Sub(start).String())
			return 2, nil
		}, nil); err != nil {
			return "", err
		}
		if wf.Attempt() == 1 {
			return "", errors.New("missed the pickup")
		}
		return fmt.Sprintf("done on attempt %d", wf.Attempt()), nil
	}, &hopper.WorkflowOpts{Retry: retryNow})
	d := newDriver(t)
	var c *hopper.Client
	c, clk = hoppertest.NewClient(t, hopper.Config{Driver: d})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	start = clk.Now()
	h, err := wf.Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "rs"})
	require.NoError(t, err)

	// sleepsUntil waits until the run sleeps in attempt, due at until.
	sleepsUntil := func(attempt int, until time.Time) {
		t.Helper()
		await(t, fmt.Sprintf("attempt %d asleep until %v", attempt, until), func() bool {
			info, err := c.RunGet(ctx, h.ID())
			if err != nil || info.Status != hopper.RunWaiting || len(info.History) == 0 || info.History[0].Attempt != attempt {
				return false
			}
			row, err := c.JobGet(ctx, h.ID())
			return err == nil && row.RunAt.Equal(until)
		}, onEvents(t, c))
		require.Empty(t, c.Active(), "a sleeping run holds no worker")
	}
	sleepsUntil(1, start.Add(time.Hour))
	clk.Advance(time.Hour) // attempt 1 wakes, fails; attempt 2 begins at once
	sleepsUntil(2, start.Add(2*time.Hour))
	require.Equal(t, []string{"1 before", "1 woke at +1h0m0s", "2 before"}, l.all(), "attempt 2 sleeps before going on")
	clk.Advance(59 * time.Minute)
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.RunWaiting, info.Status, "not woken early")
	clk.Advance(time.Minute)
	out, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "done on attempt 2", out)
	require.Equal(t, []string{"1 before", "1 woke at +1h0m0s", "2 before", "2 woke at +2h0m0s"}, l.all())

	for attempt, until := range []time.Time{start.Add(time.Hour), start.Add(2 * time.Hour)} {
		evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: h.ID(), Attempt: attempt + 1})
		require.NoError(t, err)
		i := slices.IndexFunc(evs, func(ev *hoppertype.RunEvent) bool { return ev.Kind == "sleep" })
		require.GreaterOrEqual(t, i, 0, "attempt %d's history holds its sleep", attempt+1)
		var data struct {
			Until time.Time `json:"until"`
		}
		require.NoError(t, json.Unmarshal(evs[i].Data, &data))
		require.True(t, until.Equal(data.Until), "attempt %d sleeps until %v, not %v", attempt+1, until, data.Until)
	}
}

// TestWorkflowEveryStrategy: the same saga — a charge with its refund, a
// child, an activity, then a failure — under each failure strategy, with a
// ledger of what each attempt did and undid: retry undoes every attempt
// (one refund per charge) and ends compensated; compensate undoes its one
// attempt; ignore and quarantine undo nothing and end failed and
// quarantined; cascade cancels its parent (whose own compensation runs)
// and ends cancelled.
func TestWorkflowEveryStrategy(t *testing.T) { forEachDriver(t, testWorkflowEveryStrategy) }

func testWorkflowEveryStrategy(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	kid := hopper.Workflow("strategy-kid", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		l.add(0, "child "+wf.RunID())
		return "ok", nil
	}, nil)
	act := hopper.Define("strategy-activity", func(ctx context.Context, _ hopper.None) (string, error) {
		l.add(0, "activity "+hopper.JobFromContext(ctx).ID())
		return "ok", nil
	}, nil)
	saga := func(strategy hopper.FailureStrategy) *hopper.WorkflowType[hopper.None, string] {
		return hopper.Workflow("strategy-"+string(strategy), func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
			if _, err := hopper.Step(wf, "charge", func(context.Context) (int, error) { l.add(wf.Attempt(), "charge"); return 1, nil }, nil); err != nil {
				return "", err
			}
			wf.Compensate("refund", func(context.Context) error { l.add(wf.Attempt(), "refund"); return nil })
			if _, err := hopper.Child(wf, kid, hopper.None{}, nil); err != nil {
				return "", err
			}
			if _, err := hopper.Activity(wf, act, hopper.None{}, nil); err != nil {
				return "", err
			}
			return "", fmt.Errorf("attempt %d: out of stock", wf.Attempt())
		}, &hopper.WorkflowOpts{Strategy: strategy, MaxRetries: 2, Retry: retryNow})
	}
	strategies := map[hopper.FailureStrategy]*hopper.WorkflowType[hopper.None, string]{}
	for _, s := range []hopper.FailureStrategy{hopper.StrategyRetry, hopper.StrategyCompensate, hopper.StrategyIgnore, hopper.StrategyQuarantine, hopper.StrategyCascade} {
		strategies[s] = saga(s)
	}
	// The cascading run's parent holds something it undoes when cancelled.
	parent := hopper.Workflow("strategy-parent", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if _, err := hopper.Step(wf, "hold", func(context.Context) (int, error) { l.add(wf.Attempt(), "parent hold"); return 1, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("release", func(context.Context) error { l.add(wf.Attempt(), "parent release"); return nil })
		return hopper.Child(wf, strategies[hopper.StrategyCascade], hopper.None{}, nil)
	}, &hopper.WorkflowOpts{Retry: retryNow})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(kid, act, parent))
	for _, w := range strategies {
		require.NoError(t, c.Register(w))
	}
	ctx := testCtx(t)

	for _, tc := range []struct {
		strategy hopper.FailureStrategy
		status   hopper.RunStatus
		ledger   []string
	}{
		{hopper.StrategyRetry, hopper.RunCompensated, []string{
			"1 charge", "0 child s-retry.4", "0 activity s-retry.a6", "1 refund",
			"2 charge", "0 child s-retry@2.4", "0 activity s-retry@2.a6", "2 refund",
			"3 charge", "0 child s-retry@3.4", "0 activity s-retry@3.a6", "3 refund",
		}},
		{hopper.StrategyCompensate, hopper.RunCompensated, []string{"1 charge", "0 child s-compensate.4", "0 activity s-compensate.a6", "1 refund"}},
		{hopper.StrategyIgnore, hopper.RunFailed, []string{"1 charge", "0 child s-ignore.4", "0 activity s-ignore.a6"}},
		{hopper.StrategyQuarantine, hopper.RunQuarantined, []string{"1 charge", "0 child s-quarantine.4", "0 activity s-quarantine.a6"}},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			l.reset()
			h, err := strategies[tc.strategy].Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "s-" + string(tc.strategy)})
			require.NoError(t, err)
			_, err = h.Result(ctx)
			var re *hopper.RunError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.status, re.Status)
			require.NotErrorIs(t, err, hopper.ErrAborted)
			require.Equal(t, tc.ledger, l.all())
			require.Equal(t, l.count("charge")-l.count("refund"), map[bool]int{true: 0, false: 1}[tc.status == hopper.RunCompensated],
				"compensated: one refund per charge; otherwise the charge stands")
		})
	}

	t.Run("cascade", func(t *testing.T) {
		l.reset()
		h, err := parent.Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "s-parent"})
		require.NoError(t, err)
		_, err = h.Result(ctx)
		require.ErrorIs(t, err, hopper.ErrCancelled, "the failing child cancelled its parent")
		kids, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: h.ID()}))
		require.NoError(t, err)
		require.Len(t, kids, 1)
		_, err = strategies[hopper.StrategyCascade].Handle(c, kids[0].ID).Result(ctx)
		var re *hopper.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, hopper.RunCancelled, re.Status)
		require.Equal(t, []string{
			"1 parent hold",
			"1 charge", "0 child s-parent.4.4", "0 activity s-parent.4.a6", // the cascading run: no retry, no undo
			"1 parent release", // the cancelled parent undoes what it did
		}, l.all())
	})
}

// TestWorkflowCascadeCancelsUnfinishedChildren: a run that fails under
// the cascade strategy cancels its children that are still going, and
// they undo what they did. A running child of a failing run: the run's
// child failed, so did the run (cascade), then an operator retried the
// child, which now waits on a hook, and the run, which fails again.
func TestWorkflowCascadeCancelsUnfinishedChildren(t *testing.T) {
	forEachDriver(t, testWorkflowCascadeCancelsUnfinishedChildren)
}

func testWorkflowCascadeCancelsUnfinishedChildren(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	kid := hopper.Workflow("cascade-kid", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if wf.Attempt() == 1 {
			l.add(wf.Attempt(), "kid "+wf.RunID()+" fails")
			return "", errors.New("label printer jammed")
		}
		if _, err := hopper.Step(wf, "print", func(context.Context) (int, error) { l.add(wf.Attempt(), "kid "+wf.RunID()+" prints"); return 1, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("shred", func(context.Context) error { l.add(wf.Attempt(), "kid "+wf.RunID()+" shreds"); return nil })
		h, err := hopper.NewHook[string](wf, "approval")
		if err != nil {
			return "", err
		}
		return h.Wait(nil)
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})
	run := hopper.Workflow("cascade-run", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		return hopper.Child(wf, kid, hopper.None{}, nil)
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCascade})
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(kid, run))
	ctx := testCtx(t)

	h, err := run.Start(ctx, c, hopper.None{}, &hopper.StartOpts{ID: "cr"})
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled, "its child failed: the run cascades")
	require.NoError(t, c.RunRetry(ctx, "cr.2"))
	awaitRunStatus(t, c, "cr.2", hopper.RunWaiting) // the child waits on its hook
	require.NoError(t, c.RunRetry(ctx, "cr"))
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrCancelled, "its new child failed: the run cascades again")
	info, err := c.RunGet(ctx, "cr.2")
	require.NoError(t, err)
	require.NotNil(t, info.Error, "the cascade asked the unfinished child to stop before the run ended")
	require.Equal(t, hoppertype.ErrorKindCancelled, info.Error.Kind)
	awaitRunStatus(t, c, "cr.2", hopper.RunCancelled)
	require.Equal(t, []string{
		"1 kid cr.2 fails",
		"2 kid cr.2 prints",
		"1 kid cr@2.2 fails",
		"2 kid cr.2 shreds", // cancelled by the cascade, the child undoes its print
	}, l.all())
}
