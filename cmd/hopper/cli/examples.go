package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-go/hopper"
)

// The example types `hopper dev` registers, so a newcomer sees hopper work
// within seconds.

// AddInput is the input of the "add" example.
type AddInput struct {
	A int `json:"a"`
	B int `json:"b"`
}

// FlakyInput is the input of the "flaky" example.
type FlakyInput struct {
	FailTimes int `json:"fail_times"`
}

// FanoutInput is the input of the "fanout" example.
type FanoutInput struct {
	N int `json:"n"`
	// Depth nests the fan-out: above 0, the children are fan-outs of N
	// with Depth-1, down to add jobs.
	Depth int `json:"depth,omitempty"`
}

// exampleAdd adds; inside a fan-out group it also folds its sum into the
// group value.
var exampleAdd = hopper.Define("add", func(ctx context.Context, in AddInput) (int, error) {
	sum := in.A + in.B
	return sum, hopper.FoldGroup(ctx, func(acc int) int { return acc + sum })
}, nil)

// exampleFanout fans out add jobs {a: i, b: 0} for i = 1..n; their sums fold
// into the group value, n(n+1)/2.
var exampleFanout *hopper.Type[FanoutInput, hopper.None]

// The fanout type is defined in init: its handler spawns fanout jobs when
// nested.
func init() { exampleFanout = hopper.Define("fanout", fanout, nil) }

func fanout(ctx context.Context, in FanoutInput) (hopper.None, error) {
	if in.N < 0 || in.N > 10_000 {
		return hopper.None{}, hopper.Abort(fmt.Errorf("fanout: n must be between 0 and 10000, got %d", in.N))
	}
	if in.Depth < 0 || in.Depth > 3 {
		return hopper.None{}, hopper.Abort(fmt.Errorf("fanout: depth must be between 0 and 3, got %d", in.Depth))
	}
	job := hopper.JobFromContext(ctx)
	children := make([]*hopper.JobSpec, in.N)
	for i := range children {
		if in.Depth > 0 {
			children[i] = exampleFanout.Job(FanoutInput{N: in.N, Depth: in.Depth - 1}, nil)
			continue
		}
		children[i] = exampleAdd.Job(AddInput{A: i + 1}, nil)
	}
	return hopper.None{}, job.Spawn(children...)
}

// PipelineInput is the input of the "pipeline" example.
type PipelineInput struct {
	Chunks int `json:"chunks"`
}

// exampleStage is one stage of the pipeline example; it returns its name.
var exampleStage = hopper.Define("stage", func(ctx context.Context, name string) (string, error) {
	time.Sleep(200 * time.Millisecond) // long enough to watch the gates hold
	return name, nil
}, nil)

// examplePipeline spawns chunks stage jobs, then chains two gates: "merge"
// runs once every chunk is done, "publish" once merge succeeded. Its group
// settles with "publish".
var examplePipeline = hopper.Define("pipeline", func(ctx context.Context, in PipelineInput) (hopper.None, error) {
	if in.Chunks < 1 || in.Chunks > 1000 {
		return hopper.None{}, hopper.Abort(fmt.Errorf("pipeline: chunks must be between 1 and 1000, got %d", in.Chunks))
	}
	job := hopper.JobFromContext(ctx)
	for i := range in.Chunks {
		if err := job.Spawn(exampleStage.Job(fmt.Sprintf("chunk-%d", i+1), nil)); err != nil {
			return hopper.None{}, err
		}
	}
	job.Then(hopper.AllDone(), exampleStage.Job("merge", nil)).
		Then(hopper.AllSuccess(), exampleStage.Job("publish", nil))
	return hopper.None{}, nil
}, nil)

