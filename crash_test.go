package hopper_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// crashJob is the job the crash test's child process enqueues and works.
var crashJob = hopper.Define("crash-work", func(ctx context.Context, n int) (int, error) {
	if n%7 == 0 {
		// Some work takes a while, so kills land mid-attempt too.
		t := time.NewTimer(time.Duration(n%13) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return n, nil
}, &hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 50, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}})

// crashConfig keeps leases short so jobs of a killed worker are rescued
// quickly.
func crashConfig(d *sqlitedriver.Driver) hopper.Config {
	return hopper.Config{
		Driver: d, Visibility: 600 * time.Millisecond, HeartbeatInterval: 150 * time.Millisecond,
		RescueInterval: 100 * time.Millisecond, LeaderTTL: 600 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		MaxWorkers: 16,
	}
}

// TestCrashChild is the child process of TestSQLiteCrashSafety: it enqueues
// and works jobs until it is killed, writing the id of every acknowledged
// enqueue to the ack file (fsync'd) after Enqueue returns.
func TestCrashChild(t *testing.T) {
	dbPath, ackPath := os.Getenv("HOPPER_CRASH_DB"), os.Getenv("HOPPER_CRASH_ACKS")
	if dbPath == "" {
		t.Skip("the child of TestSQLiteCrashSafety; runs only when it starts it")
	}
	cycle := os.Getenv("HOPPER_CRASH_CYCLE")
	d, err := sqlitedriver.Open(dbPath, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	c, err := hopper.New(crashConfig(d))
	if err != nil {
		os.Exit(2)
	}
	_ = c.Register(crashJob)
	if err := c.Start(context.Background()); err != nil {
		os.Exit(2)
	}
	acks, err := os.OpenFile(ackPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(2)
	}
	fmt.Println("ready")
	ctx := context.Background()
	for i := 0; ; i++ {
		id := fmt.Sprintf("c%s-%d", cycle, i)
		if _, err := crashJob.Enqueue(ctx, c, i, &hopper.InsertOpts{ID: id}); err != nil {
			fmt.Println("enqueue:", err)
			os.Exit(3)
		}
		if _, err := acks.WriteString(id + "\n"); err != nil {
			os.Exit(3)
		}
		if err := acks.Sync(); err != nil {
			os.Exit(3)
		}
	}
}

// TestSQLiteCrashSafety kills a process that enqueues and works jobs with
// SIGKILL at random points, many times over one SQLite file. After every
// kill the file passes integrity_check and every acknowledged enqueue is
// stored; at the end a clean worker finishes everything: no job is lost or
// left running. HOPPER_CRASH_CYCLES sets the number of kills (default 50) for
// a longer soak.
func TestSQLiteCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	cycles := 50
	if v := os.Getenv("HOPPER_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		cycles = n
	}
	dir := t.TempDir()
	dbPath, ackPath := filepath.Join(dir, "crash.db"), filepath.Join(dir, "acks.txt")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	acked := 0
	for cycle := range cycles {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HOPPER_CRASH_DB="+dbPath, "HOPPER_CRASH_ACKS="+ackPath, "HOPPER_CRASH_CYCLE="+strconv.Itoa(cycle))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = cmd.Stdout
		require.NoError(t, cmd.Start())
		rd := bufio.NewReader(out)
		line, err := childLine(rd)
		require.NoError(t, err, "child did not start")
		require.Equal(t, "ready\n", line)
		// Let it run a random while, then kill it without warning.
		// (The race detector slows the child several times over.)
		pause := time.Duration(5+rng.IntN(150)) * time.Millisecond
		if raceEnabled {
			pause *= 5
		}
		time.Sleep(pause)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		rest, _ := rd.ReadString(0)
		werr := cmd.Wait()
		require.Error(t, werr, "the child must die by the kill, not exit: %s", rest)
		require.NotContains(t, rest, "enqueue:", "an enqueue failed before the kill")

		ids := readAcks(t, ackPath)
		acked = len(ids)
		d, err := sqlitedriver.Open(dbPath, nil)
		require.NoError(t, err)
		var check string
		require.NoError(t, d.DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
		require.Equal(t, "ok", check, "after kill %d", cycle)
		rows, err := d.Executor().JobGetMany(ctx, &driver.JobGetManyParams{IDs: ids})
		require.NoError(t, err)
		if len(rows) != len(ids) {
			found := map[string]bool{}
			for _, r := range rows {
				found[r.ID] = true
			}
			for _, id := range ids {
				require.True(t, found[id], "acknowledged job %s lost after kill %d", id, cycle)
			}
		}
		require.NoError(t, d.Close())
	}
	require.Positive(t, acked)

	// A clean worker finishes every job: nothing lost, nothing left running.
	d, err := sqlitedriver.Open(dbPath, nil)
	require.NoError(t, err)
	defer d.Close()
	c, err := hopper.New(crashConfig(d))
	require.NoError(t, err)
	require.NoError(t, c.Register(crashJob))
	require.NoError(t, c.Start(ctx))
	var ids []string
	page, err := c.JobList(ctx, &hopper.ListParams{Limit: hopper.MaxListLimit})
	for ; ; page, err = c.JobList(ctx, &hopper.ListParams{Limit: hopper.MaxListLimit, Cursor: page.NextCursor}) {
		require.NoError(t, err)
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
	}
	require.GreaterOrEqual(t, len(ids), acked, "every acknowledged job is there")
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, id := range ids {
		row, err := c.JobWait(wctx, id)
		require.NoError(t, err, "job %s did not end in time", id)
		require.Equal(t, hopper.StateSucceeded, row.State, "job %s", id)
	}
	require.NoError(t, c.Stop(ctx))
	t.Logf("%d kills, %d acknowledged enqueues, all succeeded", cycles, acked)
}

func readAcks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var ids []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.HasSuffix(l, "\n") { // a line cut by the kill is ignored
			ids = append(ids, strings.TrimSuffix(l, "\n"))
		}
	}
	return ids
}
