package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

func request(remote string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

func TestClientIP(t *testing.T) {
	proxy := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	xff := &httplimit.ClientIP{TrustedProxies: proxy}
	fwd := &httplimit.ClientIP{TrustedProxies: proxy, Header: httplimit.HeaderForwarded}
	none := &httplimit.ClientIP{}
	giant := strings.Repeat("10.1.2.3, ", 100_000) + "10.9.9.9"
	tests := []struct {
		name   string
		c      *httplimit.ClientIP
		r      *http.Request
		want   string
		wantOK bool
	}{
		{"no proxy: connection", none, request("203.0.113.7:4242"), "203.0.113.7", true},
		{"no proxy: forged XFF ignored", none, request("203.0.113.7:4242", "X-Forwarded-For", "1.1.1.1"), "203.0.113.7", true},
		{"no proxy: forged Forwarded ignored", &httplimit.ClientIP{Header: httplimit.HeaderForwarded}, request("203.0.113.7:1", "Forwarded", "for=1.1.1.1"), "203.0.113.7", true},
		{"nil ClientIP", nil, request("203.0.113.7:1", "X-Forwarded-For", "1.1.1.1"), "203.0.113.7", true},
		{"untrusted peer: XFF ignored", xff, request("198.51.100.1:1", "X-Forwarded-For", "1.1.1.1"), "198.51.100.1", true},
		{"trusted: appended hop", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.9"), "198.51.100.9", true},
		{"trusted: forged left part skipped", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.9"), "198.51.100.9", true},
		{"trusted: two proxies", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.9, 10.0.0.2"), "198.51.100.9", true},
		{"trusted: several header lines", xff, request("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1", "X-Forwarded-For", "198.51.100.9"), "198.51.100.9", true},
		{"trusted: no header", xff, request("10.0.0.1:1"), "10.0.0.1", true},
		{"trusted: all hops trusted", xff, request("10.0.0.1:1", "X-Forwarded-For", "10.0.0.5, 10.0.0.6"), "10.0.0.5", true},
		{"trusted: hop with port", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.9:5555"), "198.51.100.9", true},
		{"trusted: bracketed IPv6", xff, request("10.0.0.1:1", "X-Forwarded-For", "[2001:db8::1]"), "2001:db8::1", true},
		{"trusted: IPv6 with zone", xff, request("10.0.0.1:1", "X-Forwarded-For", "fe80::1%eth0"), "fe80::1", true},
		{"trusted: IPv4-mapped", xff, request("10.0.0.1:1", "X-Forwarded-For", "::ffff:198.51.100.9"), "198.51.100.9", true},
		{"trusted: empty members", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.9,, ,"), "198.51.100.9", true},
		{"trusted: garbage hop", xff, request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.9, not-an-ip"), "", false},
		{"trusted: unknown", xff, request("10.0.0.1:1", "X-Forwarded-For", "unknown"), "", false},
		{"trusted: giant chain of trusted hops", xff, request("10.0.0.1:1", "X-Forwarded-For", giant), "", false},
		{"trusted: giant forged left part", xff, request("10.0.0.1:1", "X-Forwarded-For", giant+", 198.51.100.9"), "198.51.100.9", true},
		{"forwarded: for", fwd, request("10.0.0.1:1", "Forwarded", "for=198.51.100.9;proto=https"), "198.51.100.9", true},
		{"forwarded: quoted IPv6 with port", fwd, request("10.0.0.1:1", "Forwarded", `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17", true},
		{"forwarded: forged left element", fwd, request("10.0.0.1:1", "Forwarded", `for=1.1.1.1, for=198.51.100.9`), "198.51.100.9", true},
		{"forwarded: quoted comma in forged element", fwd, request("10.0.0.1:1", "Forwarded", `for="1.1.1.1, for=2.2.2.2", for=198.51.100.9;by=10.0.0.1`), "198.51.100.9", true},
		{"forwarded: case-insensitive name", fwd, request("10.0.0.1:1", "Forwarded", `By=10.0.0.1;FOR=198.51.100.9`), "198.51.100.9", true},
		{"forwarded: unterminated quote", fwd, request("10.0.0.1:1", "Forwarded", `for="198.51.100.9`), "", false},
		{"forwarded: no for", fwd, request("10.0.0.1:1", "Forwarded", `proto=https`), "", false},
		{"forwarded: obfuscated", fwd, request("10.0.0.1:1", "Forwarded", `for=_hidden`), "", false},
		{"forwarded: escapes refused", fwd, request("10.0.0.1:1", "Forwarded", `for="1.2.3.\4"`), "", false},
		{"connection IPv6 zone", none, request("[fe80::1%eth0]:80"), "fe80::1", true},
		{"connection IPv4-mapped", none, request("[::ffff:203.0.113.7]:80"), "203.0.113.7", true},
		{"connection without port", none, request("203.0.113.7"), "203.0.113.7", true},
		{"unix socket", none, request("@"), "", false},
		{"empty remote", none, request(""), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := tt.c.Addr(tt.r)
			got := ""
			if ok {
				got = a.String()
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Addr() = %q, %v, want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestClientIPKeyIPv6 checks that an IPv6 client is keyed by its /64 (or
// the configured network), so that rotating through the addresses of
// one network gives no new key, while IPv4 clients keep their address.
func TestClientIPKeyIPv6(t *testing.T) {
	for _, tt := range []struct {
		c      httplimit.ClientIP
		remote string
		want   string
	}{
		{httplimit.ClientIP{}, "[2001:db8:1:2::1]:80", "2001:db8:1:2::/64"},
		{httplimit.ClientIP{}, "[2001:db8:1:2:ffff:ffff:ffff:ffff]:80", "2001:db8:1:2::/64"},
		{httplimit.ClientIP{}, "[fe80::1%eth0]:80", "fe80::/64"},
		{httplimit.ClientIP{IPv6Prefix: 48}, "[2001:db8:1:2::1]:80", "2001:db8:1::/48"},
		{httplimit.ClientIP{IPv6Prefix: 128}, "[2001:db8:1:2::1]:80", "2001:db8:1:2::1"},
		{httplimit.ClientIP{}, "[::ffff:203.0.113.7]:80", "203.0.113.7"},
		{httplimit.ClientIP{}, "203.0.113.7:80", "203.0.113.7"},
	} {
		if got, ok := tt.c.Key(request(tt.remote)); !ok || got != tt.want {
			t.Errorf("httplimit.ClientIP{IPv6Prefix: %d}.Key(%s) = %q, %v; want %q", tt.c.IPv6Prefix, tt.remote, got, ok, tt.want)
		}
	}
}

// FuzzClientIP checks that no header makes Addr panic, and that with no
// trusted proxy the headers never matter, and behind one the address is
// the connection's, a hop of the header, or none.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "for=1.2.3.4", `for="[::1]:80", for=10.0.0.3`, "\"", "a,b,,\"c,d\"", "::ffff:1.2.3.4%x", strings.Repeat(",", 100)} {
		f.Add(s, true)
		f.Add(s, false)
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, header string, forwarded bool) {
		name := httplimit.HeaderXForwardedFor
		if forwarded {
			name = httplimit.HeaderForwarded
		}
		r := request("10.0.0.1:1")
		r.Header[name] = []string{header}
		if a, ok := (&httplimit.ClientIP{Header: name}).Addr(r); !ok || a != netip.MustParseAddr("10.0.0.1") {
			t.Fatalf("untrusted: Addr() = %v, %v, want 10.0.0.1, true", a, ok)
		}
		a, ok := (&httplimit.ClientIP{Header: name, TrustedProxies: trusted}).Addr(r)
		if ok && (a.Zone() != "" || a.Is4In6()) {
			t.Fatalf("Addr() = %v, not canonical", a)
		}
		if ok && !strings.Contains(header, strings.TrimPrefix(a.String(), "::ffff:")) && a != netip.MustParseAddr("10.0.0.1") && !a.Is6() {
			t.Fatalf("Addr() = %v, neither the connection nor a hop of %q", a, header)
		}
	})
}
