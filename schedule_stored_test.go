package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// tickInputs returns the inputs of the tick jobs the store holds, by value.
func tickInputs(t *testing.T, c *hopper.Client) map[int64]int {
	t.Helper()
	page, err := c.JobList(testCtx(t), &hopper.ListParams{Types: []string{tickJob.Name()}, Limit: hopper.MaxListLimit})
	require.NoError(t, err)
	out := map[int64]int{}
	for _, j := range page.Jobs {
		var v int64
		require.NoError(t, json.Unmarshal(j.Input, &v))
		out[v]++
	}
	return out
}

// runsStored reports whether c runs the stored schedule name with input.
func runsStored(t *testing.T, c *hopper.Client, name, input string) bool {
	t.Helper()
	infos, err := c.ScheduleList(testCtx(t))
	require.NoError(t, err)
	for _, in := range infos {
		if in.Name == name && in.Registered && in.Stored && string(in.Input) == input {
			return true
		}
	}
	return false
}

// runsHere waits until c, on spy, runs the stored schedule name with
// input: a schedule starts running before its registration reaches the
// store.
func runsHere(t *testing.T, c *hopper.Client, spy *storeSpy, name, input string) {
	t.Helper()
	await(t, "the client runs stored schedule "+name, func() bool { return runsStored(t, c, name, input) }, spy.answered.next)
}

// TestStoredScheduleOncePerOccurrence: a schedule defined in the store by a
// client that does not run the type (as the CLI does) is picked up by two
// processes that register the type, and each occurrence enqueues its job
// once, on every driver.
func TestStoredScheduleOncePerOccurrence(t *testing.T) {
	forEachDriver(t, func(t *testing.T, newDriver func(*testing.T) driver.Driver) {
		d := spyOn(newDriver(t))
		clk := hoppertest.NewClock(time.Time{})
		start := clk.Now()
		ctx := testCtx(t)
		var clients [2]*hopper.Client
		for i := range clients {
			clients[i] = newClient(t, hopper.Config{Driver: d, Clock: clk, Visibility: 72 * time.Hour, PollInterval: 10 * time.Millisecond})
			require.NoError(t, clients[i].Register(tickJob))
		}
		admin, err := hopper.New(hopper.Config{Driver: d, Clock: clk})
		require.NoError(t, err)
		require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "stored-tick", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`7`)}))
		for _, c := range clients {
			runsHere(t, c, d, "stored-tick", "7")
		}
		// recorded waits until the occurrence at is recorded, in a
		// transaction.
		recorded := func(at time.Time) {
			t.Helper()
			await(t, "the occurrence at "+at.Format(time.TimeOnly)+" recorded", func() bool {
				rows, err := d.ScheduleList(ctx, &driver.ScheduleListParams{})
				require.NoError(t, err)
				return len(rows) == 1 && rows[0].LastAt.Equal(at)
			}, d.answered.next)
		}
		// The clock starts on an occurrence, which fires too: let it be
		// recorded before the clock moves on.
		recorded(start)
		const minutes = 4
		for m := 1; m <= minutes; m++ {
			at := start.Add(time.Duration(m) * time.Minute)
			clk.AdvanceTo(at)
			recorded(at)
		}
		for _, c := range clients {
			require.NoError(t, c.Stop(testCtx(t)))
		}
		require.Equal(t, map[int64]int{7: minutes + 1}, tickInputs(t, clients[0]), "one job per occurrence")
		infos, err := admin.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		in := infos[0]
		require.True(t, in.Stored)
		require.False(t, in.Registered, "the admin client does not run it")
		require.Equal(t, tickJob.Name(), in.Type)
		require.Equal(t, "* * * * *", in.Cron)
		require.Equal(t, int64(minutes+1), in.Occurrences)
		require.Equal(t, time.Minute, in.CatchUp)
	})
}

