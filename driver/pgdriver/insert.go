package pgdriver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// copyMinRows is the batch size from which an insert without unique keys
// goes through COPY instead of the unnest INSERT.
const copyMinRows = 256

// maxInsertRounds bounds how often an insert retries jobs whose unique-key
// holder finished between the insert and the read of the holder.
const maxInsertRounds = 8

// JobInsertMany inserts jobs in order; see driver.Executor. A duplicate id
// fails the whole call and inserts nothing.
func (e *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	if err := e.check(ctx, "insert jobs"); err != nil {
		return nil, err
	}
	res, err := e.insertJobs(ctx, params.Jobs)
	if err != nil {
		return nil, e.d.fail("insert jobs", err)
	}
	return res, nil
}

// JobInsertManyTx inserts jobs through tx, with JobInsertMany's semantics:
// a pgx.Tx on the driver's database, or a *sql.Tx opened through pgx's
// database/sql driver (github.com/jackc/pgx/v5/stdlib); any other type is
// an error wrapping driver.ErrTxType. In the same transaction it notifies
// TopicJobAvailable with the queues that received pending jobs, so workers
// wake when the caller commits. The jobs exist if and only if tx commits.
func (d *Driver) JobInsertManyTx(ctx context.Context, tx any, params *driver.JobInsertManyParams) ([]driver.JobInsertResult, error) {
	e, err := d.callerTx("insert jobs", tx)
	if err != nil {
		return nil, err
	}
	res, err := e.JobInsertMany(ctx, params)
	if err != nil {
		return nil, err
	}
	var queues []string
	seen := make(map[string]bool)
	for _, r := range res {
		if !r.Existing && r.Job.State == hoppertype.JobStatePending && !seen[r.Job.Queue] {
			seen[r.Job.Queue] = true
			queues = append(queues, r.Job.Queue)
		}
	}
	if len(queues) > 0 {
		buf := &noteBuf{}
		for _, q := range queues {
			buf.add(d.channel(driver.TopicJobAvailable), q)
		}
		if err := buf.flush(ctx, e.q, d.q.notifyMany); err != nil {
			return nil, d.fail("notify", err)
		}
	}
	return res, nil
}

// uniqueKey names a unique key: a job type and its key.
type uniqueKey struct{ typ, key string }

// insertOutcome is what happened to one candidate of an insert.
type insertOutcome struct {
	inserted bool
	holder   *hoppertype.JobRow // the live job holding the key, when not inserted
}

// insertJobs inserts jobs. A job whose unique key an earlier job of the same
// call takes is resolved in Go; the others (candidates) go to the database in
// one statement, then the live holders of the keys that conflicted are read.
func (e *executor) insertJobs(ctx context.Context, jobs []*hoppertype.JobRow) ([]driver.JobInsertResult, error) {
	shadow := make([]int, len(jobs)) // index of the earlier job holding the key, or -1
	firstHolder := make(map[uniqueKey]int)
	ids := make(map[string]bool, len(jobs))
	var cands []*hoppertype.JobRow
	keyed := false
	for i, j := range jobs {
		if j == nil || j.ID == "" {
			return nil, fmt.Errorf("job %d has no id", i)
		}
		shadow[i] = -1
		if j.UniqueKey != "" {
			k := uniqueKey{j.Type, j.UniqueKey}
			if h, ok := firstHolder[k]; ok {
				shadow[i] = h
				continue
			}
			if !j.State.Terminal() {
				firstHolder[k] = i
			}
			keyed = true
		}
		if ids[j.ID] {
			return nil, fmt.Errorf("id %q appears twice: %w", j.ID, hoppertype.ErrDuplicateID)
		}
		ids[j.ID] = true
		cands = append(cands, j)
	}
	outcomes := make(map[string]*insertOutcome, len(cands))
	var err error
	switch {
	case len(cands) == 0:
	case !keyed && len(cands) >= copyMinRows && !e.callerSQLTx:
		err = e.copyJobs(ctx, cands)
		for _, c := range cands {
			outcomes[c.ID] = &insertOutcome{inserted: true}
		}
	case !keyed:
		err = e.insertRound(ctx, cands, outcomes)
	default:
		err = e.withTx(ctx, func(tx *executor) error { return tx.insertKeyed(ctx, cands, outcomes) })
	}
	if err != nil {
		return nil, err
	}
	out := make([]driver.JobInsertResult, len(jobs))
	for i, j := range jobs {
		src := j
		if shadow[i] >= 0 {
			src = jobs[shadow[i]]
		}
		o := outcomes[src.ID]
		switch {
		case o.inserted:
			out[i] = driver.JobInsertResult{Job: storedJob(src), Existing: shadow[i] >= 0}
		default:
			out[i] = driver.JobInsertResult{Job: o.holder.Clone(), Existing: true}
		}
	}
	return out, nil
}

