package hopper_test

import (
	"context"
	"errors"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// TestValidateID: the ids a caller may give are 1–255 bytes of printable
// UTF-8 without / ? # \, "..", control characters or NUL, and not ending
// as hopper's derived ids do: '@', '.' or ".a" and digits.
func TestValidateID(t *testing.T) {
	t.Parallel()
	good := []string{
		"a", "order-1", "order_1.v2", "01J9Z3Q4", "user@example.com", "a:b;c=d&e+f", "café", "日本語", "a b",
		"~tilde", "%41", "x.y.z", ".hidden", "trailing.", strings.Repeat("x", 255), strings.Repeat("é", 127),
		"12345", "order-2", "o@x", "o@", "o.a", "o.b5", "o.ab5", "o@2x", "o.5x", "o.a5.pdf", "v1.2-beta", "a@b@c",
	}
	for _, id := range good {
		if err := hopper.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{
		"", strings.Repeat("x", 256), strings.Repeat("é", 128),
		"a/b", "/", "a?b", "a#b", `a\b`, "..", "a..b", "../etc", "a/..", ".",
		"a\x00b", "\x00", "a\nb", "a\tb", "a\rb", "\x7f", "a\u0085b", "a\u200bb", "a\u2028b", "a\ufeffb",
		"\xff", "a\xc3", "\xed\xa0\x80",
		"o@2", "o.5", "o.a5", "o@12", "o.a0", "ada@example.com@2", "order.v1.2", "o@2.a3", "@1", ".5", ".a5",
	}
	for _, id := range bad {
		err := hopper.ValidateID(id)
		if !errors.Is(err, hopper.ErrInvalidInput) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidInput", id, err)
		}
	}
}

// FuzzValidateID: an id ValidateID takes is within its length, valid
// UTF-8, one clean URL path segment once escaped, and an id it refuses is
// refused with ErrInvalidInput.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"a", "order-1", "a/b", "..", "a\x00", "\xff", "é", "a b", ".", "%2F", "a\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := hopper.ValidateID(id)
		if err != nil {
			if !errors.Is(err, hopper.ErrInvalidInput) {
				t.Fatalf("ValidateID(%q) = %v, not ErrInvalidInput", id, err)
			}
			return
		}
		if len(id) < 1 || len(id) > hopper.MaxIDLength || !utf8.ValidString(id) {
			t.Fatalf("ValidateID took %q (%d bytes)", id, len(id))
		}
		if strings.ContainsAny(id, "/?#\\\x00") || strings.Contains(id, "..") {
			t.Fatalf("ValidateID took %q", id)
		}
		seg := url.PathEscape(id)
		if p := "/v1/jobs/" + seg; path.Clean(p) != p {
			t.Fatalf("ValidateID took %q, which is not a clean path segment (%s)", id, p)
		}
		if back, err := url.PathUnescape(seg); err != nil || back != id {
			t.Fatalf("ValidateID took %q, which does not survive a URL (%q, %v)", id, back, err)
		}
	})
}

// requireInvalid asserts err matches ErrInvalidInput and carries no
// store text.
func requireInvalid(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, hopper.ErrInvalidInput, msgAndArgs...)
	require.NotContains(t, err.Error(), "SQLSTATE", msgAndArgs...)
	require.NotContains(t, err.Error(), "driver", msgAndArgs...)
}

