package engine

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// slowManyDriver records how the history writer calls the store, and can
// fail RunEventAppendMany.
type slowManyDriver struct {
	driver.Executor               // nil: only the history writer's two calls are made
	gate            chan struct{} // the first single append waits on it
	singles         atomic.Int64
	manys           atomic.Int64
	manyItems       atomic.Int64
	failMany        bool
	once            sync.Once
}

func (d *slowManyDriver) RunEventAppend(ctx context.Context, p *driver.RunEventAppendParams) error {
	d.singles.Add(1)
	d.once.Do(func() { <-d.gate })
	if p.LeaseToken < 0 {
		return hoppertype.ErrLeaseLost
	}
	return nil
}

func (d *slowManyDriver) RunEventAppendMany(ctx context.Context, params *driver.RunEventAppendManyParams) ([]error, error) {
	d.manys.Add(1)
	d.manyItems.Add(int64(len(params.Events)))
	if d.failMany {
		return nil, errors.New("the store said no")
	}
	errs := make([]error, len(params.Events))
	for i, p := range params.Events {
		if p.LeaseToken < 0 {
			errs[i] = hoppertype.ErrLeaseLost
		}
	}
	return errs, nil
}

// TestHistWriterGroupsAndKeepsOutcomes: appends that arrive while a flush
// is in flight go to the store together, each keeping its own outcome; when
// the grouped call fails, each is retried alone.
func TestHistWriterGroupsAndKeepsOutcomes(t *testing.T) {
	for _, failMany := range []bool{false, true} {
		t.Run(fmt.Sprint("failMany=", failMany), func(t *testing.T) {
			d := &slowManyDriver{gate: make(chan struct{}), failMany: failMany}
			var w histWriter
			ctx := context.Background()
			const n = 40
			errs := make([]error, n)
			var wg sync.WaitGroup
			// The first append holds a flush open until all the others
			// have queued behind it.
			wg.Go(func() {
				errs[0] = w.append(ctx, ctx, time.Minute, d, &driver.RunEventAppendParams{RunID: "r0", LeaseToken: 1})
			})
			for d.singles.Load() == 0 { // the first flush is in the store
				goruntime.Gosched()
			}
			for i := 1; i < n; i++ {
				token := int64(1)
				if i%3 == 0 {
					token = -1 // this run's lease is lost
				}
				wg.Go(func() {
					errs[i] = w.append(ctx, ctx, time.Minute, d, &driver.RunEventAppendParams{RunID: fmt.Sprint("r", i), LeaseToken: token})
				})
			}
			for {
				w.mu.Lock()
				queued := len(w.queue)
				w.mu.Unlock()
				// One request may be flushing on the second flusher.
				if queued+int(d.singles.Load()+d.manyItems.Load())-1 >= n-1 {
					break
				}
				goruntime.Gosched()
			}
			close(d.gate)
			wg.Wait()
			for i, err := range errs {
				if i > 0 && i%3 == 0 {
					require.ErrorIs(t, err, hoppertype.ErrLeaseLost, "append %d", i)
				} else {
					require.NoError(t, err, "append %d", i)
				}
			}
			require.Positive(t, d.manys.Load(), "queued appends went to the store together")
			require.Equal(t, 0, w.flushing, "no flush left running")
			require.Empty(t, w.queue)
		})
	}
}
