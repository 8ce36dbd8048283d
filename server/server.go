// Package server is hopper's HTTP API and web dashboard over a Client: an
// http.Handler to mount in any Go program, and what `hopper serve` and
// `hopper dev` run.
//
//	s := server.New(client, &server.Options{Tokens: []string{os.Getenv("HOPPER_TOKEN")}})
//	defer s.Close()
//	err := s.ListenAndServe(ctx, "127.0.0.1:7700") // timeouts set, weak tokens refused
//
// Mounted in a server of your own instead, a Server whose tokens are empty
// or shorter than MinTokenLength answers every request with 500 and logs
// why, rather than serve an API anyone can sign in to.
//
// Every response of the API is JSON; errors are {"error":{"code","message"}}
// with a fitting 4xx or 5xx status. Bad input is a 4xx, never a 500.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hopper-go/hopper"
)

// Options configure a Server. The zero value is valid.
type Options struct {
	// Tokens are the API tokens accepted as "Authorization: Bearer <token>";
	// the dashboard's sign-in form takes one and keeps a session cookie
	// signed with it (never the token itself). Each needs at least
	// MinTokenLength characters: Serve and ListenAndServe refuse shorter
	// ones. With none, the API is open: bind it to loopback only (Serve and
	// ListenAndServe refuse anything else).
	Tokens []string
	// MaxBodyBytes caps request bodies, on every route and method. Defaults
	// to 1 MiB.
	MaxBodyBytes int64
	// MaxWebhookBytes caps the body of a request to /v1/webhooks/{token}. A
	// body that is not JSON reaches the workflow as a JSON string, which
	// may be up to six times longer and must still fit the client's
	// MaxPayloadBytes. Defaults to 256 KiB.
	MaxWebhookBytes int64
	// MaxWait caps the wait of long-polling requests. Defaults to 5 minutes.
	MaxWait time.Duration
	// ReadTimeout bounds how long Serve and ListenAndServe wait for a whole
	// request, body included (its headers: at most 10 seconds of it); a
	// client that sends slowly is cut off. Responses have no time limit:
	// event streams and long polls last as long as they need. Defaults to
	// 1 minute.
	ReadTimeout time.Duration
	// Logger receives request errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Title names the dashboard. Defaults to "hopper".
	Title string
	// HistoryLimit caps the changes of the store's feed the server reads
	// back when it starts, in the background, to fill the dashboard's
	// charts with the last day the store kept (see "Metrics" in
	// docs/operations.md): past it the charts begin where the read
	// stopped, and say so. Defaults to 200,000; a negative value reads
	// none (the charts begin when the server starts).
	HistoryLimit int
	// SecureCookies marks the sign-in cookie Secure even on plain HTTP:
	// set it behind a proxy that terminates TLS. Over TLS served by the
	// Server itself the cookie is Secure anyway. Defaults to false.
	SecureCookies bool
}

// Server serves the API and the dashboard for one Client.
type Server struct {
	c       *hopper.Client
	opts    Options
	mux     *http.ServeMux
	cop     *http.CrossOriginProtection
	events  *eventHub
	metrics *metrics
	stats   stats
	fleet   *fleet
	health  healthCache
	unsub   func()
	// misconfig, when set, is why the Server refuses to serve: its tokens
	// protect nothing.
	misconfig error
}

// New returns a Server for c; opts may be nil. Close it to detach it from
// the client's events.
func New(c *hopper.Client, opts *Options) *Server {
	s := &Server{c: c, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection()}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = 1 << 20
	}
	if s.opts.MaxWebhookBytes <= 0 {
		s.opts.MaxWebhookBytes = 256 << 10
	}
	if s.opts.MaxWait <= 0 {
		s.opts.MaxWait = 5 * time.Minute
	}
	if s.opts.ReadTimeout <= 0 {
		s.opts.ReadTimeout = time.Minute
	}
	if s.opts.HistoryLimit == 0 {
		s.opts.HistoryLimit = defaultHistoryLimit
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Title == "" {
		s.opts.Title = "hopper"
	}
	if err := CheckTokens(s.opts.Tokens); err != nil {
		s.misconfig = err
		s.opts.Logger.Error("hopper server: refusing to serve: " + err.Error())
	}
	s.events = newEventHub()
	s.metrics = newMetrics(c, s.opts.Logger)
	s.unsub = c.Subscribe(func(e hopper.Event) {
		s.metrics.observe(e)
		s.events.publish(e)
	})
	s.startFleet()
	s.metrics.reg.MustRegister(&fleetCollector{s: s})
	s.routes()
	return s
}

