package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/server"
)

// checkErrorLine fails unless stderr is one line that starts with
// "hopper: " once and says no clause twice in a row.
func checkErrorLine(t *testing.T, args []string, errOut string) {
	t.Helper()
	line := strings.TrimSuffix(errOut, "\n")
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "hopper: ") || strings.Contains(line[len("hopper: "):], "hopper: ") {
		t.Errorf("%v: stderr %q: want one line with one hopper: prefix", args, errOut)
		return
	}
	parts := strings.Split(line, ": ")
	for i := 1; i < len(parts); i++ {
		if strings.ReplaceAll(parts[i], `"`, "") == strings.ReplaceAll(parts[i-1], `"`, "") {
			t.Errorf("%v: stderr %q says %q twice", args, errOut, parts[i])
		}
	}
}

// TestErrorMessages: errors say what to do once, in the flags' names,
// through the database and through a server.
func TestErrorMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSharedStore(t, ctx, exampleAdd)
	for way, flags := range s.ways() {
		for _, c := range []struct {
			args       []string
			want, lack []string
		}{
			{[]string{"jobs", "show", "nope"}, []string{`no job "nope"`, "hopper jobs list"}, nil},
			{[]string{"jobs", "cancel", "nope"}, []string{`no job "nope"`}, nil},
			{[]string{"runs", "show", "nope"}, []string{`no run "nope"`, "hopper runs list"}, nil},
			{[]string{"jobs", "list", "--state", "bogus"}, []string{"--state", "succeeded"}, nil},
			{[]string{"runs", "list", "--status", "bogus"}, []string{"--status", "completed"}, nil},
			{[]string{"dead", "redrive"}, []string{"--id", "--type", "--all"}, []string{"IDs", "Type or All"}},
			{[]string{"dead", "redrive", "--all", "--limit", "-1"}, []string{"--limit"}, nil},
			{[]string{"schedules", "define", "x", "--cron", "@daily"}, []string{"--type", "--workflow"}, []string{"Type and Workflow"}},
			{[]string{"schedules", "define", "x", "--type", "add"}, []string{"--cron"}, nil},
			{[]string{"schedules", "define", "x", "--cron", "@daily", "--type", "add", "--catch-up", "soon"}, []string{"--catch-up"}, []string{"catch_up"}},
			{[]string{"schedules", "define", "x", "--cron", "CRON_TZ=Europe/Paris @daily", "--type", "add"}, []string{"--location"}, []string{"Location"}},
			{[]string{"schedules", "define", "x", "--cron", "@daily", "--type", "ad"}, []string{"registered: add", "--force"}, nil},
			{[]string{"schedules", "delete", "nope"}, []string{`no schedule "nope"`}, nil},
		} {
			args := append(c.args, flags...)
			_, errOut, code := run(t, args...)
			if code == 0 {
				t.Errorf("%s: %v: accepted", way, c.args)
				continue
			}
			checkErrorLine(t, args, errOut)
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s: %v: stderr %q lacks %q", way, c.args, errOut, w)
				}
			}
			for _, l := range c.lack {
				if strings.Contains(errOut, l) {
					t.Errorf("%s: %v: stderr %q names %q, not a flag", way, c.args, errOut, l)
				}
			}
		}
	}
	// A missing database, from the client.
	_, errOut, _ := run(t, "jobs", "list", "--db", t.TempDir()+"/typo.db")
	checkErrorLine(t, []string{"jobs", "list"}, errOut)
}

// TestServerFlag: --server without a scheme is http://; another scheme is
// refused; a server that does not answer, or asks for a token, says what to
// check.
func TestServerFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := memdriver.New()
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	srv := server.New(c, &server.Options{Tokens: []string{"s3cret-token-of-32-characters-ok"}})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	bare := strings.TrimPrefix(hs.URL, "http://")
	if out, errOut, code := run(t, "jobs", "list", "--server", bare, "--api-token", "s3cret-token-of-32-characters-ok", "--json"); code != 0 || !strings.Contains(out, `"jobs"`) {
		t.Fatalf("--server %s: %d %q %q", bare, code, out, errOut)
	}
	for _, bad := range []string{"ftp://" + bare, "http://", "://x"} {
		_, errOut, code := run(t, "jobs", "list", "--server", bad)
		if code == 0 || !strings.Contains(errOut, "--server") {
			t.Errorf("--server %s: %d %q: want it refused naming --server", bad, code, errOut)
		}
	}
	_, errOut, code := run(t, "jobs", "list", "--server", bare)
	if code == 0 || !strings.Contains(errOut, "--api-token") || !strings.Contains(errOut, "401") {
		t.Errorf("without the token: %d %q", code, errOut)
	}
	checkErrorLine(t, []string{"jobs", "list"}, errOut)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, errOut, code = run(t, "jobs", "list", "--server", closed)
	if code == 0 || !strings.Contains(errOut, "no answer from the server at http://"+closed) || !strings.Contains(errOut, "--server") {
		t.Errorf("a server that does not answer: %d %q", code, errOut)
	}
}

