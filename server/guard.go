package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// The headers every response carries. The dashboard runs one script file
// of its own and no inline script or style, so its policy can be strict.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":        "DENY",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "same-origin",
}

type requestIDKey struct{}

// requestID returns the id ServeHTTP gave r ("" outside it).
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// guard is what every request passes before its route: a request id, the
// security headers, the body cap and, for the routes that read a JSON
// body, the media type.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	id := newRequestID()
	h := w.Header()
	h.Set("X-Request-Id", id)
	for k, v := range securityHeaders {
		h.Set(k, v)
	}
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))

	limit := s.opts.MaxBodyBytes
	if isWebhook(r.URL.Path) {
		limit = s.opts.MaxWebhookBytes
	}
	if r.ContentLength > limit {
		s.writeError(w, r, http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("request body of %d bytes exceeds the %d-byte limit", r.ContentLength, limit))
		return r, false
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	if isAPI(r.URL.Path) && !isWebhook(r.URL.Path) && !safeMethod(r.Method) && s.routed(r) {
		ct := r.Header.Get("Content-Type")
		hasBody := r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
		// A browser signed in with the session cookie must say it sends
		// JSON: a form on another site cannot, so that is the cookie's
		// cross-site request check (beside SameSite and the fetch
		// metadata check).
		if (hasBody || s.cookieAuthenticated(r)) && !isJSON(ct) {
			msg := "send the request body as JSON with Content-Type: application/json"
			if ct != "" {
				msg = fmt.Sprintf("a body of type %q is not accepted: %s (curl: --json)", ct, msg)
			}
			s.writeError(w, r, http.StatusUnsupportedMediaType, "unsupported_media_type", msg)
			return r, false
		}
	}
	return r, true
}

// routed reports whether an API route takes r's method and path (else the
// answer is a 404 or a 405, whatever the body).
func (s *Server) routed(r *http.Request) bool {
	_, pattern := s.mux.Handler(r)
	return pattern != "" && pattern != "/v1/"
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func isAPI(path string) bool { return strings.HasPrefix(path, "/v1/") }

func isWebhook(path string) bool { return strings.HasPrefix(path, "/v1/webhooks/") }

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
