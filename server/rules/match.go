package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
)

// An Entry is one key/value pair of a descriptor, such as
// (remote_address, 203.0.113.7).
type Entry struct {
	Key, Value string
}

// A Descriptor is what a client asks about: of a domain, a list of
// entries that is matched against the domain's tree, one entry per
// level; of a named rule, an actor (see Key).
type Descriptor struct {
	// Entries are the key/value pairs, outermost first, of a descriptor
	// of a domain. A descriptor of a named rule that has no Actor may
	// give its key as the value of its one entry, as Envoy's do.
	Entries []Entry
	// Actor is, for a descriptor of a named rule made by Key, who it is
	// about, typed where the request was decoded: its Key is the rule's
	// key for it, and the guard judges it (with the request's Client,
	// when known, as its address).
	Actor guard.Actor
	// Cost overrides the request's cost for this descriptor when it is
	// positive. Default 0: the request's.
	Cost int
	// NoHits asks about this descriptor with zero hits (Envoy's
	// per-descriptor hits_addend of 0): nothing is taken, the descriptor
	// is never over its limit, and Remaining is what is left now.
	// Default false.
	NoHits bool
	// Override, when not nil, is the limit to apply instead of the
	// configuration's (Envoy's per-descriptor limit override, set by the
	// proxy's own configuration). Its state is keyed by the domain and
	// the entries. Default nil.
	Override *sluice.Limit

	named bool // made by Key: Actor is the actor

}

// Key returns the descriptor of a named rule about the actor whose key
// is key (an IP address, a network, a user name, an API key), typed once
// here: the engine, its guard and its jails read the key's kind from it.
func Key(key string) Descriptor {
	return Descriptor{Actor: guard.NewActor(netip.Addr{}, key), named: true}
}

// Named returns a request of the named rule about the actor whose key is
// key: the descriptor of Key(key), in one allocation.
func Named(rule, key string) Request {
	one := new([1]Descriptor)
	one[0] = Key(key)
	return Request{Domain: rule, Descriptors: one[:]}
}

// key returns the key of d, a descriptor of a named rule, and reports
// false when d names none (see actor).
func (d *Descriptor) key() (string, bool) {
	switch {
	case d.named:
		return d.Actor.Key, true
	case len(d.Entries) == 1:
		return d.Entries[0].Value, true
	}
	return "", false
}

// entries returns the entries of d: for one made by Key, its key as the
// value of one entry "key", as a descriptor from Envoy would give it.
func (d *Descriptor) entries() []Entry {
	if d.named && len(d.Entries) == 0 {
		return []Entry{{Key: "key", Value: d.Actor.Key}}
	}
	return d.Entries
}

// actor returns the actor of d, a descriptor of a named rule, from a
// client at addr (invalid when unknown), and reports false when d names
// none: neither made by Key nor of one entry.
func (d *Descriptor) actor(addr netip.Addr) (guard.Actor, bool) {
	client := plain(addr) // a new variable: addr itself must not flow to the result
	switch {
	case d.named:
		a := d.Actor
		if client.IsValid() {
			a.Addr = client
		}
		return a, true
	case len(d.Entries) == 1: // an Envoy descriptor of a named rule
		return guard.NewActor(client, d.Entries[0].Value), true
	}
	return guard.Actor{}, false
}

// plain returns a without its zone (bans and lists know none), and an
// IPv4-mapped address as IPv4, made from its bytes: it holds nothing of
// a, so that the guard keeping it does not keep the request that held a
// (whose descriptors may then stay on its caller's stack).
func plain(a netip.Addr) netip.Addr {
	switch a = a.Unmap(); {
	case a.Is4():
		return netip.AddrFrom4(a.As4())
	case a.Is6():
		return netip.AddrFrom16(a.As16())
	}
	return netip.Addr{}
}

// domain is a domain's tree, or a named rule (which matches any
// descriptor that names an actor: see Descriptor.actor).
type domain struct {
	name   string
	prefix string // store prefix of its descriptor states
	root   node
	named  *Rule
}

// node is a level of a descriptor tree: its children by their key.
type node struct {
	rule *Rule
	keys map[string]*children
	// share is set on a node reached through a wildcard with
	// share_threshold: its pattern stands for the value in state keys.
	share bool
}

// children are the children of a node under one key. They are found the
// way envoyproxy/ratelimit finds them: by value, else the first wildcard
// that matches the value, else the key alone. Grouped by key, finding one
// hashes the key once, and the value only when some child has one.
type children struct {
	values map[string]*node // by value, but ""
	wild   []wildcard
	any    *node // the key alone (value "")
}

// wildcard is a child whose value has '*': parts is the value split at
// each '*'.
type wildcard struct {
	pattern string
	parts   []string
	n       *node
}

