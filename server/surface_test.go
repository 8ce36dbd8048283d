package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/driver/pgdriver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

// countingReader yields n bytes of b and counts what was read of it.
type countingReader struct {
	b    byte
	left int64
	read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	n = min(n, r.left)
	for i := range p[:n] {
		p[i] = r.b
	}
	r.left -= n
	r.read.Add(n)
	return int(n), nil
}

// TestBodiesAreCappedOnEveryRoute sends bodies of 256 MiB with no declared
// length, on every method, to an API route and to the webhook route: each
// is refused with 413 after the server read little more than its cap.
func TestBodiesAreCappedOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}, MaxBodyBytes: 64 << 10, MaxWebhookBytes: 32 << 10})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/webhooks/nosuchtoken", 405}, // not read at all: only POST, PUT and PATCH resume hooks
		{"POST", "/v1/webhooks/nosuchtoken", 413},
		{"PUT", "/v1/webhooks/nosuchtoken", 413},
		{"POST", "/v1/jobs", 413},
		{"POST", "/v1/hooks/nosuchtoken", 413},
		{"POST", "/login", 413},
		{"GET", "/static/app.css", 200},
		{"POST", "/nosuch", 404},
	} {
		body := &countingReader{b: 0, left: 256 << 20}
		req, err := http.NewRequest(tc.method, e.url+tc.path, io.NopCloser(body))
		require.NoError(t, err)
		req.ContentLength = -1 // chunked: the server cannot refuse by the header
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if tc.path == "/login" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "%s %s: the answer comes before the client's write fails", tc.method, tc.path)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.path, b)
		// The server stopped reading near the cap (socket buffers aside),
		// whether or not the client saw the answer before its write failed.
		require.Less(t, body.read.Load(), int64(32<<20), "%s %s read %d bytes", tc.method, tc.path, body.read.Load())
	}
	// A declared length past the cap is refused before the body is read,
	// on any method.
	for _, m := range []string{"GET", "DELETE", "POST"} {
		req, _ := http.NewRequest(m, e.url+"/v1/jobs", strings.NewReader(strings.Repeat("x", 100<<10)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 413, resp.StatusCode, m)
	}
}

// TestWebhookNonJSONBodyStaysBounded: a body of NUL bytes grows six times
// as a JSON string; past the client's payload cap it is a 413, and the
// hook stays unused.
func TestWebhookNonJSONBodyStaysBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval","input":null}`, &run))
	info := waitHook(t, e, run.RunID)
	nuls := bytes.Repeat([]byte{0}, 200<<10) // 200 KiB under the 256 KiB cap, 1.2 MB as JSON
	resp, err := http.Post(e.url+"/v1/webhooks/"+info.Hooks[0].Token, "application/octet-stream", bytes.NewReader(nuls))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 413, resp.StatusCode, "%s", b)
	require.Equal(t, 200, e.do("GET", "/v1/runs/"+run.RunID, "", &info))
	require.Equal(t, "waiting", info.Hooks[0].State, "the hook was not used")
}

func waitHook(t *testing.T, e *env, runID string) server.RunJSON {
	t.Helper()
	var info server.RunJSON
	e.await(t, "the run's hook", func() bool {
		return e.do("GET", "/v1/runs/"+runID, "", &info) == 200 && len(info.Hooks) == 1 && info.Hooks[0].State == "waiting"
	})
	return info
}

// TestSlowBodyIsCutOff: a client that sends half a body and stalls is cut
// off after Options.ReadTimeout, with the server still serving.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	s := server.New(c, &server.Options{ReadTimeout: 200 * time.Millisecond})
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"type\":")
	require.NoError(t, err)
	// The server closes the connection (or answers an error) instead of
	// waiting for the rest forever.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	got, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the slow request open")
	require.NotContains(t, string(got), "201 Created")

	resp, err := http.Get("http://" + ln.Addr().String() + "/livez")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "still serving")
}

