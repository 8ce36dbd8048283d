package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// pingTimeout bounds the store round trip of a health check.
const pingTimeout = 2 * time.Second

// healthFresh is how long a health check's answer is reused.
const healthFresh = time.Second

// healthCache shares store round trips between requests: one ping at a time
// (the others wait for its answer, not in line behind a lock), and its
// answer reused for a second, so a burst of probes or of failing requests
// costs one round trip.
type healthCache struct {
	mu       sync.Mutex
	at       time.Time
	err      error
	inflight chan struct{}
}

// ping answers whether the store makes a round trip. With fresh, an answer
// from before this call is not reused (a request that just failed asks
// anew), but a ping already in flight is still shared.
func (s *Server) ping(ctx context.Context, fresh bool) error {
	h := &s.health
	h.mu.Lock()
	if !fresh && !h.at.IsZero() && time.Since(h.at) < healthFresh {
		err := h.err
		h.mu.Unlock()
		return err
	}
	if ch := h.inflight; ch != nil {
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.err
	}
	ch := make(chan struct{})
	h.inflight = ch
	h.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	err := s.c.Ping(pctx)
	cancel()

	h.mu.Lock()
	h.at, h.err, h.inflight = time.Now(), err, nil
	h.mu.Unlock()
	close(ch)
	return err
}

// storeReachable reports whether the store answers a round trip.
func (s *Server) storeReachable(ctx context.Context, fresh bool) bool {
	return s.ping(ctx, fresh) == nil
}

// livez serves GET /livez: the process serves requests. For a liveness
// probe, which should not restart a process because its database is away.
func (s *Server) livez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// readyz serves GET /readyz and GET /healthz: 200 while the store answers
// a round trip within two seconds, 503 with Retry-After otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ping(r.Context(), false); err != nil {
		s.opts.Logger.Warn("hopper server: health check: store unreachable", "request_id", requestID(r), "err", err)
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "store": "unreachable", "started": s.c.Started()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "store": "ok", "started": s.c.Started()})
}
