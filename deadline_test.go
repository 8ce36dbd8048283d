package hopper_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
)

// TestStopWithHangingStore: with a job in flight, the store stops
// answering (every call blocks until its context ends). Stop still returns
// by its ctx's deadline plus the grace, having tried — and cut — the calls
// that finish what was begun, and reports what it could not record. Once
// the store answers again, the job whose lease lapsed is rescued and runs
// again: nothing is lost. It runs in a synctest bubble on the memory
// store: no real time passes, and a goroutine left blocked (a call without
// a deadline) fails the test as a deadlock.
func TestStopWithHangingStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		base := memdriver.New()
		d := &hangingDriver{Driver: base, baseExec: base.Executor()}
		defer d.Driver.Close()
		started := make(chan struct{}, 1)
		var runs atomic.Int32
		job := hopper.Define("in-flight", func(ctx context.Context, _ hopper.None) (int, error) {
			if runs.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done() // in flight until Stop cancels it
				return 0, context.Cause(ctx)
			}
			return 7, nil
		}, nil)
		var mu sync.Mutex
		reported := map[hopper.ErrorPhase]int{}
		c, err := hopper.New(hopper.Config{
			Driver:            d,
			HeartbeatInterval: 100 * time.Millisecond,
			Logger:            slog.New(slog.DiscardHandler),
			OnError: func(_ error, phase hopper.ErrorPhase) {
				mu.Lock()
				reported[phase]++
				mu.Unlock()
			},
		})
		require.NoError(t, err)
		require.NoError(t, c.Register(job))
		ctx := context.Background()
		require.NoError(t, c.Start(ctx))
		h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
		require.NoError(t, err)
		<-started
		synctest.Wait() // the client is idle but for the job: it leads, its worker row is stored
		require.True(t, c.IsLeader())

		d.hang()
		<-d.hungOn("JobHeartbeat") // a heartbeat is stuck in the store

		// Longer than the shortest call budget (a second): the stuck
		// heartbeat times out and is reported before Stop's deadline
		// cancels the attempt, not at the same virtual instant.
		const timeout = 2 * time.Second
		stopCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		begin := time.Now()
		err = c.Stop(stopCtx)
		took := time.Since(begin)
		t.Logf("Stop took %v", took)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the attempt was cancelled")
		require.LessOrEqual(t, took, timeout+hopper.StopGrace, "Stop returns by its deadline plus the grace")
		for _, m := range []string{"InTx", "LeaderResign", "WorkerDelete"} {
			select {
			case <-d.hungOn(m):
			default:
				t.Errorf("Stop did not try %s (the completer's last flush, the resignation, the worker row)", m)
			}
		}
		mu.Lock()
		require.Positive(t, reported[hopper.PhaseQueue], "the heartbeat that timed out is reported")
		require.Positive(t, reported[hopper.PhaseCommit], "the outcome that could not be recorded is reported")
		mu.Unlock()

		// The store answers again: the lease left behind expires, the
		// rescuer retries the job, and it completes.
		d.answer()
		require.NoError(t, c.Start(ctx))
		got, err := h.Result(ctx)
		require.NoError(t, err)
		require.Equal(t, 7, got)
		require.Equal(t, int32(2), runs.Load())
		require.NoError(t, c.Close(ctx))
	})
}

// TestHangingDriverHangsEveryCall: the hanging store overrides every call
// of the driver's interface, so no call escapes it in
// TestStopWithHangingStore (a method added to the interface must be added
// there too).
func TestHangingDriverHangsEveryCall(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "hangdriver_test.go", nil, 0)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && recvName(fn) == "hangingDriver" {
			have[fn.Name.Name] = true
		}
	}
	ex := reflect.TypeFor[driver.Executor]()
	for i := range ex.NumMethod() {
		if m := ex.Method(i).Name; !have[m] {
			t.Errorf("hangingDriver does not override %s", m)
		}
	}
}

