package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// bulkFixture is a group of n running members, claimed, and a client to
// record their outcomes with.
func bulkFixture(t *testing.T, n int) (*Engine, []*hoppertype.JobRow) {
	t.Helper()
	base := memdriver.New()
	d := &groupUpdateCounter{Driver: base, baseExec: base.Executor()}
	t.Cleanup(func() { _ = d.Close() })
	e := newTestEngine(t, d)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, d.GroupInsert(ctx, &driver.GroupInsertParams{Row: &hoppertype.GroupRow{ID: "g", Open: n, State: hoppertype.GroupOpen, CreatedAt: now}}))
	var rows []*hoppertype.JobRow
	for i := range n {
		id := string(rune('a' + i))
		rows = append(rows, &hoppertype.JobRow{ID: id, Type: "t", Queue: "q", State: hoppertype.JobStatePending, GroupID: "g",
			ParentID: "p", Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now})
	}
	_, err := d.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
	require.NoError(t, err)
	claimed, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: n, Now: now, LeaseExpiresAt: now.Add(time.Hour), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	return e, claimed
}

// groupUpdateCounter counts the GroupUpdate calls made in its
// transactions, to tell the bulk path (one per group) from the fallback.
// Executor is the spy itself.
func (d *groupUpdateCounter) Executor() driver.Executor { return d }

type groupUpdateCounter struct {
	*memdriver.Driver
	baseExec
	n int
}

func (d *groupUpdateCounter) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.baseExec.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return fn(ctx, &countingTx{Executor: tx, n: &d.n})
	})
}

type countingTx struct {
	driver.Executor
	n *int
}

func (t *countingTx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return t.Executor.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return fn(ctx, &countingTx{Executor: tx, n: t.n})
	})
}

func (t *countingTx) GroupUpdate(ctx context.Context, p *driver.GroupUpdateParams) (*driver.GroupUpdateResult, error) {
	*t.n++
	return t.Executor.GroupUpdate(ctx, p)
}

func updates(e *Engine) int { return e.drv.(*groupUpdateCounter).n }

func succeed(row *hoppertype.JobRow, result string, eff *groupEffect) finishItem {
	var out []byte
	if result != "" {
		out = []byte(result)
	}
	o := decide(row, attemptResult{out: out}, nil, row.StartedAt.Add(time.Second), nil, nil)
	return finishItem{row: row, outcome: o, group: eff}
}

func addFold(n int) *groupEffect {
	return &groupEffect{fold: func(existing []byte, set bool) ([]byte, error) {
		var acc int
		if set {
			_ = json.Unmarshal(existing, &acc)
		}
		return json.Marshal(acc + n)
	}}
}