var exampleFlaky = hopper.Define("flaky", func(ctx context.Context, in FlakyInput) (string, error) {
	job := hopper.JobFromContext(ctx)
	if job.Attempt() <= in.FailTimes {
		return "", fmt.Errorf("flaky: attempt %d of %d fails on purpose", job.Attempt(), job.MaxAttempts())
	}
	return fmt.Sprintf("succeeded on attempt %d", job.Attempt()), nil
}, &hopper.TypeOpts[FlakyInput]{
	// Enough attempts to get through the requested failures, retried quickly.
	Options: func(in FlakyInput) *hopper.InsertOpts {
		return &hopper.InsertOpts{Retry: hopper.RetryPolicy{Attempts: max(3, in.FailTimes+1), Base: 500 * time.Millisecond, Max: 5 * time.Second}}
	},
})

// OrderInput is the input of the "order" workflow.
type OrderInput struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
	// FailAt names a step (charge, reserve, ship) that fails, so the saga
	// compensates what it did.
	FailAt string `json:"fail_at"`
}

// Receipt is the output of the "order" workflow.
type Receipt struct {
	OrderID  string `json:"order_id"`
	Payment  string `json:"payment"`
	Reserved string `json:"reservation"`
	Shipment string `json:"shipment"`
}

// exampleOrder is a saga: charge → reserve → ship, each step with a
// compensation; a failing step makes the run compensate (refund, release)
// in reverse order and end compensated.
var exampleOrder = hopper.Workflow("order", func(wf hopper.WorkflowContext, in OrderInput) (Receipt, error) {
	r := Receipt{OrderID: in.OrderID}
	step := func(name, undo string, out *string) error {
		v, err := hopper.Step(wf, name, func(ctx context.Context) (string, error) {
			if in.FailAt == name {
				return "", hopper.Fatal(fmt.Errorf("%s failed for order %s", name, in.OrderID))
			}
			return fmt.Sprintf("%s-%s-%d", name, in.OrderID, in.Amount), nil
		}, nil)
		if err != nil {
			return err
		}
		*out = v
		wf.Compensate(undo, func(ctx context.Context) error { return nil })
		return nil
	}
	if err := step("charge", "refund", &r.Payment); err != nil {
		return Receipt{}, err
	}
	if err := step("reserve", "release", &r.Reserved); err != nil {
		return Receipt{}, err
	}
	if err := step("ship", "recall", &r.Shipment); err != nil {
		return Receipt{}, err
	}
	return r, nil
}, &hopper.WorkflowOpts{Strategy: hopper.StrategyCompensate})

// ApprovalInput is the input of the "approval" workflow.
type ApprovalInput struct {
	Request string `json:"request"`
}

// exampleApproval waits on a hook; its output is the payload it was resumed
// with (POST /v1/hooks/{token}, or any request to /v1/webhooks/{token}).
var exampleApproval = hopper.Workflow("approval", func(wf hopper.WorkflowContext, in ApprovalInput) (json.RawMessage, error) {
	h, err := hopper.NewHook[json.RawMessage](wf, "approval")
	if err != nil {
		return nil, err
	}
	if err := wf.Stream().Write(map[string]string{"request": in.Request, "hook": h.Token(), "url": h.URL()}); err != nil {
		return nil, err
	}
	return h.Wait(nil)
}, nil)

// SleepyInput is the input of the "sleepy" workflow.
type SleepyInput struct {
	Seconds int `json:"seconds"`
}

// exampleSleepy sleeps durably, one second at a time, writing its progress
// to its stream.
var exampleSleepy = hopper.Workflow("sleepy", func(wf hopper.WorkflowContext, in SleepyInput) (string, error) {
	if in.Seconds < 0 || in.Seconds > 3600 {
		return "", hopper.Fatal(fmt.Errorf("sleepy: seconds must be between 0 and 3600, got %d", in.Seconds))
	}
	for i := 1; i <= in.Seconds; i++ {
		if err := wf.Sleep(time.Second); err != nil {
			return "", err
		}
		if err := wf.Stream().Write(map[string]int{"slept": i, "of": in.Seconds}); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("slept %ds", in.Seconds), nil
}, nil)

// ReportInput is the input of the "report" workflow.
type ReportInput struct {
	Pages int `json:"pages"`
	// FailFirst makes the render activity's first attempt fail, so its
	// retry shows in the run's timeline.
	FailFirst bool `json:"fail_first"`
}

// exampleRender renders a report's pages as an activity, reporting its
// progress with heartbeat messages.
var exampleRender = hopper.Define("render", func(ctx context.Context, in ReportInput) (string, error) {
	job := hopper.JobFromContext(ctx)
	if in.FailFirst && job.Attempt() == 1 {
		return "", fmt.Errorf("render: attempt %d fails on purpose", job.Attempt())
	}
	for i := 1; i <= in.Pages; i++ {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond): // rendering
		}
		if err := job.HeartbeatMessage(ctx, fmt.Sprintf("page %d of %d", i, in.Pages)); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d pages", in.Pages), nil
}, &hopper.TypeOpts[ReportInput]{Retry: hopper.RetryPolicy{Base: 500 * time.Millisecond, Max: 5 * time.Second}})

