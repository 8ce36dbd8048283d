package hopper_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hopper-go/hopper"

// imports returns, for each package directory of the module (test files
// left out), the module packages it imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == module || strings.HasPrefix(p, module+"/") {
				rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
				if rel == "" {
					rel = "."
				}
				if !slices.Contains(out[pkg], rel) {
					out[pkg] = append(out[pkg], rel)
				}
			} else if _, ok := out[pkg]; !ok {
				out[pkg] = nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayering holds the import rules of DESIGN's layers: hoppertype
// imports nothing of hopper's; driver only hoppertype; the drivers only
// driver, hoppertype and internal helpers; internal packages never the
// server or the command line; the root names no concrete driver but the
// SQLite default; the server and hopperotel go through the root's public
// API.
func TestLayering(t *testing.T) {
	t.Parallel()
	allowed := func(pkg, imp string) bool {
		switch {
		case pkg == "hoppertype":
			return false
		case pkg == "driver":
			return imp == "hoppertype"
		case strings.HasPrefix(pkg, "driver/"):
			return imp == "driver" || imp == "hoppertype" || strings.HasPrefix(imp, "internal/")
		case pkg == "internal/engine":
			// The engine knows jobs as bytes: the store's vocabulary and
			// its clock, nothing of the public API or a concrete driver.
			return imp == "driver" || imp == "hoppertype" || imp == "internal/hclock"
		case strings.HasPrefix(pkg, "internal/tools/"):
			return true // programs for hopper's developers, on top of everything like cmd
		case strings.HasPrefix(pkg, "internal/"):
			return imp == "driver" || imp == "hoppertype" || strings.HasPrefix(imp, "internal/")
		case pkg == ".":
			return imp == "driver" || imp == "hoppertype" || strings.HasPrefix(imp, "internal/") || imp == "driver/sqlitedriver"
		case pkg == "server":
			return imp == "." || imp == "hoppertype"
		case pkg == "hoppertest":
			return imp == "." || imp == "hoppertype" || imp == "driver/memdriver" || imp == "internal/hclock" || imp == "internal/stubs"
		case pkg == "hopperotel":
			// Middleware on the public API, like any user's.
			return imp == "." || imp == "hoppertype"
		}
		return true // cmd, examples: on top of everything
	}
	for pkg, imps := range moduleImports(t) {
		for _, imp := range imps {
			if !allowed(pkg, imp) {
				t.Errorf("%s imports %s, which its layer may not", pkg, imp)
			}
		}
	}
}

// TestOpenTelemetryOnlyInHopperotel: no package but hopperotel imports
// OpenTelemetry, in its code or its tests, so a program that does not use
// hopperotel builds none of it, and the core never depends on a telemetry
// SDK.
func TestOpenTelemetryOnlyInHopperotel(t *testing.T) {
	t.Parallel()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".git", "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != "go.opentelemetry.io" && !strings.HasPrefix(p, "go.opentelemetry.io/") {
				continue
			}
			checked++
			if pkg != "hopperotel" {
				t.Errorf("%s imports %s: only hopperotel may import OpenTelemetry", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no import of OpenTelemetry found at all: the walk missed hopperotel")
	}
}

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.golden from the root package's exported declarations")

// TestPublicAPI keeps the root package's exported declarations (names and
// signatures, not their docs) in testdata/api.golden, so a change to the
// public API is a visible diff, and a refactor that means to keep it shows
// that it did. Run `go test -run TestPublicAPI -update-api .` after a
// deliberate change.
func TestPublicAPI(t *testing.T) {
	t.Parallel()
	got := exportedAPI(t, ".")
	if *updateAPI {
		if err := os.WriteFile("testdata/api.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/api.golden")
	if err != nil {
		t.Fatalf("%v (run go test -run TestPublicAPI -update-api . to write it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		var diff []string
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				diff = append(diff, "- "+l)
			}
		}
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				diff = append(diff, "+ "+l)
			}
		}
		t.Fatalf("the public API changed (go test -run TestPublicAPI -update-api . if it is meant to):\n%s", strings.Join(diff, "\n"))
	}
}

// exportedAPI lists a package's exported declarations, one per line,
// sorted, without comments.
func exportedAPI(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	print := func(n any) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0) // no comments
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				d.Body = nil
				lines = append(lines, print(d))
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							lines = append(lines, "type "+print(stripUnexported(s)))
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								typ := ""
								if s.Type != nil {
									typ = " " + print(s.Type)
								}
								lines = append(lines, d.Tok.String()+" "+n.Name+typ)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func exportedRecv(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	typ := fl.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
		case *ast.IndexExpr:
			typ = x.X
		case *ast.IndexListExpr:
			typ = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// stripUnexported drops a struct's unexported fields, which are not API.
func stripUnexported(s *ast.TypeSpec) *ast.TypeSpec {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		return s
	}
	var kept []*ast.Field
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			kept = append(kept, f) // embedded
			continue
		}
		var names []*ast.Ident
		for _, n := range f.Names {
			if n.IsExported() {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			c := *f
			c.Names, c.Tag, c.Doc, c.Comment = names, nil, nil, nil
			kept = append(kept, &c)
		}
	}
	c := *s
	cst := *st
	cst.Fields = &ast.FieldList{List: kept}
	c.Type = &cst
	return &c
}
