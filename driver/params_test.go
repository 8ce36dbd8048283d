package driver_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hopper-go/hopper/driver"
)

// TestMethodsTakeParams holds the driver seam to its convention: every
// operation takes ctx (and, for the methods that work through a caller's
// transaction, that transaction as any) and then one *XxxParams struct of
// package driver, so that an argument can be added later without changing
// the interface. A method added without a params struct fails here.
func TestMethodsTakeParams(t *testing.T) {
	// Methods that are not operations on the store's rows and keep their
	// arguments as they are (see their docs).
	exempt := map[string]bool{
		"Executor.InTx": true,
	}
	ifaces := []reflect.Type{
		reflect.TypeFor[driver.Executor](),
		reflect.TypeFor[driver.TxInserter](),
		reflect.TypeFor[driver.TxJoiner](),
		reflect.TypeFor[driver.QueueDeleter](),
	}
	ctxType := reflect.TypeFor[context.Context]()
	anyType := reflect.TypeFor[any]()
	pkg := reflect.TypeFor[driver.Lease]().PkgPath()
	for _, it := range ifaces {
		if it.NumMethod() == 0 {
			t.Fatalf("%s has no methods", it)
		}
		for i := range it.NumMethod() {
			m := it.Method(i)
			name := it.Name() + "." + m.Name
			if exempt[name] {
				continue
			}
			ft := m.Type
			var problems []string
			switch {
			case ft.NumIn() < 2 || ft.NumIn() > 3:
				problems = append(problems, "want (ctx, *Params) or (ctx, tx any, *Params)")
			case ft.In(0) != ctxType:
				problems = append(problems, "first parameter is not context.Context")
			case ft.NumIn() == 3 && ft.In(1) != anyType:
				problems = append(problems, "middle parameter is not the transaction (any)")
			default:
				p := ft.In(ft.NumIn() - 1)
				if p.Kind() != reflect.Pointer || p.Elem().Kind() != reflect.Struct ||
					p.Elem().PkgPath() != pkg || !strings.HasSuffix(p.Elem().Name(), "Params") {
					problems = append(problems, "last parameter is "+p.String()+", not a *driver.XxxParams struct")
				}
			}
			if ft.IsVariadic() {
				problems = append(problems, "variadic")
			}
			for _, p := range problems {
				t.Errorf("%s%s: %s", name, strings.TrimPrefix(ft.String(), "func"), p)
			}
		}
	}
}