// TestDashboardEscapesIDs: a job whose id reads as a path (stored before
// ids were checked, say) keeps its buttons on itself: the Cancel button
// cancels it and pauses no queue.
func TestDashboardEscapesIDs(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	const evil = "../queues/default/pause?"
	now := time.Now()
	_, err := d.Executor().JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{{
		ID: evil, Type: "add", Queue: "default", Input: []byte(`{"a":1}`), State: hoppertype.JobStateScheduled,
		RunAt: now.Add(time.Hour), QueuedAt: now, Retry: hoppertype.RetryPolicy{Attempts: 3}, GroupID: evil,
	}}})
	require.NoError(t, err)
	e := setupOn(t, d, &server.Options{Tokens: []string{token}})

	status, page := e.page("/jobs/" + url.PathEscape(evil))
	require.Equal(t, 200, status)
	m := regexp.MustCompile(`data-post="([^"]*/cancel)"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the page has a Cancel button")
	require.Equal(t, "/v1/jobs/..%2Fqueues%2Fdefault%2Fpause%3F/cancel", m[1])
	var job server.JobJSON
	require.Equal(t, 200, e.do("POST", m[1], "", &job))
	require.Equal(t, evil, job.ID)
	require.Equal(t, "cancelled", job.State)
	var qs struct{ Queues []server.QueueJSON }
	require.Equal(t, 200, e.do("GET", "/v1/queues", "", &qs))
	for _, q := range qs.Queues {
		require.False(t, q.Paused, "queue %s paused", q.Name)
	}
	// Links to it are escaped the same way.
	_, list := e.page("/jobs")
	require.Contains(t, list, `href="/jobs/..%2Fqueues%2Fdefault%2Fpause%3F"`)
}

// page GETs a dashboard page with the token.
func (e *env) page(path string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLoginRedirectsOnlyToThisServer(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for next, want := range map[string]string{
		"/jobs?state=dead":       "/jobs?state=dead",
		"/runs/abc":              "/runs/abc",
		`/\evil.example`:         "/",
		`/\/evil.example`:        "/",
		"//evil.example":         "/",
		"https://evil.example/":  "/",
		"evil.example":           "/",
		"/%0d%0aSet-Cookie:x=y":  "/%0d%0aSet-Cookie:x=y",
		"/\r\nSet-Cookie: x=y":   "/",
		"javascript:alert(1)":    "/",
		"":                       "/",
		"/ok\x00":                "/",
		"http:/\\evil.example/x": "/",
	} {
		resp, err := cl.PostForm(e.url+"/login", url.Values{"token": {token}, "next": {next}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 303, resp.StatusCode, "next %q", next)
		require.Equal(t, want, resp.Header.Get("Location"), "next %q", next)
	}
}

func TestSessionCookie(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	login := func(base string, cl *http.Client) *http.Cookie {
		resp, err := cl.PostForm(base+"/login", url.Values{"token": {token}, "next": {"/"}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 303, resp.StatusCode)
		cks := resp.Cookies()
		require.Len(t, cks, 1)
		return cks[0]
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	ck := login(e.url, &http.Client{CheckRedirect: noRedirect})
	require.NotContains(t, ck.Value, token, "the cookie does not hold the token")
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure, "plain HTTP")
	require.Positive(t, ck.MaxAge)

	// Over TLS the cookie is Secure.
	tls := httptest.NewTLSServer(e.srv)
	defer tls.Close()
	tc := tls.Client()
	tc.CheckRedirect = noRedirect
	require.True(t, login(tls.URL, tc).Secure)

	send := func(method, path, ctype string, body string, hdr map[string]string, cookie *http.Cookie) int {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, e.url+path, rd)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	// The session reads pages and the API.
	require.Equal(t, 200, send("GET", "/jobs", "", "", nil, ck))
	require.Equal(t, 200, send("GET", "/v1/jobs", "", "", nil, ck))
	// A write on the cookie must say it is JSON: a form on another site
	// cannot.
	require.Equal(t, 415, send("POST", "/v1/queues/default/pause", "", "", nil, ck))
	require.Equal(t, 415, send("POST", "/v1/queues/default/pause", "text/plain", "x", nil, ck))
	require.Equal(t, 415, send("POST", "/v1/jobs", "application/x-www-form-urlencoded", `type=add`, nil, ck))
	require.Equal(t, 200, send("POST", "/v1/queues/default/pause", "application/json", "", nil, ck))
	// A browser's cross-site request is refused even with a JSON type.
	require.Equal(t, 403, send("POST", "/v1/queues/default/resume", "application/json", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, ck))
	require.Equal(t, 403, send("POST", "/v1/queues/default/resume", "application/json", "", map[string]string{"Origin": "https://evil.example"}, ck))
	require.Equal(t, 200, send("POST", "/v1/queues/default/resume", "application/json", "", map[string]string{"Sec-Fetch-Site": "same-origin"}, ck))
	// A bearer token needs no media type for a body-less action (curl -X POST).
	require.Equal(t, 200, send("POST", "/v1/queues/default/pause", "", "", map[string]string{"Authorization": "Bearer " + token}, nil))
	require.Equal(t, 200, send("POST", "/v1/queues/default/resume", "", "", map[string]string{"Authorization": "Bearer " + token}, nil))

	// Forged, tampered, expired and old-style cookies are nobody.
	forged := []*http.Cookie{
		{Name: "hopper_session", Value: "v1.99999999999." + strings.Repeat("A", 43)},
		{Name: "hopper_session", Value: ck.Value + "x"},
		{Name: "hopper_session", Value: strings.Replace(ck.Value, "v1.", "v1.9", 1)},
		{Name: "hopper_session", Value: "v1.1." + strings.SplitN(ck.Value, ".", 3)[2]},
		{Name: "hopper_token", Value: token},
		{Name: "hopper_session", Value: token},
	}
	for _, f := range forged {
		require.Equal(t, 401, send("GET", "/v1/jobs", "", "", nil, f), "cookie %s=%s", f.Name, f.Value)
	}
	// Signing out clears the cookie.
	req, _ := http.NewRequest("POST", e.url+"/logout", nil)
	req.AddCookie(ck)
	resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 303, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, "hopper_session", resp.Cookies()[0].Name)
	require.Negative(t, resp.Cookies()[0].MaxAge)
	// The dashboard offers to sign out only on a session.
	req, _ = http.NewRequest("GET", e.url+"/", nil)
	req.AddCookie(ck)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(b), `action="/logout"`)
	_, page := e.page("/")
	require.NotContains(t, page, `action="/logout"`)
}

func TestServeRefusesWeakTokens(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	for _, tc := range []struct {
		tokens []string
		addr   string
		want   string
	}{
		{[]string{""}, "0.0.0.0:0", "empty"},
		{[]string{""}, "127.0.0.1:0", "empty"},
		{[]string{"short"}, "0.0.0.0:0", "at least 16"},
		{[]string{token, "0123456789abcde"}, "127.0.0.1:0", "at least 16"},
		{[]string{"0123456789abcdef "}, "127.0.0.1:0", "space"},
		{nil, "0.0.0.0:0", "without an API token"},
	} {
		s := server.New(c, &server.Options{Tokens: tc.tokens})
		err := s.ListenAndServe(context.Background(), tc.addr)
		require.Error(t, err, "%q on %s", tc.tokens, tc.addr)
		require.Contains(t, err.Error(), tc.want)
		// Serve on a listener refuses the same.
		if tc.addr == "127.0.0.1:0" || tc.tokens == nil {
			ln, lerr := net.Listen("tcp", strings.Replace(tc.addr, "0.0.0.0", "127.0.0.1", 1))
			require.NoError(t, lerr)
			if tc.tokens != nil {
				require.Error(t, s.Serve(context.Background(), ln))
			} else {
				ln.Close()
			}
		}
		s.Close()
	}
	// A token of 16 characters serves a public address.
	s := server.New(c, &server.Options{Tokens: []string{"0123456789abcdef"}})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, "0.0.0.0:0") }()
	cancel()
	require.NoError(t, <-done)
}

// TestSecurityHeaders: every page and answer carries them, and no page
// holds an inline script, an event handler attribute or an inline style
// (which the policy would block).
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2}}`, &created))
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":"ship"}}`, &run))
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)
	for _, path := range []string{"/", "/jobs", "/jobs/" + created.ID, "/runs", "/runs/" + run.RunID, "/dead", "/v1/jobs", "/livez", "/nosuch", "/static/app.css"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline", path)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
		require.NotEmpty(t, h.Get("Referrer-Policy"), path)
		require.NotEmpty(t, h.Get("X-Request-Id"), path)
		if strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			require.Nil(t, inline.FindIndex(b), "%s has inline script or style: %q", path, inline.Find(b))
		}
	}
	// The unauthenticated sign-in page too.
	resp, err := http.Get(e.url + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Nil(t, inline.FindIndex(b))
}

