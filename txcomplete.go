package hopper

import (
	"context"
	"fmt"
	"reflect"
)

// CompleteTx finishes the job whose handler runs under ctx as succeeded,
// with out as its result, through tx: a transaction the handler opened on
// the client's store, in which it made the job's writes. The job's success
// and those writes then commit together, or neither does: a crash before
// the commit leaves neither, and the job runs again; after it, the job is
// done and never runs again. That makes a job's database effect
// exactly-once, where a handler's effects are otherwise at least once.
//
// tx is a *sql.Tx on the SQLite file (begin it on the driver's DB(): its
// one write connection, for which the driver's own writes wait meanwhile,
// so no lock is fought over), or a pgx.Tx on the PostgreSQL database (or
// a *sql.Tx opened through pgx's database/sql driver); out has the job
// type's output type. The memory store refuses with an error
// matching ErrTxUnsupported.
//
// Everything a success writes is written in tx, as the client would write
// it on its own: the job's finish, fenced by the attempt's lease, its
// group's count and value (FoldGroup, FinalizeGroup), the children it
// spawned, the gates watching it, the run its end wakes, the change feed
// and the InCommit observers. A worker whose lease was lost (its job was
// rescued and may run elsewhere) writes nothing: CompleteTx returns an
// error matching ErrLeaseLost. When its writes fail (a lost lease, an
// observer's veto, a store error) CompleteTx rolls tx back, so the
// handler's writes cannot commit without the job's success; the handler
// should return the error. Arguments it refuses before writing (an error
// matching ErrInvalidInput, driver.ErrTxType or ErrTxUnsupported) leave tx
// as it is.
//
// Call it last, just before committing tx, and commit or roll back before
// the handler returns. Once tx committed the job has succeeded, whatever
// the handler returns; if tx rolled back instead, the job ends as the
// handler's return says (a handler may retry its transaction and call
// CompleteTx again). Spawn children before CompleteTx: after it, Spawn is
// refused.
//
// Workflow runs end with their function and cannot be completed this way;
// a step writes in a transaction with TxStep.
func CompleteTx[O any](ctx context.Context, tx any, out O) error {
	jc := JobFromContext(ctx)
	if jc == nil || jc.a == nil {
		return fmt.Errorf("%w: CompleteTx outside a job's handler", ErrInvalidInput)
	}
	if tx == nil {
		return fmt.Errorf("%w: CompleteTx with a nil transaction", ErrInvalidInput)
	}
	bt, _ := jc.c.eng.Type(jc.row.Type).(*boundType)
	if bt == nil {
		return fmt.Errorf("%w: CompleteTx: job type %q is not registered with the client", ErrUnknownType, jc.row.Type)
	}
	b, err := bt.t.encodeOutput(jc.c, out)
	if err != nil {
		return err
	}
	return jc.a.CompleteTx(ctx, tx, b)
}

// encodeOutput encodes out, which must be of the type's output type O, as
// run encodes the handler's output.
func (t *typeImpl[I, O]) encodeOutput(c *Client, out any) ([]byte, error) {
	v, ok := out.(O)
	if !ok {
		return nil, fmt.Errorf("%w: CompleteTx: the output of %q is a %v, got a %T", ErrInvalidInput, t.typeName, reflect.TypeFor[O](), out)
	}
	if isNoValue[O]() {
		return nil, nil
	}
	b, err := t.codec(c).Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return b, nil
}

// encodeOutput refuses: a run's job ends with its workflow function.
func (w *workflowImpl[I, O]) encodeOutput(*Client, any) ([]byte, error) {
	return nil, fmt.Errorf("%w: CompleteTx in workflow %q: a run ends with its function (write through TxStep instead)", ErrInvalidInput, w.wfName)
}
