package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

// seedStore fills a store as a day of work leaves it: thousands of
// succeeded jobs, dead charges (most declined cards, some gateway
// timeouts) across two tenants, and exports waiting for a worker. The
// types charge and export are registered nowhere, so what the test moves
// back to pending stays there.
func seedStore(t *testing.T, ctx context.Context, d driver.Driver) {
	t.Helper()
	now := time.Now().UTC().Add(-time.Hour)
	job := func(id, typ string, state hoppertype.JobState, i int) *hoppertype.JobRow {
		at := now.Add(time.Duration(i) * time.Second)
		r := &hoppertype.JobRow{ID: id, Type: typ, Queue: "default", State: state, Input: []byte(`{"n":` + fmt.Sprint(i) + `}`), GroupID: id,
			Metadata: map[string]string{"tenant": []string{"acme", "globex"}[i%2]},
			Retry:    hoppertype.RetryPolicy{Attempts: 3, Backoff: "exponential", Base: time.Second, Factor: 2, Max: 30 * time.Second, Jitter: 0.5},
			QueuedAt: at, RunAt: at}
		if state.Terminal() {
			r.Attempt, r.StartedAt, r.EndedAt = 1, at, at.Add(time.Second)
		}
		return r
	}
	var rows []*hoppertype.JobRow
	for i := range 3000 {
		rows = append(rows, job(fmt.Sprintf("seed-ok-%05d", i), "add", hoppertype.JobStateSucceeded, i))
	}
	for i := range 400 {
		r := job(fmt.Sprintf("seed-charge-%05d", i), "charge", hoppertype.JobStateDead, i)
		r.Attempt = 3
		msg := fmt.Sprintf("charge %d: card declined by issuer", i)
		if i%8 >= 5 { // 150 of 400
			msg = fmt.Sprintf("charge %d: gateway timeout after 30s", i)
		}
		r.Error = &hoppertype.ErrorInfo{Kind: "error", Message: msg, Attempt: 3, At: r.EndedAt}
		rows = append(rows, r)
	}
	for i := range 120 {
		rows = append(rows, job(fmt.Sprintf("seed-export-%05d", i), "export", hoppertype.JobStatePending, i))
	}
	for len(rows) > 0 {
		n := min(len(rows), 500)
		if _, err := d.Executor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: rows[:n]}); err != nil {
			t.Fatal(err)
		}
		rows = rows[n:]
	}
}

// countJobs counts the jobs of typ in state.
func countJobs(t *testing.T, ctx context.Context, c *hopper.Client, typ string, state hopper.JobState) int {
	t.Helper()
	n := 0
	p := &hopper.ListParams{Types: []string{typ}, States: []hopper.JobState{state}, Limit: hopper.MaxListLimit}
	for {
		page, err := c.JobList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Jobs)
		if page.NextCursor == "" {
			return n
		}
		p.Cursor = page.NextCursor
	}
}

