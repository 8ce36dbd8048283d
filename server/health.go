package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// pingTimeout bounds the store round trip of a health check.
const pingTimeout = 2 * time.Second

// healthCache remembers a failed round trip for a second, so that a burst
// of failing requests during an outage costs one round trip. A success is
// not remembered: a request that failed asks the store again.
type healthCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// ping asks the store for a round trip, or reuses a failure under a second
// old.
func (s *Server) ping(ctx context.Context) error {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil && time.Since(h.at) < time.Second {
		return h.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	h.err = s.c.Ping(ctx)
	h.at = time.Now()
	return h.err
}

// storeReachable reports whether the store answers a round trip.
func (s *Server) storeReachable(ctx context.Context) bool { return s.ping(ctx) == nil }

// livez serves GET /livez: the process serves requests. For a liveness
// probe, which should not restart a process because its database is away.
func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// readyz serves GET /readyz and GET /healthz: 200 while the store answers
// a round trip within two seconds, 503 with Retry-After otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ping(r.Context()); err != nil {
		s.opts.Logger.Warn("hopper server: health check: store unreachable", "request_id", requestID(r), "err", err)
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "store": "unreachable", "started": s.c.Started()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "store": "ok", "started": s.c.Started()})
}
