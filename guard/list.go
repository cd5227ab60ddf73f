package guard

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// A List is a set of networks (CIDR prefixes) and keys (usernames, API
// keys), for allow and deny lists checked before any limit.
//
// Lookups are lock-free and cost one map lookup per distinct prefix length
// in the list (a list of single addresses and /24s costs two), whatever
// its size. Edits copy the list, so they suit lists edited by hand or by
// an admin API, not one edit per request.
//
// The zero value is an empty list, ready to use. A List is safe for
// concurrent use.
type List struct {
	mu   sync.Mutex // serialises edits
	snap atomic.Pointer[listSnap]
}

type listSnap struct {
	prefixes map[netip.Prefix]struct{}
	lens4    []int // distinct prefix lengths of IPv4 entries, longest first
	lens6    []int
	sorted   []netip.Prefix // the prefixes by address, for Overlaps
	keys     map[string]struct{}
}

var emptySnap = &listSnap{}

func (l *List) load() *listSnap {
	if s := l.snap.Load(); s != nil {
		return s
	}
	return emptySnap
}

// edit applies fn to a copy of the list and publishes it.
func (l *List) edit(fn func(s *listSnap)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.load()
	s := &listSnap{prefixes: make(map[netip.Prefix]struct{}, len(old.prefixes)), keys: make(map[string]struct{}, len(old.keys))}
	for p := range old.prefixes {
		s.prefixes[p] = struct{}{}
	}
	for k := range old.keys {
		s.keys[k] = struct{}{}
	}
	fn(s)
	for p := range s.prefixes {
		lens := &s.lens6
		if p.Addr().Is4() {
			lens = &s.lens4
		}
		if !slices.Contains(*lens, p.Bits()) {
			*lens = append(*lens, p.Bits())
		}
	}
	slices.SortFunc(s.lens4, func(a, b int) int { return b - a })
	slices.SortFunc(s.lens6, func(a, b int) int { return b - a })
	s.sorted = sortedPrefixes(s.prefixes)
	l.snap.Store(s)
}

// normalize masks p and maps IPv4-mapped IPv6 prefixes to IPv4.
func normalize(p netip.Prefix) netip.Prefix {
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	q, _ := a.WithZone("").Prefix(bits)
	return q
}

// AddPrefix adds the network p. Invalid prefixes are ignored.
func (l *List) AddPrefix(p netip.Prefix) {
	if !p.IsValid() {
		return
	}
	l.edit(func(s *listSnap) { s.prefixes[normalize(p)] = struct{}{} })
}

// RemovePrefix removes the network p, as it was added.
func (l *List) RemovePrefix(p netip.Prefix) {
	l.edit(func(s *listSnap) { delete(s.prefixes, normalize(p)) })
}

// AddKey adds a key.
func (l *List) AddKey(key string) { l.edit(func(s *listSnap) { s.keys[key] = struct{}{} }) }

// RemoveKey removes a key.
func (l *List) RemoveKey(key string) { l.edit(func(s *listSnap) { delete(s.keys, key) }) }

// Add adds entry e (see ParseEntry). The zero Entry is ignored.
func (l *List) Add(e Entry) {
	if p, ok := e.Net(); ok {
		l.AddPrefix(p)
	} else if k, ok := e.Key(); ok {
		l.AddKey(k)
	}
}

// Remove removes entry e, as it was added.
func (l *List) Remove(e Entry) {
	if p, ok := e.Net(); ok {
		l.RemovePrefix(p)
	} else if k, ok := e.Key(); ok {
		l.RemoveKey(k)
	}
}

// Entries returns the entries of the list: its networks sorted, then its
// keys sorted.
func (l *List) Entries() []Entry {
	s := l.load()
	out := make([]Entry, 0, len(s.sorted)+len(s.keys))
	for _, p := range s.sorted {
		out = append(out, Entry{net: p})
	}
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, KeyEntry(k))
	}
	return out
}

// ParsePrefix parses an address (as a single-address prefix) or a
// network in CIDR notation. Errors wrap sluice.ErrInvalidRequest.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w: guard: %q is not an address or network: %v", sluice.ErrInvalidRequest, s, err)
		}
		return normalize(p), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: guard: %q is not an address or network: %v", sluice.ErrInvalidRequest, s, err)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Contains reports whether a lies in a network of the list.
func (l *List) Contains(a netip.Addr) bool {
	s := l.load()
	if len(s.prefixes) == 0 || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	if len(s.sorted) <= scanPrefixes {
		for _, p := range s.sorted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	lens := s.lens6
	if a.Is4() {
		lens = s.lens4
	}
	for _, bits := range lens {
		p, _ := a.Prefix(bits)
		if _, ok := s.prefixes[p]; ok {
			return true
		}
	}
	return false
}

// scanPrefixes is how many networks a List tells an address's by trying
// each: fewer than hashing it at each of their lengths costs (an allow
// list of a few offices, a deny list of a few networks).
const scanPrefixes = 8

// Overlaps reports whether p and a network of the list share an
// address: p lies in one, or holds one. A ban registry asks it before it
// merges bans into p, so that no merge covers an allow-listed address.
func (l *List) Overlaps(p netip.Prefix) bool {
	s := l.load()
	if len(s.prefixes) == 0 || !p.IsValid() {
		return false
	}
	p = normalize(p)
	lens := s.lens6
	if p.Addr().Is4() {
		lens = s.lens4
	}
	for _, bits := range lens {
		if q, _ := p.Addr().Prefix(bits); bits <= p.Bits() && s.has(q) {
			return true
		}
	}
	i, _ := slices.BinarySearchFunc(s.sorted, p.Addr(), func(q netip.Prefix, a netip.Addr) int { return q.Addr().Compare(a) })
	return i < len(s.sorted) && p.Contains(s.sorted[i].Addr())
}

func (s *listSnap) has(p netip.Prefix) bool {
	_, ok := s.prefixes[p]
	return ok
}

// sortedPrefixes returns the prefixes sorted by address, then length.
func sortedPrefixes(set map[netip.Prefix]struct{}) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// ContainsKey reports whether key is in the list.
func (l *List) ContainsKey(key string) bool {
	_, ok := l.load().keys[key]
	return ok
}

// Prefixes returns the networks of the list, sorted.
func (l *List) Prefixes() []netip.Prefix { return slices.Clone(l.load().sorted) }

// Keys returns the keys of the list, sorted.
func (l *List) Keys() []string {
	s := l.load()
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
