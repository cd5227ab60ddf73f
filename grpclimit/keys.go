package grpclimit

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// A Keyer derives the actor of a call to method, or reports that it
// cannot (the call is then counted under UnknownKey).
type Keyer func(ctx context.Context, method string) (key string, ok bool)

// UnknownKey is the key of the calls whose Keyer found none: they share
// one allowance rather than each getting a fresh one.
const UnknownKey = "-unknown"

// PeerAddr keys a call by the address of the client that made it: an
// IPv4 address, or an IPv6 address's network of ipv6Prefix bits (0: 64),
// so that one client cannot multiply its allowance across the addresses
// of its network. Behind a proxy, the peer is the proxy: key by metadata
// the proxy sets instead.
func PeerAddr(ipv6Prefix int) Keyer {
	if ipv6Prefix <= 0 || ipv6Prefix > 128 {
		ipv6Prefix = 64
	}
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		host, _, err := net.SplitHostPort(p.Addr.String())
		if err != nil {
			return "", false
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return "", false
		}
		if a = a.Unmap(); a.Is6() && ipv6Prefix < 128 {
			pre, _ := a.Prefix(ipv6Prefix)
			return pre.String(), true
		}
		return a.String(), true
	}
}

// Metadata keys a call by the first value of the request metadata name
// (an API key, a user id), or reports none.
func Metadata(name string) Keyer {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, bool) {
		vs := metadata.ValueFromIncomingContext(ctx, name)
		if len(vs) == 0 || vs[0] == "" {
			return "", false
		}
		return vs[0], true
	}
}

// FullMethod keys a call by its method, "/pkg.Service/Method": one
// allowance per method for all clients.
func FullMethod(_ context.Context, method string) (string, bool) { return method, true }

// Join keys a call by the keys of ks joined by '|', such as the peer and
// the method; it reports none if any of them does.
func Join(ks ...Keyer) Keyer {
	return func(ctx context.Context, method string) (string, bool) {
		parts := make([]string, len(ks))
		for i, k := range ks {
			v, ok := k(ctx, method)
			if !ok {
				return "", false
			}
			parts[i] = v
		}
		return strings.Join(parts, "|"), true
	}
}
