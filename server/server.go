// Package server is hopper's HTTP API and web dashboard over a Client: an
// http.Handler to mount in any Go program, and what `hopper serve` and
// `hopper dev` run.
//
//	s := server.New(client, &server.Options{Tokens: []string{os.Getenv("HOPPER_TOKEN")}})
//	defer s.Close()
//	http.ListenAndServe("127.0.0.1:7700", s)
//
// Every response of the API is JSON; errors are {"error":{"code","message"}}
// with a fitting 4xx or 5xx status. Bad input is a 4xx, never a 500.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
)

// Options configure a Server. The zero value is valid.
type Options struct {
	// Tokens are the API tokens accepted as "Authorization: Bearer <token>"
	// (or, for the dashboard, the hopper_token cookie). With none, the API is
	// open: bind it to loopback only (ListenAndServe refuses anything else).
	Tokens []string
	// MaxBodyBytes caps request bodies. Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxWait caps the wait of long-polling requests. Defaults to 5 minutes.
	MaxWait time.Duration
	// Logger receives request errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Title names the dashboard. Defaults to "hopper".
	Title string
}

// Server serves the API and the dashboard for one Client.
type Server struct {
	c       *hopper.Client
	opts    Options
	mux     *http.ServeMux
	events  *eventHub
	metrics *metrics
	stats   stats
	unsub   func()
}

// New returns a Server for c; opts may be nil. Close it to detach it from
// the client's events.
func New(c *hopper.Client, opts *Options) *Server {
	s := &Server{c: c, mux: http.NewServeMux()}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = 1 << 20
	}
	if s.opts.MaxWait <= 0 {
		s.opts.MaxWait = 5 * time.Minute
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Title == "" {
		s.opts.Title = "hopper"
	}
	s.events = newEventHub()
	s.metrics = newMetrics(c)
	s.unsub = c.Subscribe(func(e hopper.Event) {
		s.metrics.observe(e)
		s.stats.observe(e)
		s.events.publish(e)
	})
	s.routes()
	return s
}