// exampleReport runs render as an activity: its job's executions (started,
// heartbeats, failed, retry) show in the run's timeline.
var exampleReport = hopper.Workflow("report", func(wf hopper.WorkflowContext, in ReportInput) (string, error) {
	if in.Pages < 1 || in.Pages > 100 {
		return "", hopper.Fatal(fmt.Errorf("report: pages must be between 1 and 100, got %d", in.Pages))
	}
	return hopper.Activity(wf, exampleRender, in, nil)
}, nil)

// TripInput is the input of the "trip" workflow.
type TripInput struct {
	Trip string `json:"trip"`
	// FailAttempts makes the first attempts fail at payment: each is
	// undone (the flight cancelled, the hotel released) before the next
	// one; past its retries the run ends compensated.
	FailAttempts int `json:"fail_attempts"`
}

// exampleTrip is a retried saga: a step, an activity whose job fails once
// and retries, a durable sleep, then payment; a failed attempt is undone
// before the next one starts (StrategyRetry), and every attempt shows on
// the run's timeline.
var exampleTrip = hopper.Workflow("trip", func(wf hopper.WorkflowContext, in TripInput) (string, error) {
	flight, err := hopper.Step(wf, "book-flight", func(ctx context.Context) (string, error) {
		return "flight-" + in.Trip, nil
	}, nil)
	if err != nil {
		return "", err
	}
	wf.Compensate("cancel-flight", func(ctx context.Context) error { return nil })
	hotel, err := hopper.Activity(wf, exampleFlaky, FlakyInput{FailTimes: 1}, nil)
	if err != nil {
		return "", err
	}
	wf.Compensate("release-hotel", func(ctx context.Context) error { return nil })
	if err := wf.Sleep(300 * time.Millisecond); err != nil { // waiting for the fare to settle
		return "", err
	}
	if wf.Attempt() <= in.FailAttempts {
		return "", fmt.Errorf("payment declined on attempt %d", wf.Attempt())
	}
	return hopper.Step(wf, "pay", func(ctx context.Context) (string, error) {
		return fmt.Sprintf("paid %s, %s (hotel %s)", in.Trip, flight, hotel), nil
	}, nil)
}, &hopper.WorkflowOpts{Strategy: hopper.StrategyRetry, MaxRetries: 2, Retry: hopper.RetryPolicy{Base: 200 * time.Millisecond, Max: time.Second, Jitter: hopper.NoJitter}})

// exampleSchedules are registered by hopper dev (and hopper serve
// --examples): an add job at the top of every minute, its input the
// occurrence's hour and minute.
func exampleSchedules() []hopper.Schedule {
	return []hopper.Schedule{{
		Name: "add-every-minute",
		Cron: "* * * * *",
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			return exampleAdd.Job(AddInput{A: at.Hour(), B: at.Minute()}, nil), nil
		},
	}}
}

// exampleTypes are registered by hopper dev (and hopper serve --examples).
func exampleTypes() []hopper.AnyType {
	return []hopper.AnyType{exampleAdd, exampleFlaky, exampleFanout, exampleStage, examplePipeline, exampleOrder, exampleApproval,
		exampleSleepy, exampleRender, exampleReport, exampleTrip}
}