// TestStoredScheduleRedefineAndDelete: defining a stored schedule again
// changes what its next occurrence enqueues; a pause applies as to any
// schedule; deleting it stops it.
// It runs in a synctest bubble: synctest.Wait returns once the client is
// idle, what the clock's move set off done.
func TestStoredScheduleRedefineAndDelete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Half past a minute, and on time only: no occurrence is due at start.
		clk := hoppertest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
		c := startedClient(t, nil, clk)
		d := c.Driver()
		ctx := testCtx(t)
		minute := func(m int) time.Time { return time.Date(2030, 1, 1, 0, m, 0, 0, time.UTC) }
		define := func(input string) {
			t.Helper()
			require.NoError(t, c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "* * * * *", CatchUp: -1, Type: tickJob.Name(), Input: json.RawMessage(input)}))
			synctest.Wait()
			require.True(t, runsStored(t, c, "s", input), "the client runs the definition")
		}
		// at moves the clock to minute m and, once the client is idle, checks
		// that its occurrence was recorded (counted, or skipped while paused).
		at := func(m int) {
			t.Helper()
			clk.AdvanceTo(minute(m))
			synctest.Wait()
			rows, err := d.Executor().ScheduleList(ctx, &driver.ScheduleListParams{})
			require.NoError(t, err)
			require.Len(t, rows, 1)
			require.False(t, rows[0].NextAt.Before(minute(m+1)), "the occurrence of minute %s recorded", minute(m).Format(time.TimeOnly))
		}
		define("1")
		at(1)
		require.Equal(t, map[int64]int{1: 1}, tickInputs(t, c))
		define("2")
		at(2)
		require.Equal(t, map[int64]int{1: 1, 2: 1}, tickInputs(t, c))
		require.NoError(t, c.SchedulePause(ctx, "s", nil))
		at(3)
		require.NoError(t, c.ScheduleResume(ctx, "s"))
		at(4)
		require.Equal(t, map[int64]int{1: 1, 2: 2}, tickInputs(t, c), "nothing while paused")
		infos, err := c.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		require.Equal(t, int64(3), infos[0].Occurrences)

		require.NoError(t, c.ScheduleDelete(ctx, "s"))
		infos, err = c.ScheduleList(ctx)
		require.NoError(t, err)
		require.Empty(t, infos, "deleted, and no longer run here")
		clk.AdvanceTo(minute(10))
		synctest.Wait() // a schedule that wrongly kept running has fired by now
		require.NoError(t, c.Stop(ctx))
		require.Equal(t, map[int64]int{1: 1, 2: 2}, tickInputs(t, c), "nothing after the delete")
	})
}

// TestStoredScheduleBadInput: malformed definitions are refused with
// ErrInvalidInput and store nothing, as is the name of a schedule
// registered in code.
// It runs in a synctest bubble: synctest.Wait returns once the client is
// idle, its schedule's registration stored.
func TestStoredScheduleBadInput(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Time{})
		c := startedClient(t, nil, clk)
		ctx := testCtx(t)
		_, err := c.Schedule(hopper.Schedule{Name: "in-code", Cron: "@hourly", Job: (&jobCalls{}).job})
		require.NoError(t, err)
		for name, s := range map[string]hopper.StoredSchedule{
			"no name":         {Cron: "* * * * *", Type: "tick"},
			"no cron":         {Name: "a", Type: "tick"},
			"bad cron":        {Name: "a", Cron: "61 * * * *", Type: "tick"},
			"bad zone":        {Name: "a", Cron: "* * * * *", Location: "Mars/Olympus", Type: "tick"},
			"no target":       {Name: "a", Cron: "* * * * *"},
			"two targets":     {Name: "a", Cron: "* * * * *", Type: "tick", Workflow: "nightly-wf"},
			"not JSON":        {Name: "a", Cron: "* * * * *", Type: "other", Input: json.RawMessage(`{`)},
			"undecodable":     {Name: "a", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`"text"`)},
			"a code schedule": {Name: "in-code", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`1`)},
			"local zone":      {Name: "a", Cron: "* * * * *", Location: "Local", Type: "tick"},
			"zone in cron":    {Name: "a", Cron: "CRON_TZ=Local * * * * *", Type: "tick"},
			"long catch-up":   {Name: "a", Cron: "@every 1s", CatchUp: 1000 * time.Hour, Type: "tick"},
			"oversized":       {Name: "a", Cron: "* * * * *", Type: "other", Input: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)},
		} {
			require.ErrorIs(t, c.ScheduleDefine(ctx, s), hopper.ErrInvalidInput, name)
		}
		synctest.Wait()
		infos, err := c.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		require.False(t, infos[0].UpdatedAt.IsZero(), "the code schedule stored")
		// Another process, which does not run it, finds the code schedule in
		// the store.
		other, err := hopper.New(hopper.Config{Driver: c.Driver(), Clock: clk})
		require.NoError(t, err)
		require.ErrorIs(t, other.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "in-code", Cron: "* * * * *", Type: "x"}), hopper.ErrInvalidInput)
		infos, err = c.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, infos, 1)
		require.False(t, infos[0].Stored)
	})
}