// TestDevBusyPort: hopper dev on an address in use says to pass --addr.
func TestDevBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, errOut, code := run(t, "dev", "--db", "memory://", "--addr", ln.Addr().String())
	if code == 0 || !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "pass --addr") {
		t.Fatalf("dev on a busy port: %d %q: want a hint to pass --addr", code, errOut)
	}
	checkErrorLine(t, []string{"dev"}, errOut)
}

// TestServeRefusesWeakTokensFirst: hopper serve and dev refuse an empty,
// short or missing token before they bind the address, create the
// database or start anything, and say why once, naming the flag.
func TestServeRefusesWeakTokensFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--token", "", "--addr", "0.0.0.0:0"}, []string{"--token", "empty"}},
		{[]string{"serve", "--token", "short", "--addr", "0.0.0.0:0"}, []string{"--token", "at least 16"}},
		{[]string{"serve", "--token", "short", "--addr", "127.0.0.1:0"}, []string{"--token", "at least 16"}},
		{[]string{"dev", "--token", "", "--addr", "127.0.0.1:0"}, []string{"--token", "empty"}},
		{[]string{"serve", "--addr", "0.0.0.0:0"}, []string{"--token", "without an API token", "127.0.0.1"}},
	} {
		db := filepath.Join(t.TempDir(), "hopper.db")
		args := append(c.args, "--db", db)
		out, errOut, code := run(t, args...)
		if code == 0 {
			t.Errorf("%v: accepted", c.args)
			continue
		}
		if out != "" {
			t.Errorf("%v: said %q on stdout: nothing was served", c.args, out)
		}
		checkErrorLine(t, args, errOut)
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errOut, w)
			}
		}
		if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the database was created before the refusal (%v)", c.args, err)
		}
	}
}

// TestDevStopsCleanly: a stop (what SIGINT does) makes hopper dev say that
// it is stopping and which running jobs it waits for, then which of them
// it left to run again.
func TestDevStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop, stopDev := context.WithCancel(ctx)
	defer stopDev()
	pr, pw := io.Pipe()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var errOut strings.Builder
	exited := make(chan int, 1)
	go func() {
		code := mainContext(stop, []string{"dev", "--db", "memory://", "--addr", "127.0.0.1:0", "--stop-timeout", "300ms"}, pw, &errOut)
		pw.Close()
		exited <- code
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dev ended; stderr %q", errOut.String())
			}
			return l
		case <-ctx.Done():
			t.Fatal("dev said nothing more")
		}
		return ""
	}
	base := ""
	for base == "" {
		if l := next(); strings.Contains(l, "dashboard and API on ") {
			base = strings.Fields(strings.SplitAfter(l, "dashboard and API on ")[1])[0]
		}
	}
	// A job that runs for seconds, cancelled by the stop after 300ms.
	resp, err := http.Post(base+"/v1/jobs", "application/json", strings.NewReader(`{"type":"render","input":{"pages":100}}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || created.ID == "" {
		t.Fatalf("enqueue: %v", err)
	}
	// The job runs in `hopper dev`, whose client the test cannot reach:
	// look through its API.
	for state := ""; state != "running"; {
		resp, err := http.Get(base + "/v1/jobs/" + created.ID)
		if err != nil {
			t.Fatal(err)
		}
		var j server.JobJSON
		err = json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if state = j.State; state != "running" {
			select {
			case <-ctx.Done():
				t.Fatalf("the job never ran: %s", state)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	stopDev() // as SIGINT does
	var said []string
	for {
		l, ok := <-lines
		if !ok {
			break
		}
		said = append(said, l)
	}
	if code := <-exited; code != 0 {
		t.Fatalf("dev exited %d: %s", code, errOut.String())
	}
	out := strings.Join(said, "\n")
	for _, w := range []string{
		"hopper dev: stopping: waiting up to 300ms for 1 running job to finish: render " + created.ID,
		"hopper dev: stopped; 1 job did not finish within 300ms and run again at the next start: render " + created.ID,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("dev said %q; want %q", out, w)
		}
	}
}
