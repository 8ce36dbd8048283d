package hopper_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// dwJob blocks for ever in the doomed child process and returns its
// attempt anywhere else.
var dwJob = hopper.Define("dw-block", func(ctx context.Context, _ int) (int, error) {
	if os.Getenv("HOPPER_DW_DB") != "" {
		fmt.Println("running")
		<-ctx.Done()
		select {} // a killed process does not return
	}
	return hopper.JobFromContext(ctx).Attempt(), nil
}, nil)

// dwVisibility is the lease: an hour, past the test's own deadline, so a
// job rescued within the test cannot have been rescued for a lapsed lease.
const dwVisibility = time.Hour

// dwConfig reports every 200 ms, with a lease of an hour: a dead worker's
// job that waited for its lease would wait an hour.
func dwConfig(d driver.Driver, worker string) hopper.Config {
	return hopper.Config{Driver: d, WorkerID: worker, Visibility: dwVisibility, HeartbeatInterval: 200 * time.Millisecond,
		RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second, PollInterval: 100 * time.Millisecond}
}

func dwOpen(ctx context.Context, db, schema string) (driver.Driver, error) {
	if strings.HasPrefix(db, "postgres") {
		return pgdriver.Open(ctx, db, &pgdriver.Options{Schema: schema})
	}
	return sqlitedriver.Open(db, nil)
}

// TestDeadWorkerChild is the doomed worker of TestDeadWorkerKilled: it
// claims the job, says so, and is killed.
func TestDeadWorkerChild(t *testing.T) {
	db := os.Getenv("HOPPER_DW_DB")
	if db == "" {
		t.Skip("a child of TestDeadWorkerKilled; runs only when it starts it")
	}
	ctx := context.Background()
	d, err := dwOpen(ctx, db, os.Getenv("HOPPER_DW_SCHEMA"))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	c, err := hopper.New(dwConfig(d, "victim"))
	if err != nil {
		os.Exit(2)
	}
	_ = c.Register(dwJob)
	if err := c.Start(ctx); err != nil {
		os.Exit(2)
	}
	select {}
}

// TestDeadWorkerKilled: a worker process killed with SIGKILL while it runs
// a job is found dead by the next leader once it stops reporting (three
// heartbeats), listed as dead, and its job is rescued by the dead-worker
// path and run again, with its hour-long lease still outstanding; on
// SQLite and PostgreSQL.
func TestDeadWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "dw.db")
		d, err := sqlitedriver.Open(db, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		testDeadWorkerKilled(t, d, db, "")
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("HOPPER_TEST_POSTGRES_URL")
		if url == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
			}
			t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL dead-worker test")
		}
		d := openPostgres(t, url).(*pgdriver.Driver)
		testDeadWorkerKilled(t, d, url, d.Schema())
	})
}

func testDeadWorkerKilled(t *testing.T, d driver.Driver, db, schema string) {
	ctx := testCtx(t)
	producer, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	h, err := dwJob.Enqueue(ctx, producer, 0, nil)
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^TestDeadWorkerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOPPER_DW_DB="+db, "HOPPER_DW_SCHEMA="+schema)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // whatever happens below
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "running\n", line, "the child claimed and ran the job")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))

	c := newClient(t, dwConfig(d, "rescuer"))
	require.NoError(t, c.Register(dwJob))
	// The test's deadline (a minute) ends long before the victim's lease
	// (an hour) could lapse: only the dead-worker path can move the job.
	attempt, err := h.Result(ctx)
	require.NoError(t, err, "the dead worker's job ran again")
	require.Equal(t, 2, attempt)
	attempts, err := c.JobAttempts(ctx, h.ID())
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	first := attempts[0]
	require.Equal(t, "victim", first.Worker)
	require.NotNil(t, first.Error)
	require.Equal(t, hoppertype.ErrorKindLeaseLost, first.Error.Kind)
	require.Contains(t, first.Error.Message, "victim is dead", "rescued as dead, not as a lapsed lease")
	require.True(t, first.Error.At.Before(first.StartedAt.Add(dwVisibility)),
		"rescued at %v, with the lease taken at %v still held", first.Error.At, first.StartedAt)

	ws, err := c.WorkerList(ctx)
	require.NoError(t, err)
	status := map[string]string{}
	for _, w := range ws {
		status[w.ID] = w.Status
	}
	require.Equal(t, hopper.WorkerDead, status["victim"], "the killed worker is listed as dead: %v", status)
	require.NotEqual(t, hopper.WorkerDead, status["rescuer"], "the live worker is not: %v", status)
}
