package pgdriver

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// promoteBatch bounds how many due jobs of a queue one claim promotes; the
// rest wait for the next claim or for JobPromote.
const promoteBatch = 1000

// claimDetachTimeout bounds a claim that runs on after its caller's
// context ended.
const claimDetachTimeout = 10 * time.Second

// limitArg is a LIMIT argument: n, or NULL (no limit) when n <= 0.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}

// JobClaim promotes the queue's due jobs, then claims pending ones; see
// driver.Executor. Both statements go in one round trip and one transaction.
// The context is checked before the claim is sent, not while it runs: a
// claim the caller never hears of would hold its jobs until their leases
// expire.
//
// Outside a transaction a claim that follows a full one starts
// after its last job (see claimCursor); one that comes back short there
// looks again from the head of the queue for the rest, in a second round
// trip.
//
// A claim's jobs' changes are one set of at most setSpan entries (see
// chainedSets): a claim of more is made of claims of setSpan, each its own
// transaction outside one, until one comes back short. Those that
// committed are returned even when a later one fails: their jobs are
// leased to the caller.
func (e *executor) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if p.Limit <= setSpan {
		return e.claim(ctx, p)
	}
	var all []*hoppertype.JobRow
	for left := p.Limit; left > 0; {
		part := *p
		part.Limit = min(left, setSpan)
		rows, err := e.claim(ctx, &part)
		if err != nil {
			if len(all) > 0 && e.tx == nil {
				break
			}
			return nil, err
		}
		all = append(all, rows...)
		left -= part.Limit
		if len(rows) < part.Limit {
			break
		}
	}
	sortClaimed(all)
	return all, nil
}

func (e *executor) claim(ctx context.Context, p *driver.JobClaimParams) ([]*hoppertype.JobRow, error) {
	if err := e.check(ctx, "claim jobs"); err != nil {
		return nil, err
	}
	if e.tx == nil {
		// Once sent, a claim is seen through: abandoning it on cancellation
		// could commit a claim nobody knows about, leaving its jobs running
		// until their leases expire.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), claimDetachTimeout)
		defer cancel()
	}
	var key string
	var cur *claimCursor
	if e.onPool() && p.Limit > 0 {
		key = cursorKey(p)
		cur = e.d.cursors.get(key, p.Now)
	}
	rows, promoted, err := e.claimOnce(ctx, p, p.Limit, cur)
	if err != nil {
		if key != "" {
			e.d.cursors.drop(key)
		}
		return nil, e.d.fail("claim jobs", err)
	}
	fellBack := false
	if cur != nil && len(rows) < p.Limit {
		// Jobs may wait before the cursor (made pending behind it, or
		// locked when a claim passed them): the rest of the limit comes
		// from the head. The first claim has committed, so its jobs are
		// returned whatever this one does; a failure here is the next
		// claim's to meet.
		fellBack = true
		more, n, err := e.claimOnce(ctx, p, p.Limit-len(rows), nil)
		if err == nil {
			rows, promoted = append(rows, more...), promoted+n
		}
	}
	sortClaimed(rows)
	if key != "" {
		switch {
		case promoted > 0 || fellBack || len(rows) < p.Limit || keyed(rows):
			// Due jobs just made pending may sort before any cursor; a
			// short claim has reached the queue's end; a queue of jobs
			// with concurrency keys has jobs the claim passed by (their
			// keys full), which the next claims must see again.
			e.d.cursors.drop(key)
		case cur != nil:
			e.d.cursors.put(key, claimCursor{at: cursorAt(rows[len(rows)-1]), since: cur.since, uses: cur.uses + 1})
		default:
			e.d.cursors.put(key, claimCursor{at: cursorAt(rows[len(rows)-1]), since: p.Now})
		}
	}
	return e.admitKeyed(ctx, rows)
}

