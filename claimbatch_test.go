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
// take a tenth of a claim's time or less, and claims ahead off (see
// TestShortJobsAreClaimedAhead), the producer waits for the jobs
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
		c, err := hopper.New(hopper.Config{Driver: pacer, MaxWorkers: workers, DisableClaimAhead: true})
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

// aheadRun works jobs numbered 0 to jobs-1 on a client of workers slots
// whose claims take claim each (a claimPacer): the jobs numbered in block
// hold their slots until release is closed or their context ends, the
// others return at once. It records how often each job ran and with which
// attempt, and counts the deferred events (a job handed back unused).
type aheadRun struct {
	c        *hopper.Client
	pacer    *claimPacer
	release  chan struct{}
	mu       sync.Mutex
	ran      map[int]int
	attempts map[int]int
	deferred atomic.Int64
	done     atomic.Int64
	// reached[n] is closed when the n-th job returns (for the counts a
	// test waits for).
	reached map[int64]chan struct{}
}

// await waits until n jobs have returned (n must be one of reached's).
func (r *aheadRun) await(n int64) { <-r.reached[n] }

func newAheadRun(t *testing.T, workers, fetch, jobs int, claim time.Duration, block func(n int) bool) *aheadRun {
	t.Helper()
	mem := memdriver.New()
	t.Cleanup(func() { mem.Close() })
	r := &aheadRun{pacer: &claimPacer{Driver: mem, baseExec: mem.Executor(), delay: claim}, release: make(chan struct{}),
		ran: map[int]int{}, attempts: map[int]int{}, reached: map[int64]chan struct{}{}}
	for _, n := range []int64{100, int64(jobs)} {
		r.reached[n] = make(chan struct{})
	}
	typ := hopper.Define("ahead", func(ctx context.Context, n int) (hopper.None, error) {
		r.mu.Lock()
		r.ran[n]++
		r.attempts[n] = hopper.JobFromContext(ctx).Attempt()
		r.mu.Unlock()
		if block(n) {
			select {
			case <-r.release:
			case <-ctx.Done():
				return hopper.None{}, ctx.Err()
			}
		}
		if ch, ok := r.reached[r.done.Add(1)]; ok {
			close(ch)
		}
		return hopper.None{}, nil
	}, nil)
	c, err := hopper.New(hopper.Config{Driver: r.pacer, MaxWorkers: workers, FetchBatch: fetch,
		OnEvent: func(e hopper.Event) {
			if e.Kind == hopper.EventDeferred {
				r.deferred.Add(1)
			}
		}})
	require.NoError(t, err)
	require.NoError(t, c.Register(typ))
	ins := make([]int, jobs)
	for i := range ins {
		ins[i] = i
	}
	_, err = typ.EnqueueMany(context.Background(), c, ins, nil)
	require.NoError(t, err)
	r.c = c
	return r
}

// TestShortJobsAreClaimedAhead: with a backlog of jobs far shorter than a
// claim, claims take more jobs than the slots free (up to FetchBatch), the
// jobs beyond the slots wait in the process for the slots the running ones
// free, and every job runs once, on its first attempt.
func TestShortJobsAreClaimedAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, fetch, jobs = 10, 50, 400
		r := newAheadRun(t, workers, fetch, jobs, 10*time.Millisecond, func(int) bool { return false })
		ctx := context.Background()
		require.NoError(t, r.c.Start(ctx))
		r.await(jobs)
		require.NoError(t, r.c.Stop(ctx))
		ahead := 0
		for _, limit := range r.pacer.claimLimits() {
			require.LessOrEqual(t, limit, fetch, "a claim takes at most FetchBatch")
			if limit > workers {
				ahead++
			}
		}
		require.Positive(t, ahead, "claims took jobs beyond the free slots: %v", r.pacer.claimLimits())
		require.Len(t, r.ran, jobs)
		for n, times := range r.ran {
			require.Equal(t, 1, times, "job %d ran once", n)
			require.Equal(t, 1, r.attempts[n], "job %d on its first attempt", n)
		}
		require.Zero(t, r.deferred.Load(), "nothing handed back")
	})
}

// TestClaimedAheadGoBack: jobs claimed ahead that wait while every slot
// holds a job longer than the claim expected go back to their queue after
// a heartbeat interval, their attempts unused, and run once later; and
// those still waiting when the client stops go back too, never having
// run. It fails if a job claimed ahead runs twice, runs on a second
// attempt, or is left running in the store.
func TestClaimedAheadGoBack(t *testing.T) {
	const workers, fetch, jobs = 4, 20, 200
	long := func(n int) bool { return n >= 100 && n < 100+workers }
	check := func(t *testing.T, r *aheadRun) {
		t.Helper()
		for n, times := range r.ran {
			require.Equal(t, 1, times, "job %d ran once", n)
			require.Equal(t, 1, r.attempts[n], "job %d on its first attempt", n)
		}
	}
	t.Run("after a heartbeat interval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newAheadRun(t, workers, fetch, jobs, 10*time.Millisecond, long)
			ctx := context.Background()
			require.NoError(t, r.c.Start(ctx))
			// The long jobs hold every slot; the jobs claimed ahead of
			// them wait, then go back.
			time.Sleep(time.Minute)
			require.Positive(t, r.deferred.Load(), "jobs claimed ahead went back")
			close(r.release)
			r.await(jobs)
			require.NoError(t, r.c.Stop(ctx))
			require.Len(t, r.ran, jobs)
			check(t, r)
		})
	})
	t.Run("at stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newAheadRun(t, workers, fetch, jobs, 10*time.Millisecond, long)
			ctx := context.Background()
			require.NoError(t, r.c.Start(ctx))
			r.await(100)
			time.Sleep(100 * time.Millisecond) // the long jobs run, later ones wait
			stop, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			require.ErrorIs(t, r.c.Stop(stop), context.DeadlineExceeded, "the long jobs are cut at the deadline")
			require.Positive(t, r.deferred.Load(), "jobs claimed ahead went back at stop")
			check(t, r)
			page, err := r.c.JobList(ctx, &hopper.ListParams{Limit: jobs})
			require.NoError(t, err)
			require.Len(t, page.Jobs, jobs)
			for _, j := range page.Jobs {
				require.NotEqual(t, hopper.StateRunning, j.State, "job %s is left running", j.ID)
				if j.State == hopper.StatePending {
					require.Zero(t, j.Attempt, "job %s went back with its attempt unused", j.ID)
				}
			}
		})
	})
}
