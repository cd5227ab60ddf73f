package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// Header names a ClientIP reads behind trusted proxies.
const (
	// HeaderXForwardedFor is the de facto X-Forwarded-For list of hops.
	HeaderXForwardedFor = "X-Forwarded-For"
	// HeaderForwarded is the RFC 7239 Forwarded field; its for= parameters
	// name the hops.
	HeaderForwarded = "Forwarded"
)

// DefaultMaxHops is how many hops of a forwarding header a ClientIP
// examines, right to left, when its MaxHops is zero.
const DefaultMaxHops = 16

// A ClientIP finds the address of the client that sent a request.
//
// Without TrustedProxies it is the address of the connection, and every
// forwarding header is ignored: anyone can write X-Forwarded-For. When the
// connection comes from a trusted proxy, the forwarding Header is read
// right to left, skipping hops that are themselves trusted proxies; the
// first untrusted hop is the client. Only what trusted proxies appended is
// believed, so a client that forges the header gains nothing: its forged
// entries sit to the left of the hop its first proxy appended.
//
// Addresses are returned without IPv6 zone, and IPv4-mapped IPv6
// addresses (::ffff:192.0.2.1) as IPv4, so one client has one key. As a
// key (Key, AppendKey), an IPv6 client is its network of IPv6Prefix
// bits, a /64 by default: every IPv6 host owns at least a /64, and
// keying by address would let one client rotate through 2^64 keys, each
// with a fresh allowance.
//
// The zero value trusts no proxy. A ClientIP must not be changed once in
// use; it is then safe for concurrent use.
type ClientIP struct {
	// TrustedProxies are the networks of the reverse proxies and load
	// balancers in front of the application. Default none.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header the trusted proxies append to:
	// HeaderXForwardedFor or HeaderForwarded. Default HeaderXForwardedFor.
	Header string
	// MaxHops bounds how many hops are examined; a chain of more trusted
	// hops than this yields no address. Default DefaultMaxHops.
	MaxHops int
	// IPv6Prefix is the length of the network an IPv6 client is keyed by
	// ("2001:db8:1:2::/64"). Default 0: DefaultIPv6Prefix; 128 keys each
	// address on its own. See AdaptivePrefix for a prefix that widens
	// under attack.
	IPv6Prefix int
}

// DefaultIPv6Prefix is the length of the network a ClientIP keys an IPv6
// client by when its IPv6Prefix is zero.
const DefaultIPv6Prefix = 64

// Addr returns the client's address, or false when none can be derived:
// a connection address that is not IP (a Unix socket), or, behind a
// trusted proxy, a malformed or over-long forwarding header, a hop written
// "unknown" or obfuscated, or no hop at all.
func (c *ClientIP) Addr(r *http.Request) (netip.Addr, bool) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if c == nil || !c.trusted(peer) {
		return peer, true
	}
	h := c.header()
	values, ok := r.Header[h] // the canonical names need no canonicalizing
	if !ok {
		values = r.Header.Values(h)
	}
	return c.hops(peer, values)
}

// AddrFrom returns the address of the client of a request that came
// from peer with the forwarding header values (its lines, in order), as
// Addr does for a request: for a tool that knows a request's hops
// without an http.Request, such as sluice simulate reading them from an
// access log.
func (c *ClientIP) AddrFrom(peer netip.Addr, values []string) (netip.Addr, bool) {
	peer = canonical(peer)
	if !peer.IsValid() {
		return netip.Addr{}, false
	}
	if c == nil || !c.trusted(peer) {
		return peer, true
	}
	return c.hops(peer, values)
}

// hops finds the client in the forwarding header values of a request
// from the trusted proxy peer.
func (c *ClientIP) hops(peer netip.Addr, values []string) (netip.Addr, bool) {
	if len(values) == 0 {
		return peer, true // the proxy reached us directly, or added nothing
	}
	maxHops := c.MaxHops
	if maxHops <= 0 {
		maxHops = DefaultMaxHops
	}
	forwarded := c.header() == HeaderForwarded
	hops := 0
	last := peer
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			var elem string
			var ok bool
			if v, elem, ok = lastHop(v, forwarded); !ok {
				return netip.Addr{}, false
			}
			if elem == "" {
				continue // tolerate empty list members ("a,,b")
			}
			hops++
			if hops > maxHops {
				return netip.Addr{}, false
			}
			ip, ok := parseHop(elem, forwarded)
			if !ok {
				return netip.Addr{}, false
			}
			if !c.trusted(ip) {
				return ip, true
			}
			last = ip
		}
	}
	// Every hop is a trusted proxy: the request started inside.
	return last, true
}

