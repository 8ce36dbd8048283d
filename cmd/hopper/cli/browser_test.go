package cli

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// findChromium returns a Chromium binary, or "" when none can be had.
func findChromium() string {
	if p := os.Getenv("HOPPER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestDashboardInBrowser drives the dashboard in headless Chromium: it
// enqueues a job from the overview page, follows the link to the job's page
// and sees it succeed, then saves a screenshot. Without Chromium it skips —
// except under CI, where a missing browser fails the test.
func TestDashboardInBrowser(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: install Debian's chromium (.ci/run does) or set HOPPER_CHROMIUM")
		}
		t.Skip("no Chromium found (install chromium or set HOPPER_CHROMIUM); skipping the browser test")
	}

	// hopper dev's set-up on a temporary SQLite file, holding what a day
	// of work leaves (seedStore: thousands of jobs, dead letters, a
	// backlog); the test adds nested fan-outs and a retried, compensated
	// saga.
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "hopper.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seedStore(t, ctx, d)
	c := startExamples(t, ctx, d)
	s := server.New(c, nil)
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(srvCtx, ln) }()
	defer func() {
		stopSrv()
		<-served
	}()
	base := "http://" + ln.Addr().String()

	bctx := newBrowser(t, ctx, chrome)

	err = chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#enqueue")),
		chromedp.SetValue(chromedp.CSS("#enqueue select[name=type]"), "add"),
		chromedp.SetValue(chromedp.CSS("#enqueue input[name=input]"), `{"a":40,"b":2}`),
		chromedp.Click(chromedp.CSS("#enqueue button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#enqueued-link")),
		chromedp.Click(chromedp.CSS("#enqueued-link")),
		chromedp.WaitVisible(chromedp.CSS("#result")),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	// The job may still be running when its page first loads; reload until
	// it shows the succeeded state.
	var jobState, result string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if jobState, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("h2 .state"))); err != nil {
			t.Fatalf("browser: %v", err)
		}
		if result, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#result"))); err != nil {
			t.Fatalf("browser: %v", err)
		}
		if jobState == "succeeded" || time.Now().After(deadline) {
			break
		}
		if err := chromedp.Do(bctx, chromedp.Reload()); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	if title != "hopper" {
		t.Errorf("title = %q", title)
	}
	if jobState != "succeeded" || strings.TrimSpace(result) != "42" {
		t.Fatalf("job page shows state %q, result %q; want succeeded, 42", jobState, result)
	}
	// Start an order run from the dashboard and watch it complete on its page.
	// Define a schedule from the overview, then pause it there.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#define-schedule")),
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=name]"), "browser-every-5"),
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=cron]"), "*/5 * * * *"),
		chromedp.SetValue(chromedp.CSS("#define-schedule select[name=target]"), "type:add"),
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=input]"), `{"a":1,"b":1}`),
		chromedp.Click(chromedp.CSS("#define-schedule button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="browser-every-5"] button`)),
		chromedp.Click(chromedp.CSS(`tr[data-schedule="browser-every-5"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="browser-every-5"] .s-paused`)),
		// A workflow's schedule, from the same form.
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=name]"), "browser-orders"),
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=cron]"), "0 3 * * *"),
		chromedp.SetValue(chromedp.CSS("#define-schedule select[name=target]"), "workflow:order"),
		chromedp.SetValue(chromedp.CSS("#define-schedule input[name=input]"), `{"order_id":"nightly","amount":1}`),
		chromedp.Click(chromedp.CSS("#define-schedule button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="browser-orders"] button`)),
		chromedp.Click(chromedp.CSS(`tr[data-schedule="browser-orders"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="browser-orders"] .s-paused`)),
	); err != nil {
		t.Fatalf("browser: define and pause a schedule: %v", err)
	}
	infos, err := c.ScheduleList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var defined, definedRun bool
	for _, in := range infos {
		if in.Name == "browser-every-5" {
			defined = in.Stored && in.Paused && in.Registered && in.Type == "add" && string(in.Input) == `{"a":1,"b":1}`
		}
		if in.Name == "browser-orders" {
			definedRun = in.Stored && in.Paused && in.Workflow == "order"
		}
	}
	if !defined || !definedRun {
		t.Fatalf("the schedule defined in the browser: %+v", infos)
	}

	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#start-run")),
		chromedp.SetValue(chromedp.CSS("#start-run select[name=workflow]"), "order"),
		chromedp.SetValue(chromedp.CSS("#start-run input[name=input]"), `{"order_id":"o1","amount":42,"fail_at":""}`),
		chromedp.Click(chromedp.CSS("#start-run button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#started-link")),
		chromedp.Click(chromedp.CSS("#started-link")),
		chromedp.WaitVisible(chromedp.CSS("#run-status")),
	); err != nil {
		t.Fatalf("browser: %v", err)
	}
	var runStatus, output string
	deadline = time.Now().Add(30 * time.Second)
	for {
		if runStatus, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#run-status .state"))); err != nil {
			t.Fatalf("browser: %v", err)
		}
		if runStatus == "completed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if output, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#run-output"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if runStatus != "completed" || !strings.Contains(output, `"shipment": "ship-o1-42"`) {
		t.Fatalf("run page shows %q with output %q; want completed with a shipment", runStatus, output)
	}

	// Fan-outs: nested fan-outs and a pipeline whose chunks two chained
	// gates wait on. Open the pipeline's page, a child from its children,
	// and the gate from the child's gates.
	nested, err := exampleFanout.Enqueue(ctx, c, FanoutInput{N: 3, Depth: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := examplePipeline.Enqueue(ctx, c, PipelineInput{Chunks: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*hopper.Handle[hopper.None]{nested, pipe} {
		if _, err := h.Group(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var explain string
	// follow opens the link sel on the current page (its href read from
	// the page, the way a click would go) and waits for want there.
	follow := func(sel, want string) {
		t.Helper()
		href, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).getAttribute("href")`))
		if err != nil || !strings.HasPrefix(href, "/") {
			t.Fatalf("browser: link %s: %q, %v", sel, href, err)
		}
		if err := chromedp.Do(bctx, chromedp.Navigate(base+href), chromedp.WaitReady(chromedp.CSS(want))); err != nil {
			t.Fatalf("browser: open %s for %s: %v", href, want, err)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/jobs/"+url.PathEscape(nested.ID())),
		chromedp.WaitReady(chromedp.CSS("#pipeline svg a[data-node]")),
		chromedp.WaitVisible(chromedp.CSS("#group")),
		chromedp.Navigate(base+"/jobs/"+url.PathEscape(pipe.ID())),
		chromedp.WaitVisible(chromedp.CSS(`#children tr[data-type="stage"] a`)),
	); err != nil {
		t.Fatalf("browser: a fan-out's pages: %v", err)
	}
	follow(`#children tr[data-type="stage"] a`, "#watching a")
	follow("#watching a", "#gate-explain")
	if explain, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#gate-explain"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !strings.HasPrefix(explain, "fired") {
		t.Fatalf("the gate's page says %q; want it fired", explain)
	}

	// A saga retried twice and compensated: its timeline shows every
	// attempt, the activity's retried tries and the compensations.
	trip, err := exampleTrip.Start(ctx, c, TripInput{Trip: "lisbon", FailAttempts: 3}, &hopper.StartOpts{ID: "trip-lisbon"})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.RunWait(ctx, trip.ID()); err != nil || info.Status != hopper.RunCompensated {
		t.Fatalf("trip run: %+v, %v; want compensated", info, err)
	}
	var attempts, comps, retries int
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs/trip-lisbon"),
		chromedp.WaitReady(chromedp.CSS("#timeline svg .k-compensation")),
	); err != nil {
		t.Fatalf("browser: a run's timeline: %v", err)
	}
	for sel, n := range map[string]*int{".k-attempt": &attempts, ".k-compensation": &comps, ".b-retry": &retries} {
		if *n, err = chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline svg `+sel+`").length`)); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	if attempts != 3 || comps != 6 || retries != 3 {
		t.Fatalf("the timeline shows %d attempts, %d compensations, %d backoffs; want 3, 6, 3", attempts, comps, retries)
	}
	runShot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	// The run links its job, whose page links back to the run; the job
	// reads compensated, not dead, there and in the job table.
	follow("#run-job", "#run-link a")
	if badge, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main h2 .state"))); err != nil || badge != "compensated" {
		t.Fatalf("the saga's job page reads %q (%v); want compensated", badge, err)
	}
	follow("#run-link a", "#timeline svg")
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/jobs?type=workflow:trip"), chromedp.WaitVisible(chromedp.CSS("table.sel"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if badge, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr:has(a[href="/jobs/trip-lisbon"]) .state`))); err != nil || badge != "compensated" {
		t.Fatalf("the saga's row reads %q (%v); want compensated", badge, err)
	}

	// A phone's width: the timeline, a fan-out's page with its graph and
	// the overview fit the screen; wide tables scroll in their boxes.
	for _, p := range []struct{ path, ready string }{
		{"/runs/trip-lisbon", "#timeline svg"}, {"/jobs/" + url.PathEscape(nested.ID()), "#pipeline svg"}, {"/", "#chart-throughput text"},
	} {
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready))); err != nil {
			t.Fatalf("browser: narrow %s: %v", p.path, err)
		}
		width, err := chromedp.Run(bctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
		if err != nil {
			t.Fatal(err)
		}
		if width > 390 {
			t.Fatalf("at 390 px %s is %d px wide; wider than the screen:\n%s", p.path, width, wideElements(bctx))
		}
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// Back to the overview for the screenshot: the charts, with axes, and
	// the queue table. A window chosen goes into the URL.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#chart-throughput polyline")),
	); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(function(){var s=document.querySelector('#chart-controls select[name=window]');s.value='1h';s.dispatchEvent(new Event('change',{bubbles:true}));return true})()`)); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`location.search.indexOf('window=1h') >= 0 && document.querySelector('#tp-unit').textContent.indexOf('per-minute') >= 0`)); err != nil {
		t.Fatalf("browser: the 1 h window: %v", err)
	}
	axisLabels, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#chart-throughput text').length`))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	search, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.search`))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	firstLabel, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('#chart-throughput text').textContent`))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if axisLabels < 8 || !strings.Contains(search, "window=1h") || !strings.HasSuffix(firstLabel, "0") {
		t.Fatalf("charts: %d axis labels, URL %q, first label %q; want a y and a time axis and the window in the URL", axisLabels, search, firstLabel)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	dir := os.Getenv("HOPPER_ARTIFACTS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.png"), runShot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s, run.png (%d bytes)", path, len(shot))
	if len(shot) < 10_000 {
		t.Fatalf("screenshot of %d bytes looks empty", len(shot))
	}
}