// faultyDriver is a store whose reads can fail: as a store that is down
// (connection refused, and its ping fails) or as a broken one (its error
// text leaks what no caller should see, and its ping works).
type faultyDriver struct {
	driver.Driver
	baseExec
	down, broken, failGet atomic.Bool
}

var errLeaky = errors.New(`ERROR: duplicate key value violates unique constraint "jobs_pkey" (SQLSTATE 23505) Key (id)=(x) postgres://admin:hunter2@db.internal:5432/prod`)

var errRefused = errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")

func (d *faultyDriver) fault() error {
	switch {
	case d.down.Load():
		return errRefused
	case d.broken.Load():
		return errLeaky
	}
	return nil
}

func (d *faultyDriver) Ping(ctx context.Context) error {
	if d.down.Load() {
		return errRefused
	}
	return nil
}

func (d *faultyDriver) JobGet(ctx context.Context, params *driver.JobGetParams) (*hoppertype.JobRow, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	if d.failGet.Load() {
		return nil, errLeaky
	}
	return d.baseExec.JobGet(ctx, params)
}

func (d *faultyDriver) JobList(ctx context.Context, p *driver.JobListParams) ([]*hoppertype.JobRow, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	return d.baseExec.JobList(ctx, p)
}

func (d *faultyDriver) JobScan(ctx context.Context, p *driver.JobScanParams) (*driver.JobScanResult, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	return d.baseExec.JobScan(ctx, p)
}

func (d *faultyDriver) StreamRead(ctx context.Context, p *driver.StreamReadParams) ([]*hoppertype.StreamChunk, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	return d.baseExec.StreamRead(ctx, p)
}

func (d *faultyDriver) JobCountByState(ctx context.Context, p *driver.JobCountParams) ([]driver.JobCount, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	return d.baseExec.JobCountByState(ctx, p)
}

func (d *faultyDriver) QueueDepthList(ctx context.Context, p *driver.QueueDepthListParams) ([]*driver.QueueDepthRow, error) {
	if err := d.fault(); err != nil {
		return nil, err
	}
	return d.baseExec.QueueDepthList(ctx, p)
}

// baseExec is a driver's Executor embedded in a test's spy, which is its
// own Executor and overrides the operations it watches.
type baseExec = driver.Executor

// Executor is the faulty driver itself.
func (d *faultyDriver) Executor() driver.Executor { return d }

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFaulty(t *testing.T) *faultyDriver {
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	return &faultyDriver{Driver: d, baseExec: d.Executor()}
}

// TestEnqueueAnswersFromTheInsert: a stored job is a 201 with its id and
// state even when reading it back would fail.
func TestEnqueueAnswersFromTheInsert(t *testing.T) {
	t.Parallel()
	fd := newFaulty(t)
	e := setupOn(t, fd, &server.Options{Tokens: []string{token}})
	fd.failGet.Store(true)
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"delay":"1h"}}`, &created))
	require.NotEmpty(t, created.ID)
	require.Equal(t, "scheduled", created.State)
	fd.failGet.Store(false)
	var job server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+created.ID, "", &job))
	require.Equal(t, "scheduled", job.State)
	// A deduplicated enqueue answers the existing job's state.
	var u1, u2 server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"unique_key":"k","delay":"1h"}}`, &u1))
	fd.failGet.Store(true)
	require.Equal(t, 200, e.do("POST", "/v1/jobs", `{"type":"add","input":{},"opts":{"unique_key":"k"}}`, &u2))
	require.Equal(t, u1.ID, u2.ID)
	require.Equal(t, "scheduled", u2.State)
}