// insertKeyed inserts candidates some of which have unique keys, in e's
// transaction, then reads the live holders of the keys that conflicted. A job
// whose holder finished before it could be read is tried again.
func (e *executor) insertKeyed(ctx context.Context, cands []*hoppertype.JobRow, outcomes map[string]*insertOutcome) error {
	pending := cands
	for round := 0; len(pending) > 0; round++ {
		if round == maxInsertRounds {
			return fmt.Errorf("unique keys kept changing holders after %d attempts", round)
		}
		if err := e.insertRound(ctx, pending, outcomes); err != nil {
			return err
		}
		var types, keys []string
		for _, c := range pending {
			if !outcomes[c.ID].inserted {
				types = append(types, c.Type)
				keys = append(keys, c.UniqueKey)
			}
		}
		if len(types) == 0 {
			return nil
		}
		held, err := collectJobs(e.q.Query(ctx, e.d.q.holders, types, keys))
		if err != nil {
			return err
		}
		holders := make(map[uniqueKey]*hoppertype.JobRow, len(held))
		for _, h := range held {
			holders[uniqueKey{h.Type, h.UniqueKey}] = h
		}
		var again []*hoppertype.JobRow
		for _, c := range pending {
			if o := outcomes[c.ID]; !o.inserted {
				if o.holder = holders[uniqueKey{c.Type, c.UniqueKey}]; o.holder == nil {
					again = append(again, c)
				}
			}
		}
		pending = again
	}
	return nil
}

// insertRound runs the insert statement for cands and records for each
// whether it was inserted. A candidate without a unique key is always
// inserted unless the call fails; one with a key may have conflicted.
func (e *executor) insertRound(ctx context.Context, cands []*hoppertype.JobRow, outcomes map[string]*insertOutcome) error {
	a, err := newJobArrays(cands)
	if err != nil {
		return err
	}
	query, args := e.d.q.insertJobs, a.args()
	if len(cands) == 1 && cands[0].UniqueKey == "" {
		query, args = e.d.q.insertOne, a.row(0)
	}
	rows, err := e.q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	inserted := make(map[string]bool, len(cands))
	var dup string
	var id string
	var isDup bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &isDup}, func() error {
		if isDup {
			dup = id
		} else {
			inserted[id] = true
		}
		return nil
	}); err != nil {
		return err
	}
	if dup != "" {
		return fmt.Errorf("id %q: %w", dup, hoppertype.ErrDuplicateID)
	}
	for _, c := range cands {
		if !inserted[c.ID] && c.UniqueKey == "" {
			return fmt.Errorf("job %q was not inserted", c.ID)
		}
		outcomes[c.ID] = &insertOutcome{inserted: inserted[c.ID]}
	}
	return nil
}

// copyJobs inserts jobs without unique keys with COPY; a duplicate id fails
// the whole COPY.
func (e *executor) copyJobs(ctx context.Context, jobs []*hoppertype.JobRow) error {
	a, err := newJobArrays(jobs)
	if err != nil {
		return err
	}
	_, err = e.q.CopyFrom(ctx, pgx.Identifier{e.d.schema, "jobs"}, jobColumns,
		pgx.CopyFromSlice(len(jobs), func(i int) ([]any, error) { return a.row(i), nil }))
	return err
}

// JobGetTx reads a job through tx, a transaction JobInsertManyTx takes:
// it sees the jobs tx inserted. A missing job is hoppertype.ErrNotFound. A
// transaction that a failed statement aborted fails the read.
func (d *Driver) JobGetTx(ctx context.Context, tx any, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	e, err := d.callerTx("get job", tx)
	if err != nil {
		return nil, err
	}
	return e.JobGet(ctx, params)
}

// callerTx is the executor that writes through a caller's transaction: a
// pgx.Tx or a *sql.Tx opened through pgx's database/sql driver; any other
// type is an error wrapping driver.ErrTxType.
func (d *Driver) callerTx(op string, tx any) (*executor, error) {
	switch t := tx.(type) {
	case pgx.Tx:
		if t == nil {
			return nil, fmt.Errorf("pgdriver: %s: a nil pgx.Tx: %w", op, driver.ErrTxType)
		}
		return &executor{d: d, q: t, tx: t}, nil
	case *sql.Tx:
		if t == nil {
			return nil, fmt.Errorf("pgdriver: %s: a nil *sql.Tx: %w", op, driver.ErrTxType)
		}
		return &executor{d: d, q: sqlTx{t}, callerSQLTx: true}, nil
	}
	return nil, fmt.Errorf("pgdriver: %s: %T is neither a pgx.Tx nor a *sql.Tx: %w", op, tx, driver.ErrTxType)
}

// RunStartInTx stores a run and its job through the caller's pgx.Tx or
// *sql.Tx, in one statement; see driver.TxInserter.
func (d *Driver) RunStartInTx(ctx context.Context, tx any, params *driver.RunStartParams) (bool, error) {
	e, err := d.callerTx("start run", tx)
	if err != nil {
		return false, err
	}
	return e.RunStart(ctx, params)
}
