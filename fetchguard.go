package hopper

import (
	"net/netip"
)

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