// TestInternalErrorsNameOnlyTheRequest: a store's text never reaches the
// caller; the log has it under the request id the answer returns.
func TestInternalErrorsNameOnlyTheRequest(t *testing.T) {
	t.Parallel()
	fd := newFaulty(t)
	var logs syncBuffer
	e := setupOn(t, fd, &server.Options{Tokens: []string{token}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	fd.broken.Store(true)
	for _, path := range []string{"/v1/jobs", "/v1/jobs/x", "/v1/dead", "/jobs", "/jobs/x"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 500, resp.StatusCode, path)
		for _, leak := range []string{"SQLSTATE", "Key (id)", "postgres://", "hunter2", "jobs_pkey", "goroutine"} {
			require.NotContains(t, string(b), leak, path)
		}
		id := resp.Header.Get("X-Request-Id")
		require.NotEmpty(t, id)
		require.Contains(t, string(b), id, "the answer names its request")
		require.Contains(t, logs.String(), "request_id="+id, "the log names the request")
	}
	require.Contains(t, logs.String(), "SQLSTATE 23505", "the log keeps the cause")
}

// TestStoreOutage: while the store is unreachable the API answers 503 with
// Retry-After and the health check says so; /livez stays up.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	fd := newFaulty(t)
	e := setupOn(t, fd, &server.Options{Tokens: []string{token}})
	require.Equal(t, 200, e.doAuth("GET", "/healthz", "", "", nil))
	fd.down.Store(true)
	for _, path := range []string{"/v1/jobs", "/v1/jobs/x"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode, path)
		require.NotEmpty(t, resp.Header.Get("Retry-After"), path)
		require.NotContains(t, string(b), "10.0.0.5", path)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.url + path)
		require.NoError(t, err)
		var h map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode, path)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		require.Equal(t, false, h["ok"])
	}
	require.Equal(t, 200, e.doAuth("GET", "/livez", "", "", nil))
	fd.down.Store(false)
	// A health answer is reused for a second of wall time (the server's
	// cache): the check says ok once it lapsed.
	require.Eventually(t, func() bool { return e.doAuth("GET", "/healthz", "", "", nil) == 200 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 200, e.do("GET", "/v1/jobs", "", nil))
}

func TestMethodAndMediaType(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/jobs", "GET, POST, HEAD"},
		{"PUT", "/v1/jobs/x/cancel", "POST"},
		{"GET", "/v1/jobs/x/cancel", "POST"},
		{"POST", "/v1/runs/x", "GET, HEAD"},
		{"PATCH", "/v1/schedules/x", "DELETE"},
	} {
		req, _ := http.NewRequest(tc.method, e.url+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var eb errBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
		resp.Body.Close()
		require.Equal(t, 405, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		require.Equal(t, "method_not_allowed", eb.Error.Code)
	}
	// A form-encoded body (curl -d without --json) is a 415 that says what to send.
	req, _ := http.NewRequest("POST", e.url+"/v1/jobs", strings.NewReader(`{"type":"add","input":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var eb errBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
	resp.Body.Close()
	require.Equal(t, 415, resp.StatusCode)
	require.Contains(t, eb.Error.Message, "application/json")
	// A JSON body with a charset, or a +json type, is JSON.
	for _, ct := range []string{"application/json; charset=utf-8", "application/merge-patch+json"} {
		req, _ := http.NewRequest("POST", e.url+"/v1/jobs", strings.NewReader(`{"type":"add","input":{}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 201, resp.StatusCode, ct)
	}
}

// TestEnqueueRefusesWorkflowTypes: a workflow's own job type is not a job
// to enqueue; the answer points to POST /v1/runs.
func TestEnqueueRefusesWorkflowTypes(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var eb errBody
	require.Equal(t, 400, e.do("POST", "/v1/jobs", `{"type":"workflow:saga","input":{}}`, &eb))
	require.Contains(t, eb.Error.Message, "/v1/runs")
	require.Equal(t, 400, e.do("POST", "/v1/jobs", `{"type":"hopper.gate","input":{}}`, &eb))
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs", "", &page))
	require.Empty(t, page.Jobs, "nothing was stored")
}

// TestAPIRefusesDerivedIDs: an id ending as the ids hopper derives for a
// run's attempts, children and activities ("o@2", "o.4", "o.a2") is a 400
// naming the rule, from POST /v1/jobs and POST /v1/runs, and nothing is
// stored; an id with '@' and '.' elsewhere is taken.
func TestAPIRefusesDerivedIDs(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	for _, id := range []string{"o@2", "o.4", "o.a2"} {
		var eb errBody
		require.Equal(t, 400, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"id":"`+id+`"}}`, &eb), id)
		require.Contains(t, eb.Error.Message, "followed by digits", id)
		require.Equal(t, 400, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{},"id":"`+id+`"}`, &eb), id)
		require.Contains(t, eb.Error.Message, "followed by digits", id)
	}
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs", "", &page))
	require.Empty(t, page.Jobs, "nothing was stored")
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval","input":null,"id":"ada@example.com"}`, nil))
}