// TestStoredScheduleStartsRuns: a stored schedule of a workflow starts one
// run per occurrence, and a client started after the definition runs it
// before Start returns.
func TestStoredScheduleStartsRuns(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
	ctx := testCtx(t)
	admin, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
	require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "nightly", Cron: "* * * * *", CatchUp: -1,
		Workflow: nightlyWorkflow.Name(), Input: json.RawMessage(`42`)}))
	c, err := hopper.New(hopper.Config{Driver: admin.Driver(), Clock: clk, Visibility: 72 * time.Hour})
	require.NoError(t, err)
	require.NoError(t, c.Register(nightlyWorkflow))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	infos, err := c.ScheduleList(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.True(t, infos[0].Registered, "running when Start returned")
	require.Equal(t, nightlyWorkflow.Name(), infos[0].Workflow)

	changed := onEvents(t, c)
	clk.AdvanceTo(time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC))
	var runs []*hopper.RunInfo
	await(t, "the scheduled run completed", func() bool {
		var err error
		runs, err = runsOf(c.RunList(ctx, &hopper.RunQuery{Workflow: nightlyWorkflow.Name(), Statuses: []hopper.RunStatus{hopper.RunCompleted}}))
		require.NoError(t, err)
		return len(runs) == 1
	}, changed)
	require.JSONEq(t, `42`, string(runs[0].Output))
}

// TestStoredScheduleReports: a process reports, once, a stored schedule it
// registers the target of but cannot run (its input does not decode into
// the type, defined from a client that does not run it), and one whose name
// it registers in code, which runs its code's schedule instead.
// It runs in a synctest bubble: synctest.Wait returns once the client is
// idle, what it reports reported.
func TestStoredScheduleReports(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
		ctx := testCtx(t)
		admin, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
		require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "bad-input", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`"text"`)}))
		require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "clash", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`1`)}))
		var errs errorLog
		c := newClient(t, hopper.Config{Driver: admin.Driver(), Clock: clk, OnError: errs.hook, PollInterval: 10 * time.Millisecond})
		require.NoError(t, c.Register(tickJob))
		synctest.Wait()
		require.True(t, runsStored(t, c, "clash", "1"))
		_, err := c.Schedule(hopper.Schedule{Name: "clash", Cron: "@hourly", Job: (&jobCalls{}).job})
		require.NoError(t, err)
		// The clash shows at the next read of the stored schedules, every
		// five poll intervals of the wall clock: the bubble's, which moves
		// only while every goroutine in it waits.
		time.Sleep(5 * 10 * time.Millisecond)
		synctest.Wait()
		require.True(t, errs.has("stored schedule bad-input: this process cannot run it"), "reported: %v", errs.list())
		require.True(t, errs.has("schedule clash is registered in code and defined in the store"), "reported: %v", errs.list())
		// Three more reads of the stored schedules (a definition rereads them
		// before it returns).
		for i := range 3 {
			require.NoError(t, c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: fmt.Sprint("other-", i), Cron: "@daily", Workflow: "elsewhere"}))
		}
		n := 0
		for _, e := range errs.list() {
			if strings.Contains(e, "bad-input") || strings.Contains(e, "clash") {
				n++
			}
		}
		require.Equal(t, 2, n, "each reported once: %v", errs.list())
		infos, err := c.ScheduleList(ctx)
		require.NoError(t, err)
		for _, in := range infos {
			if in.Name == "clash" {
				require.Equal(t, "@hourly", in.Cron, "the code's schedule runs here")
			}
		}
	})
}

