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

// fetchRefusedPrefixes are the address blocks Fetch refuses unless
// Config.FetchAllowPrivate is set: every block of the IANA IPv4 and IPv6
// Special-Purpose Address Registries that is not globally reachable, plus
// multicast and the deprecated site-local block. The registries' globally
// reachable exceptions inside a refused block are fetchAllowedPrefixes.
// Blocks that embed an IPv4 address (IPv4-mapped, IPv4-translated, NAT64,
// 6to4, Teredo) are not listed: their embedded address decides
// (fetchEmbeddedIPv4).
var fetchRefusedPrefixes = mustPrefixes(
	// IPv4 (iana-ipv4-special-registry).
	"0.0.0.0/8",          // "this network" (RFC 791)
	"10.0.0.0/8",         // private use (RFC 1918)
	"100.64.0.0/10",      // shared address space, carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",        // loopback (RFC 1122)
	"169.254.0.0/16",     // link local (RFC 3927), cloud metadata
	"172.16.0.0/12",      // private use (RFC 1918)
	"192.0.0.0/24",       // IETF protocol assignments (RFC 6890)
	"192.0.2.0/24",       // documentation, TEST-NET-1 (RFC 5737)
	"192.88.99.0/24",     // deprecated 6to4 relay anycast (RFC 7526)
	"192.168.0.0/16",     // private use (RFC 1918)
	"198.18.0.0/15",      // benchmarking (RFC 2544)
	"198.51.100.0/24",    // documentation, TEST-NET-2 (RFC 5737)
	"203.0.113.0/24",     // documentation, TEST-NET-3 (RFC 5737)
	"224.0.0.0/4",        // multicast (RFC 5771)
	"240.0.0.0/4",        // reserved (RFC 1112)
	"255.255.255.255/32", // limited broadcast (RFC 919)

	// IPv6 (iana-ipv6-special-registry).
	"::/96",          // unspecified, loopback and deprecated IPv4-compatible (RFC 4291)
	"64:ff9b:1::/48", // local-use IPv4/IPv6 translation (RFC 8215)
	"100::/64",       // discard-only (RFC 6666)
	"100:0:0:1::/64", // dummy IPv6 prefix (RFC 9780)
	"2001::/23",      // IETF protocol assignments (RFC 2928), benchmarking 2001:2::/48
	"2001:db8::/32",  // documentation (RFC 3849)
	"3fff::/20",      // documentation (RFC 9637)
	"5f00::/16",      // segment routing SIDs (RFC 9602)
	"fc00::/7",       // unique local (RFC 4193)
	"fe80::/10",      // link-local unicast (RFC 4291)
	"fec0::/10",      // deprecated site-local (RFC 3879)
	"ff00::/8",       // multicast (RFC 4291)
)

// fetchAllowedPrefixes are the globally reachable blocks inside
// fetchRefusedPrefixes, per the registries. Teredo (2001::/32) is here
// because its embedded IPv4 addresses decide.
var fetchAllowedPrefixes = mustPrefixes(
	"2001::/32",       // Teredo (RFC 4380): its embedded addresses decide
	"2001:1::1/128",   // port control protocol anycast (RFC 7723)
	"2001:1::2/128",   // TURN anycast (RFC 8155)
	"2001:3::/32",     // AMT (RFC 7450)
	"2001:4:112::/48", // AS112-v6 (RFC 7535)
	"2001:20::/28",    // ORCHIDv2 (RFC 7343)
	"2001:30::/28",    // drone remote ID (RFC 9374)
)

// Blocks whose addresses carry an IPv4 address.
var (
	prefixIPv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765
	prefixNAT64          = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	prefix6to4           = netip.MustParsePrefix("2002::/16")       // RFC 3056
	prefixTeredo         = netip.MustParsePrefix("2001::/32")       // RFC 4380
)

func mustPrefixes(ps ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// fetchAddrRefused reports whether Fetch refuses to connect to a: an
// address in a special-purpose block that is not globally reachable, or
// one that embeds such an IPv4 address (IPv4-mapped and IPv4-translated
// addresses, NAT64, 6to4, Teredo). An invalid address is refused.
func fetchAddrRefused(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.WithZone("").Unmap() // IPv4-mapped (::ffff:a.b.c.d) is its IPv4 address
	for _, v4 := range fetchEmbeddedIPv4(a) {
		if fetchAddrRefused(v4) {
			return true
		}
	}
	for _, p := range fetchAllowedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range fetchRefusedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fetchEmbeddedIPv4 returns the IPv4 addresses an IPv6 address carries by
// its block's definition (none for other addresses).
func fetchEmbeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case prefixIPv4Translated.Contains(a), prefixNAT64.Contains(a):
		return []netip.Addr{v4(12)}
	case prefix6to4.Contains(a):
		return []netip.Addr{v4(2)}
	case prefixTeredo.Contains(a):
		// The server's address, and the client's, stored inverted.
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4), client}
	}
	return nil
}