// TestPostgresOutage runs the server on PostgreSQL through a TCP proxy and
// cuts the proxy: the API answers 503 with Retry-After and /healthz says
// the store is unreachable; when the proxy is back, both recover.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	pgURL := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if pgURL == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL outage test")
	}
	u, err := url.Parse(pgURL)
	require.NoError(t, err)
	p := newTCPProxy(t, u.Host)
	u.Host = p.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	d := openPostgres(t, u.String())
	e := setupOn(t, d, &server.Options{Tokens: []string{token}})
	var created server.EnqueueResponse
	require.Equal(t, 201, e.do("POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2}}`, &created))
	require.Equal(t, 200, e.doAuth("GET", "/healthz", "", "", nil))

	p.cut()
	for _, path := range []string{"/v1/jobs", "/v1/jobs/" + created.ID, "/v1/runs"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 503, resp.StatusCode, "%s: %s", path, b)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		require.NotContains(t, string(b), p.addr, "no address in the answer")
	}
	require.Equal(t, 503, e.doAuth("GET", "/healthz", "", "", nil))
	require.Equal(t, 200, e.doAuth("GET", "/livez", "", "", nil))

	p.restore()
	// The health cache lapses after a second of wall time, and the pool
	// reconnects on its own schedule: look until both did.
	require.Eventually(t, func() bool { return e.doAuth("GET", "/healthz", "", "", nil) == 200 }, 30*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return e.do("GET", "/v1/jobs/"+created.ID, "", nil) == 200 }, 30*time.Second, 100*time.Millisecond)
}

// tcpProxy forwards connections to a backend until cut; cut closes every
// connection and refuses new ones, restore accepts them again.
type tcpProxy struct {
	t       *testing.T
	addr    string
	backend string
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
	ln      net.Listener
	wg      sync.WaitGroup
}

