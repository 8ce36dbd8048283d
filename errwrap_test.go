package hopper_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
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
// drop it from errors.Is and errors.As: it takes %w too.
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
		ast.Inspect(f, func(n ast.Node) bool {
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
			if !ok || !strings.ContainsRune(string(verbs), 'w') {
				return true
			}
			for i, v := range verbs {
				if v != 'v' || i+1 >= len(call.Args) {
					continue
				}
				if id, ok := call.Args[i+1].(*ast.Ident); ok && id.Name == "err" {
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
