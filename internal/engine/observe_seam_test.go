package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
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
	"JobScan":              "read",
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
	"ChangeListBefore":     "read",
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

// txInserterReads are the driver.TxInserter methods that write nothing.
// Every other one writes through the caller's transaction.
var txInserterReads = map[string]string{
	"JobGetTx": "read",
}

// TestCallerTxWritesMeetObservers: the writes through a caller's own
// transaction (driver.TxInserter: EnqueueTx, StartTx) cannot slip past the
// InCommit observers either. Each method of the interface is a read listed
// in txInserterReads or a write, and every call of a write, in the engine
// and the root package, is made inside a function given to InCallerTx,
// which shows its changes to the observers in that transaction. A new write
// method is a write until someone says otherwise.
func TestCallerTxWritesMeetObservers(t *testing.T) {
	ti := reflect.TypeFor[driver.TxInserter]()
	writes := map[string]int{} // calls found, by method
	for i := range ti.NumMethod() {
		if name := ti.Method(i).Name; txInserterReads[name] == "" {
			writes[name] = 0
		}
	}
	for name := range txInserterReads {
		if _, ok := ti.MethodByName(name); !ok {
			t.Errorf("txInserterReads lists %s, which driver.TxInserter no longer has", name)
		}
	}
	fset := token.NewFileSet()
	for _, dir := range []string{".", "../.."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var inside []ast.Node // the functions given to InCallerTx
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "InCallerTx" {
						for _, a := range call.Args {
							if fl, ok := a.(*ast.FuncLit); ok {
								inside = append(inside, fl)
							}
						}
					}
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if _, write := writes[sel.Sel.Name]; !write {
					return true
				}
				writes[sel.Sel.Name]++
				for _, fl := range inside {
					if fl.Pos() <= call.Pos() && call.End() <= fl.End() {
						return true
					}
				}
				t.Errorf("%s: %s writes through the caller's transaction outside InCallerTx, unseen by the InCommit observers",
					fset.Position(call.Pos()), sel.Sel.Name)
				return true
			})
		}
	}
	for name, n := range writes {
		if n == 0 {
			t.Errorf("no call of driver.TxInserter.%s found: list it in txInserterReads if it writes nothing", name)
		}
	}
}