func newTCPProxy(t *testing.T, backend string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, addr: ln.Addr().String(), backend: backend, conns: map[net.Conn]struct{}{}, ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[b] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(b, c)
		go pipe(c, b)
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// openPostgres opens the driver on a fresh schema of the database at
// pgURL, dropped when the test ends.
func openPostgres(t *testing.T, pgURL string) driver.Driver {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "hopper_server_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := pgdriver.Open(ctx, pgURL, &pgdriver.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, os.Getenv("HOPPER_TEST_POSTGRES_URL"))
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return d
}

// TestInternalJobsReadable: a gate's job shows what the gate waits for and
// queues (not hopper's encoding of it); a workflow run's job names its run
// and counts the run's tries, in the API and on the dashboard.
func TestInternalJobsReadable(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	ctx := context.Background()
	first, err := e.c.NameJob("add", json.RawMessage(`{"a":1,"b":1}`), nil)
	require.NoError(t, err)
	failing, err := e.c.NameJob("fail", json.RawMessage(`null`), nil)
	require.NoError(t, err)
	next, err := e.c.NameJob("add", json.RawMessage(`{"a":40,"b":2}`), nil)
	require.NoError(t, err)
	gate := hopper.Gate([]string{first.ID(), failing.ID()}, []*hopper.JobSpec{next}, hopper.CountDone(2), 0)
	_, err = e.c.EnqueueMany(ctx, first, failing, gate)
	require.NoError(t, err)
	var g server.JobJSON
	e.await(t, "the gate to fire", func() bool {
		return e.do("GET", "/v1/jobs/"+gate.ID(), "", &g) == 200 && g.State == "succeeded"
	})
	require.JSONEq(t, `null`, string(g.Input), "no encoded gate input")
	require.NotNil(t, g.Gate)
	require.Equal(t, []string{first.ID(), failing.ID()}, g.Gate.On)
	require.Equal(t, "2 of 2 jobs finish", g.Gate.WaitsUntil)
	require.Equal(t, []string{"succeeded", "dead"}, g.Gate.Seen)
	require.Equal(t, 2, *g.Gate.Done)
	require.Equal(t, 1, *g.Gate.Succeeded)
	require.Len(t, g.Gate.Next, 1)
	require.Equal(t, next.ID(), g.Gate.Next[0].ID)
	require.Equal(t, "add", g.Gate.Next[0].Type)
	require.JSONEq(t, `{"a":40,"b":2}`, string(g.Gate.Next[0].Input))
	raw := e.raw("/v1/jobs/" + gate.ID())
	for _, internal := range []string{"QueuedAt", "RunAt", "GroupID", "eyJ"} {
		require.NotContains(t, raw, internal, "hopper's encoding leaked")
	}
	// Lists parse the gate without reading what it has seen.
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs?type=hopper.gate", "", &page))
	require.Len(t, page.Jobs, 1)
	require.Equal(t, "2 of 2 jobs finish", page.Jobs[0].Gate.WaitsUntil)
	require.Nil(t, page.Jobs[0].Gate.Seen)
	_, html := e.page("/jobs/" + gate.ID())
	require.Contains(t, html, `id="gate"`)
	require.Contains(t, html, "fires when 2 of 2 jobs finish")
	require.Contains(t, html, `href="/jobs/`+failing.ID()+`"`)
	require.Contains(t, html, `href="/jobs/`+next.ID()+`"`)
	require.NotContains(t, html, "QueuedAt")

	// A compensated saga's job: labelled with its run, its tries counted
	// as the run's.
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":"ship"}}`, &run))
	var info server.RunJSON
	e.await(t, "the saga compensated", func() bool {
		return e.do("GET", "/v1/runs/"+run.RunID, "", &info) == 200 && info.Status == "compensated"
	})
	var job server.JobJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs/"+run.RunID, "", &job))
	require.Equal(t, "dead", job.State, "a run's status is written in its job's transition")
	require.Equal(t, "saga", job.Workflow)
	require.Equal(t, run.RunID, job.RunID)
	require.Equal(t, 1, job.MaxAttempts, "the run's tries, not the crash allowance")
	_, html = e.page("/jobs/" + run.RunID)
	require.Contains(t, html, `id="run-link"`)
	require.Contains(t, html, `href="/runs/`+run.RunID+`"`)
	require.Contains(t, html, "1 of 1")
	_, dead := e.page("/dead")
	require.NotContains(t, dead, run.RunID, "a compensated saga is no dead letter")
	_, dead = e.page("/dead?hide_compensated=false")
	require.Contains(t, dead, "workflow saga")
	require.Contains(t, dead, `href="/runs/`+run.RunID+`"`)
	require.NotRegexp(t, `\d+ of 101`, dead)
	require.NotContains(t, dead, "/101")
}

// raw GETs an API path with the token and returns its body.
func (e *env) raw(path string) string {
	_, b := e.page(path)
	return b
}

// TestPostgresBadInputIs4xx: on PostgreSQL, which refuses a NUL byte in
// text with its own error, bad ids, names, queries and numbers are 400s
// with hopper's message, never a 500 with the driver's text.
func TestPostgresBadInputIs4xx(t *testing.T) {
	t.Parallel()
	pgURL := os.Getenv("HOPPER_TEST_POSTGRES_URL")
	if pgURL == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HOPPER_TEST_POSTGRES_URL is not set: the PostgreSQL tests must run under CI")
		}
		t.Skip("set HOPPER_TEST_POSTGRES_URL to run the PostgreSQL bad-input test")
	}
	e := setupOn(t, openPostgres(t, pgURL), &server.Options{Tokens: []string{token}})
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs/a%00b", ""},
		{"GET", "/v1/jobs?type=a%00b", ""},
		{"GET", "/v1/jobs?queue=%00", ""},
		{"GET", "/v1/jobs?cursor=%00", ""},
		{"GET", "/v1/runs/a%00b", ""},
		{"GET", "/v1/runs?workflow=%00", ""},
		{"POST", "/v1/jobs/a%00b/cancel", ""},
		{"POST", "/v1/queues/a%00b/pause?create=true", ""},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"queue":"q\u0000"}}`},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"metadata":{"k":"v\u0000"}}}`},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"priority":1099511627776}}`},
		{"POST", "/v1/jobs", `{"type":"add","input":{"a":1,"b":2},"opts":{"run_at":"10000-01-01T00:00:00Z"}}`},
		{"POST", "/v1/runs", `{"workflow":"saga","input":{},"id":"r\u0000"}`},
	} {
		var eb errBody
		status := e.do(tc.method, tc.path, tc.body, &eb)
		require.Equal(t, 400, status, "%s %s %s: %+v", tc.method, tc.path, tc.body, eb)
		require.NotContains(t, eb.Error.Message, "SQLSTATE", tc.path)
	}
	var page server.JobListJSON
	require.Equal(t, 200, e.do("GET", "/v1/jobs", "", &page))
	require.Empty(t, page.Jobs, "nothing was stored")
}

// TestAPIRunsPageByCursor: GET /v1/runs pages by next_cursor, the
// dashboard's Runs page links its next page by cursor, and a bad cursor is
// a 400.
func TestAPIRunsPageByCursor(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	for i := range 3 {
		require.Equal(t, 201, e.do("POST", "/v1/runs", fmt.Sprintf(`{"workflow":"approval","input":null,"id":"paged-%d"}`, i), nil))
	}
	var seen []string
	path := "/v1/runs?workflow=approval&limit=2"
	for range 5 {
		var page server.RunListJSON
		require.Equal(t, 200, e.do("GET", path, "", &page))
		for _, r := range page.Runs {
			seen = append(seen, r.RunID)
		}
		if page.NextCursor == "" {
			break
		}
		path = "/v1/runs?workflow=approval&limit=2&cursor=" + url.QueryEscape(page.NextCursor)
	}
	require.ElementsMatch(t, []string{"paged-0", "paged-1", "paged-2"}, seen)
	require.Len(t, seen, 3, "no run twice")
	var eb errBody
	require.Equal(t, 400, e.do("GET", "/v1/runs?cursor=nope", "", &eb))
	require.Equal(t, 400, e.do("GET", "/v1/runs?cursor="+url.QueryEscape(path)+"&offset=2", "", &eb))
}

// TestHandlerModeRefusesWeakTokens: a Server mounted in a server of one's
// own with an empty or short token (an unset environment variable, say)
// serves nothing, rather than accept sessions anyone can sign; not even a
// cookie signed with the empty key.
func TestHandlerModeRefusesWeakTokens(t *testing.T) {
	t.Parallel()
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	for _, weak := range [][]string{{""}, {"abc"}, {token, ""}} {
		var logs syncBuffer
		s := server.New(c, &server.Options{Tokens: weak, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ts := httptest.NewServer(s)
		for _, ck := range []*http.Cookie{nil, forgedSession("", time.Now().Add(time.Hour)), forgedSession("abc", time.Now().Add(time.Hour))} {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/queues/default/pause?create=true", nil)
			req.Header.Set("Content-Type", "application/json")
			if ck != nil {
				req.AddCookie(ck)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 500, resp.StatusCode, "tokens %q", weak)
		}
		require.Contains(t, logs.String(), "refusing to serve")
		ts.Close()
		s.Close()
	}
	qs, err := c.QueueList(context.Background())
	require.NoError(t, err)
	for _, q := range qs {
		require.False(t, q.Paused)
	}
}

// forgedSession is a session cookie signed with key, as an attacker who
// knows or guesses the key makes one.
func forgedSession(key string, exp time.Time) *http.Cookie {
	e := strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("hopper dashboard session v1|" + e))
	return &http.Cookie{Name: "hopper_session", Value: "v1." + e + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

// TestSessionOfARemovedToken: a session signed with a token that is no
// longer configured is refused; one signed with a configured token (the
// same scheme, made by the test) is accepted, so the forgery check is sound.
func TestSessionOfARemovedToken(t *testing.T) {
	t.Parallel()
	other := "another-token-of-32-characters-x"
	e := setup(t, &server.Options{Tokens: []string{token}})
	get := func(ck *http.Cookie) int {
		req, _ := http.NewRequest("GET", e.url+"/v1/jobs", nil)
		req.AddCookie(ck)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 200, get(forgedSession(token, time.Now().Add(time.Hour))))
	require.Equal(t, 401, get(forgedSession(other, time.Now().Add(time.Hour))), "a token not configured here")
	require.Equal(t, 401, get(forgedSession(token, time.Now().Add(-time.Second))), "expired")
}

// TestWebhookOnlyResumesOnWrites: a preflight, a HEAD or a link preview's
// GET does not use a hook up; a POST does.
func TestWebhookOnlyResumesOnWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval","input":null}`, &run))
	info := waitHook(t, e, run.RunID)
	hook := e.url + "/v1/webhooks/" + info.Hooks[0].Token
	for _, m := range []string{"OPTIONS", "HEAD", "GET", "DELETE"} {
		req, _ := http.NewRequest(m, hook, nil)
		req.Header.Set("Origin", "https://elsewhere.example")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.NotEqual(t, 200, resp.StatusCode, m)
	}
	require.Equal(t, 200, e.do("GET", "/v1/runs/"+run.RunID, "", &info))
	require.Equal(t, "waiting", info.Hooks[0].State, "no read resumed the hook")
	resp, err := http.Post(hook, "application/json", strings.NewReader(`{"approved":true}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// TestStoreTextNeverInStreamsOrMetrics: a failing store's text reaches
// neither a run's event stream nor /metrics; both say less and the log
// says more.
func TestStoreTextNeverInStreamsOrMetrics(t *testing.T) {
	t.Parallel()
	fd := newFaulty(t)
	var logs syncBuffer
	e := setupOn(t, fd, &server.Options{Tokens: []string{token}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval","input":null}`, &run))
	waitHook(t, e, run.RunID)
	fd.broken.Store(true)
	for _, path := range []string{"/v1/runs/" + run.RunID + "/stream", "/metrics"} {
		body := e.raw(path)
		for _, leak := range []string{"SQLSTATE", "postgres://", "hunter2", "jobs_pkey"} {
			require.NotContains(t, body, leak, path)
		}
	}
	require.Contains(t, e.raw("/metrics"), "hopper_store_up 0")
	fd.broken.Store(false)
	require.Contains(t, e.raw("/metrics"), "hopper_store_up 1")
	require.Contains(t, logs.String(), "SQLSTATE", "the log keeps the cause")
}

