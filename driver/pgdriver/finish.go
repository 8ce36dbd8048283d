package pgdriver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// JobFinishMany applies workers' transitions in one statement: the batch is
// unnest'ed and joined to the jobs, with the compare-and-set (running, same
// lease token, and the lease expired before the bound when one is given) in
// the WHERE. Items that did not apply get hoppertype.ErrLeaseLost, or
// hoppertype.ErrNotFound when the job does not exist.
//
// The same round trip locks the gate waits on the batch's jobs; the jobs
// that became terminal are then counted in the gates watching them (see
// the driver package's "Gates"), in the same transaction. On the pool the
// call runs in a transaction of its own.
func (e *executor) JobFinishMany(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	if err := e.check(ctx, "finish jobs"); err != nil {
		return nil, err
	}
	var out []driver.JobFinishResult
	err := e.atomic(ctx, func(tx *executor) error {
		var err error
		out, err = tx.finish(ctx, p)
		return err
	})
	return out, err
}

// finishArgs are a finish's argument arrays, reused from one finish to the
// next (finishPool): a finish of a few hundred jobs allocated a dozen
// arrays of them every time, a tenth of the client's allocations per job
// at 2,000 workers. Nothing keeps them past the finish's batch.
type finishArgs struct {
	idx, attempts       []int32
	ids, states, fields []string
	tokens              []int64
	// FlatArray: pgx encodes slices of these element types by
	// reflection, and a FlatArray through its index (a fifth less time,
	// BenchmarkEncodeNullableArrays).
	runAt, endedAt, expBefore pgtype.FlatArray[pgtype.Timestamptz]
	results                   pgtype.FlatArray[[]byte]
	errInfo, stuck            pgtype.FlatArray[pgtype.Text]
	order                     []int
}

var finishPool = sync.Pool{New: func() any { return new(finishArgs) }}

// reset sizes every array to n zero values.
func (a *finishArgs) reset(n int) {
	a.idx, a.attempts = sized(a.idx, n), sized(a.attempts, n)
	a.ids, a.states, a.fields = sized(a.ids, n), sized(a.states, n), sized(a.fields, n)
	a.tokens = sized(a.tokens, n)
	a.runAt, a.endedAt, a.expBefore = sized(a.runAt, n), sized(a.endedAt, n), sized(a.expBefore, n)
	a.results, a.errInfo, a.stuck = sized(a.results, n), sized(a.errInfo, n), sized(a.stuck, n)
}

// release drops what the arrays point at (the items' ids, results,
// errors) and returns them to the pool.
func (a *finishArgs) release() {
	clear(a.ids)
	clear(a.states)
	clear(a.fields)
	clear(a.results)
	clear(a.errInfo)
	clear(a.stuck)
	finishPool.Put(a)
}

