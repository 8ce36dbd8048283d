package hopper_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/pgdriver"
)

// ledgerJob records its job id in a ledger table with a unique key: however
// often it runs, each job leaves exactly one row.
var ledgerJob = hopper.Define("ledger", func(ctx context.Context, n int) (int, error) {
	d, ok := ledgerDriver.(*pgdriver.Driver)
	if !ok {
		return 0, hopper.Abort(fmt.Errorf("ledger job needs the PostgreSQL driver"))
	}
	id := hopper.JobFromContext(ctx).ID()
	_, err := d.Pool().Exec(ctx, `INSERT INTO "`+d.Schema()+`".ledger (job_id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
	return n, err
}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 50, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}})

// ledgerDriver is the store of a worker child process.
var ledgerDriver any

// pgChildConfig keeps leases and leadership short so a killed process's
// jobs and leadership move on quickly.
func pgChildConfig(d *pgdriver.Driver, worker string) hopper.Config {
	return hopper.Config{
		Driver: d, WorkerID: worker, MaxWorkers: 50, Visibility: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		RescueInterval: 250 * time.Millisecond, LeaderTTL: 3 * time.Second, PollInterval: 200 * time.Millisecond,
	}
}

// TestPostgresWorkerChild is a worker process of the multi-process tests:
// it works ledger jobs until killed or until its stdin closes.
func TestPostgresWorkerChild(t *testing.T) {
	url, schema := os.Getenv("HOPPER_PG_CHILD_URL"), os.Getenv("HOPPER_PG_CHILD_SCHEMA")
	if url == "" {
		t.Skip("a child of the PostgreSQL multi-process tests; runs only when they start it")
	}
	ctx := context.Background()
	d, err := pgdriver.Open(ctx, url, &pgdriver.Options{Schema: schema})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	ledgerDriver = d
	c, err := hopper.New(pgChildConfig(d, os.Getenv("HOPPER_PG_CHILD_NAME")))
	if err != nil {
		os.Exit(2)
	}
	_ = c.Register(ledgerJob)
	if err := c.Start(ctx); err != nil {
		fmt.Println("start:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // the parent closes stdin to stop us
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = c.Stop(stopCtx)
	_ = d.Close()
	os.Exit(0)
}

// pgWorker is a running child process.
type pgWorker struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	name  string
}

func startPGWorker(t *testing.T, url, schema, name string) *pgWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresWorkerChild$", "-test.count=1")
	// The workers' connections carry a name, so a test can cut them all.
	childURL := url + "&application_name=hopper-worker-" + schema
	if !strings.Contains(url, "?") {
		childURL = url + "?application_name=hopper-worker-" + schema
	}
	cmd.Env = append(os.Environ(), "HOPPER_PG_CHILD_URL="+childURL, "HOPPER_PG_CHILD_SCHEMA="+schema, "HOPPER_PG_CHILD_NAME="+name)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(out)
	line, err := childLine(rd)
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "worker %s did not start", name)
	go func() { _, _ = io.Copy(io.Discard, rd) }() // drain
	return &pgWorker{cmd: cmd, stdin: in, name: name}
}

func (w *pgWorker) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	_ = w.cmd.Wait()
}

func (w *pgWorker) stop() {
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
}

// multiProcessSetup opens the test database on a fresh schema with a ledger
// table, and enqueues n ledger jobs.
func multiProcessSetup(t *testing.T, n int) (url string, d *pgdriver.Driver) {
	t.Helper()
	url = os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("PostgreSQL multi-process tests skipped: set HOPPER_TEST_POSTGRES_URL")
	}
	d = openPostgres(t, url).(*pgdriver.Driver)
	ctx := context.Background()
	_, err := d.Pool().Exec(ctx, `CREATE TABLE "`+d.Schema()+`".ledger (job_id text PRIMARY KEY)`)
	require.NoError(t, err)
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	ins := make([]int, 5000)
	for left := n; left > 0; left -= len(ins) {
		if left < len(ins) {
			ins = ins[:left]
		}
		_, err := ledgerJob.EnqueueMany(ctx, c, ins, nil)
		require.NoError(t, err)
	}
	return url, d
}

// waitAllDone waits until every job has succeeded, calling tick between
// looks, and checks the ledger. The jobs are worked by other processes,
// whose progress reaches this one through PostgreSQL only (its
// notifications are hints, which may be dropped): it looks five times a
// second.
func waitAllDone(t *testing.T, d *pgdriver.Driver, n int, timeout time.Duration, tick func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var succeeded, other int
	pollEvery(t, ctx, 200*time.Millisecond, fmt.Sprintf("%d jobs to succeed", n), func() bool {
		require.NoError(t, d.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state <> 'succeeded') FROM "`+d.Schema()+`".jobs`).Scan(&succeeded, &other))
		if succeeded == n && other == 0 {
			return true
		}
		if tick != nil {
			tick()
		}
		return false
	})
	var ledger int
	require.NoError(t, d.Pool().QueryRow(ctx, `SELECT count(*) FROM "`+d.Schema()+`".ledger`).Scan(&ledger))
	require.Equal(t, n, ledger, "the ledger holds exactly one row per job")
}