// Close detaches the server from the client's events and ends open event
// streams.
func (s *Server) Close() {
	s.unsub()
	s.events.close()
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", s.healthz)
	m.Handle("GET /metrics", s.auth(s.metrics.handler()))

	m.Handle("POST /v1/jobs", s.auth(http.HandlerFunc(s.enqueue)))
	m.Handle("GET /v1/jobs", s.auth(http.HandlerFunc(s.listJobs)))
	m.Handle("GET /v1/jobs/{id}", s.auth(http.HandlerFunc(s.getJob)))
	m.Handle("GET /v1/jobs/{id}/result", s.auth(http.HandlerFunc(s.jobResult)))
	m.Handle("GET /v1/jobs/{id}/attempts", s.auth(http.HandlerFunc(s.jobAttempts)))
	m.Handle("GET /v1/changes", s.auth(http.HandlerFunc(s.listChanges)))
	m.Handle("GET /v1/changes/stream", s.auth(http.HandlerFunc(s.streamChanges)))
	m.Handle("GET /v1/observers", s.auth(http.HandlerFunc(s.listObservers)))
	m.Handle("POST /v1/jobs/{id}/cancel", s.auth(http.HandlerFunc(s.cancelJob)))
	m.Handle("POST /v1/jobs/{id}/retry", s.auth(http.HandlerFunc(s.retryJob)))
	m.Handle("GET /v1/groups/{id}", s.auth(http.HandlerFunc(s.getGroup)))
	m.Handle("GET /v1/dead", s.auth(http.HandlerFunc(s.listDead)))
	m.Handle("POST /v1/dead/redrive", s.auth(http.HandlerFunc(s.redrive)))
	m.Handle("GET /v1/queues", s.auth(http.HandlerFunc(s.listQueues)))
	m.Handle("POST /v1/queues/{name}/pause", s.auth(http.HandlerFunc(s.pauseQueue)))
	m.Handle("POST /v1/queues/{name}/resume", s.auth(http.HandlerFunc(s.resumeQueue)))
	m.Handle("GET /v1/types", s.auth(http.HandlerFunc(s.listTypes)))
	m.Handle("GET /v1/schedules", s.auth(http.HandlerFunc(s.listSchedules)))
	m.Handle("POST /v1/schedules", s.auth(http.HandlerFunc(s.defineSchedule)))
	m.Handle("POST /v1/schedules/{name}/pause", s.auth(http.HandlerFunc(s.pauseSchedule)))
	m.Handle("POST /v1/schedules/{name}/resume", s.auth(http.HandlerFunc(s.resumeSchedule)))
	m.Handle("DELETE /v1/schedules/{name}", s.auth(http.HandlerFunc(s.deleteSchedule)))
	m.Handle("GET /v1/workers", s.auth(http.HandlerFunc(s.listWorkers)))
	m.Handle("POST /v1/runs", s.auth(http.HandlerFunc(s.startRun)))
	m.Handle("GET /v1/runs", s.auth(http.HandlerFunc(s.listRuns)))
	m.Handle("GET /v1/runs/{id}", s.auth(http.HandlerFunc(s.getRun)))
	m.Handle("POST /v1/runs/{id}/cancel", s.auth(http.HandlerFunc(s.cancelRun)))
	m.Handle("GET /v1/runs/{id}/stream", s.auth(http.HandlerFunc(s.streamRun)))
	m.Handle("GET /v1/runs/{id}/history", s.auth(http.HandlerFunc(s.runHistory)))
	m.Handle("POST /v1/hooks/{token}", s.auth(http.HandlerFunc(s.resumeHook)))
	// The webhook token is its own authorisation, as webhook URLs are.
	m.HandleFunc("/v1/webhooks/{token}", s.webhook)
	m.Handle("GET /v1/events", s.auth(http.HandlerFunc(s.streamEvents)))
	m.Handle("GET /v1/stats", s.auth(http.HandlerFunc(s.getStats)))
	m.Handle("/v1/", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path)
	})))
	s.uiRoutes()
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		if r.ContentLength > s.opts.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
				fmt.Sprintf("request body of %d bytes exceeds the %d-byte limit", r.ContentLength, s.opts.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	}
	s.mux.ServeHTTP(w, r)
}

// ListenAndServe serves on addr until ctx is done, then shuts down
// gracefully. Without tokens it refuses an address that is not loopback.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if len(s.opts.Tokens) == 0 && !IsLoopback(addr) {
		return fmt.Errorf("server: refusing to serve %s without an API token: set a token or bind to 127.0.0.1", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.events.close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	<-errc
	return err
}

// IsLoopback reports whether addr ("host:port") binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authorized reports whether r carries a valid token (or none is needed).
func (s *Server) authorized(r *http.Request) bool {
	if len(s.opts.Tokens) == 0 {
		return true
	}
	tok := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		tok = strings.TrimPrefix(h, "Bearer ")
	} else if ck, err := r.Cookie(tokenCookie); err == nil {
		tok = ck.Value
	}
	if tok == "" {
		return false
	}
	for _, t := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			return true
		}
	}
	return false
}

const tokenCookie = "hopper_token"

func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hopper"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid API token is required")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "started": s.c.Started()})
}

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// fail maps an error from the client to a response.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("request body exceeds the %d-byte limit", mbe.Limit))
	case errors.Is(err, hopper.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, hopper.ErrUnknownType):
		writeError(w, http.StatusNotFound, "unknown_type", err.Error())
	case errors.Is(err, hopper.ErrInvalidInput), errors.Is(err, errBadRequest):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, hopper.ErrStateConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.opts.Logger.Error("hopper server: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

// listWorkers serves GET /v1/workers: the clients running jobs on the store.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := s.c.Workers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": ws})
}