// TestDashboardBulkInBrowser drives the bulk actions and the dead-letter
// search in headless Chromium over a seeded store: two picked rows
// cancelled, then every job matching a filter past the first page, then
// the dead letters searched by type and error text and the matching set
// redriven, each confirmed with its count. Without Chromium it skips —
// except under CI, where a missing browser fails the test.
func TestDashboardBulkInBrowser(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: install Debian's chromium (.ci/run does) or set HOPPER_CHROMIUM")
		}
		t.Skip("no Chromium found (install chromium or set HOPPER_CHROMIUM); skipping the browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "hopper.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
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

	// result waits for the action bar to report, and returns its words.
	result := func(what string) string {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Poll[string](`document.getElementById("bulk-result") && document.getElementById("bulk-result").textContent`,
			chromedp.WithPollingMutation()))
		if err != nil {
			t.Fatalf("browser: %s: no result: %v", what, err)
		}
		return got
	}
	question := func(what string) string {
		t.Helper()
		q, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#bulk-question")))
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
		return q
	}

	// Two rows picked and cancelled.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/jobs?state=pending&type=export"),
		chromedp.WaitVisible(chromedp.CSS("table.sel")),
		chromedp.Click(chromedp.CSS("tbody tr:nth-child(1) input.sel")),
		chromedp.Click(chromedp.CSS("tbody tr:nth-child(2) input.sel")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: pick two rows: %v", err)
	}
	if q := question("pick two rows"); q != "Cancel 2 jobs?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	// Escape answers no and gives the focus back to the action asked; the
	// keyboard alone then asks again and confirms.
	if err := chromedp.Do(bctx, chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.CSS("#bulk-confirm"))); err != nil {
		t.Fatalf("browser: escape the confirmation: %v", err)
	}
	if focus, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("data-action") || document.activeElement.id`)); err != nil || focus != "cancel" {
		t.Fatalf("after Escape the focus is on %q (%v); want the cancel action", focus, err)
	}
	if err := chromedp.Do(bctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#bulk-confirm"))); err != nil {
		t.Fatalf("browser: ask again from the keyboard: %v", err)
	}
	if focus, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.id`)); err != nil || focus != "bulk-yes" {
		t.Fatalf("the confirmation's focus is on %q (%v); want #bulk-yes", focus, err)
	}
	if err := chromedp.Do(bctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	if r := result("cancel two"); r != "Cancelled 2 of 2 jobs." {
		t.Fatalf("after cancelling two the bar says %q", r)
	}
	if n := countJobs(t, ctx, c, "export", hopper.StateCancelled); n != 2 {
		t.Fatalf("%d exports cancelled; want 2", n)
	}

	// Every job matching the filter, past the first page of 50.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/jobs?state=pending&type=export"),
		chromedp.WaitVisible(chromedp.CSS("table.sel")),
		chromedp.Click(chromedp.CSS("#sel-page")),
		chromedp.WaitVisible(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: select all matching: %v", err)
	}
	if q := question("select all matching"); q != "Cancel all 118 jobs matching this filter?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#bulk-yes"))); err != nil {
		t.Fatal(err)
	}
	if r := result("cancel all matching"); r != "Cancelled 118 of 118 jobs." {
		t.Fatalf("after cancelling all matching the bar says %q", r)
	}
	if n := countJobs(t, ctx, c, "export", hopper.StateCancelled); n != 120 {
		t.Fatalf("%d exports cancelled; want 120", n)
	}

	// Dead letters: searched by type and error text, the error column
	// shown, the matching set redriven.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/dead"),
		chromedp.WaitVisible(chromedp.CSS("#dead-search")),
		chromedp.SetValue(chromedp.CSS(`#dead-search input[name="type"]`), "charge"),
		chromedp.SetValue(chromedp.CSS(`#dead-search input[name="error"]`), "card declined"),
		chromedp.Click(chromedp.CSS(`#dead-search button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#dead-clear")),
	); err != nil {
		t.Fatalf("browser: search dead letters: %v", err)
	}
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "type=charge") || !strings.Contains(loc, "error=card+declined") {
		t.Fatalf("the search is not in the URL: %s", loc)
	}
	errText, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("td.err")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "card declined by issuer") {
		t.Fatalf("the error column shows %q", errText)
	}
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS("#sel-page")),
		chromedp.WaitVisible(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="redrive"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: select the search's matches: %v", err)
	}
	if q := question("redrive the search"); q != "Redrive all 250 jobs matching this filter?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#bulk-yes"))); err != nil {
		t.Fatal(err)
	}
	if r := result("redrive the search"); r != "Redriven 250 of 250 jobs." {
		t.Fatalf("after redriving the search the bar says %q", r)
	}
	if dead, pending := countJobs(t, ctx, c, "charge", hopper.StateDead), countJobs(t, ctx, c, "charge", hopper.StatePending); dead != 150 || pending != 250 {
		t.Fatalf("charges: %d dead, %d pending; want the 150 timeouts dead and the 250 declined pending", dead, pending)
	}

	// The first Tab on a page reaches the link that skips the header.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("table.sel")), chromedp.KeyEvent(kb.Tab)); err != nil {
		t.Fatalf("browser: tab: %v", err)
	}
	if skip, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.className + " " + document.activeElement.getAttribute("href")`)); err != nil || skip != "skip #main" {
		t.Fatalf("the first Tab reaches %q (%v); want the skip link", skip, err)
	}

	// On a phone's width nothing is wider than the screen but the
	// tables, which scroll in their boxes: the overview with its charts,
	// the job listing, a job's page and the dead letters left.
	page, err := c.JobList(ctx, &hopper.ListParams{Types: []string{"charge"}, Limit: 1})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("a charge to open: %v", err)
	}
	for _, p := range []struct{ path, ready string }{
		{"/", "#chart-throughput text"}, {"/jobs", "table.sel"}, {"/runs", "main"},
		{"/jobs/" + page.Jobs[0].ID, "main section.card"}, {"/dead", "td.err"},
	} {
		if err := chromedp.Do(bctx,
			chromedp.EmulateViewport(390, 844),
			chromedp.Navigate(base+p.path),
			chromedp.WaitVisible(chromedp.CSS(p.ready)),
		); err != nil {
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
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("HOPPER_ARTIFACTS_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "dead-letters-390.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// Jobs searched by metadata, the search in the URL; the matches
	// retried in bulk: acme's 50 gateway timeouts (globex has 100).
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/jobs?state=dead"),
		chromedp.WaitVisible(chromedp.CSS("#job-search")),
		chromedp.SetValue(chromedp.CSS(`#job-search input[name="type"]`), "charge"),
		chromedp.SetValue(chromedp.CSS(`#job-search input[name="meta"]`), "tenant=acme"),
		chromedp.Click(chromedp.CSS(`#job-search button[type="submit"]`)),
		// The page the search loads fills its form from the URL.
		chromedp.WaitVisible(chromedp.CSS(`#job-search input[name="meta"][value="tenant=acme"]`)),
	); err != nil {
		t.Fatalf("browser: search jobs by metadata: %v", err)
	}
	if loc, err := chromedp.Run(bctx, chromedp.Location()); err != nil || !strings.Contains(loc, "meta=tenant%3Dacme") || !strings.Contains(loc, "type=charge") {
		t.Fatalf("the metadata search is not in the URL: %s (%v)", loc, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS("#sel-page")),
		chromedp.WaitVisible(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: select the metadata search: %v", err)
	}
	if q := question("retry the search"); q != "Retry all 50 jobs matching this filter?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#bulk-yes"))); err != nil {
		t.Fatal(err)
	}
	if r := result("retry the search"); r != "Retried 50 of 50 jobs." {
		t.Fatalf("after retrying the search the bar says %q", r)
	}

	// The dead letters left, filtered by queue and error, deleted.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/dead?queue=default&error=gateway+timeout"),
		chromedp.WaitVisible(chromedp.CSS("td.err")),
		chromedp.Click(chromedp.CSS("#sel-page")),
		chromedp.WaitVisible(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS("#bulk-all")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="delete"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: select the timeouts left: %v", err)
	}
	if q := question("delete the timeouts"); q != "Delete all 100 jobs matching this filter?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#bulk-yes"))); err != nil {
		t.Fatal(err)
	}
	if r := result("delete the timeouts"); r != "Deleted 100 of 100 jobs." {
		t.Fatalf("after deleting the timeouts the bar says %q", r)
	}
	if dead, pending := countJobs(t, ctx, c, "charge", hopper.StateDead), countJobs(t, ctx, c, "charge", hopper.StatePending); dead != 0 || pending != 300 {
		t.Fatalf("charges: %d dead, %d pending; want none dead and 250 + 50 pending", dead, pending)
	}

	// Runs of a workflow that waits on a hook, picked on the Runs page and
	// cancelled, whether they wait yet or not.
	for i := range 3 {
		if _, err := exampleApproval.Start(ctx, c, ApprovalInput{}, &hopper.StartOpts{ID: fmt.Sprintf("approve-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/runs?workflow=approval"),
		chromedp.WaitVisible(chromedp.CSS("table.runs tbody input.sel")),
		chromedp.Click(chromedp.CSS("#sel-page")),
		chromedp.Click(chromedp.CSS(`.bulk-act[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS("#bulk-confirm")),
	); err != nil {
		t.Fatalf("browser: pick the waiting runs: %v", err)
	}
	if q := question("cancel the runs"); q != "Cancel 3 runs?" {
		t.Fatalf("the confirmation asks %q", q)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#bulk-yes"))); err != nil {
		t.Fatal(err)
	}
	if r := result("cancel the runs"); r != "Cancelled 3 of 3 runs." {
		t.Fatalf("after cancelling the runs the bar says %q", r)
	}
	for i := range 3 {
		if info, err := c.RunWait(ctx, fmt.Sprintf("approve-%d", i)); err != nil || info.Status != hopper.RunCancelled {
			t.Fatalf("run approve-%d: %+v, %v; want cancelled", i, info, err)
		}
	}
}