func multiProcessJobs() int {
	if v := os.Getenv("HOPPER_MULTIPROCESS_JOBS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	if raceEnabled || testing.Short() {
		return 10_000
	}
	return 100_000
}

// TestPostgresThreeProcesses: three worker processes on one database work
// every job exactly once in the ledger; none is left running.
func TestPostgresThreeProcesses(t *testing.T) {
	n := multiProcessJobs()
	url, d := multiProcessSetup(t, n)
	var workers []*pgWorker
	for i := range 3 {
		workers = append(workers, startPGWorker(t, url, d.Schema(), fmt.Sprintf("w%d", i)))
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	waitAllDone(t, d, n, 5*time.Minute, nil)
}

// TestPostgresKillChurn: the same with one process killed with SIGKILL every
// two seconds and restarted, and every connection of the workers cut once
// (as a database restart would; other tests' connections are left alone):
// nothing lost, killed workers' leases rescued, no finished job overwritten
// (the ledger has exactly one row per job, and every job succeeded).
func TestPostgresKillChurn(t *testing.T) {
	n := multiProcessJobs() / 2
	url, d := multiProcessSetup(t, n)
	workers := make([]*pgWorker, 3)
	for i := range workers {
		workers[i] = startPGWorker(t, url, d.Schema(), fmt.Sprintf("w%d", i))
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	kills, lastKill, cut := 0, time.Now(), false
	waitAllDone(t, d, n, 5*time.Minute, func() {
		if time.Since(lastKill) < 2*time.Second {
			return
		}
		i := kills % len(workers)
		workers[i].kill()
		workers[i] = startPGWorker(t, url, d.Schema(), fmt.Sprintf("w%d-%d", i, kills))
		kills++
		lastKill = time.Now()
		if !cut && kills == 2 {
			// Cut every connection of the workers, pooled and listening, as
			// a database restart would: they must reconnect and carry on.
			cut = true
			var cutN int
			err := d.Pool().QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()
				  AND (application_name = 'hopper-worker-`+d.Schema()+`' OR application_name LIKE 'hopper-listen:`+d.Schema()+`%')`).Scan(&cutN)
			require.NoError(t, err)
			require.Positive(t, cutN, "no worker connection found to cut")
		}
	})
	t.Logf("%d jobs, %d kills", n, kills)
}

// TestPostgresLeaderKilled: when the leader's process is killed, another
// takes over within 20s, and terms only grow: never two leaders at once.
func TestPostgresLeaderKilled(t *testing.T) {
	url, d := multiProcessSetup(t, 0)
	ctx := context.Background()
	workers := map[string]*pgWorker{}
	for i := range 3 {
		name := fmt.Sprintf("w%d", i)
		workers[name] = startPGWorker(t, url, d.Schema(), name)
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	leader := func() (string, int64) {
		var owner string
		var term int64
		err := d.Pool().QueryRow(ctx, `SELECT owner, term FROM "`+d.Schema()+`".leaders WHERE name = 'hopper-maintenance' AND expires_at > now()`).Scan(&owner, &term)
		if err == pgx.ErrNoRows {
			return "", 0
		}
		require.NoError(t, err)
		return owner, term
	}
	// The leadership is taken by other processes, in PostgreSQL: look ten
	// times a second.
	var first string
	var firstTerm int64
	within, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pollEvery(t, within, 100*time.Millisecond, "a leader within 20s", func() bool {
		first, firstTerm = leader()
		return first != ""
	})
	require.Contains(t, workers, first)
	workers[first].kill()
	delete(workers, first)
	killedAt := time.Now()
	within, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var owner string
	var term int64
	pollEvery(t, within, 100*time.Millisecond, "a new leader within 20s of the kill", func() bool {
		owner, term = leader()
		return owner != "" && owner != first
	})
	require.Greater(t, term, firstTerm, "a new holder has a higher term")
	require.Contains(t, workers, owner)
	t.Logf("leader %s (term %d) replaced by %s (term %d) after %v", first, firstTerm, owner, term, time.Since(killedAt).Round(time.Millisecond))
}
