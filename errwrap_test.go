package hopper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
)

// failingCodec refuses to encode anything, with errCodec.
type failingCodec struct{ hopper.JSONCodec }

var errCodec = errors.New("codec refuses")

func (failingCodec) Marshal(any) ([]byte, error) { return nil, errCodec }

// TestWrapKeepsCauses: an error that wraps a sentinel with the error that
// caused it keeps both in its chain, so errors.Is and errors.As find the
// sentinel and the cause alike.
func TestWrapKeepsCauses(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := newClient(t, hopper.Config{})
	add := hopper.Define("add", addHandler, nil)
	refused := hopper.Define("refused", addHandler, &hopper.TypeOpts[addIn]{Codec: failingCodec{}})
	require.NoError(t, c.Register(add, refused))

	t.Run("input that does not decode", func(t *testing.T) {
		_, err := c.EnqueueName(ctx, "add", json.RawMessage(`{"a":"one"}`), nil)
		require.ErrorIs(t, err, hopper.ErrInvalidInput)
		var typeErr *json.UnmarshalTypeError
		require.ErrorAs(t, err, &typeErr, "the decoder's error stays in the chain")
		require.Equal(t, "a", typeErr.Field)
	})
	t.Run("input the codec cannot encode", func(t *testing.T) {
		_, err := refused.Enqueue(ctx, c, addIn{A: 1}, nil)
		require.ErrorIs(t, err, hopper.ErrInvalidInput)
		require.ErrorIs(t, err, errCodec, "the codec's error stays in the chain")
	})
}

// TestErrorfWrapsErrors: no fmt.Errorf of the module's code (tests left
// out) that wraps with %w formats an error named err with %v, which would
// drop it from errors.Is and errors.As: it takes %w too. Nor does any
// fmt.Errorf format a recovered panic value with %v: a panic(err) keeps err
// as the cause (through engine.PanicCause, with %w).
func TestErrorfWrapsErrors(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "bench", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		recovered := map[*ast.Object]bool{} // the variables given recover()'s value
		ast.Inspect(f, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
				for i, rhs := range as.Rhs {
					c, ok := rhs.(*ast.CallExpr)
					if !ok || len(c.Args) != 0 {
						continue
					}
					if fn, ok := c.Fun.(*ast.Ident); ok && fn.Name == "recover" {
						if id, ok := as.Lhs[i].(*ast.Ident); ok && id.Obj != nil {
							recovered[id.Obj] = true
						}
					}
				}
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Errorf" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			verbs, ok := formatVerbs(format)
			if !ok {
				return true
			}
			wraps := strings.ContainsRune(string(verbs), 'w')
			for i, v := range verbs {
				if v != 'v' || i+1 >= len(call.Args) {
					continue
				}
				id, ok := call.Args[i+1].(*ast.Ident)
				switch {
				case !ok:
				case id.Obj != nil && recovered[id.Obj]:
					t.Errorf("%s: fmt.Errorf formats a recovered panic value with %%v: wrap engine.PanicCause(%s) with %%w", fset.Position(call.Pos()), id.Name)
				case wraps && id.Name == "err":
					t.Errorf("%s: fmt.Errorf wraps with %%w but formats err with %%v: use %%w for it too", fset.Position(call.Pos()))
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
}

// formatVerbs returns the verb of each argument a format string consumes,
// in order ('*' for a width or precision taken from an argument); ok is
// false for a format that picks arguments by index.
func formatVerbs(format string) (verbs []rune, ok bool) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		for i < len(format) && (format[i] == '.' || format[i] == '*' || format[i] >= '0' && format[i] <= '9') {
			if format[i] == '*' {
				verbs = append(verbs, '*')
			}
			i++
		}
		if i >= len(format) {
			break
		}
		switch format[i] {
		case '%':
			continue
		case '[':
			return nil, false
		}
		verbs = append(verbs, rune(format[i]))
	}
	return verbs, true
}

var errPanicked = errors.New("the value a panic carried")

// TestPanicKeepsCause: a handler or a step that panics with an error keeps
// that error as the cause. The work middleware and the classifier see an
// error matching both ErrPanic and the panicked error, and a step that
// panics with Abort(err) ends its retries at once, as returning it would.
func TestPanicKeepsCause(t *testing.T) { forEachDriver(t, testPanicKeepsCause) }

func testPanicKeepsCause(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var mu sync.Mutex
	var seen, classified []error
	mw := hopper.WorkMiddlewareFunc(func(ctx context.Context, job *hopper.JobRow, doInner func(context.Context) error) error {
		err := doInner(ctx)
		if job.Type == "panics" {
			mu.Lock()
			seen = append(seen, err)
			mu.Unlock()
		}
		return err
	})
	classify := func(err error, _ hopper.FailureInfo) hopper.Decision {
		mu.Lock()
		classified = append(classified, err)
		mu.Unlock()
		return hopper.DecideRetry()
	}
	boom := hopper.Define("panics", func(context.Context, int) (int, error) {
		panic(fmt.Errorf("wrapped: %w", errPanicked))
	}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}})
	var tries atomic.Int32
	flow := hopper.Workflow("panics-in-step", func(wf hopper.WorkflowContext, _ int) (int, error) {
		return hopper.Step(wf, "refuses", func(context.Context) (int, error) {
			tries.Add(1)
			panic(hopper.Abort(errPanicked))
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond, Jitter: hopper.NoJitter}})
	}, nil)
	c := newClient(t, hopper.Config{Driver: newDriver(t), WorkMiddleware: []hopper.WorkMiddleware{mw}, Classify: classify})
	require.NoError(t, c.Register(boom, flow))
	ctx := testCtx(t)

	h, err := boom.Enqueue(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrPanic, "the waiter, from the store")
	mu.Lock()
	require.Len(t, seen, 1)
	require.ErrorIs(t, seen[0], hopper.ErrPanic)
	require.ErrorIs(t, seen[0], errPanicked, "the middleware sees the panic's cause")
	require.Len(t, classified, 1)
	require.ErrorIs(t, classified[0], errPanicked, "so does the classifier")
	mu.Unlock()

	run, err := flow.Start(ctx, c, 0, nil)
	require.NoError(t, err)
	_, err = run.Result(ctx)
	require.ErrorIs(t, err, hopper.ErrAborted)
	require.Equal(t, int32(1), tries.Load(), "the abort the step panicked with ends its retries")
}