// TestErrorMessagesSayItOnce: a missing job, run or group is named once, in
// the route's words, not as the store's chain of wrapped errors; an unknown
// method on a route is a 405 whatever the body's type.
func TestErrorMessagesSayItOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	for path, want := range map[string]string{
		"/v1/jobs/missing":         `no job "missing"`,
		"/v1/jobs/missing/result":  `no job "missing"`,
		"/v1/runs/missing":         `no run "missing"`,
		"/v1/runs/missing/history": `no run "missing"`,
		"/v1/groups/missing":       `no group "missing"`,
	} {
		var eb errBody
		require.Equal(t, 404, e.do("GET", path, "", &eb), path)
		require.Equal(t, want, eb.Error.Message, path)
	}
	req, _ := http.NewRequest("PUT", e.url+"/v1/jobs", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
}

// TestAPIRetryRun: POST /v1/runs/{id}/retry runs a compensated saga again;
// a completed run is a 409; the run page offers Retry only when it applies.
func TestAPIRetryRun(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":"ship"},"id":"retry-me"}`, &run))
	info := waitRun(t, e, run.RunID)
	require.Equal(t, "compensated", info.Status)
	_, page := e.page("/runs/retry-me")
	require.Contains(t, page, `data-post="/v1/runs/retry-me/retry"`)
	var again server.RunJSON
	require.Equal(t, 200, e.do("POST", "/v1/runs/retry-me/retry", "", &again))
	require.Nil(t, again.Error, "the failure is cleared")
	info = waitRun(t, e, run.RunID)
	require.Equal(t, "compensated", info.Status, "the saga fails again at ship: a second attempt, undone again")
	require.Len(t, info.Compensations, 4, "two attempts, two undos each")

	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"saga","input":{"fail_at":""},"id":"done"}`, nil))
	require.Equal(t, "completed", waitRun(t, e, "done").Status)
	var eb errBody
	require.Equal(t, 409, e.do("POST", "/v1/runs/done/retry", "", &eb))
	_, page = e.page("/runs/done")
	require.NotContains(t, page, `/retry"`)
	require.Equal(t, 404, e.do("POST", "/v1/runs/nope/retry", "", &eb))
}

