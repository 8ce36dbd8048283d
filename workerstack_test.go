package hopper_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/stretchr/testify/require"
)

// deep uses about n KB of stack, then calls at.
//
//go:noinline
func deep(n int, at func()) byte {
	var frame [1000]byte
	frame[n%len(frame)] = byte(n)
	if n > 0 {
		frame[0] += deep(n-1, at)
	} else {
		at()
	}
	return frame[0]
}

// TestWaitingWorkersKeepTheirStacks: a pooled worker that waits for its
// next job keeps the stack its jobs grew (8 KB here), where a collection
// would otherwise halve a waiting goroutine's stack that it uses under a
// quarter of, and every job after it grow it again: a copy of the stack
// per job and collection at thousands of workers. Measured as the bytes
// of stack in use across two collections while the workers wait: shrunk,
// they drop by 4 KB or more a worker.
func TestWaitingWorkersKeepTheirStacks(t *testing.T) {
	if raceEnabled {
		// Its frames are larger: the jobs' stacks grow past 8 KB, or the
		// waiting workers use a quarter of theirs anyway. The plain run
		// of the tests checks it.
		t.Skip("frame sizes differ under the race detector")
	}
	const depth = 4 // KB of the handler's own stack
	const n = 200
	ctx := testCtx(t)
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	c := newClient(t, hopper.Config{Driver: memdriver.New(), MaxWorkers: n})
	typ := hopper.Define("deep", func(ctx context.Context, _ int) (hopper.None, error) {
		// Every job on a worker of its own (each holds its worker until
		// all have started), each growing its stack to 8 KB.
		deep(depth, func() {
			started.Done()
			<-release
		})
		return hopper.None{}, nil
	}, nil)
	require.NoError(t, c.Register(typ))
	hs, err := typ.EnqueueMany(ctx, c, make([]int, n), nil)
	require.NoError(t, err)
	started.Wait()
	close(release)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}

	stacks := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.StackInuse
	}
	before := stacks()
	runtime.GC()
	runtime.GC()
	after := stacks()
	t.Logf("stacks in use: %d KB before two collections, %d KB after", before>>10, after>>10)
	require.Less(t, int64(before)-int64(after), int64(n*2<<10), "the waiting workers' stacks shrank")
}
