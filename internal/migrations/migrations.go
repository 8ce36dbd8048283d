// Package migrations loads the embedded, versioned schema migrations the
// SQL drivers apply: one file per version, named NNNN_description.sql.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema version.
type Migration struct {
	Version int
	Name    string // the file name without .sql
	SQL     string
}

// MustLoad reads dir's migrations from fsys in version order. A file name
// that is not NNNN_description.sql, or versions that are not numbered 1, 2,
// 3… are a programming error: it panics, naming owner.
func MustLoad(fsys fs.FS, dir, owner string) []Migration {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			panic(fmt.Sprintf("%s: bad migration file name %q", owner, name))
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			panic(fmt.Sprintf("%s: migrations are not numbered 1, 2, 3...: %q", owner, m.Name))
		}
	}
	return out
}
