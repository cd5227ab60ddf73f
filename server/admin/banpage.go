package admin

import (
	"cmp"
	"container/heap"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/wire"
)

// Bounds of a page of bans.
const (
	// DefaultBanPage is how many bans or groups a page holds when the
	// request names no limit.
	DefaultBanPage = 50
	// MaxBanPage is the most a page holds.
	MaxBanPage = 500
)

// The orders of a page of bans (its sort parameter).
const (
	SortNewest   = "newest"   // the latest bans first (the default)
	SortRefused  = "refused"  // the bans that refused most requests first
	SortOffences = "offences" // the bans of the most offences first, then the latest
	SortKey      = "key"      // addresses and networks in address order (IPv4, then IPv6), then other keys
)

// A BanQuery picks and orders bans: the query parameters of GET
// /admin/api/bans/page and /admin/api/bans/groups.
type BanQuery struct {
	// Jail keeps the bans of one jail; "" keeps all.
	Jail string
	// Filter keeps, when it is an address or a network, the bans of the
	// networks that overlap it (that hold it, or lie within it); else
	// the bans whose key holds it, ignoring case ("key:" before it
	// ignored too). "" keeps all.
	Filter string
	// Sort is SortNewest, SortRefused, SortOffences or SortKey.
	Sort string
	// Offset skips as many; Limit is the most returned (1 to MaxBanPage).
	Offset, Limit int
}

// A BanPage is a page of the bans in force.
type BanPage struct {
	// Total is how many bans the query matches; All how many are in
	// force, Jails how many of them each jail holds.
	Total int            `json:"total"`
	All   int            `json:"all"`
	Jails map[string]int `json:"jails"`
	// Offset is the query's; Bans are the page's, in its order.
	Offset int        `json:"offset"`
	Bans   []wire.Ban `json:"bans"`
}

// A BanGroup is the bans of the addresses and networks within one /24
// (IPv4) or /64 (IPv6), or of a wider network on its own.
type BanGroup struct {
	Network string   `json:"network"`
	Bans    int      `json:"bans"`
	Refused int64    `json:"refused"`
	Jails   []string `json:"jails"`
	// Newest is when the latest of them started.
	Newest time.Time `json:"newest"`
}

// A GroupPage is a page of the groups of the bans a query matches, the
// largest first.
type GroupPage struct {
	// Total is how many groups there are; Keys how many of the bans
	// matched are of keys that are no address, which no group holds.
	Total  int        `json:"total"`
	Keys   int        `json:"keys"`
	Offset int        `json:"offset"`
	Groups []BanGroup `json:"groups"`
}