// wideElements names the first elements that reach past a 390 px screen,
// for a failure's message.
func wideElements(bctx context.Context) string {
	out, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[].slice.call(document.querySelectorAll("*")).filter(function (e) {
		return e.getBoundingClientRect().right > 392;
	}).slice(0, 12).map(function (e) {
		return e.tagName + "." + e.className + "#" + e.id + " " + Math.round(e.getBoundingClientRect().right);
	}).join("\n")`))
	if err != nil {
		return err.Error()
	}
	return out
}

// newBrowser starts headless Chromium for ctx and returns its context.
func newBrowser(t *testing.T, ctx context.Context, chrome string) context.Context {
	t.Helper()
	// Chromium's helpers may still write in its profile for a moment after
	// it exits, so the directory is removed with retries, not by t.TempDir.
	profile, err := os.MkdirTemp("", "hopper-chromium-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the browser's own cleanups, which run first
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// A page kept in the back-forward cache keeps its event stream
		// open: a few navigations would use up the browser's six
		// connections to the server.
		chromedp.Flag("disable-features", "BackForwardCache"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// TestDashboardSignInInBrowser signs in to a server with a token in
// headless Chromium: the sign-in form, a session cookie that is not the
// token, an action the dashboard posts on that cookie (pausing a queue),
// and signing out.
func TestDashboardSignInInBrowser(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: install Debian's chromium (.ci/run does) or set HOPPER_CHROMIUM")
		}
		t.Skip("no Chromium found (install chromium or set HOPPER_CHROMIUM); skipping the browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "hopper.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := startExamples(t, ctx, d)
	if _, err := exampleAdd.Enqueue(ctx, c, AddInput{A: 1, B: 2}, nil); err != nil {
		t.Fatal(err)
	}
	const token = "browser-test-token-0123456789"
	s := server.New(c, &server.Options{Tokens: []string{token}})
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(srvCtx, ln) }()
	defer func() {
		stopSrv()
		<-served
	}()
	base := "http://" + ln.Addr().String()
	bctx := newBrowser(t, ctx, chrome)

	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/jobs?state=succeeded"),
		chromedp.WaitVisible(chromedp.CSS("input[name=token]")),
		chromedp.SendKeys(chromedp.CSS("input[name=token]"), token),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("table.jobs")),
	); err != nil {
		t.Fatalf("browser: sign in: %v", err)
	}
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(loc, "/jobs?state=succeeded") {
		t.Fatalf("after signing in the browser is at %q; want the page it asked for", loc)
	}
	cookie, err := chromedp.Run(bctx, chromedp.Evaluate[string]("document.cookie"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cookie, "hopper_session") || strings.Contains(cookie, token) {
		t.Fatalf("the session cookie is readable by scripts: %q", cookie)
	}
	// An action on the cookie: pause the queue from the overview.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`button[data-post="/v1/queues/default/pause"]`)),
		chromedp.Click(chromedp.CSS(`button[data-post="/v1/queues/default/pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-post="/v1/queues/default/resume"]`)),
	); err != nil {
		t.Fatalf("browser: pause a queue: %v", err)
	}
	qs, err := c.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 || !qs[0].Paused {
		t.Fatalf("the queue is not paused: %+v", qs)
	}
	// Signing out ends the session.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("input[name=token]")),
		chromedp.Navigate(base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS("input[name=token]")),
	); err != nil {
		t.Fatalf("browser: sign out: %v", err)
	}
}