// Close detaches the server from the client's events and ends open event
// streams.
func (s *Server) Close() {
	s.unsub()
	s.fleet.stop()
	s.events.close()
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /livez", s.livez)
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /healthz", s.readyz)
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
	m.Handle("GET /v1/queues/{name}/demand", s.auth(http.HandlerFunc(s.queueDemand)))
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
	m.Handle("POST /v1/runs/{id}/retry", s.auth(http.HandlerFunc(s.retryRun)))
	m.Handle("GET /v1/runs/{id}/stream", s.auth(http.HandlerFunc(s.streamRun)))
	m.Handle("GET /v1/runs/{id}/history", s.auth(http.HandlerFunc(s.runHistory)))
	m.Handle("POST /v1/hooks/{token}", s.auth(http.HandlerFunc(s.resumeHook)))
	// The webhook token is its own authorisation, as webhook URLs are.
	// Only the methods that send something resume a hook: a preflight, a
	// HEAD or a link preview's GET must not use it up.
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch} {
		m.HandleFunc(method+" /v1/webhooks/{token}", s.webhook)
	}
	m.Handle("GET /v1/events", s.auth(http.HandlerFunc(s.streamEvents)))
	m.Handle("GET /v1/events/list", s.auth(http.HandlerFunc(s.listEvents)))
	m.Handle("GET /v1/stats", s.auth(http.HandlerFunc(s.getStats)))
	s.inspectRoutes() // fan-outs, gates and run timelines (pipeline.go)
	m.Handle("/v1/", s.auth(http.HandlerFunc(s.noRoute)))
	s.bulkRoutes() // server/bulk.go
	s.uiRoutes()
}