// TestHookPayloadRefusedOverHTTP: a hook payload that does not fit the
// hook's type is a 400 naming the field, on both hook routes, and the hook
// stays unused.
func TestHookPayloadRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	type decision struct {
		Approved bool `json:"approved"`
	}
	wf := hopper.Workflow("decide", func(wf hopper.WorkflowContext, _ hopper.None) (bool, error) {
		h, err := hopper.NewHook[decision](wf, "decision")
		if err != nil {
			return false, err
		}
		d, err := h.Wait(nil)
		return d.Approved, err
	}, nil)
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(wf))
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	s := server.New(c, &server.Options{Tokens: []string{token}})
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	e := &env{t: t, c: c, url: ts.URL, srv: s}

	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"decide","input":null}`, &run))
	info := waitHook(t, e, run.RunID)
	tok := info.Hooks[0].Token
	var eb errBody
	require.Equal(t, 400, e.do("POST", "/v1/hooks/"+tok, `{"approved":"yes"}`, &eb))
	require.Contains(t, eb.Error.Message, `.approved: want true or false, got the string "yes"`)
	resp, err := http.Post(e.url+"/v1/webhooks/"+tok, "application/json", strings.NewReader(`{"approved":1}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 400, resp.StatusCode, "%s", b)
	require.Equal(t, 200, e.do("GET", "/v1/runs/"+run.RunID, "", &info))
	require.Equal(t, "waiting", info.Hooks[0].State)
	require.Equal(t, 200, e.do("POST", "/v1/hooks/"+tok, `{"approved":true}`, nil))
	require.Equal(t, "completed", waitRun(t, e, run.RunID).Status)
}

// TestWebhookRequestReachesTheWorkflow: a webhook's method, headers and
// query reach the workflow beside its body; its credentials do not.
func TestWebhookRequestReachesTheWorkflow(t *testing.T) {
	t.Parallel()
	wf := hopper.Workflow("signed", func(wf hopper.WorkflowContext, _ hopper.None) (map[string]string, error) {
		h, err := hopper.NewHook[json.RawMessage](wf, "callback")
		if err != nil {
			return nil, err
		}
		if _, err := h.Wait(nil); err != nil {
			return nil, err
		}
		r := h.Request()
		return map[string]string{"method": r.Method, "sig": r.Header.Get("X-Signature"), "cookie": r.Header.Get("Cookie"),
			"state": r.Query.Get("state")}, nil
	}, nil)
	d := memdriver.New()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	require.NoError(t, err)
	require.NoError(t, c.Register(wf))
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	s := server.New(c, &server.Options{Tokens: []string{token}})
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	e := &env{t: t, c: c, url: ts.URL, srv: s}

	var run server.StartRunResponse
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"signed","input":null}`, &run))
	info := waitHook(t, e, run.RunID)
	req, _ := http.NewRequest("PUT", e.url+"/v1/webhooks/"+info.Hooks[0].Token+"?state=done", strings.NewReader(`{"ok":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256=abc")
	req.Header.Set("Cookie", "session=secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	done := waitRun(t, e, run.RunID)
	require.Equal(t, "completed", done.Status)
	require.JSONEq(t, `{"method":"PUT","sig":"sha256=abc","cookie":"","state":"done"}`, string(done.Output))
}

// TestDashboardWorkerScalings: an autoscaled worker's row shows its slots
// over its latest scaling decisions, drawn and listed.
func TestDashboardWorkerScalings(t *testing.T) {
	d := newDriver(t)
	e := setupOn(t, d, nil)
	now := time.Now().UTC()
	info := hopper.WorkerInfo{Status: hopper.WorkerBusy, MaxWorkers: 10, MinWorkers: 2, Slots: 6, Active: 5, Queues: []string{"default"},
		Scalings: []hopper.ScalingInfo{{Workload: 1, Busy: 2, Before: 2, After: 6, At: now.Add(-20 * time.Second)}}}
	b, err := json.Marshal(info)
	require.NoError(t, err)
	require.NoError(t, d.Executor().WorkerUpsert(context.Background(), &driver.WorkerUpsertParams{Row: &driver.WorkerRow{
		ID: "scaled-worker", StartedAt: now.Add(-time.Minute), SeenAt: now, Info: b}}))
	code, body := e.page("/")
	require.Equal(t, 200, code)
	require.Contains(t, body, "scaled-worker")
	require.Contains(t, body, "(autoscaled 2–10)")
	require.Contains(t, body, `<polyline fill="none" stroke="currentColor" points="0,16.7 0.0,16.7 0.0,2.0 120,2.0"/>`)
	require.Contains(t, body, "2→6")
}
