package hoppertest

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/hopper-go/hopper"
)

// RequireReplay replays every history file matching pattern (a
// filepath.Glob pattern, such as "testdata/histories/*.json") whose
// workflow is w's against w's current code, offline, and fails the test
// naming each file whose replay diverges (a *hopper.NonDeterminismError
// naming the event) or cannot be read. Files of other workflows are left
// alone; a pattern that matches no file of w's fails, so a moved directory
// is not a silent pass. It returns how many histories it replayed.
//
// Export histories of real runs with `hopper runs history ID > file.json`
// (or Client.RunHistory), keep them beside the tests, and run this in CI
// before deploying a change to a workflow with runs in flight.
func RequireReplay[I, O any](tb TB, w *hopper.WorkflowType[I, O], pattern string) int {
	tb.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		tb.Fatalf("hoppertest: replay %s: %v", pattern, err)
	}
	var failures []string
	n := 0
	for _, path := range paths {
		h, err := hopper.ReadHistoryFile(path)
		if err != nil {
			failures = append(failures, path+": "+err.Error())
			continue
		}
		if h.Workflow != w.Name() {
			continue
		}
		n++
		if err := hopper.ReplayHistory(context.Background(), w, h); err != nil {
			failures = append(failures, path+": "+err.Error())
		}
	}
	switch {
	case len(failures) > 0:
		tb.Fatalf("hoppertest: %d of the histories of workflow %q do not replay against its code:\n  %s", len(failures), w.Name(), strings.Join(failures, "\n  "))
	case n == 0:
		tb.Fatalf("hoppertest: no history of workflow %q matches %s", w.Name(), pattern)
	}
	return n
}