// TestStoredScheduleStaleDefinition: a process still running a definition
// replaced by another process enqueues nothing for it; the refused
// occurrence makes it read the store again, and the new definition takes
// the occurrence.
// It runs in a synctest bubble: synctest.Wait returns once the client is
// idle, the occurrence enqueued.
func TestStoredScheduleStaleDefinition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
		ctx := testCtx(t)
		admin, _ := hoppertest.NewClient(t, hopper.Config{Clock: clk})
		define := func(input string) {
			t.Helper()
			require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "* * * * *", CatchUp: -1, Type: tickJob.Name(), Input: json.RawMessage(input)}))
		}
		define("1")
		// A process that rereads the store only every 30 s: it runs the first
		// definition from its Start.
		c := newClient(t, hopper.Config{Driver: admin.Driver(), Clock: clk, Visibility: 72 * time.Hour, PollInterval: time.Hour})
		require.NoError(t, c.Register(tickJob))
		synctest.Wait()
		require.True(t, runsStored(t, c, "s", "1"))
		define("2")
		clk.AdvanceTo(time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC))
		synctest.Wait()
		require.NotEmpty(t, tickInputs(t, c), "the occurrence enqueued")
		require.NoError(t, c.Stop(ctx))
		require.Equal(t, map[int64]int{2: 1}, tickInputs(t, c), "the new definition's job only")
	})
}

// workerUpsertFails is a store whose worker rows cannot be written.
type workerUpsertFails struct {
	*memdriver.Driver
	baseExec
}

// Executor is the store itself.
func (d workerUpsertFails) Executor() driver.Executor { return d }

func (workerUpsertFails) WorkerUpsert(context.Context, *driver.WorkerUpsertParams) error {
	return errors.New("worker rows are read-only today")
}

// TestStartReportsOutsideItsLock: a report made while Start runs (here,
// the worker row it cannot write) reaches an OnError handler that calls
// the client back, and Start returns.
func TestStartReportsOutsideItsLock(t *testing.T) {
	t.Parallel()
	base := memdriver.New()
	d := workerUpsertFails{Driver: base, baseExec: base.Executor()}
	t.Cleanup(func() { _ = d.Close() })
	var c *hopper.Client
	reported := make(chan bool, 16)
	c, err := hopper.New(hopper.Config{Driver: d, OnError: func(err error, phase hopper.ErrorPhase) {
		if strings.Contains(err.Error(), "read-only today") {
			reported <- c.Started()
		}
	}})
	require.NoError(t, err)
	require.NoError(t, c.Start(testCtx(t)))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	select {
	case started := <-reported:
		require.True(t, started)
	case <-testCtx(t).Done():
		t.Fatal("no report")
	}
}

// TestStoredScheduleNotBeforeDefinition: a new stored schedule does not
// catch up an occurrence from before it was defined.
// It runs in a synctest bubble: synctest.Wait returns once the client is
// idle, the occurrence enqueued.
func TestStoredScheduleNotBeforeDefinition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := hoppertest.NewClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
		c := startedClient(t, nil, clk)
		ctx := testCtx(t)
		require.NoError(t, c.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "* * * * *", Type: tickJob.Name(), Input: json.RawMessage(`5`)}))
		synctest.Wait()
		require.True(t, runsStored(t, c, "s", "5"))
		clk.AdvanceTo(time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC))
		synctest.Wait()
		require.NotEmpty(t, tickInputs(t, c), "the first occurrence after the definition")
		require.NoError(t, c.Stop(ctx))
		infos, err := c.ScheduleList(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), infos[0].Occurrences, "00:00 was before the definition, within the catch-up")
		require.True(t, infos[0].Last.Equal(time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)))
		require.Equal(t, map[int64]int{5: 1}, tickInputs(t, c))
	})
}