// TestBulkMembersContributeInOrder records a batch of members of one group
// together: the folds apply in order, a last-writer value replaces the
// folded one, a final contribution locks the value, and the group settles.
func TestBulkMembersContributeInOrder(t *testing.T) {
	e, rows := bulkFixture(t, 5)
	items := []finishItem{
		succeed(rows[0], "", addFold(1)),
		succeed(rows[1], "", addFold(2)),
		succeed(rows[2], `10`, nil),                       // last writer
		succeed(rows[3], `20`, &groupEffect{final: true}), // locks
		succeed(rows[4], "", addFold(100)),                // ignored: final
	}
	out, err := e.finishTx(context.Background(), items)
	require.NoError(t, err)
	for _, f := range out {
		require.NoError(t, f.err)
		require.NotNil(t, f.job)
	}
	g, err := e.drv.GroupGet(context.Background(), &driver.GroupGetParams{ID: "g"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.GroupSettled, g.State)
	require.Equal(t, 0, g.Open)
	require.JSONEq(t, `20`, string(g.Value))
	require.True(t, g.Final)
	settled := 0
	for _, f := range out {
		settled += len(f.settled)
	}
	require.Equal(t, 1, settled, "the settle is reported once")
	require.Equal(t, 1, updates(e), "the five members in one group update")
}

// TestBulkMembersFallBackOnError: a fold that fails makes the batch go
// member by member, so only the failing member's contribution is lost.
func TestBulkMembersFallBackOnError(t *testing.T) {
	e, rows := bulkFixture(t, 3)
	bad := &groupEffect{fold: func([]byte, bool) ([]byte, error) { return nil, errors.New("fold broke") }}
	items := []finishItem{succeed(rows[0], "", addFold(1)), succeed(rows[1], "", bad), succeed(rows[2], "", addFold(2))}
	out, err := e.finishTx(context.Background(), items)
	require.NoError(t, err)
	require.NotNil(t, out[0].job)
	require.Nil(t, out[1].job, "the member whose fold failed is not recorded")
	require.Error(t, out[1].err)
	require.NotNil(t, out[2].job)
	g, err := e.drv.GroupGet(context.Background(), &driver.GroupGetParams{ID: "g"})
	require.NoError(t, err)
	require.Equal(t, 1, g.Open, "one member still open")
	require.JSONEq(t, `3`, string(g.Value))
	require.Equal(t, 1+3, updates(e), "the failed bulk update, then one per member")
}

// TestBulkMembersSkipLostLeases: a member whose lease is lost neither
// closes nor contributes.
func TestBulkMembersSkipLostLeases(t *testing.T) {
	e, rows := bulkFixture(t, 3)
	lost := rows[1].Clone()
	lost.LeaseToken++ // not the lease the store holds
	items := []finishItem{succeed(rows[0], "", addFold(1)), succeed(lost, "", addFold(50)), succeed(rows[2], "", addFold(2))}
	out, err := e.finishTx(context.Background(), items)
	require.NoError(t, err)
	require.ErrorIs(t, out[1].err, hoppertype.ErrLeaseLost)
	g, err := e.drv.GroupGet(context.Background(), &driver.GroupGetParams{ID: "g"})
	require.NoError(t, err)
	require.Equal(t, 1, g.Open)
	require.JSONEq(t, `3`, string(g.Value))
}

// appendCounter counts the history appends made in its transactions, to
// tell the batched run path (one RunEventAppendMany) from the per-run one.
// Executor is the spy itself.
func (d *appendCounter) Executor() driver.Executor { return d }

type appendCounter struct {
	*memdriver.Driver
	baseExec
	one, many int
}

func (d *appendCounter) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.baseExec.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return fn(ctx, &appendCountingTx{Executor: tx, d: d})
	})
}

type appendCountingTx struct {
	driver.Executor
	d *appendCounter
}

func (t *appendCountingTx) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	t.d.one++
	return t.Executor.RunEventAppend(ctx, p)
}

func (t *appendCountingTx) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	t.d.many++
	return t.Executor.RunEventAppendMany(ctx, params)
}