// claimOnce promotes the queue's due jobs and claims up to limit pending
// ones (none when limit <= 0), after cur's key when cur is not nil, in one
// round trip and one transaction; it returns the claimed jobs, unordered,
// and how many due jobs it promoted.
func (e *executor) claimOnce(ctx context.Context, p *driver.JobClaimParams, limit int, cur *claimCursor) ([]*hoppertype.JobRow, int64, error) {
	b := &pgx.Batch{}
	// The claim must walk jobs_claim in order and stop at LIMIT: an index
	// scan marks the entries of claimed rows dead as it passes them
	// (kill_prior_tuple), so the next claim skips them. Right after a burst of
	// inserts, before autovacuum has analyzed the table, the planner prefers
	// a bitmap scan and a sort, which rereads every dead entry at the head of
	// the index on every claim (a million-job backlog then cut throughput to
	// a quarter). Bitmap and sequential scans are off for the claim's own
	// transaction; a claim inside a caller's transaction leaves its
	// settings alone.
	planned := e.withClaimPlan(b)
	b.Queue(e.d.q.promoteQueue, p.Queue, p.Now)
	if limit > 0 {
		sql, withLimit := e.d.q.claimStmt(len(p.Types) > 0, limit, cur != nil)
		args := []any{p.Queue, limit, ts(p.LeaseExpiresAt), p.Worker, p.Now}
		if !withLimit {
			args = slices.Delete(args, 1, 2)
		}
		if len(p.Types) > 0 {
			args = append(args, p.Types)
		}
		if cur != nil {
			args = append(args, int32(cur.at.priority), ts(cur.at.runAt), cur.at.id)
		}
		b.Queue(sql, args...)
	}
	rows := []*hoppertype.JobRow{}
	var promoted int64
	err := e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
		if planned {
			if err := skip(br, 1); err != nil { // the planner settings
				return err
			}
		}
		if err := br.QueryRow().Scan(&promoted); err != nil { // the promotion
			return err
		}
		if limit <= 0 {
			return nil
		}
		got, err := collectJobs(br.Query())
		if got != nil {
			rows = got
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return rows, promoted, nil
}

// keyed reports whether a job of rows has a concurrency limit.
func keyed(rows []*hoppertype.JobRow) bool {
	for _, j := range rows {
		if j.ConcurrencyKey != "" && j.ConcurrencyLimit > 0 {
			return true
		}
	}
	return false
}

// sortClaimed puts claimed rows in claim order (RETURNING has none):
// priority, highest first, then RunAt, then ID.
func sortClaimed(rows []*hoppertype.JobRow) {
	slices.SortFunc(rows, func(a, b *hoppertype.JobRow) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// admitKeyed keeps the claimed jobs whose concurrency keys have room. The
// claim skips keys at their limit as its snapshot saw them, so one claim
// (taking several jobs of a key) or claimers racing may go past a limit.
// Admission settles it, one claimer per key at a time (the key's row in
// concurrency_keys, FOR UPDATE): every other running job of the key counts
// first — admitted or still being admitted by another claimer — and this
// claim's jobs of the key are admitted in claim order while they fit under
// their limit; the rest go back to pending, their attempts unused. Racing
// claimers may so give back more than needed (the next claim takes them),
// never admit too many.
func (e *executor) admitKeyed(ctx context.Context, rows []*hoppertype.JobRow) ([]*hoppertype.JobRow, error) {
	var keys []string
	mine := map[string]*hoppertype.JobRow{}
	for _, j := range rows {
		if j.ConcurrencyKey != "" && j.ConcurrencyLimit > 0 {
			keys = append(keys, j.ConcurrencyKey)
			mine[j.ID] = j
		}
	}
	if len(keys) == 0 {
		return rows, nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	over := map[string]bool{}
	running := map[string]int{} // the key's running jobs outside this claim
	err := e.atomic(ctx, func(tx *executor) error {
		for _, key := range keys {
			if _, err := tx.q.Exec(ctx, e.d.q.lockKey, key); err != nil {
				return err
			}
			rs, err := tx.q.Query(ctx, e.d.q.runningOfKey, key)
			if err != nil {
				return err
			}
			var id string
			if _, err := pgx.ForEachRow(rs, []any{&id}, func() error {
				if mine[id] == nil {
					running[key]++
				}
				return nil
			}); err != nil {
				return err
			}
		}
		over = driver.ConcurrencyOverflow(rows, running)
		if len(over) == 0 {
			return nil
		}
		var back []string
		var tokens []int64
		for id := range over {
			back = append(back, id)
			tokens = append(tokens, mine[id].LeaseToken)
		}
		if _, err := tx.q.Exec(ctx, e.d.q.unclaim, back, tokens); err != nil {
			return err
		}
		// A racing claimer counted here may give its jobs back too: have
		// the queue looked at again rather than wait for a poll.
		return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: mine[back[0]].Queue})
	})
	if err != nil {
		// The claim committed: leave its jobs to their leases rather than
		// run them past a limit.
		return nil, e.d.fail("claim jobs: concurrency keys", err)
	}
	if len(over) == 0 {
		return rows, nil
	}
	kept := rows[:0]
	for _, j := range rows {
		if !over[j.ID] {
			kept = append(kept, j)
		}
	}
	return kept, nil
}

// JobPromote makes due scheduled and retrying jobs pending in every queue,
// earliest RunAt first, at most Limit (no limit when Limit <= 0).
func (e *executor) JobPromote(ctx context.Context, p *driver.JobPromoteParams) (int, error) {
	if err := e.check(ctx, "promote jobs"); err != nil {
		return 0, err
	}
	var n int64
	if err := e.q.QueryRow(ctx, e.d.q.promoteAll, p.Now, limitArg(p.Limit)).Scan(&n); err != nil {
		return 0, e.d.fail("promote jobs", err)
	}
	return int(n), nil
}

// JobNextRunAt returns the earliest RunAt of the queue's scheduled and
// retrying jobs, or the zero time.
func (e *executor) JobNextRunAt(ctx context.Context, params *driver.JobNextRunAtParams) (time.Time, error) {
	if err := e.check(ctx, "next run"); err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	if err := e.q.QueryRow(ctx, e.d.q.nextRunAt, params.Queue).Scan(&next); err != nil {
		return time.Time{}, e.d.fail("next run", err)
	}
	return fromTS(next), nil
}

// sortedIndex returns the indexes of n items ordered by id, so batch writes
// lock rows in one global order and two batches cannot deadlock.
func sortedIndex(n int, id func(i int) string) []int { return sortedIndexInto(nil, n, id) }

// sortedIndexInto is sortedIndex into buf's array when it is large enough.
func sortedIndexInto(buf []int, n int, id func(i int) string) []int {
	idx := sized(buf, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(id(a), id(b)) })
	return idx
}

// JobHeartbeat extends the leases still held, in one statement, and reports
// each lease in the order given.
func (e *executor) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]driver.JobHeartbeatResult, error) {
	if err := e.check(ctx, "heartbeat"); err != nil {
		return nil, err
	}
	out := make([]driver.JobHeartbeatResult, len(p.Leases))
	for i, l := range p.Leases {
		out[i].ID = l.ID
	}
	if len(p.Leases) == 0 {
		return out, nil
	}
	order := sortedIndex(len(p.Leases), func(i int) string { return p.Leases[i].ID })
	ids := make([]string, len(order))
	tokens := make([]int64, len(order))
	for k, i := range order {
		ids[k], tokens[k] = p.Leases[i].ID, p.Leases[i].Token
	}
	q, args := e.d.q.heartbeat, []any{ids, tokens, ts(p.ExpiresAt), runningStates(len(ids))}
	if p.Message != "" {
		q, args = e.d.q.heartbeatNote, []any{ids, tokens, ts(p.ExpiresAt), p.Message, runningStates(len(ids))}
	}
	// On its generic plan, by key (see sqlGenericOn).
	held := make(map[driver.Lease]bool, len(ids)) // lease → cancel requested
	err := e.queryGeneric(ctx, func(rows pgx.Rows) error {
		var (
			id     string
			token  int64
			cancel bool
		)
		_, err := pgx.ForEachRow(rows, []any{&id, &token, &cancel}, func() error {
			held[driver.Lease{ID: id, Token: token}] = cancel
			return nil
		})
		return err
	}, q, args...)
	if err != nil {
		return nil, e.d.fail("heartbeat", err)
	}
	for i, l := range p.Leases {
		if c, ok := held[l]; ok {
			out[i].Held, out[i].CancelRequested = true, c
		}
	}
	return out, nil
}

