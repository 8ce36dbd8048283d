package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCLIEnv makes the test binary run the hopper command line instead of
// its tests: the tests below start it as a real process.
const runCLIEnv = "HOPPER_TEST_RUN_CLI"

func init() {
	if os.Getenv(runCLIEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// devProcess is `hopper dev` running as its own process.
type devProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	errw *bytes.Buffer
}

// startDev starts `hopper dev` on a temporary SQLite file and a free port,
// and waits until it prints its address.
func startDev(t *testing.T, args ...string) *devProcess {
	t.Helper()
	db := filepath.Join(t.TempDir(), "hopper.db")
	cmd := exec.Command(os.Args[0], append([]string{"dev", "--db", db, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), runCLIEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &devProcess{t: t, cmd: cmd, errw: &bytes.Buffer{}}
	cmd.Stderr = p.errw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if m := addr.FindStringSubmatch(lines.Text()); m != nil {
			p.url = m[1]
			break
		}
	}
	if p.url == "" {
		t.Fatalf("hopper dev did not print its address; stderr: %s", p.errw)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return p
}

// rssKiB is the process's resident memory, from /proc.
func (p *devProcess) rssKiB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Skipf("no /proc on this system: %v", err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		p.t.Fatalf("no VmRSS in /proc status")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (p *devProcess) send(method, path, ctype string, body io.Reader) answer {
	p.t.Helper()
	req, err := http.NewRequest(method, p.url+path, body)
	if err != nil {
		p.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if body != nil {
		if _, ok := body.(*zeroReader); ok {
			req.ContentLength = -1
		}
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		return answer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// zeroReader yields n zero bytes.
type zeroReader struct{ left int64 }

func (z *zeroReader) Read(b []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), z.left))
	clear(b[:n])
	z.left -= int64(n)
	return n, nil
}

// TestDevProcessUnderMisuse runs `hopper dev` as a real process and sends
// it what attackers and new users send: oversized and malformed bodies,
// crafted ids, foreign redirects, wrong methods and media types. It stays
// up, within bounded memory, and answers each with a 4xx that says what is
// wrong; SIGINT stops it cleanly.
func TestDevProcessUnderMisuse(t *testing.T) {
	p := startDev(t)
	before := p.rssKiB()

	// 512 MiB bodies, streamed with no declared length, on the API and the
	// webhook route, with any method.
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/jobs"}, {"PUT", "/v1/webhooks/nosuch"}, {"POST", "/v1/webhooks/nosuch"}, {"POST", "/v1/hooks/nosuch"},
	} {
		a := p.send(tc.method, tc.path, "application/json", &zeroReader{left: 512 << 20})
		if a.status != 413 {
			t.Fatalf("%s %s with 512 MiB: %d %s", tc.method, tc.path, a.status, a.body)
		}
	}
	if grew := p.rssKiB() - before; grew > 96<<10 {
		t.Fatalf("the process grew by %d KiB under oversized bodies", grew)
	}

	for _, tc := range []struct {
		name, method, path, ctype, body string
		status                          int
		contains                        string
	}{
		{"crafted id", "POST", "/v1/jobs", "application/json", `{"type":"add","input":{"a":1,"b":2},"opts":{"id":"../queues/default/pause?"}}`, 400, "id"},
		{"NUL in an id", "POST", "/v1/jobs", "application/json", `{"type":"add","input":{"a":1,"b":2},"opts":{"id":"a\u0000b"}}`, 400, "id"},
		{"workflow's own type", "POST", "/v1/jobs", "application/json", `{"type":"workflow:order","input":{}}`, 400, "/v1/runs"},
		{"form-encoded", "POST", "/v1/jobs", "application/x-www-form-urlencoded", `type=add`, 415, "application/json"},
		{"wrong method", "DELETE", "/v1/jobs", "", "", 405, "GET"},
		{"malformed JSON", "POST", "/v1/jobs", "application/json", `{"type":`, 400, "request body"},
		{"unknown type", "POST", "/v1/jobs", "application/json", `{"type":"nosuch","input":{}}`, 404, "add"},
		{"priority past int32", "POST", "/v1/jobs", "application/json", `{"type":"add","input":{"a":1,"b":2},"opts":{"priority":1099511627776}}`, 400, "priority"},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		a := p.send(tc.method, tc.path, tc.ctype, body)
		if a.status != tc.status || !strings.Contains(a.body, tc.contains) {
			t.Fatalf("%s: want %d with %q, got %d %s", tc.name, tc.status, tc.contains, a.status, a.body)
		}
		if strings.Contains(a.body, "SQLSTATE") || strings.Contains(a.body, "hopper: hopper:") {
			t.Fatalf("%s: %s", tc.name, a.body)
		}
		if a.header.Get("X-Request-Id") == "" || a.header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: headers %v", tc.name, a.header)
		}
	}
	if a := p.send("GET", "/v1/queues", "", nil); a.status != 200 || strings.Contains(a.body, `"paused": true`) {
		t.Fatalf("a queue was paused: %d %s", a.status, a.body)
	}

	// An explicit id: the same insert again answers the same job; another
	// input under that id is a 409.
	job := `{"type":"add","input":{"a":1,"b":2},"opts":{"id":"order-42","delay":"1h"}}`
	if a := p.send("POST", "/v1/jobs", "application/json", strings.NewReader(job)); a.status != 201 {
		t.Fatalf("explicit id: %d %s", a.status, a.body)
	}
	if a := p.send("POST", "/v1/jobs", "application/json", strings.NewReader(job)); a.status != 200 || !strings.Contains(a.body, "order-42") {
		t.Fatalf("the same insert again: %d %s", a.status, a.body)
	}
	other := `{"type":"add","input":{"a":9,"b":9},"opts":{"id":"order-42"}}`
	if a := p.send("POST", "/v1/jobs", "application/json", strings.NewReader(other)); a.status != 409 {
		t.Fatalf("another job under a taken id: %d %s", a.status, a.body)
	}

	// The sign-in form (no token: it goes straight through) sends only to
	// this server.
	a := p.send("POST", "/login", "application/x-www-form-urlencoded", strings.NewReader(url.Values{"next": {`/\evil.example`}}.Encode()))
	if a.status != 303 || a.header.Get("Location") != "/" {
		t.Fatalf("login next: %d %q", a.status, a.header.Get("Location"))
	}
	if a := p.send("GET", "/healthz", "", nil); a.status != 200 {
		t.Fatalf("healthz: %d %s", a.status, a.body)
	}
	var health map[string]any
	if err := json.Unmarshal([]byte(p.send("GET", "/readyz", "", nil).body), &health); err != nil || health["store"] != "ok" {
		t.Fatalf("readyz: %v %v", health, err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hopper dev exited with %v; stderr: %s", err, p.errw)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("hopper dev did not stop on SIGINT; stderr: %s", p.errw)
	}
}
