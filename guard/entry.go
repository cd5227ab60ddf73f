package guard

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
)

// An Entry is one entry of an allow or deny list: a network (an address
// is the network of itself alone) or a key (a username, an API key).
// Operators write entries as text, which ParseEntry reads once, at the
// edge: the configuration file, the admin API.
//
// The zero Entry is no entry (IsValid reports false). Entries are
// comparable: two entries are equal when they hold the same network or
// the same key.
type Entry struct {
	net netip.Prefix // valid for a network
	key string       // for a key, when net is not valid
}

// NetEntry returns the entry of network p, masked, IPv4-mapped IPv6
// networks as IPv4; the zero Entry if p is not valid.
func NetEntry(p netip.Prefix) Entry {
	if !p.IsValid() {
		return Entry{}
	}
	return Entry{net: normalize(p)}
}

// KeyEntry returns the entry of key; the zero Entry if key is empty.
func KeyEntry(key string) Entry { return Entry{key: key} }

// ParseEntry reads an entry as the lists write it: an address
// ("203.0.113.7", "2001:db8::1"), a network ("203.0.113.0/24"), or
// "key:" and a key ("key:alice"). The error names the entry and wraps
// sluice.ErrInvalidRequest.
func ParseEntry(s string) (Entry, error) {
	if k, ok := strings.CutPrefix(s, "key:"); ok {
		if k == "" {
			return Entry{}, fmt.Errorf("%w: guard: list entry %q names no key", sluice.ErrInvalidRequest, s)
		}
		return KeyEntry(k), nil
	}
	p, err := ParsePrefix(s)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: guard: list entry %q is not an address, a network or key:NAME", sluice.ErrInvalidRequest, s)
	}
	return Entry{net: p}, nil
}

// IsValid reports whether e is an entry: a network or a non-empty key.
func (e Entry) IsValid() bool { return e.net.IsValid() || e.key != "" }

// Net returns the network of e, and whether e is one.
func (e Entry) Net() (netip.Prefix, bool) { return e.net, e.net.IsValid() }

// Key returns the key of e, and whether e is one.
func (e Entry) Key() (string, bool) { return e.key, !e.net.IsValid() && e.key != "" }

// String returns e as ParseEntry reads it: an address without its
// length, a network, or "key:" and the key; "" for the zero Entry.
func (e Entry) String() string {
	switch {
	case e.net.IsValid():
		return netString(e.net)
	case e.key != "":
		return "key:" + e.key
	}
	return ""
}
