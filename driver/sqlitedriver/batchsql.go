package sqlitedriver

import (
	"strconv"
	"strings"
)

// Batch statements: multi-row INSERT ... VALUES and UPDATE ... FROM (VALUES
// ...) apply many rows per statement, so the per-statement work of SQLite
// (opening a cursor on every index of jobs, statement journal, halt) and of
// database/sql is paid once per chunk instead of once per row. Chunks have
// power-of-two sizes up to maxChunk so that a small, fixed set of statements
// covers every batch size and each is prepared once.

// maxChunk is the largest number of rows one batch statement carries.
const maxChunk = 32

// chunkSizes are the statement sizes, largest first.
var chunkSizes = []int{32, 16, 8, 4, 2, 1}

// chunks splits n rows into chunk sizes, largest first: more than one chunk
// means more than one statement (n = 3 is 2 + 1).
func chunks(n int) []int {
	var out []int
	for _, size := range chunkSizes {
		for n >= size {
			out = append(out, size)
			n -= size
		}
	}
	return out
}

// valuesList returns n rows of cols placeholders: "(?, ?), (?, ?)".
func valuesList(n, cols int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// jobColCount is the number of columns in jobCols.
var jobColCount = strings.Count(jobCols, ",") + 1

// insertJobsSQL inserts n jobs, their columns in jobCols order.
func insertJobsSQL(n int) string {
	return `INSERT INTO jobs (` + jobCols + `) VALUES ` + valuesList(n, jobColCount)
}

// finishCols is the number of values per item of finishJobsSQL.
const finishCols = 10

// finishJobsSQL applies n transitions whose leases are held. Each item is
// (id, lease token, state, attempt, run_at, result, error, ended_at, stuck,
// require-lease-expired-before or NULL); a missing lease expiry counts as the
// zero time.
func finishJobsSQL(n int) string {
	return `UPDATE jobs INDEXED BY sqlite_autoindex_jobs_1 SET state = v.column3, attempt = v.column4, run_at = v.column5,
	result = v.column6, error = v.column7, ended_at = v.column8, stuck = v.column9,
	lease_expires_at = NULL, worker = ''
	FROM (VALUES ` + valuesList(n, finishCols) + `) AS v
	WHERE jobs.id = v.column1 AND jobs.state = 'running' AND jobs.lease_token = v.column2
	AND (v.column10 IS NULL OR coalesce(jobs.lease_expires_at, ` + itoa(zeroMicros) + `) < v.column10)
	RETURNING ` + jobCols
}

// finishClaimedSQL is finishJobsSQL for items whose claimed rows the caller
// passed (JobFinishParams.Claimed): it returns only what the driver cannot
// take from them.
func finishClaimedSQL(n int) string {
	return strings.Replace(finishJobsSQL(n), "RETURNING "+jobCols, "RETURNING id, cancel_requested", 1)
}

var (
	insertJobsSQLs    = map[int]string{}
	finishJobsSQLs    = map[int]string{}
	finishClaimedSQLs = map[int]string{}
)

func init() {
	for _, n := range chunkSizes {
		insertJobsSQLs[n] = insertJobsSQL(n)
		finishJobsSQLs[n] = finishJobsSQL(n)
		finishClaimedSQLs[n] = finishClaimedSQL(n)
		hotStatements[insertJobsSQLs[n]] = true
		hotStatements[finishJobsSQLs[n]] = true
		hotStatements[finishClaimedSQLs[n]] = true
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
