package hoppertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTB records a helper's failure instead of failing the test.
type fakeTB struct{ failed string }

type fatal struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(fatal{})
}

// failure runs fn with a fakeTB and returns its failure message ("" when
// it passed).
func failure(fn func(tb hoppertest.TB)) (msg string) {
	tb := &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				panic(r)
			}
			msg = tb.failed
		}
	}()
	fn(tb)
	return ""
}

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

var sendEmail = hopper.Define("send-email", func(context.Context, email) (string, error) { return "sent", nil }, nil)

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	c, _ := hoppertest.NewClient(t, hopper.Config{}) // sendEmail is not registered: jobs stay put
	ctx := context.Background()
	_, err := sendEmail.Enqueue(ctx, c, email{To: "ada@example.com", Subject: "hi"}, &hopper.InsertOpts{Queue: "mail", Metadata: map[string]string{"tenant": "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sendEmail.Enqueue(ctx, c, email{To: "bob@example.com"}, &hopper.InsertOpts{Priority: 5, Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	got := hoppertest.RequireEnqueued(t, c, sendEmail, &hoppertest.JobOpts[email]{Queue: "mail"})
	if got.Input.To != "ada@example.com" || got.Row.Queue != "mail" {
		t.Fatalf("found %+v", got)
	}
	five := 5
	got = hoppertest.RequireEnqueued(t, c, sendEmail, &hoppertest.JobOpts[email]{Priority: &five, State: hopper.StateScheduled,
		Match: func(e email) bool { return strings.HasPrefix(e.To, "bob") }})
	if got.Input.To != "bob@example.com" {
		t.Fatalf("found %+v", got)
	}
	hoppertest.RequireEnqueued(t, c, sendEmail, &hoppertest.JobOpts[email]{Metadata: map[string]string{"tenant": "t1"}})
	hoppertest.RequireNotEnqueued(t, c, sendEmail, &hoppertest.JobOpts[email]{Queue: "nowhere"})

	// Failures say what was there instead.
	msg := failure(func(tb hoppertest.TB) {
		hoppertest.RequireEnqueued(tb, c, sendEmail, &hoppertest.JobOpts[email]{Queue: "nowhere"})
	})
	for _, want := range []string{`no "send-email" job with queue nowhere`, "there were 2", "ada@example.com", "bob@example.com", "queue mail"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	msg = failure(func(tb hoppertest.TB) { hoppertest.RequireEnqueued(tb, c, sendEmail, nil) })
	if !strings.Contains(msg, `2 "send-email" jobs were enqueued, want one`) {
		t.Errorf("several: %s", msg)
	}
	msg = failure(func(tb hoppertest.TB) {
		hoppertest.RequireNotEnqueued(tb, c, sendEmail, &hoppertest.JobOpts[email]{Match: func(e email) bool { return e.To == "bob@example.com" }})
	})
	if !strings.Contains(msg, "found 1") || !strings.Contains(msg, "bob@example.com") || strings.Contains(msg, "ada@example.com") {
		t.Errorf("not enqueued: %s", msg)
	}
	msg = failure(func(tb hoppertest.TB) {
		hoppertest.RequireEnqueued(tb, c, sendEmail, &hoppertest.JobOpts[email]{Metadata: map[string]string{"tenant": "t2"}})
	})
	if !strings.Contains(msg, "metadata tenant t2") || !strings.Contains(msg, "metadata map[tenant:t1]") {
		t.Errorf("metadata: %s", msg)
	}
}

func TestRequireRunCompletedAndHistory(t *testing.T) {
	t.Parallel()
	greet := hopper.Workflow("greet", func(wf hopper.WorkflowContext, name string) (string, error) {
		s, err := hopper.Step(wf, "compose", func(context.Context) (string, error) { return "hello " + name, nil }, nil)
		if err != nil {
			return "", err
		}
		return hopper.Step(wf, "send", func(context.Context) (string, error) { return s, nil }, nil)
	}, nil)
	broken := hopper.Workflow("broken", func(wf hopper.WorkflowContext, _ hopper.None) (string, error) {
		return hopper.Step(wf, "explode", func(context.Context) (string, error) { return "", hopper.Abort(errors.New("boom")) }, nil)
	}, &hopper.WorkflowOpts{Strategy: hopper.StrategyIgnore})
	c, _ := hoppertest.NewClient(t, hopper.Config{})
	if err := c.Register(greet, broken); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := greet.Start(ctx, c, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := hoppertest.RequireRunCompleted(t, c, run); out != "hello ada" {
		t.Fatalf("output %q", out)
	}
	hoppertest.RequireHistory(t, c, run.ID(), hoppertest.Event{Kind: "step", Name: "compose"}, hoppertest.Event{Kind: "step", Name: "send"})

	msg := failure(func(tb hoppertest.TB) {
		hoppertest.RequireHistory(tb, c, run.ID(), hoppertest.Event{Kind: "step", Name: "send"}, hoppertest.Event{Kind: "step", Name: "compose"})
	})
	if !strings.Contains(msg, `lacks step "compose" (after 1 of 2`) || !strings.Contains(msg, `step "compose"`) {
		t.Errorf("history: %s", msg)
	}
	bad, err := broken.Start(ctx, c, hopper.None{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg = failure(func(tb hoppertest.TB) { hoppertest.RequireRunCompleted(tb, c, bad) })
	if !strings.Contains(msg, "ended failed") || !strings.Contains(msg, "boom") || !strings.Contains(msg, "explode (failed") {
		t.Errorf("run: %s", msg)
	}
}
