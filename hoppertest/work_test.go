package hoppertest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

type batchIn struct {
	Users []string
	Mode  string
}

var notify = hopper.Define("notify", func(context.Context, string) (hopper.None, error) { return hopper.None{}, nil }, nil)

// fanout spawns one notify per user, and one more of itself; its Mode
// decides how the attempt ends.
var fanout *hopper.Type[batchIn, int]

func init() {
	fanout = hopper.Define("fanout", func(ctx context.Context, in batchIn) (int, error) {
		job := hopper.JobFromContext(ctx)
		if err := job.HeartbeatMessage(ctx, "spawning"); err != nil {
			return 0, err
		}
		first, err := job.Claim(ctx, "fanout:"+job.ID())
		if err != nil || !first {
			return 0, errors.New("claimed twice")
		}
		for _, u := range in.Users {
			if err := job.Spawn(notify.Job(u, nil)); err != nil {
				return 0, err
			}
		}
		if err := job.Spawn(fanout.Job(batchIn{Mode: "ok"}, nil)); err != nil {
			return 0, err
		}
		switch in.Mode {
		case "fail":
			return 0, errors.New("mailer down")
		case "snooze":
			return 0, hopper.Snooze(time.Hour)
		case "abort":
			return 0, hopper.Abort(errors.New("bad batch"))
		}
		return len(in.Users), nil
	}, &hopper.TypeOpts[batchIn]{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Minute, Max: time.Hour, Jitter: hopper.NoJitter}})
}

// TestWork: one attempt runs through the engine, and what it did is
// reported: its output, the children it spawned (not run, not even those
// of its own type), the heartbeat it recorded; a failure is retried later,
// a snooze waits, an abort dead-letters, and a failed attempt's children
// are not stored.
func TestWork(t *testing.T) {
	t.Parallel()
	w := hoppertest.Work(t, fanout, batchIn{Users: []string{"ada", "bob"}}, nil)
	if w.Job.State != hopper.StateSucceeded || w.Output != 2 {
		t.Fatalf("state %s, output %d; want succeeded, 2", w.Job.State, w.Output)
	}
	if len(w.Spawned) != 3 {
		t.Fatalf("spawned %d, want 3", len(w.Spawned))
	}
	for _, ch := range w.Spawned {
		if ch.State != hopper.StatePending {
			t.Fatalf("child %s (%s) is %s: children must not run", ch.ID, ch.Type, ch.State)
		}
	}
	if hb := w.Attempt.Heartbeats; len(hb) != 1 || hb[0].Message != "spawning" {
		t.Fatalf("heartbeats %+v, want one: spawning", hb)
	}

	failed := hoppertest.Work(t, fanout, batchIn{Users: []string{"ada"}, Mode: "fail"}, nil)
	if failed.Job.State != hopper.StateRetrying || failed.Job.Attempt != 1 {
		t.Fatalf("state %s attempt %d; want retrying after attempt 1", failed.Job.State, failed.Job.Attempt)
	}
	if failed.Attempt.Error == nil || failed.Attempt.Error.Message != "mailer down" {
		t.Fatalf("attempt error %+v, want mailer down", failed.Attempt.Error)
	}
	if got := failed.Job.RunAt.Sub(failed.Attempt.StartedAt); got != time.Minute {
		t.Fatalf("retry due %s after the start, want the policy's minute", got)
	}
	if len(failed.Spawned) != 0 {
		t.Fatalf("a failed attempt stored %d children", len(failed.Spawned))
	}

	snoozed := hoppertest.Work(t, fanout, batchIn{Mode: "snooze"}, nil)
	if snoozed.Job.State != hopper.StateScheduled || snoozed.Job.RunAt.Sub(snoozed.Attempt.StartedAt) != time.Hour {
		t.Fatalf("state %s run at %s; want scheduled an hour on", snoozed.Job.State, snoozed.Job.RunAt)
	}

	elsewhere := hoppertest.Work(t, fanout, batchIn{Users: []string{"ada"}}, &hoppertest.WorkOpts{Insert: &hopper.InsertOpts{Queue: "batch"}})
	if elsewhere.Job.State != hopper.StateSucceeded || elsewhere.Job.Queue != "batch" {
		t.Fatalf("a job on a queue of its own: %s on %s", elsewhere.Job.State, elsewhere.Job.Queue)
	}

	aborted := hoppertest.Work(t, fanout, batchIn{Mode: "abort"}, nil)
	if aborted.Job.State != hopper.StateDead {
		t.Fatalf("state %s, want dead", aborted.Job.State)
	}
}

// TestWorkRecordsCalls: Work reports the handler's Claim calls (won and
// lost) and its heartbeats, those without a message too, in order.
func TestWorkRecordsCalls(t *testing.T) {
	t.Parallel()
	once := hopper.Define("once", func(ctx context.Context, key string) (bool, error) {
		job := hopper.JobFromContext(ctx)
		if err := job.Heartbeat(ctx); err != nil {
			return false, err
		}
		first, err := job.Claim(ctx, key)
		if err != nil {
			return false, err
		}
		again, err := job.Claim(ctx, key)
		if err != nil {
			return false, err
		}
		if err := job.HeartbeatMessage(ctx, "sent"); err != nil {
			return false, err
		}
		return first && !again, nil
	}, nil)
	w := hoppertest.Work(t, once, "mail:1", nil)
	if !w.Output {
		t.Fatalf("state %s, output %v", w.Job.State, w.Output)
	}
	want := []hoppertest.ClaimCall{{Key: "mail:1", Won: true}, {Key: "mail:1"}}
	if len(w.Claims) != 2 || w.Claims[0] != want[0] || w.Claims[1] != want[1] {
		t.Fatalf("claims %+v, want %+v", w.Claims, want)
	}
	if hb := w.Heartbeats; len(hb) != 2 || hb[0].Message != "" || hb[1].Message != "sent" || hb[0].Err != nil || !hb[0].At.Equal(w.Attempt.StartedAt) {
		t.Fatalf("heartbeats %+v, want one without a message then one saying sent, at the attempt's start %s", hb, w.Attempt.StartedAt)
	}
	if len(w.Attempt.Heartbeats) != 1 {
		t.Fatalf("the store recorded %d heartbeat messages, want 1", len(w.Attempt.Heartbeats))
	}
}

// TestWorkRetryInHandler: an attempt whose handler backs off an hour with
// hopper.Retry completes, the clock jumping over the backoff.
func TestWorkRetryInHandler(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	patient := hopper.Define("patient-work", func(ctx context.Context, _ int) (int32, error) {
		err := hopper.Retry(ctx, func(context.Context) error {
			if calls.Add(1) < 2 {
				return errors.New("busy")
			}
			return nil
		}, hopper.RetryPolicy{Attempts: 2, Base: time.Hour, Max: 24 * time.Hour, Jitter: hopper.NoJitter})
		return calls.Load(), err
	}, nil)
	w := hoppertest.Work(t, patient, 0, nil)
	if w.Job.State != hopper.StateSucceeded || w.Output != 2 || w.Job.Attempt != 1 {
		t.Fatalf("state %s, output %d, attempt %d; want succeeded, 2, 1", w.Job.State, w.Output, w.Job.Attempt)
	}
	if got := w.Attempt.EndedAt.Sub(w.Attempt.StartedAt); got != time.Hour {
		t.Fatalf("the attempt took %s of the clock, want the hour's backoff", got)
	}
}