// TestCallerIDsAreChecked: every way a caller gives an id — a job's
// (Enqueue, EnqueueMany, EnqueueTx, EnqueueName, Spawn), a run's (Start,
// StartTx, StartName, a child's) or a schedule's name — refuses one that breaks
// ValidateID's rule with ErrInvalidInput, storing nothing; ids hopper
// derives from a caller's (an activity's, a child's) are not held to it.
func TestCallerIDsAreChecked(t *testing.T) {
	t.Parallel()
	d, err := sqlitedriver.Open(t.TempDir()+"/ids.db", &sqlitedriver.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	ctx := testCtx(t)
	add := hopper.Define("add", addHandler, nil)
	wf := hopper.Workflow("wf", func(wf hopper.WorkflowContext, in int) (int, error) { return in, nil }, nil)
	c := idleClient(t, d, add, wf)
	badIDs := []string{"a/b", "a..b", "a?b", "a#b", `a\b`, "a\x00b", "a\nb", strings.Repeat("x", 256), "\xff"}
	// Ids ending as the ids hopper derives: refused for jobs and runs; a
	// schedule names no job or run, and may be named so.
	derived := []string{"o@2", "o.5", "o.a5"}
	for _, id := range append(slices.Clone(badIDs), derived...) {
		o := &hopper.InsertOpts{ID: id}
		_, err := add.Enqueue(ctx, c, addIn{}, o)
		requireInvalid(t, err, "Enqueue %q", id)
		_, err = c.EnqueueMany(ctx, add.Job(addIn{}, nil), add.Job(addIn{}, o))
		requireInvalid(t, err, "EnqueueMany %q", id)
		_, err = c.EnqueueName(ctx, "add", []byte(`{}`), o)
		requireInvalid(t, err, "EnqueueName %q", id)
		tx, err := d.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = add.EnqueueTx(ctx, c, tx, addIn{}, o)
		requireInvalid(t, err, "EnqueueTx %q", id)
		_, err = wf.StartTx(ctx, c, tx, 1, &hopper.StartOpts{ID: id})
		requireInvalid(t, err, "StartTx %q", id)
		require.NoError(t, tx.Rollback())
		_, err = wf.Start(ctx, c, 1, &hopper.StartOpts{ID: id})
		requireInvalid(t, err, "Start %q", id)
		_, err = c.StartName(ctx, "wf", []byte(`1`), &hopper.StartOpts{ID: id})
		requireInvalid(t, err, "StartName %q", id)
		if slices.Contains(derived, id) {
			continue
		}
		_, err = c.Schedule(hopper.Schedule{Name: id, Cron: "* * * * *", Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
		requireInvalid(t, err, "Schedule %q", id)
		err = c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: id, Cron: "* * * * *", Type: "add"})
		requireInvalid(t, err, "ScheduleDefine %q", id)
	}
	page, err := c.JobList(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "nothing stored")
	scheds, err := c.ScheduleList(ctx)
	require.NoError(t, err)
	require.Empty(t, scheds)
	for _, id := range derived {
		_, err = c.Schedule(hopper.Schedule{Name: id, Cron: "* * * * *", Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
		require.NoError(t, err, "Schedule %q", id)
		require.NoError(t, c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "stored-" + id, Cron: "* * * * *", Type: "add"}), "ScheduleDefine %q", id)
	}
}

// TestCallerIDsAreCheckedInWorkers: Spawn and Child refuse a bad id given
// in code that runs in a worker (one that is no URL path segment, one that
// ends as a derived id), and an activity's id, derived from a run
// id of the longest length, is not refused.
func TestCallerIDsAreCheckedInWorkers(t *testing.T) { forEachDriver(t, testCallerIDsInWorkers) }

func testCallerIDsInWorkers(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	spawner := hopper.Define("spawner", func(ctx context.Context, id string) (string, error) {
		err := hopper.JobFromContext(ctx).Spawn(add.Job(addIn{}, &hopper.InsertOpts{ID: id}))
		if errors.Is(err, hopper.ErrInvalidInput) {
			return "refused", nil
		}
		return "", err
	}, nil)
	child := hopper.Workflow("child", func(wf hopper.WorkflowContext, in int) (int, error) { return in, nil }, nil)
	parent := hopper.Workflow("parent", func(wf hopper.WorkflowContext, id string) (int, error) {
		_, err := hopper.Child(wf, child, 1, &hopper.ChildOpts{ID: id})
		if !errors.Is(err, hopper.ErrInvalidInput) {
			return 0, errors.New("child id not refused")
		}
		return hopper.Activity(wf, add, addIn{A: 2, B: 3}, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(add, spawner, child, parent))
	ctx := testCtx(t)
	for _, id := range []string{"a/b", "a.a3"} {
		h, err := spawner.Enqueue(ctx, c, id, nil)
		require.NoError(t, err)
		v, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, "refused", v, "Spawn %q", id)
	}
	// A child's id ending as a derived one.
	ph, err := parent.Start(ctx, c, "kid@2", nil)
	require.NoError(t, err)
	n, err := ph.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n)

	// The run's id is as long as an id may be: its activity's is longer.
	long := strings.Repeat("r", hopper.MaxIDLength-1) + "."
	rh, err := parent.Start(ctx, c, "x..y", &hopper.StartOpts{ID: long})
	require.NoError(t, err)
	n, err = rh.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

// TestStoreNeverSeesBadStrings: a NUL byte or invalid UTF-8 in any string
// that would reach the store, a priority past 32 bits, a time past year
// 9999 or a negative cursor is refused by hopper before the store sees
// it, on every driver: ErrInvalidInput naming the field, never the store's
// own error (PostgreSQL refuses NUL in text with SQLSTATE 22021), and
// nothing stored.
func TestStoreNeverSeesBadStrings(t *testing.T) { forEachDriver(t, testStoreNeverSeesBadStrings) }

func testStoreNeverSeesBadStrings(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	add := hopper.Define("add", addHandler, nil)
	wf := hopper.Workflow("wf", func(wf hopper.WorkflowContext, in int) (int, error) { return in, nil }, nil)
	c := idleClient(t, newDriver(t), add, wf)
	ctx := testCtx(t)
	far := time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, bad := range []string{"a\x00b", "a\xffb"} {
		enq := func(o *hopper.InsertOpts) error { _, err := add.Enqueue(ctx, c, addIn{}, o); return err }
		cases := map[string]error{
			"queue":           enq(&hopper.InsertOpts{Queue: bad}),
			"group":           enq(&hopper.InsertOpts{Group: bad}),
			"unique key":      enq(&hopper.InsertOpts{UniqueKey: bad}),
			"concurrency key": enq(&hopper.InsertOpts{ConcurrencyKey: bad, ConcurrencyLimit: 1}),
			"metadata key":    enq(&hopper.InsertOpts{Metadata: map[string]string{bad: "v"}}),
			"metadata value":  enq(&hopper.InsertOpts{Metadata: map[string]string{"k": bad}}),
			"type name":       func() error { _, err := hopper.Define(bad, addHandler, nil).Enqueue(ctx, c, addIn{}, nil); return err }(),
			"register":        c.Register(hopper.Define(bad, addHandler, nil)),
			"workflow name":   c.Register(hopper.Workflow(bad, func(hopper.WorkflowContext, int) (int, error) { return 0, nil }, nil)),
			"start by name":   func() error { _, err := c.StartName(ctx, "wf", []byte(`1`), &hopper.StartOpts{Queue: bad}); return err }(),
			"gate on": func() error {
				_, err := c.EnqueueMany(ctx, hopper.Gate([]string{bad}, []*hopper.JobSpec{add.Job(addIn{}, nil)}, hopper.Condition{}, 0))
				return err
			}(),
			"get":              func() error { _, err := c.JobGet(ctx, bad); return err }(),
			"cancel":           func() error { _, err := c.JobCancel(ctx, bad); return err }(),
			"retry":            func() error { _, err := c.JobRetry(ctx, bad); return err }(),
			"reopen":           func() error { _, err := c.JobReopen(ctx, bad); return err }(),
			"attempts":         func() error { _, err := c.JobAttempts(ctx, bad); return err }(),
			"job changes":      func() error { _, err := c.JobChanges(ctx, bad); return err }(),
			"wait":             func() error { _, err := c.JobWait(ctx, bad); return err }(),
			"wait group":       func() error { _, err := c.GroupWait(ctx, bad); return err }(),
			"group status":     func() error { _, err := c.GroupGet(ctx, bad); return err }(),
			"handle":           func() error { _, err := hopper.HandleFor(c, add, bad).Result(ctx); return err }(),
			"redrive ids":      func() error { _, err := c.JobRedrive(ctx, &hopper.RedriveParams{IDs: []string{bad}}); return err }(),
			"redrive type":     func() error { _, err := c.JobRedrive(ctx, &hopper.RedriveParams{Type: bad}); return err }(),
			"list types":       func() error { _, err := c.JobList(ctx, &hopper.ListParams{Types: []string{bad}}); return err }(),
			"list queues":      func() error { _, err := c.JobList(ctx, &hopper.ListParams{Queues: []string{bad}}); return err }(),
			"list group":       func() error { _, err := c.JobList(ctx, &hopper.ListParams{GroupID: bad}); return err }(),
			"list parent":      func() error { _, err := c.JobList(ctx, &hopper.ListParams{ParentID: bad}); return err }(),
			"list cursor":      func() error { _, err := c.JobList(ctx, &hopper.ListParams{Cursor: bad}); return err }(),
			"pause queue":      c.QueuePause(ctx, bad, &hopper.PauseOpts{Create: true}),
			"resume queue":     c.QueueResume(ctx, bad),
			"get run":          func() error { _, err := c.RunGet(ctx, bad); return err }(),
			"wait run":         func() error { _, err := c.RunWait(ctx, bad); return err }(),
			"cancel run":       c.RunCancel(ctx, bad),
			"history":          func() error { _, err := c.RunHistory(ctx, bad); return err }(),
			"read stream":      func() error { _, err := c.StreamRead(ctx, bad, 0, 10); return err }(),
			"query workflow":   func() error { _, err := runsOf(c.RunList(ctx, &hopper.RunQuery{Workflow: bad})); return err }(),
			"query parent":     func() error { _, err := runsOf(c.RunList(ctx, &hopper.RunQuery{ParentID: bad})); return err }(),
			"resume hook":      c.HookResume(ctx, bad, []byte(`1`)),
			"pause schedule":   c.SchedulePause(ctx, bad, &hopper.PauseOpts{Create: true}),
			"resume schedule":  c.ScheduleResume(ctx, bad),
			"delete schedule":  c.ScheduleDelete(ctx, bad),
			"stored cron":      c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: bad, Type: "add"}),
			"stored type":      c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "* * * * *", Type: bad}),
			"stored location":  c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "* * * * *", Type: "add", Location: bad}),
			"observer name":    c.Observe(bad, hopper.AfterCommit, hopper.ChangeFilter{}, func(context.Context, hopper.Change) error { return nil }),
			"observer types":   c.Observe("o1", hopper.AfterCommit, hopper.ChangeFilter{Types: []string{bad}}, func(context.Context, hopper.Change) error { return nil }),
			"observer states":  c.Observe("o2", hopper.AfterCommit, hopper.ChangeFilter{States: []string{bad}}, func(context.Context, hopper.Change) error { return nil }),
			"config queue":     func() error { _, err := hopper.New(hopper.Config{Driver: newDriver(t), DefaultQueue: bad}); return err }(),
			"config worker id": func() error { _, err := hopper.New(hopper.Config{Driver: newDriver(t), WorkerID: bad}); return err }(),
		}
		for name, err := range cases {
			requireInvalid(t, err, "%s with %q", name, bad)
		}
	}
	// Numbers and times the stores cannot keep.
	for name, err := range map[string]error{
		"priority": func() error {
			_, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Priority: 1 << 40})
			return err
		}(),
		"negative priority": func() error {
			_, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Priority: -1 << 40})
			return err
		}(),
		"run priority":   func() error { _, err := wf.Start(ctx, c, 1, &hopper.StartOpts{Priority: 1 << 40}); return err }(),
		"run at":         func() error { _, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{RunAt: far}); return err }(),
		"deadline":       func() error { _, err := add.Enqueue(ctx, c, addIn{}, &hopper.InsertOpts{Deadline: far}); return err }(),
		"queued after":   func() error { _, err := c.JobList(ctx, &hopper.ListParams{QueuedAfter: far}); return err }(),
		"started before": func() error { _, err := runsOf(c.RunList(ctx, &hopper.RunQuery{StartedBefore: far})); return err }(),
		"change cursor":  func() error { _, err := c.ChangeList(ctx, hopper.ChangeCursor{Tx: -1}, 10); return err }(),
	} {
		requireInvalid(t, err, name)
	}
	page, err := c.JobList(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, page.Jobs, "nothing stored")
	runs, err := runsOf(c.RunList(ctx, nil))
	require.NoError(t, err)
	require.Empty(t, runs)
}

