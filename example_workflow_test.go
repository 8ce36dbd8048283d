package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// runStatus returns a run's status, or "" when it cannot be read.
func runStatus(c *hopper.Client, id string) hopper.RunStatus {
	info, err := c.RunGet(context.Background(), id)
	if err != nil {
		return ""
	}
	return info.Status
}

// Define a workflow whose steps are checkpointed, start a run and wait for
// its result.
func ExampleWorkflow() {
	type Signup struct{ Email string }

	onboard := hopper.Workflow("onboard", func(wf hopper.WorkflowContext, in Signup) (string, error) {
		userID, err := hopper.Step(wf, "create-user", func(ctx context.Context) (string, error) {
			return "user-42", nil // a call to the user service
		}, nil)
		if err != nil {
			return "", err
		}
		_, err = hopper.Step(wf, "send-welcome", func(ctx context.Context) (bool, error) {
			return true, nil // a call to the mailer
		}, nil)
		if err != nil {
			return "", err
		}
		return userID + " welcomed at " + in.Email, nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, onboard)
	defer c.Stop(ctx)

	run, err := onboard.Start(ctx, c, Signup{Email: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Result(ctx))
	// Output: user-42 welcomed at ada@example.com <nil>
}

// A step retries its function under its own policy; a Fatal error stops
// the retries. The step's final error is recorded, and the workflow sees it
// as a *StepError.
func ExampleStep() {
	calls := 0
	wf := hopper.Workflow("lookup", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		rate, err := hopper.Step(wf, "fetch-rate", func(ctx context.Context) (float64, error) {
			calls++
			if calls < 3 {
				return 0, errors.New("rate service unavailable")
			}
			return 1.08, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 5, Base: time.Millisecond}})
		if err != nil {
			return "", err
		}
		_, err = hopper.Step(wf, "validate", func(ctx context.Context) (bool, error) {
			return false, hopper.Fatal(errors.New("currency not supported"))
		}, nil)
		var se *hopper.StepError
		if errors.As(err, &se) {
			return fmt.Sprintf("rate %.2f after %d calls; %s (fatal: %v)", rate, calls, se.Message, errors.Is(err, hopper.ErrAborted)), nil
		}
		return "", err
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, wf)
	defer c.Stop(ctx)

	run, _ := wf.Start(ctx, c, hopper.None{}, nil)
	fmt.Println(run.Result(ctx))
	// Output: rate 1.08 after 3 calls; currency not supported (fatal: true) <nil>
}

// Sleep waits durably: the run suspends, holding no goroutine and no
// worker, and wakes when the time has passed, even in another process after
// a restart. Here a virtual clock stands in for a day.
func ExampleWorkflowContext_Sleep() {
	reminder := hopper.Workflow("reminder", func(wf hopper.WorkflowContext, user string) (string, error) {
		start := wf.Now()
		if err := wf.Sleep(24 * time.Hour); err != nil {
			return "", err // the run suspends here: return the error
		}
		return fmt.Sprintf("remind %s after %s", user, wf.Now().Sub(start)), nil
	}, nil)

	ctx := context.Background()
	clk := hoppertest.NewClock(time.Time{})
	c := exampleClient(hopper.Config{Clock: clk}, reminder)
	defer c.Stop(ctx)

	run, _ := reminder.Start(ctx, c, "ada", nil)
	waitUntil(c, func() bool { return runStatus(c, run.ID()) == hopper.RunWaiting })
	fmt.Println(runStatus(c, run.ID()), "workers busy:", len(c.Active()))

	clk.Advance(24 * time.Hour)
	fmt.Println(run.Result(ctx))
	// Output:
	// waiting workers busy: 0
	// remind ada after 24h0m0s <nil>
}

// A hook waits durably for a payload from outside: a person, another
// system, a webhook. Client.HookResume (or POST /v1/hooks/{token}) delivers
// it, once.
func ExampleClient_HookResume() {
	type Approval struct {
		Approved bool   `json:"approved"`
		By       string `json:"by"`
	}
	approval := hopper.DefineHook[Approval]("manager-approval")

	expense := hopper.Workflow("expense", func(wf hopper.WorkflowContext, amount int) (string, error) {
		h, err := approval.Create(wf)
		if err != nil {
			return "", err
		}
		// Tell someone how to answer: h.Token(), or h.URL() with
		// Config.WebhookBaseURL set.
		if err := wf.Stream().Write(map[string]string{"hook": h.Token()}); err != nil {
			return "", err
		}
		a, err := h.Wait(&hopper.HookWaitOpts{Timeout: 7 * 24 * time.Hour})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d approved=%v by %s", amount, a.Approved, a.By), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, expense)
	defer c.Stop(ctx)

	run, _ := expense.Start(ctx, c, 120, nil)

	// The token, as the run published it on its stream.
	var token string
	waitUntil(c, func() bool {
		chunks, err := c.StreamRead(ctx, run.ID(), 0, 1)
		if err != nil || len(chunks) == 0 {
			return false
		}
		var msg struct{ Hook string }
		_ = json.Unmarshal(chunks[0].Data, &msg)
		token = msg.Hook
		return true
	})

	err := c.HookResume(ctx, token, json.RawMessage(`{"approved":true,"by":"grace"}`))
	fmt.Println(err)
	fmt.Println(run.Result(ctx))

	// A hook is resumed once.
	err = c.HookResume(ctx, token, json.RawMessage(`{"approved":false}`))
	fmt.Println(errors.Is(err, hopper.ErrStateConflict))
	// Output:
	// <nil>
	// 120 approved=true by grace <nil>
	// true
}

// A hook wait with a timeout ends with ErrHookTimeout when nobody answers;
// returned, the error fails the run and its compensations run.
func ExampleWaitHook() {
	type Approval struct{ By string }
	order := hopper.Workflow("order", func(wf hopper.WorkflowContext, cents int) (string, error) {
		payment, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) {
			return fmt.Sprintf("payment-%d", cents), nil
		}, nil)
		if err != nil {
			return "", err
		}
		wf.Compensate("refund", func(ctx context.Context) error {
			fmt.Println("refund", payment)
			return nil
		})
		approval, err := hopper.WaitHook[Approval](wf, "approval", &hopper.HookWaitOpts{Timeout: 48 * time.Hour})
		if err != nil {
			return "", err // suspended (return it), or timed out: the refund runs
		}
		return "approved by " + approval.By, nil
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})

	ctx := context.Background()
	clk := hoppertest.NewClock(time.Time{})
	c := exampleClient(hopper.Config{Clock: clk}, order)
	defer c.Stop(ctx)

	run, _ := order.Start(ctx, c, 4200, nil)
	waitUntil(c, func() bool { return runStatus(c, run.ID()) == hopper.RunWaiting })
	clk.Advance(48 * time.Hour) // nobody approves
	_, err := run.Result(ctx)
	var re *hopper.RunError
	fmt.Println(errors.As(err, &re), re.Status, re.Message)
	// Output:
	// refund payment-4200
	// true compensated hopper: hook timed out: "approval"
}

// A saga: each step registers its undo. When a step fails for good, the
// registered compensations run in reverse order and the run ends
// compensated.
func ExampleWorkflowContext_Compensate() {
	type Order struct {
		ID     string
		FailAt string
	}
	order := hopper.Workflow("order", func(wf hopper.WorkflowContext, o Order) (string, error) {
		steps := []struct{ do, undo string }{{"charge", "refund"}, {"reserve", "release"}, {"ship", "recall"}}
		for _, s := range steps {
			_, err := hopper.Step(wf, s.do, func(ctx context.Context) (string, error) {
				if s.do == o.FailAt {
					return "", hopper.Fatal(fmt.Errorf("%s failed", s.do))
				}
				fmt.Println("do", s.do)
				return s.do + "-ok", nil
			}, nil)
			if err != nil {
				return "", err
			}
			wf.Compensate(s.undo, func(ctx context.Context) error {
				fmt.Println("undo", s.do, "with", s.undo)
				return nil
			})
		}
		return "shipped " + o.ID, nil
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, order)
	defer c.Stop(ctx)

	run, _ := order.Start(ctx, c, Order{ID: "o-1", FailAt: "ship"}, nil)
	_, err := run.Result(ctx)
	var re *hopper.RunError
	if errors.As(err, &re) {
		fmt.Println("status:", re.Status)
	}
	info, _ := c.RunGet(ctx, run.ID())
	for _, comp := range info.Compensations {
		fmt.Println("compensation", comp.Name, "executed:", comp.Executed)
	}
	// Output:
	// do charge
	// do reserve
	// undo reserve with release
	// undo charge with refund
	// status: compensated
	// compensation release executed: true
	// compensation refund executed: true
}

// A retried saga (StrategyRetry, the default): each attempt that fails is
// undone before the next one begins, so the charges of the failed attempts
// are refunded and the successful attempt's charge stands — one refund
// per charge. Each attempt's step has an id of its own, an idempotency key
// that the payment service will not take for the refunded charge.
func ExampleFailureStrategy() {
	order := hopper.Workflow("retried-order", func(wf hopper.WorkflowContext, id string) (string, error) {
		charge, err := hopper.Step(wf, "charge", func(ctx context.Context) (string, error) {
			step, _ := hopper.StepFromContext(ctx)
			fmt.Println("attempt", wf.Attempt(), "charges, key", step.ID)
			return fmt.Sprintf("ch-%d", wf.Attempt()), nil
		}, nil)
		if err != nil {
			return "", err
		}
		wf.Compensate("refund", func(ctx context.Context) error {
			fmt.Println("attempt", wf.Attempt(), "refunds", charge)
			return nil
		})
		if wf.Attempt() < 3 {
			return "", errors.New("carrier unavailable") // retried from the beginning
		}
		return "shipped " + id + ", paid by " + charge, nil
	}, &hopper.WorkflowOpts{MaxRetries: 3, Retry: hopper.RetryPolicy{Base: time.Millisecond}})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, order)
	defer c.Stop(ctx)

	run, _ := order.Start(ctx, c, "o-1", &hopper.StartOpts{ID: "order-o-1"})
	fmt.Println(run.Result(ctx))
	info, _ := c.RunGet(ctx, run.ID())
	for _, comp := range info.Compensations {
		fmt.Println("attempt", comp.Attempt, comp.Name, "executed:", comp.Executed)
	}
	// Output:
	// attempt 1 charges, key order-o-1/charge#2
	// attempt 1 refunds ch-1
	// attempt 2 charges, key order-o-1@2/charge#2
	// attempt 2 refunds ch-2
	// attempt 3 charges, key order-o-1@3/charge#2
	// shipped o-1, paid by ch-3 <nil>
	// attempt 1 refund executed: true
	// attempt 2 refund executed: true
	// attempt 3 refund executed: false
}

// A parent starts a child run and waits for it durably; a child's failure
// reaches the parent as a *RunError.
func ExampleChild() {
	square := hopper.Workflow("square", func(wf hopper.WorkflowContext, n int) (int, error) {
		if n < 0 {
			return 0, hopper.Abort(errors.New("negative input"))
		}
		return hopper.Step(wf, "multiply", func(ctx context.Context) (int, error) { return n * n, nil }, nil)
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})

	sumOfSquares := hopper.Workflow("sum-of-squares", func(wf hopper.WorkflowContext, ns []int) (string, error) {
		sum := 0
		for _, n := range ns {
			sq, err := hopper.Child(wf, square, n, nil)
			var re *hopper.RunError
			if errors.As(err, &re) {
				return fmt.Sprintf("child %d %s", n, re.Status), nil
			}
			if err != nil {
				return "", err
			}
			sum += sq
		}
		return fmt.Sprint("sum ", sum), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, square, sumOfSquares)
	defer c.Stop(ctx)

	run, _ := sumOfSquares.Start(ctx, c, []int{1, 2, 3}, nil)
	fmt.Println(run.Result(ctx))
	children, _ := c.RunList(ctx, &hopper.RunQuery{ParentID: run.ID()})
	fmt.Println(len(children.Runs), "children")

	run, _ = sumOfSquares.Start(ctx, c, []int{4, -1}, nil)
	fmt.Println(run.Result(ctx))
	// Output:
	// sum 14 <nil>
	// 3 children
	// child -1 failed <nil>
}

// An activity is a step that runs as a job of its own: its own queue,
// retries, timeouts and heartbeats, on whichever worker claims it. The run
// waits for it without holding a goroutine.
func ExampleActivity() {
	resize := hopper.Define("resize", func(ctx context.Context, width int) (string, error) {
		return fmt.Sprintf("image-%dpx.png", width), nil
	}, nil)
	publish := hopper.Workflow("publish", func(wf hopper.WorkflowContext, width int) (string, error) {
		return hopper.Activity(wf, resize, width, &hopper.InsertOpts{Timeout: time.Minute})
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, resize, publish)
	defer c.Stop(ctx)

	run, _ := publish.Start(ctx, c, 640, nil)
	fmt.Println(run.Result(ctx))
	info, _ := c.RunGet(ctx, run.ID())
	fmt.Println(info.Steps[0].Kind, info.Steps[0].Name, string(info.Steps[0].Output))
	// Output:
	// image-640px.png <nil>
	// activity resize "image-640px.png"
}

// RunGet shows a run with its status, output, steps and history.
func ExampleClient_RunGet() {
	wf := hopper.Workflow("report", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		rows, err := hopper.Step(wf, "query", func(ctx context.Context) (int, error) { return 1200, nil }, nil)
		if err != nil {
			return 0, err
		}
		return hopper.Step(wf, "render", func(ctx context.Context) (int, error) { return rows / 100, nil }, nil)
	}, &hopper.WorkflowOpts{CodeVersion: "v3"})

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, wf)
	defer c.Stop(ctx)

	run, _ := wf.Start(ctx, c, hopper.None{}, nil)
	if _, err := c.RunWait(ctx, run.ID()); err != nil {
		panic(err)
	}
	info, _ := c.RunGet(ctx, run.ID())
	fmt.Println(info.Workflow, info.Status, string(info.Output), info.CodeVersion)
	for _, s := range info.Steps {
		fmt.Println("step", s.Name, string(s.Output))
	}
	for _, ev := range info.History {
		fmt.Print(ev.Kind, " ")
	}
	fmt.Println()
	// Output:
	// report completed 12 v3
	// step query 1200
	// step render 12
	// workflow_started step step workflow_completed
}

// Starting with an id is idempotent: a second start with the same id, in
// any state, returns the existing run.
func ExampleWorkflowType_Start() {
	invoice := hopper.Workflow("invoice", func(wf hopper.WorkflowContext, month string) (string, error) {
		return hopper.Step(wf, "issue", func(ctx context.Context) (string, error) {
			return "invoice for " + month, nil
		}, nil)
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, invoice)
	defer c.Stop(ctx)

	first, _ := invoice.Start(ctx, c, "2030-01", &hopper.StartOpts{ID: "invoice-acme-2030-01"})
	again, _ := invoice.Start(ctx, c, "2030-01", &hopper.StartOpts{ID: "invoice-acme-2030-01"})
	fmt.Println(first.ID(), again.ID(), again.Existing())
	fmt.Println(again.Result(ctx))
	// Output:
	// invoice-acme-2030-01 invoice-acme-2030-01 true
	// invoice for 2030-01 <nil>
}

// RunCancel stops a run: the compensations it registered run, its children
// are cancelled and its waiters get an error matching ErrCancelled.
func ExampleClient_RunCancel() {
	trial := hopper.Workflow("trial", func(wf hopper.WorkflowContext, user string) (string, error) {
		if _, err := hopper.Step(wf, "grant", func(ctx context.Context) (bool, error) { return true, nil }, nil); err != nil {
			return "", err
		}
		wf.Compensate("revoke", func(ctx context.Context) error {
			fmt.Println("revoke the trial of", user)
			return nil
		})
		if err := wf.Sleep(30 * 24 * time.Hour); err != nil {
			return "", err
		}
		return "trial over", nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, trial)
	defer c.Stop(ctx)

	run, _ := trial.Start(ctx, c, "ada", nil)
	waitUntil(c, func() bool { return runStatus(c, run.ID()) == hopper.RunWaiting })
	if err := c.RunCancel(ctx, run.ID()); err != nil {
		panic(err)
	}
	_, err := run.Result(ctx)
	fmt.Println(errors.Is(err, hopper.ErrCancelled), runStatus(c, run.ID()))
	// Output:
	// revoke the trial of ada
	// true cancelled
}

// Patch lets workflow code change while runs are in flight. Here a release
// adds a receipt step while a run sleeps: that run's history predates the
// change, so it keeps the old path; a run started after it takes the new one.
func ExampleWorkflowContext_Patch() {
	var released atomic.Bool // the new code is deployed
	checkout := hopper.Workflow("checkout", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		if _, err := hopper.Step(wf, "charge", func(ctx context.Context) (bool, error) { return true, nil }, nil); err != nil {
			return "", err
		}
		receipt := false
		if released.Load() && wf.Patch("send-receipt") {
			if _, err := hopper.Step(wf, "send-receipt", func(ctx context.Context) (bool, error) { return true, nil }, nil); err != nil {
				return "", err
			}
			receipt = true
		}
		if err := wf.Sleep(time.Hour); err != nil { // wait before confirming
			return "", err
		}
		return fmt.Sprint("charged, receipt sent: ", receipt), nil
	}, nil)

	ctx := context.Background()
	clk := hoppertest.NewClock(time.Time{})
	c := exampleClient(hopper.Config{Clock: clk}, checkout)
	defer c.Stop(ctx)

	old, _ := checkout.Start(ctx, c, hopper.None{}, nil)
	waitUntil(c, func() bool { return runStatus(c, old.ID()) == hopper.RunWaiting })

	released.Store(true)
	current, _ := checkout.Start(ctx, c, hopper.None{}, nil)
	waitUntil(c, func() bool { return runStatus(c, current.ID()) == hopper.RunWaiting })

	clk.Advance(time.Hour)
	fmt.Println(old.Result(ctx))
	fmt.Println(current.Result(ctx))
	// Output:
	// charged, receipt sent: false <nil>
	// charged, receipt sent: true <nil>
}

// A run's stream carries progress to readers (StreamRead, or
// GET /v1/runs/{id}/stream as Server-Sent Events); each chunk is written
// once, however often the run replays.
func ExampleStream_Write() {
	wf := hopper.Workflow("import", func(wf hopper.WorkflowContext, files []string) (int, error) {
		for i, f := range files {
			if _, err := hopper.Step(wf, "import "+f, func(ctx context.Context) (bool, error) { return true, nil }, nil); err != nil {
				return 0, err
			}
			if err := wf.Stream().Write(map[string]any{"done": i + 1, "of": len(files)}); err != nil {
				return 0, err
			}
		}
		return len(files), nil
	}, nil)

	ctx := context.Background()
	c := exampleClient(hopper.Config{}, wf)
	defer c.Stop(ctx)

	run, _ := wf.Start(ctx, c, []string{"a.csv", "b.csv"}, nil)
	_, _ = run.Result(ctx)
	chunks, _ := c.StreamRead(ctx, run.ID(), 0, 100)
	for _, ch := range chunks {
		fmt.Println(ch.Offset, string(ch.Data))
	}
	// Output:
	// 0 {"done":1,"of":2}
	// 1 {"done":2,"of":2}
}

// ExampleReplayOutput runs a workflow inline against a history written by
// hand: the step's and the hook's answers are the history's.
func ExampleReplayOutput() {
	checkout := hopper.Workflow("example-checkout", func(wf hopper.WorkflowContext, cart int) (string, error) {
		price, err := hopper.Step(wf, "price", func(context.Context) (int, error) { return cart * 10, nil }, nil)
		if err != nil {
			return "", err
		}
		approver, err := hopper.WaitHook[string](wf, "approve", nil)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("charged %d, approved by %s", price, approver), nil
	}, nil)
	h := &hopper.History{Version: hopper.HistoryVersion, RunID: "r1", Workflow: "example-checkout", Attempt: 1, Input: json.RawMessage(`3`),
		Events: []hopper.HistoryEvent{
			{Seq: 1, Kind: "workflow_started"},
			{Seq: 2, Kind: "step", Name: "price", Data: json.RawMessage(`{"output": 45}`)},
			{Seq: 3, Kind: "hook_created", Name: "approve", Data: json.RawMessage(`{"token": "t"}`)},
			{Seq: 4, Kind: "hook_wait", Name: "approve", Data: json.RawMessage(`{"until": "9999-01-01T00:00:00Z", "token": "t"}`)},
			{Seq: 5, Kind: "hook_received", Name: "approve", Data: json.RawMessage(`{"output": "ana"}`)},
		}}
	out, err := hopper.ReplayOutput(context.Background(), checkout, h)
	fmt.Println(out, err)
	// Output: charged 45, approved by ana <nil>
}
