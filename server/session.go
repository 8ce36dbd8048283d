package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// MinTokenLength is the shortest API token a server accepts: a token is
// the whole of the API's protection, so it must not be guessable.
const MinTokenLength = 16

// sessionCookie names the dashboard's sign-in cookie. It holds a session
// value signed with the token the person signed in with, never the token.
const sessionCookie = "hopper_session"

// sessionTTL is how long a dashboard sign-in lasts.
const sessionTTL = 12 * time.Hour

// CheckTokens refuses tokens that protect nothing: empty, shorter than
// MinTokenLength, or with spaces or control characters (a token pasted
// with its newline). The error says which token and why. New, Serve and
// ListenAndServe refuse such tokens; a program can check them before it
// opens anything else.
func CheckTokens(tokens []string) error {
	for i, t := range tokens {
		switch {
		case t == "":
			return fmt.Errorf("API token %d is empty: an empty token is no token", i+1)
		case len(t) < MinTokenLength:
			return fmt.Errorf("API token %d has %d characters: a token needs at least %d, so it cannot be guessed (for example: openssl rand -hex 16)", i+1, len(t), MinTokenLength)
		case strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("API token %d contains a space or a control character", i+1)
		}
	}
	return nil
}

// sessionValue returns the cookie value of a session signed with token
// that ends at exp: "v1.<unix seconds>.<HMAC-SHA256>". Sessions need no
// server state: every server holding the token accepts them, and removing
// a token ends the sessions it signed.
func sessionValue(token string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return "v1." + e + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(token, e))
}

func sessionMAC(token, exp string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hopper dashboard session v1|" + exp))
	return m.Sum(nil)
}

// validSession reports whether v is an unexpired session signed with one
// of the server's tokens.
func (s *Server) validSession(v string, now time.Time) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	mac, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	ok := false
	for _, t := range s.opts.Tokens {
		if len(t) < MinTokenLength {
			continue // never a key: a forged session must not pass
		}
		if hmac.Equal(mac, sessionMAC(t, parts[1])) {
			ok = true
		}
	}
	return ok
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") {
		return "", false
	}
	return strings.TrimPrefix(h, "Bearer "), true
}

// authorized reports whether r carries a valid token or session (or none
// is needed).
func (s *Server) authorized(r *http.Request) bool {
	if len(s.opts.Tokens) == 0 {
		return true
	}
	if tok, ok := bearer(r); ok {
		return s.validToken(tok)
	}
	return s.cookieAuthenticated(r)
}

func (s *Server) validToken(tok string) bool {
	_, ok := s.tokenOf(tok)
	return ok && tok != ""
}

// tokenOf returns the configured token equal to tok. It compares digests
// in constant time, so neither a token's content nor its length leaks.
func (s *Server) tokenOf(tok string) (string, bool) {
	given := sha256.Sum256([]byte(tok))
	found, ok := "", false
	for _, t := range s.opts.Tokens {
		if len(t) < MinTokenLength {
			continue
		}
		want := sha256.Sum256([]byte(t))
		if subtle.ConstantTimeCompare(given[:], want[:]) == 1 {
			found, ok = t, true
		}
	}
	return found, ok
}

// cookieAuthenticated reports whether r is authorised by a dashboard
// session cookie (and not by a bearer token).
func (s *Server) cookieAuthenticated(r *http.Request) bool {
	if len(s.opts.Tokens) == 0 {
		return false
	}
	if _, ok := bearer(r); ok {
		return false
	}
	ck, err := r.Cookie(sessionCookie)
	return err == nil && s.validSession(ck.Value, time.Now())
}

// safeNext returns next when it is a path on this server, "/" otherwise:
// never another host ("//evil", "/\evil", "https://evil").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') ||
		strings.IndexFunc(next, unicode.IsControl) >= 0 {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.fail(w, r, err)
			return
		}
		s.fail(w, r, badRequest("bad form"))
		return
	}
	tok := r.PostForm.Get("token")
	next := safeNext(r.PostForm.Get("next"))
	if len(s.opts.Tokens) == 0 {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	signed, ok := s.tokenOf(tok)
	if !ok || tok == "" {
		s.render(w, r, http.StatusUnauthorized, "login", map[string]any{"Next": next, "Failed": true})
		return
	}
	exp := time.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sessionValue(signed, exp), Path: "/", Expires: exp,
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// secure says whether the sign-in cookie is marked Secure: over TLS, or
// when Options.SecureCookies says TLS ends at a proxy in front.
func (s *Server) secure(r *http.Request) bool { return r.TLS != nil || s.opts.SecureCookies }

// logout clears the session cookie in this browser. Sessions are not
// stored, so a copied cookie stays valid until it expires or its token is
// removed from the configuration.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
