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
	info, err := c.GetRun(ctx, h.ID())
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
	kids, err := c.QueryRuns(ctx, &hopper.RunQuery{ParentID: h.ID()})
	require.NoError(t, err)
	require.Len(t, kids, 2)
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

// loadRecordedRun stores a run recorded before (testdata/histories/runs:
// its attempts' histories) as the run's job would have left it, waiting
// for its next attempt in an hour: the run and its job are started through
// c (a client that runs nothing), the attempts' events are appended under
// the job's lease, and the job is left retrying.
func loadRecordedRun[I, O any](t *testing.T, c *hopper.Client, clk *hoppertest.Clock, w *hopper.WorkflowType[I, O], path string) []*hopper.History {
	t.Helper()
	ctx := testCtx(t)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var atts []*hopper.History
	require.NoError(t, json.Unmarshal(b, &atts))
	require.NotEmpty(t, atts)
	var in I
	require.NoError(t, json.Unmarshal(atts[0].Input, &in))
	_, err = w.Start(ctx, c, in, &hopper.StartOpts{ID: atts[0].RunID})
	require.NoError(t, err)
	d := c.Driver()
	now := clk.Now()
	claimed, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: hopper.DefaultQueue, Limit: 1, Now: now, LeaseExpiresAt: now.Add(time.Minute), Worker: "recorder"})
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
		require.NoError(t, d.RunEventAppend(ctx, p))
	}
	errInfo := &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKindHandler, Message: "carrier unavailable", Attempt: job.Attempt, At: now}
	res, err := d.JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: job.ID, LeaseToken: job.LeaseToken, State: hopper.StateRetrying, Attempt: job.Attempt, RunAt: now.Add(time.Hour), Error: errInfo,
	}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	_, err = d.RunUpdate(ctx, &driver.RunUpdateParams{ID: job.ID, Status: hopper.RunPending, Now: now})
	require.NoError(t, err)
	return atts
}

// TestWorkflowRetryOfARecordedRun: a run recorded before attempts had
// identities of their own, between its first attempt (failed, retried)
// and its second, goes on with this code: the second attempt runs its
// activity and its child again as new ones (the first attempt's ids are
// taken) and completes.
func TestWorkflowRetryOfARecordedRun(t *testing.T) { forEachDriver(t, testWorkflowRetryOfARecordedRun) }

func testWorkflowRetryOfARecordedRun(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var l ledger
	email, ship, order := compatOrder(&l)
	d := newDriver(t)
	clk := hoppertest.NewClock(time.Time{})
	recorder, err := hopper.New(hopper.Config{Driver: d, Clock: clk}) // never started: runs nothing
	require.NoError(t, err)
	loadRecordedRun(t, recorder, clk, order, "testdata/histories/runs/compat-order-v1.json")

	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk})
	require.NoError(t, c.Register(email, ship, order))
	ctx := testCtx(t)
	// The first attempt's activity job and child run, as it left them.
	eh, err := email.Enqueue(ctx, c, "o-7@example.com", &hopper.InsertOpts{ID: "compat-o-7.a4"})
	require.NoError(t, err)
	_, err = eh.Result(ctx)
	require.NoError(t, err)
	sh, err := ship.Start(ctx, c, "o-7", &hopper.StartOpts{ID: "compat-o-7.6"})
	require.NoError(t, err)
	_, err = sh.Result(ctx)
	require.NoError(t, err)
	l.reset()

	clk.Advance(time.Hour) // the second attempt is due
	out, err := order.Handle(c, "compat-o-7").Result(ctx)
	require.NoError(t, err)
	require.Equal(t, "pay-o-7 label-o-7", out)
	require.Contains(t, l.all(), "2 charge")
	require.Contains(t, l.all(), "0 email compat-o-7@2.a4", "the second attempt's activity is a new job")
	require.Contains(t, l.all(), "0 ship compat-o-7@2.6", "the second attempt's child is a new run")
	info, err := c.GetRun(ctx, "compat-o-7")
	require.NoError(t, err)
	require.Equal(t, hopper.RunCompleted, info.Status)
	require.Equal(t, 2, info.History[0].Attempt)
}
