package pgdriver

import "strconv"

// The change feed is two tables (schema 23): changes, a row per change,
// and change_sets, a row of arrays per statement's job transitions, whose
// entry i (from 0) is the change at the set's position + i. Positions come
// from one sequence in steps of setSpan, so a set's entries lie in
// [position, position + setSpan) and meet no other row's; the feed's order
// is (tx, position) across both. The queries below read both and expand
// the sets, each side bounded before the expansion.

// chainedSets: a claim's set and a finish's of claimed jobs (the sets of
// nearly every job's transitions) are found from their jobs' rows rather
// than by the index on the sets' entities, which took an entry per job per
// set (schema 29). Such a statement draws its set's key first, and each job
// it changes takes the set's position in its row (jobs.set_position),
// keeping the one before in prev_set_position, which the statement returns
// into the set's prev_positions: an entity's sets so chained are walked
// back from its row, one look-up by position (change_sets_chained) a step,
// each set's entry found by array_position. Every other set has no chain
// (prev_positions IS NULL) and is found by the entities' index, now
// partial to them. A gate's or a stuck job's change is a row of its own, and
// its row's chain stays as it was.
//
// setSpan is the positions one set may use, the step of the changes'
// position sequence (schema 23).
const setSpan = 4096

// changeOut are the columns every feed query returns, from its union of
// rows and expanded set entries (c): collectChanges scans them.
const changeOut = `c.tx::text::bigint AS tx_key, c.position, c.kind, c.entity_id, c.type, c.queue, c.prev_state, c.state, c.attempt,
	c.worker, c.fields, c.error, c.stuck, c.at, c.detail, c.due_at, c.seq`

// rowCols are a changes row's columns in changeOut's order (with tx as
// it is stored, for ordering).
const rowCols = `tx, position, kind, entity_id, type, queue, prev_state, state, attempt, worker, fields, error, stuck, at, detail, due_at, seq`

// entryCols are an expanded set entry's columns (s a set, e its entry).
const entryCols = `s.tx, s.position + e.i - 1 AS position, 'job'::text AS kind, e.entity_id, e.type, e.queue, e.prev_state, e.state,
	e.attempt, e.worker, e.fields, e.error, NULL::text AS stuck, s.at, NULL::text AS detail, e.due_at, 0 AS seq`

// expand unnests the sets s into their entries e (e.i from 1).
const expand = `CROSS JOIN LATERAL unnest(s.entity_ids, s.types, s.queues, s.prev_states, s.states, s.attempts, s.workers, s.fields,
	s.errors, s.due_ats) WITH ORDINALITY AS e(entity_id, type, queue, prev_state, state, attempt, worker, fields, error, due_at, i)`

// final is the condition that a row or set is final: its transaction is
// older than every transaction still running.
const final = `tx < pg_snapshot_xmin(pg_current_snapshot())`

// counted keeps of the sets r (ordered by the window's order) those whose
// entries before them, counted by the expression left (the entries of a
// set that may be listed), come to fewer than limit: the sets the listing
// can reach, so that no more are expanded than a page needs.
func counted(sets, left, order, limit string) string {
	return `(SELECT w.* FROM (SELECT r.*, sum(` + left + `) OVER (ORDER BY ` + order + ` ROWS UNBOUNDED PRECEDING) - (` + left + `) AS before
	FROM (` + sets + `) r) w WHERE w.before < ` + limit + `)`
}