// sized returns s with length n and zero values, reusing its array when
// it is large enough.
func sized[S ~[]E, E any](s S, n int) S {
	if cap(s) < n {
		return make(S, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func (e *executor) finish(ctx context.Context, p *driver.JobFinishManyParams) ([]driver.JobFinishResult, error) {
	items := p.Items
	out := make([]driver.JobFinishResult, len(items))
	if len(items) == 0 {
		return out, nil
	}
	n := len(items)
	a := finishPool.Get().(*finishArgs)
	defer a.release()
	a.reset(n)
	idx, ids, tokens, states, attempts := a.idx, a.ids, a.tokens, a.states, a.attempts
	runAt, endedAt, expBefore, results, errInfo, stuck := a.runAt, a.endedAt, a.expBefore, a.results, a.errInfo, a.stuck
	a.order = sortedIndexInto(a.order, n, func(i int) string { return items[i].ID })
	for k, i := range a.order {
		it := &items[i]
		if it.Attempt != int(int32(it.Attempt)) {
			return nil, fmt.Errorf("pgdriver: finish job %q: attempt %d out of range", it.ID, it.Attempt)
		}
		idx[k], ids[k], tokens[k], states[k], attempts[k] = int32(i), it.ID, it.LeaseToken, string(it.State), int32(it.Attempt)
		runAt[k] = pgtype.Timestamptz{Time: it.RunAt, Valid: true}
		endedAt[k], expBefore[k] = ts(it.EndedAt), ts(it.RequireLeaseExpiredBefore)
		results[k] = it.Result
		errInfo[k], stuck[k] = text(marshalError(it.Error)), text(marshalStuck(it.Stuck))
	}
	// When every item passes the row it claimed, the statement returns
	// only what may have changed since (see driver.FinishedRow).
	claimed := true
	for i := range items {
		c := items[i].Claimed
		claimed = claimed && c != nil && c.ID == items[i].ID && c.LeaseToken == items[i].LeaseToken
	}
	// A batch of claimed rows whose changes are plain (no gate, nothing
	// stuck, every state moves) writes them without reading the old rows
	// (finishOwnSQL); any other reads them as it locks them (finishSQL).
	var fields []string
	if claimed && n <= setSpan {
		fields = a.fields
		for k, i := range idx {
			f, ok := finishFields(&items[i])
			if !ok {
				fields = nil
				break
			}
			fields[k] = f
		}
	}
	b := &pgx.Batch{}
	generic := true     // on its generic plan: statements before and after it
	byPosition := false // the rows return their items' positions from 1, not their indexes
	switch {
	case fields != nil && n == 1:
		generic = false
		b.Queue(e.d.q.finishOwnOne, idx[0], ids[0], tokens[0], states[0], attempts[0], runAt[0], results[0], errInfo[0],
			endedAt[0], stuck[0], expBefore[0], string(hoppertype.JobStateRunning), fields[0])
	case fields != nil:
		byPosition = true
		queueGeneric(b, func() {
			b.Queue(e.d.q.finishOwn, ids, tokens, states, attempts, runAt, results, errInfo, endedAt, fields,
				string(hoppertype.JobStateRunning))
		})
	default:
		many := e.d.q.finish
		if claimed {
			many = e.d.q.finishClaimed
		}
		// Its arrays would have it planned at every call.
		queueGeneric(b, func() {
			b.Queue(many, idx, ids, tokens, states, attempts, runAt, results, errInfo, endedAt, stuck, expBefore, runningStates(n))
		})
	}
	b.Queue(e.d.q.gates.watched, ids)
	br := e.q.SendBatch(ctx, b)
	applied := 0
	var waits []gateWait
	err := func() error {
		if generic {
			if err := skip(br, 2); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var i int32
		if claimed {
			var cancel bool
			for rows.Next() {
				if err := rows.Scan(&i, &cancel); err != nil {
					rows.Close()
					return err
				}
				if byPosition {
					if i < 1 || int(i) > n {
						rows.Close()
						return fmt.Errorf("finish returned position %d of %d", i, n)
					}
					i = idx[i-1]
				}
				out[i].Job = driver.FinishedRow(&items[i], cancel)
				applied++
			}
		} else {
			sc := newJobScanner(&i)
			for rows.Next() {
				job, err := sc.scan(rows)
				if err != nil {
					rows.Close()
					return err
				}
				out[i].Job = job
				applied++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if generic {
			if err := skip(br, 1); err != nil {
				return err
			}
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		waits, err = readWaits(rows)
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, e.d.fail("finish jobs", err)
	}
	if len(waits) > 0 {
		var changes []gateChange
		for _, r := range out {
			if r.Job != nil && r.Job.State.Terminal() {
				changes = append(changes, gateChange{id: r.Job.ID, state: r.Job.State, at: r.Job.EndedAt})
			}
		}
		if err := e.observe(ctx, changes, waits); err != nil {
			return nil, e.d.fail("finish jobs: gates", err)
		}
	}
	if applied == n {
		return out, nil
	}
	// Tell a lost lease from a missing job (rare, so a second statement).
	var lost []string
	for i := range out {
		if out[i].Job == nil {
			lost = append(lost, items[i].ID)
		}
	}
	exists := make(map[string]bool, len(lost))
	rows, err := e.q.Query(ctx, e.d.q.existingIDs, lost)
	if err != nil {
		return nil, e.d.fail("finish jobs", err)
	}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { exists[id] = true; return nil }); err != nil {
		return nil, e.d.fail("finish jobs", err)
	}
	for i := range out {
		if out[i].Job != nil {
			continue
		}
		cause := hoppertype.ErrLeaseLost
		if !exists[items[i].ID] {
			cause = hoppertype.ErrNotFound
		}
		out[i].Err = fmt.Errorf("pgdriver: finish job %q: %w", items[i].ID, cause)
	}
	return out, nil
}

// finishFields returns the fields the finish of it changes, listed as
// recordSQL lists them (attempt, run_at, started_at, ended_at, worker,
// result, error, stuck), from the row it claimed; ok is false when the
// change is no set's entry (a gate's, a stuck job's before or after, or
// one that leaves the state as it was) or the finish a rescue's (bound by
// the lease's expiry), which finishSQL then records.
// The claimed row is the job's row but for its lease's expiry and cancel
// flag, which no finish lists.
func finishFields(it *driver.JobFinishParams) (string, bool) {
	c := it.Claimed
	if c.Type == hoppertype.GateType || c.Stuck != nil || it.Stuck != nil || !it.RequireLeaseExpiredBefore.IsZero() ||
		it.State == hoppertype.JobStateStuck || it.State == c.State {
		return "", false
	}
	var f []string
	if it.Attempt != c.Attempt {
		f = append(f, "attempt")
	}
	if !trunc(it.RunAt).Equal(trunc(c.RunAt)) {
		f = append(f, "run_at")
	}
	if !sameTime(it.EndedAt, c.EndedAt) {
		f = append(f, "ended_at")
	}
	if c.Worker != "" {
		f = append(f, "worker")
	}
	if (it.Result == nil) != (c.Result == nil) || !bytes.Equal(it.Result, c.Result) {
		f = append(f, "result")
	}
	if e1, e2 := marshalError(it.Error), marshalError(c.Error); (e1 == nil) != (e2 == nil) || !bytes.Equal(e1, e2) {
		f = append(f, "error")
	}
	return strings.Join(f, ","), true
}

// sameTime reports whether a and b are the same stored time: both none
// (zero, NULL), or equal at the store's microseconds.
func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	return trunc(a).Equal(trunc(b))
}
