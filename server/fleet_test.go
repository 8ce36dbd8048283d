package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// The fleet test's job and workflow, run by its worker processes.
var (
	fleetAdd = hopper.Define("fleet-add", func(_ context.Context, n int) (int, error) { return n + 1, nil }, nil)
	fleetWF  = hopper.Workflow("fleet-double", func(wf hopper.WorkflowContext, n int) (int, error) {
		return hopper.Step(wf, "double", func(context.Context) (int, error) { return 2 * n, nil }, nil)
	}, nil)
)

// openFleetStore opens the store named by kind and where: a SQLite file,
// or a PostgreSQL schema of the test database.
func openFleetStore(ctx context.Context, kind, where string) (driver.Driver, error) {
	if kind == "sqlite" {
		return sqlitedriver.Open(where, nil)
	}
	return pgdriver.Open(ctx, os.Getenv("HOPPER_TEST_POSTGRES_URL"), &pgdriver.Options{Schema: where})
}

// TestFleetWorkerChild is a worker process of TestServerSeesTheFleet: it
// works its own queue until its stdin closes.
func TestFleetWorkerChild(t *testing.T) {
	kind, where, name := os.Getenv("HOPPER_FLEET_KIND"), os.Getenv("HOPPER_FLEET_STORE"), os.Getenv("HOPPER_FLEET_NAME")
	if kind == "" {
		t.Skip("a child of TestServerSeesTheFleet; runs only when it starts it")
	}
	ctx := context.Background()
	d, err := openFleetStore(ctx, kind, where)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	c, err := hopper.New(hopper.Config{Driver: d, WorkerID: name, Queues: []string{"q-" + name}, PollInterval: 50 * time.Millisecond})
	if err == nil {
		err = c.Register(fleetAdd, fleetWF)
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
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

// TestServerSeesTheFleet: two worker processes and a server that works
// nothing share one store; the server's events, stats, metrics and charts
// account for every job and run the workers did — on SQLite and on
// PostgreSQL.
func TestServerSeesTheFleet(t *testing.T) {
	eachFleetStore(t, "hopper_fleet_", testServerSeesTheFleet)
}

func testServerSeesTheFleet(t *testing.T, kind, where string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := openFleetStore(ctx, kind, where) // creates the schema before the workers open it
	require.NoError(t, err)
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.Register(fleetAdd, fleetWF)) // to enqueue; never started: it runs nothing
	srv := server.New(c, nil)
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	select {
	case <-server.FleetReady(srv):
	case <-ctx.Done():
		t.Fatal("the server did not begin following the store")
	}

	for _, name := range []string{"w1", "w2"} {
		stop := startFleetWorker(t, kind, where, name)
		defer stop()
	}
	const jobs, runs = 20, 5
	var jobIDs []string
	var runHandles []*hopper.RunHandle[int]
	for _, name := range []string{"w1", "w2"} {
		for i := range jobs {
			h, err := fleetAdd.Enqueue(ctx, c, i, &hopper.InsertOpts{Queue: "q-" + name})
			require.NoError(t, err)
			jobIDs = append(jobIDs, h.ID())
		}
		for i := range runs {
			h, err := fleetWF.Start(ctx, c, i, &hopper.StartOpts{Queue: "q-" + name})
			require.NoError(t, err)
			runHandles = append(runHandles, h)
		}
	}
	for _, h := range runHandles {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}

	var st server.StatsJSON
	awaitFleet(t, srv, "every job and run in the server's figures", func() bool {
		st = server.StatsJSON{}
		require.NoError(t, json.Unmarshal([]byte(getText(t, ctx, hs.URL+"/v1/stats")), &st))
		for _, name := range []string{"w1", "w2"} {
			ts, _ := st.Fleet.Type("q-"+name, "fleet-add")
			if ts.Succeeded != jobs {
				return false
			}
		}
		w, _ := st.Fleet.Workflow("fleet-double")
		total := 0
		for _, n := range st.Succeeded {
			total += n
		}
		// A run's own job ends after the run's completion in the feed.
		return w.Completed == 2*runs && total == 2*jobs+2*runs
	})
	for _, name := range []string{"w1", "w2"} {
		ts, _ := st.Fleet.Type("q-"+name, "fleet-add")
		require.Equal(t, int64(jobs), ts.Queued, "queue q-%s", name)
		require.Equal(t, int64(jobs), ts.Started)
		require.Equal(t, int64(jobs), ts.Wait.Count, "every start's pickup lag")
		require.Equal(t, int64(jobs), ts.Total.Count)
	}
	total := 0
	for _, n := range st.Succeeded {
		total += n
	}
	require.Equal(t, 2*jobs+2*runs, total, "the chart counts every job and every run's own job")
	require.Equal(t, 2, st.Fleet.Workers.Processes, "the two workers' slots; the server runs none")

	// Events: every job's start names the worker of its queue.
	workerOf := map[string]string{}
	var page server.EventListJSON
	require.NoError(t, json.Unmarshal([]byte(getText(t, ctx, hs.URL+"/v1/events/list?after=0.0&limit=1000&kind=started&type=fleet-add")), &page))
	for _, e := range page.Events {
		workerOf[e.JobID] = e.Worker
	}
	for i, id := range jobIDs {
		require.Equal(t, []string{"w1", "w2"}[i/jobs], workerOf[id], "job %s", id)
	}

	// Metrics.
	body := getText(t, ctx, hs.URL+"/metrics")
	for _, name := range []string{"w1", "w2"} {
		labels := fmt.Sprintf(`queue="q-%s",type="fleet-add"`, name)
		require.Contains(t, body, `hopper_jobs_enqueued_total{`+labels+`} 20`)
		require.Contains(t, body, `hopper_job_attempts_finished_total{outcome="succeeded",`+labels+`} 20`)
		require.Contains(t, body, `hopper_job_queue_wait_seconds_count{`+labels+`} 20`)
	}
	require.Contains(t, body, `hopper_workflow_runs_total{event="completed",workflow="fleet-double"} 10`)
	require.Contains(t, body, `hopper_workers{status="idle"} 2`)
	require.Contains(t, body, `hopper_worker_slots{state="busy"} 0`)
}

// startFleetWorker starts a worker process on the store; stop ends it.
func startFleetWorker(t *testing.T, kind, where, name string) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetWorkerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOPPER_FLEET_KIND="+kind, "HOPPER_FLEET_STORE="+where, "HOPPER_FLEET_NAME="+name)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	for err == nil && logLine.MatchString(line) { // the engine's warnings under load come first
		line, err = rd.ReadString('\n')
	}
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "worker %s did not start", name)
	go func() { _, _ = io.Copy(io.Discard, rd) }()
	return func() {
		_ = in.Close()
		_ = cmd.Wait()
	}
}

func getText(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// logLine matches a line the standard logger wrote (a worker's warnings,
// its stderr merged with its stdout).
var logLine = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)
