package pgdriver

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// runStart is a run and its job on queue q.
func runStart(q string) *driver.RunStartParams {
	job := newJob(q)
	run := &hoppertype.RunRow{ID: job.ID, Workflow: "wf", Status: hoppertype.RunPending, CodeVersion: "v1",
		CreatedAt: testBase, UpdatedAt: testBase}
	return &driver.RunStartParams{Run: run, Job: job}
}

// holdStarts marks a group in flight on d, so that starts queue behind
// it, and returns a channel that yields the queue's length as it grows
// and a release that lets the first queued start lead the rest.
func holdStarts(t *testing.T, d *Driver) (<-chan int, func()) {
	t.Helper()
	lengths := make(chan int, 100)
	g := &d.starts
	g.mu.Lock()
	require.False(t, g.leading)
	g.leading = true
	g.queued = func(n int) { lengths <- n }
	g.mu.Unlock()
	return lengths, func() {
		g.mu.Lock()
		g.handOn()
		g.mu.Unlock()
	}
}

// waitQueued reads lengths until the queue holds n starts.
func waitQueued(t *testing.T, lengths <-chan int, n int) {
	t.Helper()
	for got := range lengths {
		if got == n {
			return
		}
	}
}

// startAll starts each of ps from a goroutine of its own and returns their
// outcomes once all are back.
func startAll(ctx context.Context, d *Driver, ps []*driver.RunStartParams) ([]bool, []error) {
	existing, errs := make([]bool, len(ps)), make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { existing[i], errs[i] = d.Executor().RunStart(ctx, p) })
	}
	wg.Wait()
	return existing, errs
}

// startHeld starts each of ps while a group is held in flight, so that all
// of them queue behind it, then lets them go: they are stored as one
// group. It returns their outcomes once all are back.
func startHeld(t *testing.T, d *Driver, ps []*driver.RunStartParams) ([]bool, []error) {
	t.Helper()
	lengths, release := holdStarts(t, d)
	var (
		got  []bool
		errs []error
		done = make(chan struct{})
	)
	go func() { got, errs = startAll(t.Context(), d, ps); close(done) }()
	waitQueued(t, lengths, len(ps))
	release()
	<-done
	return got, errs
}

// transactions counts the transactions that wrote the runs of ps.
func transactions(t *testing.T, d *Driver, ps []*driver.RunStartParams) int {
	t.Helper()
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.Run.ID
	}
	var n int
	require.NoError(t, d.pool.QueryRow(t.Context(), `SELECT count(DISTINCT xmin::text) FROM `+d.q.schema+`.runs WHERE id = ANY($1)`, ids).Scan(&n))
	return n
}

// TestStartsShareATransaction: starts that arrive while another is being
// stored go in one transaction, and each has its own outcome: a new run is
// new, the same run started twice in a group is new once and existing once.
func TestStartsShareATransaction(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 4))
	ctx := t.Context()
	before := runStart("grouped")
	existing, err := d.Executor().RunStart(ctx, before)
	require.NoError(t, err)
	require.False(t, existing)

	ps := make([]*driver.RunStartParams, 20)
	for i := range ps {
		ps[i] = runStart("grouped")
	}
	again := *ps[3]
	got, errs := startHeld(t, d, append(ps, before, &again))
	for i, err := range errs {
		require.NoError(t, err, "start %d", i)
	}
	for i := range ps {
		if i != 3 {
			require.False(t, got[i], "run %d is new", i)
		}
	}
	require.True(t, got[len(ps)], "a run started before exists")
	require.True(t, got[3] != got[len(ps)+1], "the same run twice: one start stores it, the other finds it")
	require.Equal(t, 1, transactions(t, d, ps), "the group's runs were written by one transaction")
	for _, p := range ps {
		j, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: p.Job.ID})
		require.NoError(t, err)
		require.Equal(t, hoppertype.JobStatePending, j.State)
	}
}

// TestAGroupOfDistinctRunsIsOneStatement: a group whose runs all differ is
// stored by one statement (runStartMany): new runs are new, a run stored
// before exists and keeps its job, and each new run's first change names
// its job's queue (the statement trigger reads the job inserted beside it).
func TestAGroupOfDistinctRunsIsOneStatement(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 4))
	ctx := t.Context()
	before := runStart("grouped-one")
	_, err := d.Executor().RunStart(ctx, before)
	require.NoError(t, err)

	ps := make([]*driver.RunStartParams, 12)
	for i := range ps {
		ps[i] = runStart("grouped-one")
	}
	again := *before
	againJob := *before.Job
	againJob.Queue = "elsewhere"
	again.Job = &againJob
	got, errs := startHeld(t, d, append(ps, &again))
	for i, err := range errs {
		require.NoError(t, err, "start %d", i)
	}
	for i := range ps {
		require.False(t, got[i], "run %d is new", i)
	}
	require.True(t, got[len(ps)], "a run stored before exists")
	require.Equal(t, 1, transactions(t, d, ps), "the group's runs were written by one transaction")
	j, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: before.Job.ID})
	require.NoError(t, err)
	require.Equal(t, "grouped-one", j.Queue, "an existing run's job is left as it was")

	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.Run.ID
	}
	var runChanges, jobs int
	require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'run' AND state = 'pending' AND queue = 'grouped-one'),
	count(*) FILTER (WHERE kind = 'job' AND state = 'pending')