// noRoute answers a request no API route takes: 405 with the methods the
// path does take, 404 when it takes none.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/v1/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.writeError(w, r, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path)
		return
	}
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeError(w, r, http.StatusMethodNotAllowed, "method_not_allowed",
		fmt.Sprintf("%s is not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, ok := s.guard(w, r)
	if !ok {
		return
	}
	if s.misconfig != nil {
		s.opts.Logger.Error("hopper server: refusing to serve: "+s.misconfig.Error(), "request_id", requestID(r))
		s.writeError(w, r, http.StatusInternalServerError, "misconfigured", "the server's API tokens protect nothing; its log says why")
		return
	}
	if !isWebhook(r.URL.Path) {
		// A browser's request from another site does not change anything.
		if err := s.cop.Check(r); err != nil {
			s.writeError(w, r, http.StatusForbidden, "forbidden", "cross-origin request refused")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// The HTTP server's limits beside Options.ReadTimeout: a client that sends
// its headers slowly, or holds an idle connection, is cut off. No write
// timeout: event streams and long polls write for as long as they are open.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// ListenAndServe serves on addr until ctx is done, then shuts down
// gracefully. It refuses a token shorter than MinTokenLength, and without
// tokens an address that is not loopback.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if err := s.checkExposure(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// checkExposure refuses to serve addr with tokens that protect nothing.
func (s *Server) checkExposure(addr string) error {
	if err := CheckTokens(s.opts.Tokens); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if len(s.opts.Tokens) == 0 && !IsLoopback(addr) {
		return fmt.Errorf("server: refusing to serve %s without an API token: set a token of at least %d characters or bind to 127.0.0.1", addr, MinTokenLength)
	}
	return nil
}

// Serve serves on ln until ctx is done, then shuts down gracefully. It
// refuses what ListenAndServe refuses, closing ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.checkExposure(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: min(readHeaderTimeout, s.opts.ReadTimeout), ReadTimeout: s.opts.ReadTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelDebug)}
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

func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hopper"`)
			s.writeError(w, r, http.StatusUnauthorized, "unauthorized", "a valid API token is required: send Authorization: Bearer <token>")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// RequestID names the request in the server's log.
		RequestID string `json:"request_id,omitempty"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.RequestID = code, msg, requestID(r)
	writeJSON(w, status, e)
}

// retryAfter is what a 503 asks a client to wait, in seconds.
const retryAfter = "5"

// fail maps an error from the client to a response. Messages of the 4xx
// answers are hopper's own; a 5xx answer names only the request, whose
// error the log keeps (a store's text, SQL or addresses never reach the
// caller).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		s.writeError(w, r, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("request body exceeds the %d-byte limit", mbe.Limit))
	case errors.Is(err, hopper.ErrPayloadTooLarge):
		s.writeError(w, r, http.StatusRequestEntityTooLarge, "payload_too_large", err.Error())
	case errors.Is(err, hopper.ErrNotFound):
		s.writeError(w, r, http.StatusNotFound, "not_found", notFoundMessage(r, err))
	case errors.Is(err, hopper.ErrUnknownType):
		s.writeError(w, r, http.StatusNotFound, "unknown_type", err.Error())
	case errors.Is(err, hopper.ErrDuplicateID):
		s.writeError(w, r, http.StatusConflict, "duplicate_id", err.Error())
	case errors.Is(err, hopper.ErrInvalidInput), errors.Is(err, errBadRequest):
		s.writeError(w, r, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, hopper.ErrStateConflict):
		s.writeError(w, r, http.StatusConflict, "conflict", err.Error())
	case (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	case !s.storeReachable(r.Context(), true):
		s.opts.Logger.Warn("hopper server: store unreachable", "request_id", requestID(r), "method", r.Method, "path", logPath(r), "err", err)
		w.Header().Set("Retry-After", retryAfter)
		s.writeError(w, r, http.StatusServiceUnavailable, "unavailable", "the store is unreachable; try again shortly")
	default:
		s.opts.Logger.Error("hopper server: request failed", "request_id", requestID(r), "method", r.Method, "path", logPath(r), "err", err)
		s.writeError(w, r, http.StatusInternalServerError, "internal", "internal error (request "+requestID(r)+"; the server's log has its cause)")
	}
}

// logPath is the request's path for logs, hook tokens left out: a token is
// the whole authorisation of its webhook.
func logPath(r *http.Request) string {
	if r.Pattern != "" && (strings.Contains(r.Pattern, "{token}")) {
		return r.Pattern
	}
	return r.URL.Path
}

// notFoundMessage says what is missing in the words of the route: "no job
// \"x\"", not the store's chain of wrapped errors. An error that lists what
// does exist (an unknown queue or schedule) keeps its own message.
func notFoundMessage(r *http.Request, err error) string {
	var une *hopper.UnknownNameError
	if errors.As(err, &une) {
		return err.Error()
	}
	p := r.Pattern
	switch {
	case strings.Contains(p, "/jobs/{id}"):
		return fmt.Sprintf("no job %q", r.PathValue("id"))
	case strings.Contains(p, "/runs/{id}"):
		return fmt.Sprintf("no run %q", r.PathValue("id"))
	case strings.Contains(p, "/groups/{id}"):
		return fmt.Sprintf("no group %q", r.PathValue("id"))
	case strings.Contains(p, "{token}"):
		return "no hook has that token"
	case strings.Contains(p, "/schedules/{name}"):
		return fmt.Sprintf("no schedule %q", r.PathValue("name"))
	case strings.Contains(p, "/queues/{name}"):
		return fmt.Sprintf("no queue %q", r.PathValue("name"))
	}
	return err.Error()
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

// listWorkers serves GET /v1/workers: the clients running jobs on the store.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := s.c.WorkerList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": ws})
}
