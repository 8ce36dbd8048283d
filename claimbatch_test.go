package hopper_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// claimPacer makes every claim take delay (in a synctest bubble, where the
// time passes once everything else is idle) and records each claim's
// limit. Executor is the pacer itself.
type claimPacer struct {
	driver.Driver
	baseExec
	delay time.Duration

	mu     sync.Mutex
	limits []int
}

func (p *claimPacer) Executor() driver.Executor { return p }

func (p *claimPacer) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	p.mu.Lock()
	p.limits = append(p.limits, params.Limit)
	p.mu.Unlock()
	time.Sleep(p.delay)
	return p.baseExec.JobClaim(ctx, params)
}

func (p *claimPacer) claimLimits() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.limits...)
}

// TestShortJobsAreClaimedInFullBatches: with a backlog of jobs that each
// take a tenth of a claim's time or less, the producer waits for the jobs
// it just started before it claims again, so each claim takes every slot.
// Claiming at once would size each claim by the slots free at that instant:
// the jobs here end one by one (their durations differ), so claims would
// alternate between the one slot freed first and the nine freed during
// that claim. Nor does the producer wait longer than that between a full
// claim and the next: the bubble's clock, which moves only when every
// goroutine waits, bounds each round by a claim, its wait for the jobs
// (half a claim at most) and their run; a round that waited for a poll
// (a second) or for a whole claim more would pass it.
func TestShortJobsAreClaimedInFullBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			workers = 10
			jobs    = 200
			claim   = 10 * time.Millisecond
		)
		mem := memdriver.New()
		defer mem.Close()
		pacer := &claimPacer{Driver: mem, baseExec: mem.Executor(), delay: claim}
		var done atomic.Int64
		allDone := make(chan struct{})
		short := hopper.Define("short", func(_ context.Context, n int) (hopper.None, error) {
			time.Sleep(time.Duration(n%workers+1) * 100 * time.Microsecond) // up to a tenth of a claim
			if done.Add(1) == jobs {
				close(allDone)
			}
			return hopper.None{}, nil
		}, nil)
		c, err := hopper.New(hopper.Config{Driver: pacer, MaxWorkers: workers})
		require.NoError(t, err)
		require.NoError(t, c.Register(short))
		ins := make([]int, jobs)
		for i := range ins {
			ins[i] = i
		}
		ctx := context.Background()
		_, err = short.EnqueueMany(ctx, c, ins, nil)
		require.NoError(t, err)
		began := time.Now()
		require.NoError(t, c.Start(ctx))
		<-allDone
		took := time.Since(began)
		require.NoError(t, c.Stop(ctx))

		limits := pacer.claimLimits()
		// Each round: its claim, at most half a claim's wait for its jobs,
		// and the jobs themselves (a tenth of a claim at most).
		round := claim + claim/2 + claim/10
		require.LessOrEqual(t, took, time.Duration(len(limits))*round,
			"%d claims took %s of the bubble's time: a round waited past its claim and its jobs", len(limits), took)
		// The first claims come before any job has returned: the producer
		// has not seen how long they take yet.
		require.Greater(t, len(limits), 3, "claims: %v", limits)
		for i, limit := range limits[3:] {
			if limit != workers {
				t.Fatalf("claim %d asked for %d jobs, want every slot (%d); claims: %v", i+3, limit, workers, limits)
			}
		}
	})
}
