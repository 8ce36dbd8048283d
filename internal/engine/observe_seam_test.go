package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/hopper-go/hopper/driver"
)

// noChangeRows are the store operations that write no change of the
// feed (reads, and writes to rows that are not jobs, gates or runs), so
// the InCommit observers need not see them. Every other operation of
// driver.Executor must be wrapped by observedDriver.
var noChangeRows = map[string]string{
	"Notify":               "a hint, no row",
	"JobGet":               "read",
	"JobGetMany":           "read",
	"JobList":              "read",
	"JobCountByState":      "read",
	"JobNextRunAt":         "read",
	"JobListExpiredLeases": "read",
	"JobDeleteFinished":    "retention deletes rows and their changes; it changes no state",
	"GroupInsert":          "groups are not in the feed",
	"GroupGet":             "read",
	"GroupUpdate":          "groups are not in the feed",
	"KeySetIfAbsent":       "keys are not in the feed",
	"KeyDeleteExpired":     "keys are not in the feed",
	"LeaderAttempt":        "leadership is not in the feed",
	"LeaderResign":         "leadership is not in the feed",
	"WorkerUpsert":         "worker rows are not in the feed",
	"WorkerList":           "read",
	"WorkerDelete":         "worker rows are not in the feed",
	"QueueSetPaused":       "queue rows are not in the feed",
	"QueueList":            "read",
	"QueueDepthList":       "read",
	"ScheduleUpsert":       "schedule rows are not in the feed",
	"ScheduleRecord":       "schedule rows are not in the feed (an occurrence's job is inserted through JobInsertMany)",
	"ScheduleDefine":       "schedule rows are not in the feed",
	"ScheduleSetPaused":    "schedule rows are not in the feed",
	"ScheduleList":         "read",
	"ScheduleDelete":       "schedule rows are not in the feed",
	"RunGet":               "read",
	"RunLoad":              "read",
	"RunList":              "read",
	"RunEventList":         "read",
	"HookInsert":           "hooks are not in the feed",
	"HookGet":              "read",
	"HookResume":           "hooks are not in the feed (the run's wake-up goes through JobWake)",
	"HookListByRun":        "read",
	"StreamAppend":         "stream chunks are not in the feed",
	"StreamRead":           "read",
	"GateGet":              "read",
	"GateWaitList":         "read",
	"GateEdges":            "read",
	"GateWatcherList":      "read",
	"ChangeList":           "read",
	"ChangeScan":           "read",
	"ChangeTail":           "read",
	"ChangeMark":           "read",
	"CursorLease":          "cursors are not in the feed",
	"CursorAdvance":        "cursors are not in the feed",
	"CursorList":           "read",
}

// TestObserversCannotBeBypassed enumerates driver.Executor: an operation
// that may write a change of the feed must be wrapped by observedDriver
// (which runs the InCommit observers in its transaction); one that cannot
// must say so in noChangeRows. A new operation of the driver seam is in
// neither until someone decides, so it cannot slip past the observers.
func TestObserversCannotBeBypassed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "observe.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := map[string]bool{}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "observedDriver" {
				wrapped[fd.Name.Name] = true
			}
		}
	}
	ex := reflect.TypeFor[driver.Executor]()
	for i := range ex.NumMethod() {
		name := ex.Method(i).Name
		_, quiet := noChangeRows[name]
		switch {
		case wrapped[name] && quiet:
			t.Errorf("%s is wrapped by observedDriver and listed as writing no change: which is it?", name)
		case !wrapped[name] && !quiet:
			t.Errorf("driver.Executor.%s is neither wrapped by observedDriver (observe.go) nor listed in noChangeRows: "+
				"wrap it if it can write a change of the feed, list it with the reason otherwise", name)
		}
	}
	for name := range noChangeRows {
		if _, ok := ex.MethodByName(name); !ok {
			t.Errorf("noChangeRows lists %s, which driver.Executor no longer has", name)
		}
	}
}
