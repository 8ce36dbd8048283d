package drivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// purgeCases cover JobDeleteQueue, for drivers that implement
// driver.QueueDeleter.
func purgeCases() []testCase {
	return []testCase{
		{"DeleteQueue", testDeleteQueue},
	}
}

// testDeleteQueue: JobDeleteQueue deletes the queue's jobs in every state
// but running, a run's rows with its job, page by page, and nothing of
// another queue.
func testDeleteQueue(t *testing.T, f *fixture) {
	qd, ok := f.d.(driver.QueueDeleter)
	if !ok {
		t.Skipf("%s does not implement driver.QueueDeleter", f.d.Name())
	}
	queue := "purge-" + f.id()
	var mine []*hoppertype.JobRow
	for _, s := range []hoppertype.JobState{hoppertype.JobStatePending, hoppertype.JobStateScheduled, hoppertype.JobStateSucceeded} {
		mine = append(mine, f.insertOne(t, inQueue(queue), inState(s), runAt(at(time.Hour))))
	}
	running := f.insertOne(t, inQueue(queue), inState(hoppertype.JobStateRunning), runAt(at(-time.Hour)))
	other := f.insertOne(t, inQueue("other-"+f.id()))
	run := f.runRow()
	job := f.job(func(j *hoppertype.JobRow) { j.ID, j.GroupID, j.Queue, j.Type = run.ID, run.ID, queue, "workflow:wf" })
	_, err := f.x.RunStart(f.ctx, &driver.RunStartParams{Run: run, Job: job})
	require.NoError(t, err)
	_, err = f.x.StreamAppend(f.ctx, &driver.StreamAppendParams{RunID: run.ID, Chunks: [][]byte{[]byte(`1`)}, Now: base})
	require.NoError(t, err)

	del := func(limit int) int {
		t.Helper()
		n, err := qd.JobDeleteQueue(f.ctx, &driver.JobDeleteQueueParams{Queue: queue, Limit: limit})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 3, del(3), "a page of at most Limit")
	require.Equal(t, 1, del(0), "the rest, without a limit")
	require.Zero(t, del(0), "nothing left but the running job")
	for _, j := range mine {
		f.requireMissing(t, j.ID)
	}
	f.requireMissing(t, run.ID)
	_, err = f.x.RunGet(f.ctx, &driver.RunGetParams{ID: run.ID})
	require.ErrorIs(t, err, hoppertype.ErrNotFound, "the run's row goes with its job")
	chunks, err := f.x.StreamRead(f.ctx, &driver.StreamReadParams{RunID: run.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, chunks, "and its stream")
	f.requireState(t, running.ID, hoppertype.JobStateRunning)
	f.get(t, other.ID)
}
