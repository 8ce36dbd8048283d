package hopper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// FetchRequest is the HTTP request of a Fetch step.
type FetchRequest struct {
	// Method defaults to GET.
	Method string
	// URL is an http or https URL.
	URL    string
	Header http.Header
	Body   []byte
	// Timeout bounds one try (connection, redirects and body). Defaults to
	// 30 s.
	Timeout time.Duration
}

// FetchResponse is a Fetch step's recorded response.
type FetchResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// JSON decodes the response body into v.
func (r *FetchResponse) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// ErrFetchForbidden is the error of a Fetch to an address it refuses,
// unless Config.FetchAllowPrivate is set: any address of the IANA IPv4 and
// IPv6 special-purpose registries that is not globally reachable
// (loopback, private, carrier-grade NAT, link-local, documentation,
// benchmarking, reserved, unique-local, …), multicast, and IPv6 addresses
// that embed such an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo). It
// is checked on the address each connection dials, after name
// resolution. It is not retried.
var ErrFetchForbidden = errors.New("hopper: fetch to a loopback, private or link-local address refused")

// fetchMaxBody caps a recorded response body.
const fetchMaxBody = 4 << 20

// Fetch makes an HTTP request as a recorded step named name: its response
// (status, headers, body up to 4 MiB) is checkpointed, so a replay returns
// it without a request. Network errors and 408, 429 and 5xx responses are
// retried under opts' policy (a Retry-After header sets a floor); any other
// status is returned as the response, with no error. The request goes
// directly (no proxy), and addresses on the internal network are refused
// with ErrFetchForbidden unless Config.FetchAllowPrivate is set, checked
// on every connection, redirects included. Like any step it runs at least
// once: give non-idempotent requests an idempotency key (wf.RunID() and
// name make one).
func Fetch(wf WorkflowContext, name string, req *FetchRequest, opts *StepOpts) (*FetchResponse, error) {
	st := wf.state()
	if req == nil {
		return nil, fmt.Errorf("%w: fetch %q: no request", ErrInvalidInput, name)
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: fetch %q: want an http or https URL, got %q", ErrInvalidInput, name, req.URL)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return Step(wf, name, func(ctx context.Context) (*FetchResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		hr, err := http.NewRequestWithContext(ctx, method, req.URL, bytes.NewReader(req.Body))
		if err != nil {
			return nil, Abort(err)
		}
		for k, vs := range req.Header {
			hr.Header[k] = append([]string(nil), vs...)
		}
		resp, err := st.c.fetchClient().Do(hr)
		if err != nil {
			if errors.Is(err, ErrFetchForbidden) {
				return nil, Abort(fmt.Errorf("%w: %s", ErrFetchForbidden, req.URL))
			}
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBody+1))
		if err != nil {
			return nil, err
		}
		if len(body) > fetchMaxBody {
			return nil, Abort(fmt.Errorf("hopper: fetch %s: response body over %d bytes", req.URL, fetchMaxBody))
		}
		if resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			ferr := fmt.Errorf("hopper: fetch %s: %s", req.URL, resp.Status)
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				return nil, RetryAfter(ferr, time.Duration(s)*time.Second)
			}
			return nil, ferr
		}
		return &FetchResponse{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
	}, opts)
}

// fetchClient is the HTTP client of Fetch: no proxy, and a dialer that
// refuses internal addresses unless allowed.
func (c *Client) fetchClient() *http.Client {
	c.fetchOnce.Do(func() {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		if !c.cfg.FetchAllowPrivate {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				host, _, err := net.SplitHostPort(address)
				if err != nil {
					return err
				}
				// The address resolved for this connection: a name that
				// resolves elsewhere the next time (DNS rebinding) is
				// checked again then.
				ip, err := netip.ParseAddr(host)
				if err != nil || fetchAddrRefused(ip) {
					return ErrFetchForbidden
				}
				return nil
			}
		}
		t := &http.Transport{
			Proxy: nil, DialContext: d.DialContext, ForceAttemptHTTP2: true,
			MaxIdleConns: 100, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
		}
		c.fetchHTTP = &http.Client{Transport: t}
	})
	return c.fetchHTTP
}