// TestFinishRunsTogether: the outcomes of several workflow runs are
// recorded with one append and one finish; a run whose lease was lost
// writes nothing, and the others are not held back by it.
func TestFinishRunsTogether(t *testing.T) {
	base := memdriver.New()
	d := &appendCounter{Driver: base, baseExec: base.Executor()}
	t.Cleanup(func() { _ = d.Close() })
	e := newTestEngine(t, d)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"ra", "rb", "rc"} {
		_, err := d.RunStart(ctx, &driver.RunStartParams{
			Run: &hoppertype.RunRow{ID: id, Workflow: "w", Status: hoppertype.RunPending, CreatedAt: now, UpdatedAt: now},
			Job: &hoppertype.JobRow{ID: id, GroupID: id, Type: WorkflowTypePrefix + "w", Queue: "q", State: hoppertype.JobStatePending,
				Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now},
		})
		require.NoError(t, err)
	}
	rows, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: 3, Now: now, LeaseExpiresAt: now.Add(time.Hour), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, rows, 3)
	byID := map[string]*hoppertype.JobRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	done := func(row *hoppertype.JobRow) finishItem {
		it := succeed(row, `"ok"`, nil)
		it.run = &RunEffect{Events: []*hoppertype.RunEvent{{RunID: row.ID, Attempt: 1, Seq: 1, Kind: "workflow_completed", At: now}}}
		return it
	}
	lost := byID["rb"].Clone()
	lost.LeaseToken++ // not the lease the store holds
	waiting := byID["rc"]
	o := decide(waiting, attemptResult{err: &SuspendError{Until: now.Add(time.Hour)}}, nil, now, nil, nil)
	items := []finishItem{done(byID["ra"]), done(lost), {row: waiting, outcome: o, run: &RunEffect{}}}
	require.Equal(t, scopeRun, e.scopeOf(items[0]), "plain runs need no savepoint")

	out, err := e.finishTx(ctx, items)
	require.NoError(t, err)
	require.Equal(t, 1, d.many, "one append for the batch")
	require.Zero(t, d.one, "no append per run")

	require.NoError(t, out[0].err)
	require.Equal(t, hoppertype.JobStateSucceeded, out[0].job.State)
	ra, err := d.RunGet(ctx, &driver.RunGetParams{ID: "ra"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunCompleted, ra.Status, "the run's end went with its last record")
	evs, err := d.RunEventList(ctx, &driver.RunEventListParams{RunID: "ra"})
	require.NoError(t, err)
	require.Len(t, evs, 1)

	require.ErrorIs(t, out[1].err, hoppertype.ErrLeaseLost)
	require.Nil(t, out[1].job)
	rb, err := d.RunGet(ctx, &driver.RunGetParams{ID: "rb"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunPending, rb.Status, "a lost run writes nothing")
	evs, err = d.RunEventList(ctx, &driver.RunEventListParams{RunID: "rb"})
	require.NoError(t, err)
	require.Empty(t, evs)
	jb, err := d.JobGet(ctx, &driver.JobGetParams{ID: "rb"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.JobStateRunning, jb.State)

	require.NoError(t, out[2].err)
	require.Equal(t, hoppertype.JobStateScheduled, out[2].job.State)
	rc, err := d.RunGet(ctx, &driver.RunGetParams{ID: "rc"})
	require.NoError(t, err)
	require.Equal(t, hoppertype.RunWaiting, rc.Status)
}

// listenCounter counts subscriptions to the store's notifications.
type listenCounter struct {
	*memdriver.Driver
	mu sync.Mutex
	n  int
}

func (d *listenCounter) Listen(ctx context.Context, topic string) (driver.Subscription, error) {
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
	return d.Driver.Listen(ctx, topic)
}

func (d *listenCounter) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// TestWaitersKeepTheirSubscription: waits that follow one another share one
// subscription per topic; Stop ends it.
func TestWaitersKeepTheirSubscription(t *testing.T) {
	d := &listenCounter{Driver: memdriver.New()}
	t.Cleanup(func() { _ = d.Close() })
	e := newTestEngine(t, d)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"w1", "w2", "w3"} {
		_, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{{ID: id, GroupID: id, Type: "t", Queue: "q",
			State: hoppertype.JobStateSucceeded, Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now}}})
		require.NoError(t, err)
		_, err = e.WaitJob(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, 2, d.count(), "one subscription per done topic for the three waits")
	e.waiters.close()
	_, err := e.WaitJob(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, 4, d.count(), "after close, a wait subscribes again")
	e.waiters.close()
}

// baseExec is a driver's Executor embedded in a test's spy, which is its
// own Executor and overrides the operations it watches.
type baseExec = driver.Executor

