package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// TestPauseRefusesUnknownNames: a queue no job, worker or pause has named,
// and a schedule nobody knows, are refused (the typo is not stored) unless
// PauseOpts.Create; a name a job, a worker's row or the store knows is
// paused.
func TestPauseRefusesUnknownNames(t *testing.T) { forEachDriver(t, testPauseRefusesUnknownNames) }

func testPauseRefusesUnknownNames(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	ctx := testCtx(t)
	d := newDriver(t)
	add := hopper.Define("add", addHandler, nil)
	// A worker process serving the reports queue, and an unstarted admin
	// client as the command line makes one.
	worker := newClient(t, hopper.Config{Driver: d, Queues: []string{"reports"}})
	require.NoError(t, worker.Register(add))
	admin, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)

	err = admin.QueuePause(ctx, "nosuch", nil)
	require.ErrorIs(t, err, hopper.ErrNotFound)
	var unknown *hopper.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "queue", unknown.Kind)
	require.Contains(t, unknown.Known, "reports", "the error lists the queues in use")
	require.Contains(t, err.Error(), `"nosuch"`)
	require.ErrorIs(t, admin.QueueResume(ctx, "nosuch"), hopper.ErrNotFound)
	qs, err := admin.QueueList(ctx)
	require.NoError(t, err)
	for _, q := range qs {
		require.NotEqual(t, "nosuch", q.Name, "a refused pause stores nothing")
	}

	require.NoError(t, admin.QueuePause(ctx, "reports", nil), "a worker serves it")
	require.NoError(t, admin.QueueResume(ctx, "reports"))
	require.NoError(t, admin.QueuePause(ctx, hopper.DefaultQueue, nil), "the default queue")
	require.NoError(t, admin.QueueResume(ctx, hopper.DefaultQueue))
	_, err = add.Enqueue(ctx, admin, addIn{A: 1}, &hopper.InsertOpts{Queue: "emails", Delay: 1 << 40})
	require.NoError(t, err)
	require.NoError(t, admin.QueuePause(ctx, "emails", nil), "a job names it")
	require.NoError(t, admin.QueuePause(ctx, "later", &hopper.PauseOpts{Create: true}), "created ahead of its first job")
	require.NoError(t, admin.QueueResume(ctx, "later"), "its stored state names it now")

	err = admin.SchedulePause(ctx, "typo", nil)
	require.ErrorIs(t, err, hopper.ErrNotFound)
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "schedule", unknown.Kind)
	require.ErrorIs(t, admin.ScheduleResume(ctx, "typo"), hopper.ErrNotFound)
	infos, err := admin.ScheduleList(ctx)
	require.NoError(t, err)
	require.Empty(t, infos, "a refused pause stores nothing")
	require.NoError(t, admin.SchedulePause(ctx, "nightly", &hopper.PauseOpts{Create: true}))
	require.NoError(t, admin.ScheduleResume(ctx, "nightly"))
	require.NoError(t, admin.SchedulePause(ctx, "nightly", nil), "the store keeps it now")
	err = admin.SchedulePause(ctx, "nightlt", nil)
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, []string{"nightly"}, unknown.Known, "the error lists the schedules known")
}

// TestCheckScheduleTarget: a stored schedule's type or workflow must be
// registered by a worker (this client, or a process whose worker row the
// store keeps); the error lists the registered ones.
func TestCheckScheduleTarget(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	// A worker process: its row reports the types it registered by Start.
	worker, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, worker.Register(hopper.Define("add", addHandler, nil)))
	require.NoError(t, worker.Start(ctx))
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })
	admin, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)

	types, workflows, err := admin.Registered(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"add"}, types)
	require.Empty(t, workflows)
	require.NoError(t, admin.ScheduleCheckTarget(ctx, hopper.StoredSchedule{Name: "s", Cron: "@daily", Type: "add"}))
	err = admin.ScheduleCheckTarget(ctx, hopper.StoredSchedule{Name: "s", Cron: "@daily", Type: "ad"})
	require.ErrorIs(t, err, hopper.ErrUnknownType)
	var unknown *hopper.UnknownTargetError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, []string{"add"}, unknown.Registered)
	require.Contains(t, err.Error(), `"ad"`)
	require.Contains(t, err.Error(), "add", "the message lists the registered types")
	err = admin.ScheduleCheckTarget(ctx, hopper.StoredSchedule{Name: "s", Cron: "@daily", Workflow: "add"})
	require.ErrorAs(t, err, &unknown)
	require.True(t, unknown.Workflow, "a job type is not a workflow")
	require.NoError(t, admin.ScheduleDefine(ctx, hopper.StoredSchedule{Name: "s", Cron: "@daily", Type: "ad", Input: json.RawMessage(`1`)}),
		"ScheduleDefine itself does not check: a schedule may come before its deploy")
	require.False(t, errors.Is(admin.ScheduleCheckTarget(ctx, hopper.StoredSchedule{}), hopper.ErrUnknownType))
}

// TestSchedulesRegisteredElsewhere: a client that does not run a schedule
// lists it as registered, with the runner's catch-up, while a started
// client runs it, as the runner itself lists it; no longer once the runner
// stops. It runs in a synctest bubble: synctest.Wait returns once the
// runner is idle, its row written.
func TestSchedulesRegisteredElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := testCtx(t)
		d := memdriver.New()
		defer d.Close()
		// Heartbeats an hour apart: only a change reports the row meanwhile.
		runner, err := hopper.New(hopper.Config{Driver: d, Visibility: 3 * time.Hour})
		require.NoError(t, err)
		stop, err := runner.Schedule(hopper.Schedule{Name: "nightly", Cron: "0 3 * * *", CatchUp: 5 * time.Minute,
			Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
		require.NoError(t, err)
		defer stop()
		require.NoError(t, runner.Start(ctx)) // its worker row reports the schedule
		defer func() { require.NoError(t, runner.Stop(ctx)) }()
		admin, err := hopper.New(hopper.Config{Driver: d})
		require.NoError(t, err)

		synctest.Wait()
		seen, err := admin.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, seen, 1, "the store keeps the schedule")
		own, err := runner.ScheduleList(ctx)
		require.NoError(t, err)
		require.True(t, seen[0].Registered, "a started client runs it")
		require.Equal(t, 5*time.Minute, seen[0].CatchUp)
		require.Equal(t, own[0].Registered, seen[0].Registered)
		require.Equal(t, own[0].CatchUp, seen[0].CatchUp)

		// One registered after Start is reported without waiting for a
		// heartbeat.
		stopLater, err := runner.Schedule(hopper.Schedule{Name: "hourly", Cron: "@hourly",
			Job: func(time.Time) (*hopper.JobSpec, error) { return nil, nil }})
		require.NoError(t, err)
		defer stopLater()
		synctest.Wait()
		seen, err = admin.ScheduleList(ctx)
		require.NoError(t, err)
		require.Len(t, seen, 2)
		require.Equal(t, "hourly", seen[0].Name)
		require.True(t, seen[0].Registered, "the runner's row reports the new schedule")

		require.NoError(t, runner.Stop(ctx))
		seen, err = admin.ScheduleList(ctx)
		require.NoError(t, err)
		require.False(t, seen[1].Registered, "no started client runs it")
		require.Zero(t, seen[1].CatchUp)
	})
}