// unboundedAllowed are the engine's contexts that have no end of their own
// outside deadline.go, by file and function, each with why: lifetimes, not
// calls to the store.
var unboundedAllowed = map[string]string{
	"internal/engine/waiter.go:waiterHub.startListening": "the waiters' subscriptions to done notifications: they end when the last waiter leaves or the client closes",
	"internal/engine/attempt.go:Attempt.HardLife":        "an attempt run outside a session (a replay, a test) has no session's lifetime: its calls' budgets bound it",
	"batch.go:batcher.run":                               "a batch function's context when no session runs (none does): user code's, no store call",
}

// TestNoUnboundedContext: the engine makes no context without an end
// (context.Background, context.TODO, context.WithoutCancel) outside
// deadline.go, whose helpers give each store call its lifetime and budget,
// and the allowlist above. Calls a user makes keep the user's context.
func TestNoUnboundedContext(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	engineFiles, err := filepath.Glob("internal/engine/*.go")
	require.NoError(t, err)
	files = append(files, engineFiles...)
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "deadline.go" {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		pkg := contextName(f)
		if pkg == "" {
			continue
		}
		for _, decl := range f.Decls {
			where := name + ":" + declName(decl)
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != pkg {
					return true
				}
				switch sel.Sel.Name {
				case "Background", "TODO", "WithoutCancel":
				default:
					return true
				}
				if _, ok := unboundedAllowed[where]; ok {
					used[where] = true
					return true
				}
				t.Errorf("%s: context.%s in %s: derive the context from a lifetime with a budget (deadline.go), or keep the caller's",
					fset.Position(call.Pos()), sel.Sel.Name, where)
				return true
			})
		}
	}
	for where := range unboundedAllowed {
		if !used[where] {
			t.Errorf("allowlist entry %s matches nothing: remove it", where)
		}
	}
}

// contextName is the name file f imports package context under ("" if
// it does not).
func contextName(f *ast.File) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "context" {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "context"
		}
	}
	return ""
}

// declName names a declaration: Func, Type.Method, or "package" for the
// package-level ones.
func declName(decl ast.Decl) string {
	fn, ok := decl.(*ast.FuncDecl)
	if !ok {
		return "package"
	}
	if fn.Recv == nil {
		return fn.Name.Name
	}
	return recvName(fn) + "." + fn.Name.Name
}

// recvName is the name of a method's receiver type, without pointer or
// type parameters.
func recvName(fn *ast.FuncDecl) string {
	x := fn.Recv.List[0].Type
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// failingTx fails the transactions it is told to fail, and counts them.
type failingTx struct {
	*memdriver.Driver
	baseExec
	fail  atomic.Int32 // how many of the next transactions fail
	tries atomic.Int32 // transactions begun
}

func (d *failingTx) InTx(ctx context.Context, fn func(ctx context.Context, tx driver.Executor) error) error {
	d.tries.Add(1)
	if d.fail.Add(-1) >= 0 {
		return errors.New("injected: the commit failed")
	}
	return d.baseExec.InTx(ctx, fn)
}

// Executor is the store itself.
func (d *failingTx) Executor() driver.Executor { return d }

// TestCompleterRetryWaitsOnTheClock: when the transaction that records an
// outcome fails, the completer tries again after a pause on the client's
// clock: under a virtual clock, not before the test moves it.
func TestCompleterRetryWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	clk := hoppertest.NewClock(time.Time{})
	base := memdriver.New(memdriver.WithClock(clk.Now))
	d := &failingTx{Driver: base, baseExec: base.Executor()}
	t.Cleanup(func() { _ = d.Close() })
	started, release := make(chan struct{}), make(chan struct{})
	job := hopper.Define("record-retried", func(ctx context.Context, _ hopper.None) (int, error) {
		close(started)
		<-release
		return 1, nil
	}, nil)
	c, _ := hoppertest.NewClient(t, hopper.Config{Driver: d, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, c.Register(job))
	ctx := testCtx(t)
	h, err := job.Enqueue(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	<-started
	d.fail.Store(1)
	before := d.tries.Load()
	now := clk.Now()
	close(release)
	// The first try failed; the next waits 10ms on the clock.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, clk.WaitArmedAt(wait, now.Add(10*time.Millisecond)), "the retry waits on the client's clock")
	require.Equal(t, before+1, d.tries.Load(), "no second try before the clock moved")
	clk.Advance(10 * time.Millisecond)
	got, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.Equal(t, before+2, d.tries.Load())
}
