package sqlitedriver

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// TestExecutorEveryOperationOutsideTx calls every operation of
// driver.Executor on the Driver's own executor after Close. Each operation
// is implemented once, on the type a transaction's executor has too, and
// must route itself (a write to the writer, a read to the read pool) when it
// is called outside a transaction: one that forgot would run on a
// transaction it does not have. Each must answer ErrClosed.
func TestExecutorEveryOperationOutsideTx(t *testing.T) {
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ex := d.Executor()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	callEveryOperation(t, ex, func(name string, err error) {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s on a closed driver: %v, want ErrClosed", name, err)
		}
	})
}

// callEveryOperation calls each method of driver.Executor on ex with zero
// params (InTx with a function that does nothing, RunStart with a run and
// its job) and hands check its
// error. A panic fails the test with the method's name.
func callEveryOperation(t *testing.T, ex driver.Executor, check func(name string, err error)) {
	t.Helper()
	ctx := context.Background()
	it := reflect.TypeFor[driver.Executor]()
	v := reflect.ValueOf(ex)
	for i := range it.NumMethod() {
		m := it.Method(i)
		ft := m.Type
		args := []reflect.Value{reflect.ValueOf(ctx)}
		switch m.Name {
		case "InTx":
			args = append(args, reflect.ValueOf(func(context.Context, driver.Executor) error { return nil }))
		case "RunStart": // refuses a run without its job before reaching the store
			args = append(args, reflect.ValueOf(&driver.RunStartParams{Run: &hoppertype.RunRow{ID: "r"}, Job: &hoppertype.JobRow{ID: "r"}}))
		default:
			args = append(args, reflect.New(ft.In(1).Elem()))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s outside a transaction panicked: %v", m.Name, p)
				}
			}()
			out := v.MethodByName(m.Name).Call(args)
			err, _ := out[len(out)-1].Interface().(error)
			check(m.Name, err)
		}()
	}
}