// changeSetQueries are the feed queries (see queries' change* fields),
// reading rows and sets together.
func changeSetQueries(q func(string) string) (feed, entity, own, before, tail, scanLast, scanRange string) {
	cursor := `($3::bigint::text::xid8, $1)`
	// The sets that may hold changes after the cursor: the one that holds
	// the cursor's position, if any, and every later one.
	afterSets := `SELECT * FROM {s}.change_sets WHERE (tx, position) > ($3::bigint::text::xid8, $1::bigint - ` + strconv.Itoa(setSpan-1) + `) AND ` + final + `
		ORDER BY tx, position LIMIT $2 + 1`
	// Entries of a set at or before the cursor are not listed.
	afterLeft := `cardinality(r.entity_ids) - CASE WHEN r.tx = $3::bigint::text::xid8 AND r.position <= $1
		THEN least($1 - r.position + 1, cardinality(r.entity_ids)) ELSE 0 END`
	feed = q(`SELECT ` + changeOut + ` FROM (
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE (tx, position) > ` + cursor + ` AND ` + final + `
		ORDER BY tx, position LIMIT $2)
	UNION ALL
	(SELECT ` + entryCols + ` FROM ` + counted(afterSets, afterLeft, "r.tx, r.position", "$2") + ` s ` + expand + `
		WHERE (s.tx, s.position + e.i - 1) > ` + cursor + `)
) c ORDER BY c.tx, c.position LIMIT $2`)

	// An entity's changes: its rows, its entries in the sets its row's
	// chain holds (chainedSets; each step a look-up by position, its LIMIT
	// keeping the planner from joining a scan of every set to the chain), and its entries in the other sets written
	// since its first row (a job's insert; none once the job is deleted),
	// found by their entities' index.
	entry := `s.tx, s.position + p.i - 1 AS position, 'job'::text AS kind, s.entity_ids[p.i], s.types[p.i], s.queues[p.i],
		s.prev_states[p.i], s.states[p.i], s.attempts[p.i], s.workers[p.i], s.fields[p.i], s.errors[p.i], NULL::text,
		s.at, NULL::text, s.due_ats[p.i], 0`
	// A step of the chain: the entry of set s at p.i, with the position
	// of its entity's set before it.
	step := `s.position, p.i, s.prev_positions[p.i], s.tx, s.at, s.entity_ids[p.i], s.types[p.i], s.queues[p.i],
		s.prev_states[p.i], s.states[p.i], s.attempts[p.i], s.workers[p.i], s.fields[p.i], s.errors[p.i], s.due_ats[p.i]`
	entity = q(`WITH RECURSIVE chain(position, i, prev, tx, at, entity_id, type, queue, prev_state, state, attempt, worker,
	fields, error, due_at) AS (
	SELECT ` + step + ` FROM {s}.jobs j
		JOIN {s}.change_sets s ON s.position = j.set_position AND s.prev_positions IS NOT NULL
		CROSS JOIN LATERAL (SELECT array_position(s.entity_ids, $3::text) AS i) p
	WHERE j.id = $3 AND p.i IS NOT NULL
	UNION ALL
	SELECT ` + step + ` FROM chain c
		CROSS JOIN LATERAL (SELECT * FROM {s}.change_sets x
			WHERE x.position = c.prev AND x.position < c.position AND x.prev_positions IS NOT NULL LIMIT 1) s
		CROSS JOIN LATERAL (SELECT array_position(s.entity_ids, $3::text) AS i) p
	WHERE p.i IS NOT NULL
)
SELECT ` + changeOut + ` FROM (
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE entity_id = $3 AND position > $1 ORDER BY tx, position LIMIT $2)
	UNION ALL
	(SELECT c.tx, c.position + c.i - 1 AS position, 'job'::text AS kind, c.entity_id, c.type, c.queue, c.prev_state, c.state,
		c.attempt, c.worker, c.fields, c.error, NULL::text, c.at, NULL::text, c.due_at, 0
	FROM chain c
	WHERE c.position + c.i - 1 > $1
	ORDER BY c.tx, c.position LIMIT $2)
	UNION ALL
	(SELECT ` + entry + `
	FROM {s}.change_sets s
		CROSS JOIN LATERAL (SELECT array_position(s.entity_ids, $3::text) AS i) p
		CROSS JOIN (SELECT tx AS first_tx, position AS first_position FROM {s}.changes WHERE entity_id = $3
			ORDER BY tx, position LIMIT 1) f
	WHERE s.entity_ids @> ARRAY[$3::text] AND s.prev_positions IS NULL AND (s.tx, s.position) > (f.first_tx, f.first_position)
		AND s.position + p.i - 1 > $1
	ORDER BY s.tx, s.position LIMIT $2)
) c ORDER BY c.tx, c.position LIMIT $2`)

	// The transaction's own changes in the order it wrote them: those
	// keyed by its id, and those raised past an entity's previous change
	// (changes_raised, change_sets_raised).
	ownSets := func(where string) string {
		return `(SELECT ` + entryCols + ` FROM (SELECT * FROM {s}.change_sets WHERE ` + where + ` AND position > $1::bigint - ` + strconv.Itoa(setSpan-1) + `
		ORDER BY position LIMIT $2 + 1) s ` + expand + ` WHERE s.position + e.i - 1 > $1)`
	}
	own = q(`SELECT ` + changeOut + ` FROM (
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE tx = pg_current_xact_id_if_assigned() AND xid = tx AND position > $1 ORDER BY position LIMIT $2)
	UNION ALL
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE xid = pg_current_xact_id_if_assigned() AND xid <> tx AND position > $1 ORDER BY position LIMIT $2)
	UNION ALL
	` + ownSets("tx = pg_current_xact_id_if_assigned() AND xid = tx") + `
	UNION ALL
	` + ownSets("xid = pg_current_xact_id_if_assigned() AND xid <> tx") + `
) c ORDER BY c.position LIMIT $2`)

	// Backwards from a cursor ($1 tx, $2 position), newest first: a set
	// before the cursor lists its entries before it.
	bcursor := `($1::bigint::text::xid8, $2)`
	beforeSets := `SELECT * FROM {s}.change_sets WHERE (tx, position) < ` + bcursor + ` AND ` + final + `
		ORDER BY tx DESC, position DESC LIMIT $3`
	beforeLeft := `cardinality(r.entity_ids) - CASE WHEN r.tx = $1::bigint::text::xid8 AND r.position + cardinality(r.entity_ids) > $2
		THEN r.position + cardinality(r.entity_ids) - $2 ELSE 0 END`
	before = q(`SELECT ` + changeOut + ` FROM (
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE (tx, position) < ` + bcursor + ` AND ` + final + `
		ORDER BY tx DESC, position DESC LIMIT $3)
	UNION ALL
	(SELECT ` + entryCols + ` FROM ` + counted(beforeSets, beforeLeft, "r.tx DESC, r.position DESC", "$3") + ` s ` + expand + `
		WHERE (s.tx, s.position + e.i - 1) < ` + bcursor + `)
) c ORDER BY c.tx DESC, c.position DESC LIMIT $3`)

	// The last final change: a row's, or a set's last entry.
	tail = q(`SELECT c.tx::text::bigint AS tx_key, c.position FROM (
	(SELECT tx, position FROM {s}.changes WHERE ` + final + ` ORDER BY tx DESC, position DESC LIMIT 1)
	UNION ALL
	(SELECT tx, position + cardinality(entity_ids) - 1 FROM {s}.change_sets WHERE ` + final + ` ORDER BY tx DESC, position DESC LIMIT 1)
) c ORDER BY c.tx DESC, c.position DESC LIMIT 1`)

	// A scan's page: the last of the next $2 final changes after the
	// cursor ($3, $1).
	scanLast = q(`SELECT c.tx::text::bigint AS tx_key, c.position FROM (
	SELECT c.tx, c.position FROM (
		(SELECT tx, position FROM {s}.changes WHERE (tx, position) > ` + cursor + ` AND ` + final + `
			ORDER BY tx, position LIMIT $2)
		UNION ALL
		(SELECT s.tx, s.position + e.i - 1 FROM ` + counted(afterSets, afterLeft, "r.tx, r.position", "$2") + ` s
			CROSS JOIN LATERAL generate_series(1, cardinality(s.entity_ids)) AS e(i)
			WHERE (s.tx, s.position + e.i - 1) > ` + cursor + `)
	) c ORDER BY c.tx, c.position LIMIT $2
) c ORDER BY c.tx DESC, c.position DESC LIMIT 1`)

	// The changes after ($1, $2) up to ($3, $4) that pass the filter ($5
	// kinds, $6 types, $7 states; NULL for none), at most $8: the range
	// holds no more, so no more than $8 + 1 sets (the first may hold
	// changes before it). Sets hold only jobs' changes.
	lo, hi := `($1::bigint::text::xid8, $2)`, `($3::bigint::text::xid8, $4)`
	scanRange = q(`SELECT ` + changeOut + ` FROM (
	(SELECT ` + rowCols + ` FROM {s}.changes WHERE (tx, position) > ` + lo + ` AND (tx, position) <= ` + hi + `
		AND ($5::text[] IS NULL OR kind = ANY($5)) AND ($6::text[] IS NULL OR type = ANY($6)) AND ($7::text[] IS NULL OR state = ANY($7))
		ORDER BY tx, position LIMIT $8)
	UNION ALL
	(SELECT ` + entryCols + ` FROM (SELECT * FROM {s}.change_sets
		WHERE (tx, position) > ($1::bigint::text::xid8, $2::bigint - ` + strconv.Itoa(setSpan-1) + `) AND (tx, position) <= ` + hi + `
			AND ($5::text[] IS NULL OR 'job' = ANY($5)) AND ($6::text[] IS NULL OR types && $6) AND ($7::text[] IS NULL OR states && $7)
		ORDER BY tx, position LIMIT $8 + 1) s
		` + expand + `
		WHERE (s.tx, s.position + e.i - 1) > ` + lo + ` AND (s.tx, s.position + e.i - 1) <= ` + hi + `
			AND ($6::text[] IS NULL OR e.type = ANY($6)) AND ($7::text[] IS NULL OR e.state = ANY($7)))
) c ORDER BY c.tx, c.position LIMIT $8`)
	return feed, entity, own, before, tail, scanLast, scanRange
}