// build adds descriptors under n; parent is the full key of n.
func (d *domain) build(n *node, parent string, ds []config.Descriptor, rules map[string]*Rule) {
	n.keys = make(map[string]*children, len(ds))
	for _, cd := range ds {
		full := parent + "." + cd.Key
		if cd.Value != "" {
			full += "_" + cd.Value
		}
		child := &node{share: cd.ShareThreshold}
		if cd.RateLimit != nil {
			child.rule = newRule(full, cd.RateLimit.Name, d.name, d.prefix, *cd.RateLimit, cd.Shadow, cd.Quota)
			rules[full] = child.rule
		}
		d.build(child, full, cd.Descriptors, rules)
		c := n.keys[cd.Key]
		if c == nil {
			c = &children{values: make(map[string]*node)}
			n.keys[cd.Key] = c
		}
		switch {
		case strings.Contains(cd.Value, "*"):
			c.wild = append(c.wild, wildcard{pattern: cd.Value, parts: strings.Split(cd.Value, "*"), n: child})
		case cd.Value == "":
			c.any = child
		default:
			c.values[cd.Value] = child
		}
	}
}

// child returns the child of n that entry e leads to, and the wildcard
// pattern that matched its value, if one did; nil when none.
func (n *node) child(e Entry) (*node, string) {
	c := n.keys[e.Key]
	switch {
	case c == nil:
		return nil, ""
	case e.Value == "" && c.any != nil:
		return c.any, "" // the key alone has the empty value
	}
	if next := c.values[e.Value]; next != nil {
		return next, ""
	}
	for _, w := range c.wild {
		if wildcardMatch(w.parts, e.Value) {
			return w.n, w.pattern
		}
	}
	return c.any, ""
}

// match finds the rule of a descriptor's entries, and appends the state
// key of the descriptor to buf: each entry's key and value (a shared
// wildcard's pattern instead of the value), escaped and joined. It
// returns nil when no rule applies: no node at the descriptor's depth, or
// a node without a rate limit.
func (d *domain) match(entries []Entry, buf []byte) (*Rule, []byte) {
	n := &d.root
	for i, e := range entries {
		next, pattern := n.child(e)
		if next == nil {
			return nil, buf
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendEscaped(buf, e.Key, entrySpecial)
		buf = append(buf, '=')
		if next.share && pattern != "" {
			buf = append(buf, '*')
			buf = appendEscaped(buf, pattern, entrySpecial)
		} else {
			buf = appendEscaped(buf, e.Value, entrySpecial)
		}
		if i == len(entries)-1 {
			return next.rule, buf
		}
		n = next
	}
	return nil, buf // no entries
}

// wildcardMatch reports whether value matches the pattern split at each
// '*' into parts: each '*' matches any run of bytes, possibly empty.
func wildcardMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// entrySpecial are the bytes escaped in entries: the separators of a
// state key, and '*', which marks a shared wildcard's pattern.
var entrySpecial = newEscaper(",=*")

// An escaper writes '%' and a set of special bytes as %XX, so that
// joined parts name one state only.
type escaper [256]bool

// newEscaper returns the escaper of '%' and the bytes of special.
func newEscaper(special string) *escaper {
	var e escaper
	e['%'] = true
	for i := range len(special) {
		e[special[i]] = true
	}
	return &e
}

// appendEscaped appends s to buf, escaped by esc.
func appendEscaped(buf []byte, s string, esc *escaper) []byte {
	plain := true
	for i := range len(s) {
		if esc[s[i]] {
			plain = false
			break
		}
	}
	if plain {
		return append(buf, s...)
	}
	const hex = "0123456789ABCDEF"
	for i := range len(s) {
		if c := s[i]; esc[c] {
			buf = append(buf, '%', hex[c>>4], hex[c&15])
		} else {
			buf = append(buf, c)
		}
	}
	return buf
}

// stateKey bounds a state key as sluice.Limiter bounds actor keys: keys
// longer than sluice.MaxActorLen, and keys that start with '#', become
// '#' and the unpadded base64url of their SHA-256, so that a descriptor
// of megabytes costs 44 bytes of store and named rules share their
// states with Limiters of the same namespace and action.
func stateKey(buf []byte) string {
	if len(buf) <= sluice.MaxActorLen && (len(buf) == 0 || buf[0] != '#') {
		return string(buf)
	}
	sum := sha256.Sum256(buf)
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// stateKeyOf is stateKey of a key that is a string already: the string
// itself when it is kept as it is.
func stateKeyOf(s string) string {
	if len(s) <= sluice.MaxActorLen && (s == "" || s[0] != '#') {
		return s
	}
	return stateKey([]byte(s))
}

// entriesKey appends the state key of entries matched literally, as for
// a limit override: every key and value, escaped and joined.
func entriesKey(entries []Entry, buf []byte) []byte {
	for i, e := range entries {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendEscaped(buf, e.Key, entrySpecial)
		buf = append(buf, '=')
		buf = appendEscaped(buf, e.Value, entrySpecial)
	}
	return buf
}
