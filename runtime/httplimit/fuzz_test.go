package httplimit

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// FuzzClientIP checks ClientIP on a request whose peer address and
// X-Forwarded-For fields come from outside: it fails only for a peer
// address that is not an IP (with or without a port); the key is a
// canonical IP without zone and never IPv4-mapped; it is the peer or one
// of the entries; an untrusted peer is its own key; and entries a client
// writes to the left of an untrusted key never change it.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.9:1234", "", "", "6.6.6.6")
	f.Add("10.0.0.1:80", "198.51.100.7, 10.1.2.3", "10.9.9.9", "6.6.6.6")
	f.Add("127.0.0.1:80", "10.0.0.2,10.0.0.3", "", "6.6.6.6, 7.7.7.7")
	f.Add("[2001:db8::1]:443", "2001:db8::2, [::ffff:198.51.100.7]", "garbage", "1.1.1.1")
	f.Add("10.0.0.1", "::ffff:10.0.0.5, fe80::1%eth0", "not-an-ip", "")
	f.Add("[fe80::1%25eth0]:80", "", "", "x")
	f.Add("unix:@", "1.2.3.4", "", "")
	key := ClientIP(fuzzProxies...)
	f.Fuzz(func(t *testing.T, remote, xff1, xff2, junk string) {
		r := forwardedRequest(remote, xff1, xff2)
		got, err := key(r)
		peer, perr := parseIP(remote)
		if (err != nil) != (perr != nil) {
			t.Fatalf("peer %q (%v): key %q, %v", remote, perr, got, err)
		}
		if err != nil {
			if got != "" || !strings.HasPrefix(err.Error(), "ratelimit: remote address ") {
				t.Fatalf("peer %q: key %q, error %v", remote, got, err)
			}
			return
		}
		ip, err := netip.ParseAddr(got)
		if err != nil || ip.String() != got || ip.Is4In6() || ip.Zone() != "" {
			t.Fatalf("peer %q, X-Forwarded-For %q %q: key %q is not a canonical address (%v)", remote, xff1, xff2, got, err)
		}
		if !trustedProxy(peer) && ip != peer {
			t.Fatalf("untrusted peer %q gave key %q", remote, got)
		}
		if ip != peer && !slices.Contains(forwardedEntries(xff1, xff2), ip) {
			t.Fatalf("peer %q, X-Forwarded-For %q %q: key %q is no entry", remote, xff1, xff2, got)
		}
		if trustedProxy(ip) {
			return
		}
		for _, forged := range []*http.Request{
			forwardedRequest(remote, junk+","+xff1, xff2),
			forwardedRequest(remote, junk, xff1, xff2),
		} {
			if again, err := key(forged); err != nil || again != got {
				t.Fatalf("peer %q, X-Forwarded-For %q %q gave %q; with %q on the left it gives %q, %v",
					remote, xff1, xff2, got, junk, again, err)
			}
		}
	})
}

// forwardedRequest returns a request from remote with the non-empty
// fields xff as its X-Forwarded-For lines, in order.
func forwardedRequest(remote string, xff ...string) *http.Request {
	r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
	for _, v := range xff {
		if v != "" {
			r.Header["X-Forwarded-For"] = append(r.Header["X-Forwarded-For"], v)
		}
	}
	return r
}

// forwardedEntries returns the addresses among the entries of the fields.
func forwardedEntries(fields ...string) []netip.Addr {
	var addrs []netip.Addr
	for _, f := range fields {
		for _, e := range strings.Split(f, ",") {
			if a, err := parseIP(strings.TrimSpace(e)); err == nil {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}

func trustedProxy(a netip.Addr) bool {
	return slices.ContainsFunc(fuzzProxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// fuzzProxies are the trusted proxies of FuzzClientIP.
var fuzzProxies = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.1/32"),
	netip.MustParsePrefix("2001:db8::/32"),
}
