package cli

import (
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestDevProcessCutsSlowClients: a real hopper dev process, its read
// timeout set to a second, closes a connection whose headers or body stop
// arriving, and goes on serving others.
func TestDevProcessCutsSlowClients(t *testing.T) {
	p := startDev(t, "--read-timeout", "1s")
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sent string }{
		{"headers that stop", "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Ty"},
		{"a body that stops", "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"type\":"},
	} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, tc.sent); err != nil {
			t.Fatal(err)
		}
		// The server's cut is the event waited for; the deadline only
		// keeps a broken server from hanging the test.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: the connection was not closed by the server: %v (read %q)", tc.name, err, got)
		}
		if s := string(got); s != "" && !strings.HasPrefix(s, "HTTP/1.1 4") {
			t.Fatalf("%s: answered %q", tc.name, s)
		}
	}
	if a := p.send("GET", "/healthz", "", nil); a.status != 200 {
		t.Fatalf("after the slow clients: %d %s", a.status, a.body)
	}
}
