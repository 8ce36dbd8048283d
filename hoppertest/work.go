package hoppertest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/internal/stubs"
)

// WorkOpts configure Work. The zero value is usable.
type WorkOpts struct {
	// Insert are the job's insert options (a Delay is ignored: the job
	// runs at once).
	Insert *hopper.InsertOpts
	// Config configures the client the attempt runs on; Driver and Clock
	// are filled in as NewClient fills them.
	Config hopper.Config
}

// Worked is what one attempt of a job did, as the engine recorded it.
type Worked[O any] struct {
	// Job is the job after the attempt: its State says what the engine
	// made of the handler's return (succeeded; retrying with its RunAt;
	// scheduled for a Snooze; dead for an Abort or the last attempt),
	// with its Attempt and Error.
	Job *hopper.JobRow
	// Output is the handler's decoded output when the job succeeded.
	Output O
	// Attempt is the attempt's record: its outcome, error and the
	// messages the handler recorded with HeartbeatMessage.
	Attempt hopper.Attempt
	// Spawned are the children the attempt stored with Spawn (stored only
	// when it succeeded), as JobList lists them. They are not run.
	Spawned []*hopper.JobRow
	// Claims are the handler's JobContext.Claim calls, in order.
	Claims []ClaimCall
	// Heartbeats are the heartbeats the handler sent, in order: with
	// JobContext.Heartbeat (no message) and HeartbeatMessage. (Attempt's
	// Heartbeats are the messages, as the store recorded them.)
	Heartbeats []HeartbeatCall
}

// ClaimCall is a JobContext.Claim call: its key, whether the claim was
// won, and its error.
type ClaimCall struct {
	Key string
	Won bool
	Err error
}

// HeartbeatCall is a heartbeat a handler sent: its message (empty for
// JobContext.Heartbeat), the clock's time, and its error.
type HeartbeatCall struct {
	At      time.Time
	Message string
	Err     error
}

// Work runs one attempt of a job of typ with input in through the whole
// engine — JobFromContext, Claim, Spawn, FoldGroup, heartbeats, the retry
// policy, Snooze and Abort behave as in production — on a client of its
// own (the memory store and a virtual clock), and returns what the attempt
// did, with the Claim and heartbeat calls its handler made. Nothing else runs: the client's queues are paused as the attempt
// starts, so the children it spawns and its retry stay where they are, for
// the test to look at. It is River's rivertest.Worker for hopper.
func Work[I, O any](t T, typ *hopper.Type[I, O], in I, opts *WorkOpts) *Worked[O] {
	t.Helper()
	var o WorkOpts
	if opts != nil {
		o = *opts
	}
	if o.Insert != nil && o.Insert.Queue != "" {
		// The client works the queue the job goes to.
		o.Config.Queues = append(slices.Clone(o.Config.Queues), o.Insert.Queue)
	}
	c, clk := NewClient(t, o.Config)
	ctx := context.Background()

	// As the attempt starts, pause every queue the client works, so
	// nothing else is claimed: the pause commits before the handler runs.
	var once sync.Once
	var pauseErr error
	started := make(chan struct{})
	var id string
	var idMu sync.Mutex
	unsubscribe := c.Subscribe(func(ev hopper.Event) {
		idMu.Lock()
		mine := ev.Kind == hopper.EventStarted && ev.JobID == id
		idMu.Unlock()
		if !mine {
			return
		}
		once.Do(func() {
			names := []string{hopper.DefaultQueue, o.Config.DefaultQueue, ev.Queue}
			qs, err := c.QueueList(ctx)
			if err != nil {
				pauseErr = err
			}
			for _, q := range qs {
				names = append(names, q.Name)
			}
			for _, q := range names {
				if q == "" {
					continue
				}
				if err := c.QueuePause(ctx, q, nil); err != nil && pauseErr == nil {
					pauseErr = err
				}
			}
			close(started)
		})
	})
	defer unsubscribe()

	// The handler's Claim and heartbeat calls, as it makes them.
	var calls struct {
		sync.Mutex
		claims     []ClaimCall
		heartbeats []HeartbeatCall
	}
	defer stubs.SetRecorder(c, func(call stubs.JobCall) {
		idMu.Lock()
		mine := call.JobID == id
		idMu.Unlock()
		if !mine {
			return
		}
		calls.Lock()
		defer calls.Unlock()
		if call.Claim {
			calls.claims = append(calls.claims, ClaimCall{Key: call.Key, Won: call.Won, Err: call.Err})
		} else {
			calls.heartbeats = append(calls.heartbeats, HeartbeatCall{At: clk.Now(), Message: call.Message, Err: call.Err})
		}
	})()

	// The job is inserted before its type is registered, so no attempt
	// can start before the subscription knows its id.
	ins := hopper.InsertOpts{}
	if o.Insert != nil {
		ins = *o.Insert
	}
	ins.Delay, ins.RunAt = 0, time.Time{}
	h, err := typ.Enqueue(ctx, c, in, &ins)
	if err != nil {
		t.Fatalf("hoppertest: work %s: enqueue: %v", typ.Name(), err)
	}
	idMu.Lock()
	id = h.ID()
	idMu.Unlock()
	if err := c.Register(typ); err != nil {
		t.Fatalf("hoppertest: work %s: %v", typ.Name(), err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-started:
	case <-wait.Done():
		t.Fatalf("hoppertest: work %s: the attempt never started (is its queue paused?)", typ.Name())
	}
	if pauseErr != nil {
		t.Fatalf("hoppertest: work %s: pause the queues: %v", typ.Name(), pauseErr)
	}
	// Until the attempt is recorded, moving the clock while it waits on it
	// (Retry, a heartbeat timeout); the paused queues keep the rest still.
	if err := runUntil(ctx, c, clk, (*RunOpts)(nil).withDefaults(), nil); err != nil {
		t.Fatalf("hoppertest: work %s: %v", typ.Name(), err)
	}
	w := worked(t, c, typ, h)
	calls.Lock()
	w.Claims, w.Heartbeats = calls.claims, calls.heartbeats
	calls.Unlock()
	return w
}

// worked reads what the attempt of h left.
func worked[I, O any](t T, c *hopper.Client, typ *hopper.Type[I, O], h *hopper.Handle[O]) *Worked[O] {
	t.Helper()
	ctx := context.Background()
	row, err := c.JobGet(ctx, h.ID())
	if err != nil {
		t.Fatalf("hoppertest: work %s: %v", typ.Name(), err)
	}
	w := &Worked[O]{Job: row}
	if row.State == hopper.StateSucceeded {
		if w.Output, err = h.Result(ctx); err != nil {
			t.Fatalf("hoppertest: work %s: output: %v", typ.Name(), err)
		}
	}
	attempts, err := c.JobAttempts(ctx, h.ID())
	if err != nil {
		t.Fatalf("hoppertest: work %s: attempts: %v", typ.Name(), err)
	}
	if len(attempts) > 0 {
		w.Attempt = attempts[len(attempts)-1]
	}
	for cursor := ""; ; {
		page, err := c.JobList(ctx, &hopper.ListParams{ParentID: h.ID(), Cursor: cursor, Limit: 500})
		if err != nil {
			t.Fatalf("hoppertest: work %s: children: %v", typ.Name(), err)
		}
		w.Spawned = append(w.Spawned, page.Jobs...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return w
}
