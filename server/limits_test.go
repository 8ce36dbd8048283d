package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/server"
)

// pipeListener hands Serve the server ends of in-memory connections, so a
// test in a synctest bubble sees the server's timeouts on its virtual
// clock.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- server
	return client
}

// TestServerCutsSlowAndIdleClients: a client that sends its headers slowly
// is cut off by the header timeout, and a keep-alive connection left idle
// by the idle timeout, both long before the read timeout (here an hour);
// headers past 64 KiB are refused with 431. Time is the bubble's virtual
// clock: the test waits for the server to close each connection.
func TestServerCutsSlowAndIdleClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		defer d.Close()
		c, err := hopper.New(hopper.Config{Driver: d})
		require.NoError(t, err)
		s := server.New(c, &server.Options{Tokens: []string{token}, ReadTimeout: time.Hour})
		defer s.Close()
		ln := newPipeListener()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		defer func() { cancel(); <-done }()

		// Headers that never end.
		conn := ln.dial()
		start := time.Now()
		_, err = io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		_, err = io.ReadAll(conn)
		require.NoError(t, err)
		require.Less(t, time.Since(start), time.Hour, "slow headers are cut off by the header timeout")
		conn.Close()

		// A request answered, then nothing more on the connection.
		conn = ln.dial()
		_, err = io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		idle := time.Now()
		_, err = io.ReadAll(br)
		require.NoError(t, err)
		require.Less(t, time.Since(idle), time.Hour, "an idle connection is closed by the idle timeout")
		conn.Close()

		// Headers of 100 KiB.
		conn = ln.dial()
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			// The server stops reading at its limit: this write ends when
			// it closes the connection.
			_, _ = io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 100<<10)+"\r\n\r\n")
		}()
		resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
		conn.Close()
		<-wrote
	})
}