// lastHop splits the last element off a forwarding header's value v
// (of Forwarded when forwarded, else of a comma-separated list): the
// rest, the element trimmed of spaces, and false if v is malformed.
func lastHop(v string, forwarded bool) (rest, elem string, ok bool) {
	if forwarded {
		if rest, elem, ok = lastForwardedElement(v); !ok {
			return "", "", false
		}
	} else {
		j := strings.LastIndexByte(v, ',')
		rest, elem = v[:max(j, 0)], v[j+1:]
	}
	return rest, strings.Trim(elem, " \t"), true
}

var _ KeyAppender = (*ClientIP)(nil)

// Key returns the client's key: its address as Addr derives it, for an
// IPv6 client its network of IPv6Prefix bits.
func (c *ClientIP) Key(r *http.Request) (string, bool) { return keyString(c, r) }

// AppendKey appends the client's key, as Key returns it, to dst.
func (c *ClientIP) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	a, ok := c.Addr(r)
	if !ok {
		return dst, false
	}
	return c.AppendKeyOf(dst, a), true
}

// AppendKeyOf appends the key of the client address a, as Addr returns
// it, to dst: for a caller that has the address already.
func (c *ClientIP) AppendKeyOf(dst []byte, a netip.Addr) []byte {
	if bits := c.v6Bits(); a.Is6() && bits < 128 {
		return appendPrefix(dst, a, bits)
	}
	return a.AppendTo(dst)
}

// v6Bits is the length of the network an IPv6 client is keyed by.
func (c *ClientIP) v6Bits() int {
	if c == nil || c.IPv6Prefix <= 0 || c.IPv6Prefix > 128 {
		return DefaultIPv6Prefix
	}
	return c.IPv6Prefix
}

func (c *ClientIP) header() string {
	if c.Header == "" {
		return HeaderXForwardedFor
	}
	return c.Header
}

func (c *ClientIP) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// canonical returns a without zone, and IPv4-mapped addresses as IPv4.
func canonical(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// parseHost parses an address with or without port, IPv6 in brackets or
// not, as found in RemoteAddr and in X-Forwarded-For. It splits the port
// off before parsing, so that a valid address costs no allocation.
func parseHost(s string) (netip.Addr, bool) {
	host := s
	switch first, last := strings.IndexByte(s, ':'), strings.LastIndexByte(s, ':'); {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !isPort(rest[1:])) {
			return netip.Addr{}, false
		}
		host = s[1:end]
	case first >= 0 && first == last: // IPv4 with a port
		if !isPort(s[first+1:]) {
			return netip.Addr{}, false
		}
		host = s[:first]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return canonical(a), true
}

func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseHop parses one hop: an X-Forwarded-For member, or a Forwarded
// element whose for= node it extracts.
func parseHop(elem string, forwarded bool) (netip.Addr, bool) {
	if !forwarded {
		return parseHost(elem)
	}
	node, ok := forwardedFor(elem)
	if !ok {
		return netip.Addr{}, false
	}
	return parseHost(node)
}

// lastForwardedElement splits the last element off a Forwarded field
// value (RFC 7239: elements separated by commas, pairs by semicolons,
// values tokens or quoted strings that may hold commas). It scans forward,
// since quotes cannot be matched backwards, and reports false on an
// unterminated quoted string.
func lastForwardedElement(v string) (rest, elem string, ok bool) {
	start, cut := 0, -1
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			cut, start = i, i+1
		}
	}
	if quoted {
		return "", "", false
	}
	if cut < 0 {
		return "", v, true
	}
	return v[:cut], v[start:], true
}

// forwardedFor returns the value of the for= pair of one Forwarded
// element, unquoted. Nodes are addresses, so a quoted value with escapes
// is refused rather than unescaped.
func forwardedFor(elem string) (string, bool) {
	for elem != "" {
		var pair string
		pair, elem, _ = strings.Cut(elem, ";")
		name, value, found := strings.Cut(strings.Trim(pair, " \t"), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
			if strings.ContainsRune(value, '\\') {
				return "", false
			}
		}
		return value, value != ""
	}
	return "", false
}