// TestWorkerCodeNeverSendsBadStrings: code that runs in a worker gets
// ErrInvalidInput for a NUL byte in a heartbeat message, a claim key or a
// step name, and for a sleep past year 9999, on every driver; a snooze
// past year 9999 waits until then instead of failing in the store.
func TestWorkerCodeNeverSendsBadStrings(t *testing.T) {
	forEachDriver(t, testWorkerCodeNeverSendsBadStrings)
}

func testWorkerCodeNeverSendsBadStrings(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	far := time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)
	check := func(what string, err error) error {
		if !errors.Is(err, hopper.ErrInvalidInput) || strings.Contains(err.Error(), "SQLSTATE") {
			return hopper.Abort(errors.New(what + ": " + errString(err)))
		}
		return nil
	}
	job := hopper.Define("job", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		j := hopper.JobFromContext(ctx)
		if err := check("heartbeat", j.HeartbeatMessage(ctx, "a\x00b")); err != nil {
			return hopper.None{}, err
		}
		_, err := j.Claim(ctx, "a\x00b")
		return hopper.None{}, check("claim", err)
	}, nil)
	snoozer := hopper.Define("snoozer", func(ctx context.Context, _ hopper.None) (hopper.None, error) {
		return hopper.None{}, hopper.SnoozeUntil(far)
	}, nil)
	wf := hopper.Workflow("wf", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		_, err := hopper.Step(wf, "a\x00b", func(context.Context) (int, error) { return 1, nil }, nil)
		if err := check("step", err); err != nil {
			return 0, err
		}
		if err := check("sleep", wf.SleepUntil(far)); err != nil {
			return 0, err
		}
		return hopper.Step(wf, "ok", func(context.Context) (int, error) { return 7, nil }, nil)
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, c.Register(job, snoozer, wf))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.NoError(t, err)
	rh, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	n, err := rh.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, n)

	deferred := make(chan hopper.Event, 1)
	unsubscribe := c.Subscribe(func(ev hopper.Event) {
		if ev.Kind == hopper.EventDeferred && ev.Type == "snoozer" {
			select {
			case deferred <- ev:
			default:
			}
		}
	})
	defer unsubscribe()
	sh, err := snoozer.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	select {
	case ev := <-deferred:
		require.Equal(t, 9999, ev.RunAt.Year(), "deferred to the last storable year")
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	row, err := c.JobGet(ctx, sh.ID())
	require.NoError(t, err)
	require.Equal(t, hopper.StateScheduled, row.State)
	require.Equal(t, 9999, row.RunAt.Year())
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