// runningStates is n times "running": the state heartbeats and finishes
// require, passed beside their ids (see the heartbeat statement).
func runningStates(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = string(hoppertype.JobStateRunning)
	}
	return s
}

// JobListExpiredLeases returns running jobs whose lease expired before Now,
// oldest expiry first, at most Limit (no limit when Limit <= 0).
//
// Every finished attempt leaves a dead entry in jobs_lease until vacuum
// reaches the table, and the statistics (few running jobs) make the planner
// read the index with a bitmap scan and sort: it then revisits every dead
// entry on every scan, 40 ms each time the rescuer looked after only a few
// thousand jobs. Outside a caller's transaction the listing runs with the
// claim's planner settings: an index scan walks jobs_lease in order and
// marks the dead entries it passes, so the next scan skips them.
func (e *executor) JobListExpiredLeases(ctx context.Context, p *driver.JobListExpiredLeasesParams) ([]*hoppertype.JobRow, error) {
	if err := e.check(ctx, "list expired leases"); err != nil {
		return nil, err
	}
	var rows []*hoppertype.JobRow
	b := &pgx.Batch{}
	planned := e.withClaimPlan(b)
	b.Queue(e.d.q.expiredLease, p.Now, limitArg(p.Limit))
	if len(p.Workers) > 0 {
		b.Queue(e.d.q.workersLeases, p.Workers, limitArg(p.Limit))
	}
	err := e.sendAtomic(ctx, b, func(br pgx.BatchResults) error {
		if planned {
			if err := skip(br, 1); err != nil {
				return err
			}
		}
		got, err := collectJobs(br.Query())
		if err != nil {
			return err
		}
		rows = got
		if len(p.Workers) > 0 {
			held, err := collectJobs(br.Query())
			if err != nil {
				return err
			}
			rows = driver.MergeLeases(rows, held, p.Limit)
		}
		return nil
	})
	if err != nil {
		return nil, e.d.fail("list expired leases", err)
	}
	if rows == nil {
		rows = []*hoppertype.JobRow{}
	}
	return rows, nil
}
