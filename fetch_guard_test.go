package hopper

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
)

// TestFetchAddrRefused: every special-purpose block that is not globally
// reachable is refused, with an address inside it, and the address just
// outside it is not (unless a neighbouring block refuses it too); blocks
// that embed an IPv4 address are judged by it.
func TestFetchAddrRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		block   string
		in, out []string
	}{
		// IPv4: first and last of the block, then the neighbours outside.
		{"0.0.0.0/8", []string{"0.0.0.0", "0.255.255.255"}, []string{"1.0.0.0"}},
		{"10.0.0.0/8", []string{"10.0.0.0", "10.255.255.255"}, []string{"9.255.255.255", "11.0.0.0"}},
		{"100.64.0.0/10", []string{"100.64.0.0", "100.100.100.200", "100.127.255.255"}, []string{"100.63.255.255", "100.128.0.0"}},
		{"127.0.0.0/8", []string{"127.0.0.1", "127.255.255.255"}, []string{"126.255.255.255", "128.0.0.0"}},
		{"169.254.0.0/16", []string{"169.254.0.0", "169.254.169.254", "169.254.255.255"}, []string{"169.253.255.255", "169.255.0.0"}},
		{"172.16.0.0/12", []string{"172.16.0.0", "172.31.255.255"}, []string{"172.15.255.255", "172.32.0.0"}},
		{"192.0.0.0/24", []string{"192.0.0.0", "192.0.0.170", "192.0.0.255"}, []string{"191.255.255.255", "192.0.1.0"}},
		{"192.0.2.0/24", []string{"192.0.2.0", "192.0.2.255"}, []string{"192.0.1.255", "192.0.3.0"}},
		{"192.88.99.0/24", []string{"192.88.99.0", "192.88.99.255"}, []string{"192.88.98.255", "192.88.100.0"}},
		{"192.168.0.0/16", []string{"192.168.0.0", "192.168.255.255"}, []string{"192.167.255.255", "192.169.0.0"}},
		{"198.18.0.0/15", []string{"198.18.0.0", "198.19.255.255"}, []string{"198.17.255.255", "198.20.0.0"}},
		{"198.51.100.0/24", []string{"198.51.100.0", "198.51.100.255"}, []string{"198.51.99.255", "198.51.101.0"}},
		{"203.0.113.0/24", []string{"203.0.113.0", "203.0.113.255"}, []string{"203.0.112.255", "203.0.114.0"}},
		{"224.0.0.0/4", []string{"224.0.0.0", "239.255.255.255"}, []string{"223.255.255.255"}},
		{"240.0.0.0/4", []string{"240.0.0.0", "255.255.255.254"}, nil},
		{"255.255.255.255/32", []string{"255.255.255.255"}, nil},
		{"globally reachable IPv4", nil, []string{"1.1.1.1", "8.8.8.8", "192.31.196.1", "192.52.193.1", "192.175.48.1"}},

		// IPv6.
		{"::/96", []string{"::", "::1", "::127.0.0.1", "::8.8.8.8", "::ffff:ffff"}, []string{"::1:0:0"}},
		{"::ffff:0:0/96 (IPv4-mapped)", []string{"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:100.64.0.1"}, []string{"::ffff:8.8.8.8"}},
		{"::ffff:0:0:0/96 (IPv4-translated)", []string{"::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe"}, []string{"::ffff:0:808:808"}},
		{"64:ff9b::/96 (NAT64)", []string{"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:1", "64:ff9b::6440:1"}, []string{"64:ff9b::808:808"}},
		{"64:ff9b:1::/48", []string{"64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"}, []string{"64:ff9b:0:ffff::808:808", "64:ff9b:2::"}},
		{"100::/64", []string{"100::", "100::ffff:ffff:ffff:ffff"}, []string{"ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "100:0:0:2::"}},
		{"100:0:0:1::/64", []string{"100:0:0:1::", "100:0:0:1:ffff:ffff:ffff:ffff"}, nil},
		{"2001::/23", []string{"2001:2::1", "2001:5::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:200::"}},
		{"2001::/23 exceptions", []string{"2001:1::3"}, []string{"2001:1::1", "2001:1::2", "2001:3::1", "2001:4:112::1", "2001:20::1", "2001:30::1"}},
		{"2001::/32 (Teredo)", []string{
			"2001:0:808:808::f5ff:fffe", // client 10.0.0.1 (inverted), public server
			"2001:0:a00:1::f7f7:f7f7",   // server 10.0.0.1, public client 8.8.8.8
		}, []string{"2001:0:808:808::f7f7:f7f7"}}, // both 8.8.8.8
		{"2001:db8::/32", []string{"2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"2001:db9::"}},
		{"2002::/16 (6to4)", []string{"2002:7f00:1::1", "2002:a00:1::", "2002:a9fe:a9fe::1", "2002:c612:1::"}, []string{"2002:808:808::1"}},
		{"3fff::/20", []string{"3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff:1000::"}},
		{"5f00::/16", []string{"5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "5f01::"}},
		{"fc00::/7", []string{"fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}},
		{"fe80::/10", []string{"fe80::", "fe80::1%eth0", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, []string{"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}},
		{"fec0::/10", []string{"fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, nil},
		{"ff00::/8", []string{"ff00::", "ff02::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, nil},
		{"globally reachable IPv6", nil, []string{"2606:4700:4700::1111", "2001:4860:4860::8888", "2620:4f:8000::1"}},
	}
	for _, tc := range cases {
		for _, s := range tc.in {
			if !fetchAddrRefused(netip.MustParseAddr(s)) {
				t.Errorf("%s: %s is allowed, want refused", tc.block, s)
			}
		}
		for _, s := range tc.out {
			if fetchAddrRefused(netip.MustParseAddr(s)) {
				t.Errorf("%s: %s is refused, want allowed", tc.block, s)
			}
		}
	}
	if !fetchAddrRefused(netip.Addr{}) {
		t.Error("the zero Addr is allowed, want refused")
	}
}

// TestFetchClientChecksDialedAddress: the check runs on the address a
// connection dials, after name resolution, so a name that resolves to a
// refused address (localhost here; a rebinding name alike) is refused
// before any request is sent; allowed, the same request goes through.
func TestFetchClientChecksDialedAddress(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	url := "http://localhost:" + port + "/"

	strict := &Client{}
	defer strict.fetchClient().CloseIdleConnections()
	if resp, err := strict.fetchClient().Get(url); !errors.Is(err, ErrFetchForbidden) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("GET %s: %v, want ErrFetchForbidden", url, err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}

	open := &Client{cfg: Config{FetchAllowPrivate: true}}
	defer open.fetchClient().CloseIdleConnections()
	resp, err := open.fetchClient().Get(url)
	if err != nil {
		t.Fatalf("GET %s allowed: %v", url, err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d requests reached the server, want 1", n)
	}
}