// TestGatherLingers: a batch takes what is queued at once; with a linger it
// also takes what arrives within it, and no more; it stops early when the
// batch is full or the queue closes; without one it does not wait.
func TestGatherLingers(t *testing.T) {
	item := func(id string) finishItem { return finishItem{row: &hoppertype.JobRow{ID: id}} }
	ids := func(b []finishItem) []string {
		var out []string
		for _, it := range b {
			out = append(out, it.row.ID)
		}
		return out
	}
	t.Run("queued only without a linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := make(chan finishItem, 4)
			in <- item("b")
			go func() {
				time.Sleep(time.Millisecond)
				in <- item("late")
			}()
			start := time.Now()
			got := gather(in, []finishItem{item("a")}, 0)
			require.Equal(t, []string{"a", "b"}, ids(got))
			require.Zero(t, time.Since(start), "no wait")
			require.Equal(t, "late", (<-in).row.ID)
		})
	})
	t.Run("what arrives within the linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := make(chan finishItem, 4)
			go func() {
				time.Sleep(completerLinger / 2)
				in <- item("b")
				time.Sleep(completerLinger)
				in <- item("too late")
			}()
			start := time.Now()
			got := gather(in, []finishItem{item("a")}, completerLinger)
			require.Equal(t, []string{"a", "b"}, ids(got))
			require.Equal(t, completerLinger, time.Since(start))
			require.Equal(t, "too late", (<-in).row.ID)
		})
	})
	t.Run("a full batch does not wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := make(chan finishItem, maxCompleteBatch)
			for i := range maxCompleteBatch {
				in <- item(string(rune('a' + i%26)))
			}
			start := time.Now()
			got := gather(in, []finishItem{item("first")}, completerLinger)
			require.Len(t, got, maxCompleteBatch)
			require.Zero(t, time.Since(start))
			require.Len(t, in, 1, "one left for the next batch")
		})
	})
	t.Run("a closed queue ends the linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			in := make(chan finishItem, 4)
			go func() {
				time.Sleep(completerLinger / 4)
				in <- item("b")
				close(in)
			}()
			start := time.Now()
			got := gather(in, []finishItem{item("a")}, completerLinger)
			require.Equal(t, []string{"a", "b"}, ids(got))
			require.Equal(t, completerLinger/4, time.Since(start))
		})
	})
}

// finishSizes records the size of each JobFinishMany call in its
// transactions.
type finishSizes struct {
	*memdriver.Driver
	baseExec
	mu    sync.Mutex
	sizes []int
	at    []time.Time
}

func (d *finishSizes) Executor() driver.Executor { return d }

func (d *finishSizes) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.baseExec.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return fn(ctx, &finishSizesTx{Executor: tx, d: d})
	})
}

type finishSizesTx struct {
	driver.Executor
	d *finishSizes
}

func (t *finishSizesTx) JobFinishMany(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	t.d.mu.Lock()
	t.d.sizes, t.d.at = append(t.d.sizes, len(p.Items)), append(t.d.at, time.Now())
	t.d.mu.Unlock()
	return t.Executor.JobFinishMany(ctx, p)
}

// TestCompleterLingersOnlyWhenBusy: after a batch of lingerAfter attempts
// or more, the next batch waits completerLinger for more to join it; after
// a small one, an outcome is recorded at once.
func TestCompleterLingersOnlyWhenBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := memdriver.New()
		d := &finishSizes{Driver: base, baseExec: base.Executor()}
		e := newTestEngine(t, d)
		ctx := context.Background()
		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		n := lingerAfter + 3
		var rows []*hoppertype.JobRow
		for i := range n {
			id := fmt.Sprintf("j%02d", i) // a plain job: the root of its own group
			rows = append(rows, &hoppertype.JobRow{ID: id, GroupID: id, Type: "t", Queue: "q", State: hoppertype.JobStatePending,
				Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now})
		}
		_, err := d.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
		require.NoError(t, err)
		claimed, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: n, Now: now, LeaseExpiresAt: now.Add(time.Hour), Worker: "w"})
		require.NoError(t, err)
		require.Len(t, claimed, n)

		cp := newCompleter(e, ctx)
		busy := claimed[:lingerAfter]
		for _, row := range busy { // queued before it starts: one busy batch
			cp.submit(succeed(row, "", nil))
		}
		cp.start()
		synctest.Wait()
		start := time.Now()
		cp.submit(succeed(claimed[lingerAfter], "", nil))
		time.Sleep(completerLinger / 2)
		cp.submit(succeed(claimed[lingerAfter+1], "", nil)) // joins the lingering batch
		time.Sleep(completerLinger)
		synctest.Wait()
		again := time.Now()
		cp.submit(succeed(claimed[lingerAfter+2], "", nil)) // after a small batch: at once
		synctest.Wait()
		cp.stop()

		d.mu.Lock()
		defer d.mu.Unlock()
		require.Equal(t, []int{lingerAfter, 2, 1}, d.sizes)
		require.Equal(t, completerLinger, d.at[1].Sub(start), "the batch after a busy one waited")
		require.Equal(t, time.Duration(0), d.at[2].Sub(again), "the batch after a small one did not")
	})
}