// parseBanQuery reads a BanQuery from the query parameters q.
func parseBanQuery(q url.Values) (BanQuery, error) {
	bq := BanQuery{Jail: q.Get("jail"), Filter: strings.TrimSpace(q.Get("filter")), Sort: cmp.Or(q.Get("sort"), SortNewest), Limit: DefaultBanPage}
	switch bq.Sort {
	case SortNewest, SortRefused, SortOffences, SortKey:
	default:
		return bq, fmt.Errorf("sort %q: want %s, %s, %s or %s", bq.Sort, SortNewest, SortRefused, SortOffences, SortKey)
	}
	var err error
	if v := q.Get("offset"); v != "" {
		if bq.Offset, err = strconv.Atoi(v); err != nil || bq.Offset < 0 {
			return bq, fmt.Errorf("offset %q must be a whole number", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if bq.Limit, err = strconv.Atoi(v); err != nil || bq.Limit < 1 || bq.Limit > MaxBanPage {
			return bq, fmt.Errorf("limit %q must be 1 to %d", v, MaxBanPage)
		}
	}
	return bq, nil
}

// A listedBan is a ban with its key read as an address or a network.
type listedBan struct {
	*wire.Ban
	net netip.Prefix // invalid for another key
}

// matcher returns whether a ban matches q's jail and filter.
func (q BanQuery) matcher() func(*listedBan) bool {
	p, perr := guard.ParsePrefix(q.Filter)
	text := strings.ToLower(strings.TrimPrefix(q.Filter, "key:"))
	return func(b *listedBan) bool {
		switch {
		case q.Jail != "" && b.Jail != q.Jail:
			return false
		case q.Filter == "":
			return true
		case perr == nil:
			return b.net.IsValid() && b.net.Overlaps(p)
		}
		return strings.Contains(strings.ToLower(b.Key), text)
	}
}

// matching returns the bans that match q, their keys read, and counts
// the bans of each jail. The bans are pointed to, not copied: an attack's
// 100,000 are sorted by their pointers.
func matching(bans []wire.Ban, q BanQuery) ([]*listedBan, map[string]int) {
	keep := q.matcher()
	jails := map[string]int{}
	all := make([]listedBan, len(bans))
	out := make([]*listedBan, 0, len(bans))
	for i := range bans {
		b := &bans[i]
		jails[b.Jail]++
		lb := &all[i]
		lb.Ban = b
		if p, err := guard.ParsePrefix(b.Key); err == nil {
			lb.net = p
		}
		if keep(lb) {
			out = append(out, lb)
		}
	}
	return out, jails
}

// Page returns the page of bans that q picks.
func Page(bans []wire.Ban, q BanQuery) BanPage {
	in, jails := matching(bans, q)
	first := firsts(in, q.Offset+q.Limit, orderOf(q.Sort))
	page := BanPage{Total: len(in), All: len(bans), Jails: jails, Offset: q.Offset, Bans: []wire.Ban{}}
	for _, b := range first[min(q.Offset, len(first)):] {
		page.Bans = append(page.Bans, *b.Ban)
	}
	return page
}

// firsts returns the first n bans of in in the order of cmp, sorted. For
// the first pages of many bans it keeps the n best in a heap, in one
// pass over in: sorting them all would take a second of cache misses.
func firsts(in []*listedBan, n int, cmp func(a, b *listedBan) int) []*listedBan {
	if n >= len(in)/8 {
		slices.SortFunc(in, cmp)
		return in[:min(n, len(in))]
	}
	h := worstFirst{cmp: cmp, bans: slices.Clone(in[:n])}
	heap.Init(&h)
	for _, b := range in[n:] {
		if cmp(b, h.bans[0]) < 0 {
			h.bans[0] = b
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h.bans, cmp)
	return h.bans
}

// worstFirst is a heap of bans whose root is the last in the order cmp.
type worstFirst struct {
	cmp  func(a, b *listedBan) int
	bans []*listedBan
}

func (h *worstFirst) Len() int           { return len(h.bans) }
func (h *worstFirst) Less(i, j int) bool { return h.cmp(h.bans[i], h.bans[j]) > 0 }
func (h *worstFirst) Swap(i, j int)      { h.bans[i], h.bans[j] = h.bans[j], h.bans[i] }
func (h *worstFirst) Push(b any)         { h.bans = append(h.bans, b.(*listedBan)) }
func (h *worstFirst) Pop() any {
	b := h.bans[len(h.bans)-1]
	h.bans = h.bans[:len(h.bans)-1]
	return b
}

// orderOf returns the comparison of the order named sort; ties go by
// key in address order, then jail.
func orderOf(sort string) func(a, b *listedBan) int {
	byKey := func(a, b *listedBan) int {
		switch {
		case a.net.IsValid() && !b.net.IsValid():
			return -1
		case !a.net.IsValid() && b.net.IsValid():
			return 1
		case a.net.IsValid():
			return cmp.Or(a.net.Addr().Compare(b.net.Addr()), cmp.Compare(a.net.Bits(), b.net.Bits()), strings.Compare(a.Jail, b.Jail))
		}
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Jail, b.Jail))
	}
	newest := func(a, b *listedBan) int { return b.Since.Compare(a.Since) }
	switch sort {
	case SortRefused:
		return func(a, b *listedBan) int { return cmp.Or(cmp.Compare(b.Refused, a.Refused), newest(a, b), byKey(a, b)) }
	case SortOffences:
		return func(a, b *listedBan) int {
			return cmp.Or(cmp.Compare(b.Offences, a.Offences), newest(a, b), byKey(a, b))
		}
	case SortKey:
		return byKey
	}
	return func(a, b *listedBan) int { return cmp.Or(newest(a, b), byKey(a, b)) }
}

// Group widths: the bans within one /24 or /64 form a group.
const (
	groupIPv4 = 24
	groupIPv6 = 64
)

// groupOf returns the network of the group of a ban's network: its /24
// or /64, or itself when wider.
func groupOf(p netip.Prefix) netip.Prefix {
	bits := groupIPv6
	if p.Addr().Is4() {
		bits = groupIPv4
	}
	if p.Bits() <= bits {
		return p
	}
	g, _ := p.Addr().Prefix(bits)
	return g
}

// Groups returns the page of the groups of the bans q matches (q.Sort
// aside): the groups of the most bans first, then of the most refusals,
// then in address order.
func Groups(bans []wire.Ban, q BanQuery) GroupPage {
	in, _ := matching(bans, q)
	byNet := map[netip.Prefix]*BanGroup{}
	var page GroupPage
	for _, b := range in {
		if !b.net.IsValid() {
			page.Keys++
			continue
		}
		n := groupOf(b.net)
		g := byNet[n]
		if g == nil {
			g = &BanGroup{Network: n.String()}
			byNet[n] = g
		}
		g.Bans++
		g.Refused += b.Refused
		if !slices.Contains(g.Jails, b.Jail) {
			g.Jails = append(g.Jails, b.Jail)
		}
		if b.Since.After(g.Newest) {
			g.Newest = b.Since
		}
	}
	nets := make([]netip.Prefix, 0, len(byNet))
	for n := range byNet {
		nets = append(nets, n)
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		ga, gb := byNet[a], byNet[b]
		return cmp.Or(cmp.Compare(gb.Bans, ga.Bans), cmp.Compare(gb.Refused, ga.Refused), a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	page.Total, page.Offset, page.Groups = len(nets), q.Offset, []BanGroup{}
	for _, n := range nets[min(q.Offset, len(nets)):min(q.Offset+q.Limit, len(nets))] {
		slices.Sort(byNet[n].Jails)
		page.Groups = append(page.Groups, *byNet[n])
	}
	return page
}

// Within returns the bans of jail (every jail when "") of the addresses
// and networks that lie within net: what lifting the group of net ends.
func Within(bans []wire.Ban, jail string, net netip.Prefix) []wire.Ban {
	var out []wire.Ban
	for _, b := range bans {
		p, err := guard.ParsePrefix(b.Key)
		if err == nil && (jail == "" || b.Jail == jail) && p.Bits() >= net.Bits() && net.Contains(p.Addr()) {
			out = append(out, b)
		}
	}
	return out
}
