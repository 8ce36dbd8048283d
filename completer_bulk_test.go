package hopper

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// bulkFixture is a group of n running members, claimed, and a client to
// record their outcomes with.
func bulkFixture(t *testing.T, n int) (*Client, []*hoppertype.JobRow) {
	t.Helper()
	d := &groupUpdateCounter{Driver: memdriver.New()}
	t.Cleanup(func() { _ = d.Close() })
	c, err := newClient(Config{Driver: d})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, d.GroupInsert(ctx, &hoppertype.GroupRow{ID: "g", Open: n, State: hoppertype.GroupOpen, CreatedAt: now}))
	var rows []*hoppertype.JobRow
	for i := range n {
		id := string(rune('a' + i))
		rows = append(rows, &hoppertype.JobRow{ID: id, Type: "t", Queue: "q", State: hoppertype.JobStatePending, GroupID: "g",
			ParentID: "p", Retry: hoppertype.RetryPolicy{Attempts: 1}, QueuedAt: now, RunAt: now})
	}
	_, err = d.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows})
	require.NoError(t, err)
	claimed, err := d.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Limit: n, Now: now, LeaseExpiresAt: now.Add(time.Hour), Worker: "w"})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	return c, claimed
}

// groupUpdateCounter counts the GroupUpdate calls made in its
// transactions, to tell the bulk path (one per group) from the fallback.
type groupUpdateCounter struct {
	*memdriver.Driver
	n int
}

func (d *groupUpdateCounter) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	return d.Driver.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
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

func updates(c *Client) int { return c.drv.(*groupUpdateCounter).n }

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
	c, rows := bulkFixture(t, 5)
	items := []finishItem{
		succeed(rows[0], "", addFold(1)),
		succeed(rows[1], "", addFold(2)),
		succeed(rows[2], `10`, nil),                       // last writer
		succeed(rows[3], `20`, &groupEffect{final: true}), // locks
		succeed(rows[4], "", addFold(100)),                // ignored: final
	}
	out, err := c.finishTx(context.Background(), items)
	require.NoError(t, err)
	for _, f := range out {
		require.NoError(t, f.err)
		require.NotNil(t, f.job)
	}
	g, err := c.drv.GroupGet(context.Background(), "g")
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
	require.Equal(t, 1, updates(c), "the five members in one group update")
}

// TestBulkMembersFallBackOnError: a fold that fails makes the batch go
// member by member, so only the failing member's contribution is lost.
func TestBulkMembersFallBackOnError(t *testing.T) {
	c, rows := bulkFixture(t, 3)
	bad := &groupEffect{fold: func([]byte, bool) ([]byte, error) { return nil, errors.New("fold broke") }}
	items := []finishItem{succeed(rows[0], "", addFold(1)), succeed(rows[1], "", bad), succeed(rows[2], "", addFold(2))}
	out, err := c.finishTx(context.Background(), items)
	require.NoError(t, err)
	require.NotNil(t, out[0].job)
	require.Nil(t, out[1].job, "the member whose fold failed is not recorded")
	require.Error(t, out[1].err)
	require.NotNil(t, out[2].job)
	g, err := c.drv.GroupGet(context.Background(), "g")
	require.NoError(t, err)
	require.Equal(t, 1, g.Open, "one member still open")
	require.JSONEq(t, `3`, string(g.Value))
	require.Equal(t, 1+3, updates(c), "the failed bulk update, then one per member")
}

// TestBulkMembersSkipLostLeases: a member whose lease is lost neither
// closes nor contributes.
func TestBulkMembersSkipLostLeases(t *testing.T) {
	c, rows := bulkFixture(t, 3)
	lost := rows[1].Clone()
	lost.LeaseToken++ // not the lease the store holds
	items := []finishItem{succeed(rows[0], "", addFold(1)), succeed(lost, "", addFold(50)), succeed(rows[2], "", addFold(2))}
	out, err := c.finishTx(context.Background(), items)
	require.NoError(t, err)
	require.ErrorIs(t, out[1].err, hoppertype.ErrLeaseLost)
	g, err := c.drv.GroupGet(context.Background(), "g")
	require.NoError(t, err)
	require.Equal(t, 1, g.Open)
	require.JSONEq(t, `3`, string(g.Value))
}