FROM `+d.q.schema+`.changes WHERE entity_id = ANY($1)`, ids).Scan(&runChanges, &jobs))
	require.Equal(t, len(ps), runChanges, "one first change per run, naming its job's queue")
	require.Equal(t, len(ps), jobs, "one first change per job")
	for _, p := range append(ps, before) {
		rows, err := d.pool.Query(ctx, `SELECT kind FROM `+d.q.schema+`.changes WHERE entity_id = $1 ORDER BY tx, position`, p.Run.ID)
		require.NoError(t, err)
		kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"run", "job"}, kinds, "run %s: its first change comes before its job's", p.Run.ID)
	}
	for _, p := range ps {
		j, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: p.Job.ID})
		require.NoError(t, err)
		require.Equal(t, hoppertype.JobStatePending, j.State)
	}
}

// TestAGroupsFailedStartIsItsOwn: a start that fails (its id is a plain
// job's) fails alone; the other starts of its group are stored.
func TestAGroupsFailedStartIsItsOwn(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 4))
	ctx := t.Context()
	plain := newJob("grouped")
	insert(t, d.Executor(), plain)

	ps := make([]*driver.RunStartParams, 8)
	for i := range ps {
		ps[i] = runStart("grouped")
	}
	bad := runStart("grouped")
	bad.Run.ID, bad.Job.ID = plain.ID, plain.ID
	_, errs := startHeld(t, d, append(ps, bad))
	require.ErrorIs(t, errs[len(ps)], hoppertype.ErrDuplicateID)
	for i := range ps {
		require.NoError(t, errs[i], "start %d", i)
		_, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: ps[i].Run.ID})
		require.NoError(t, err, "run %d", i)
	}
	_, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: plain.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "no run for the plain job")
}

// TestAQueuedStartCanGiveUp: a start whose context ends while it waits for
// a group leaves with its context's error and stores nothing; a start that
// was to lead the next group hands the lead on when it gives up.
func TestAQueuedStartCanGiveUp(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, newPool(t, 4))
	ctx := t.Context()
	lengths, release := holdStarts(t, d)

	// The first in the queue gives up before the lead reaches it.
	gone := runStart("grouped")
	gctx, cancel := context.WithCancel(ctx)
	goneErr := make(chan error, 1)
	go func() {
		_, err := d.Executor().RunStart(gctx, gone)
		goneErr <- err
	}()
	waitQueued(t, lengths, 1)
	stays := runStart("grouped")
	stayErr := make(chan error, 1)
	go func() {
		_, err := d.Executor().RunStart(ctx, stays)
		stayErr <- err
	}()
	waitQueued(t, lengths, 2)
	cancel()
	require.ErrorIs(t, <-goneErr, context.Canceled)
	release()
	require.NoError(t, <-stayErr)
	_, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: gone.Run.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound)
	_, err = d.Executor().RunGet(ctx, &driver.RunGetParams{ID: stays.Run.ID})
	require.NoError(t, err)

	// The lead reaches a start that has given up: whichever it sees first,
	// the next start is stored and no group stays in flight.
	lengths, release = holdStarts(t, d)
	first, second := runStart("grouped"), runStart("grouped")
	fctx, fcancel := context.WithCancel(ctx)
	firstErr, secondErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := d.Executor().RunStart(fctx, first)
		firstErr <- err
	}()
	waitQueued(t, lengths, 1)
	go func() {
		_, err := d.Executor().RunStart(ctx, second)
		secondErr <- err
	}()
	waitQueued(t, lengths, 2)
	fcancel()
	release()
	err = <-firstErr
	_, getErr := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: first.Run.ID})
	if err != nil {
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, getErr, hoppertype.ErrNotFound, "a start that gave up stored nothing")
	} else {
		require.NoError(t, getErr, "a start that led its group stored its run")
	}
	require.NoError(t, <-secondErr)
	_, err = d.Executor().RunGet(ctx, &driver.RunGetParams{ID: second.Run.ID})
	require.NoError(t, err)
	d.starts.mu.Lock()
	defer d.starts.mu.Unlock()
	require.False(t, d.starts.leading, "no group in flight once all are answered")
	require.Empty(t, d.starts.queue)
}
